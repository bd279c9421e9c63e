"""jaxrl_suite.lm."""
