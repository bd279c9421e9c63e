"""`python -m jaxrl_suite.train`: the command line of `jaxrl_suite.train` (see its docstring)."""

from jaxrl_suite.train import _entry

if __name__ == "__main__":
  _entry()
