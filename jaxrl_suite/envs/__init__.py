"""jaxrl_suite.envs."""
