"""jaxrl_suite.ope."""
