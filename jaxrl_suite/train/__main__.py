"""`python -m jaxrl_suite.train`: the command line of `jaxrl_suite.train`, whose docstring is this
program's `--help` text."""

from absl import flags

from jaxrl_suite import train


def _adopt_flags() -> None:
  # absl's --help lists the main module's key flags; they are defined in jaxrl_suite.train.
  flags.adopt_module_key_flags(train)


if __name__ == "__main__":
  __doc__ = train.__doc__   # absl prints the main module's docstring as the usage text
  train._entry(after_define=_adopt_flags)
