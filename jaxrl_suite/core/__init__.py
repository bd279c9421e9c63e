"""jaxrl_suite.core."""
