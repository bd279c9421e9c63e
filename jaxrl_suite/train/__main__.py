"""`python -m jaxrl_suite.train`: the command line of `jaxrl_suite.train` (jaxrl_suite/train/host.py),
whose package docstring is this program's `--help` text."""

from absl import flags

from jaxrl_suite import train
from jaxrl_suite.train import host


def _adopt_flags() -> None:
  # absl's --help lists the main module's key flags; they are defined in jaxrl_suite.train.host.
  flags.adopt_module_key_flags(host)


if __name__ == "__main__":
  __doc__ = train.__doc__   # absl prints the main module's docstring as the usage text
  host._entry(after_define=_adopt_flags)
