"""Shared CLI plumbing of the reproduction scripts that do not start through
`jaxrl_suite.repro.entry` (the serving scripts, whose --workdir defaults per trace) and of
direct_opd's folder mode."""

from __future__ import annotations

import contextlib
from typing import Iterable

from absl import flags

from jaxrl_suite.core import cli as core_cli
from jaxrl_suite.repro import entry

# Every script imports this module: each gets `--debug` (keep the traceback of a user error) and
# a short message for an unknown --config.x field instead of absl's traceback.
core_cli.define_debug_flag()
core_cli.install_override_error_hook()


@contextlib.contextmanager
def user_errors(argv=None):
  """Around a script's run: a user error (bad config value, unreadable --layout / --eval_trace,
  a workdir that does not match, an unknown variant in `--config=<file>:<variant>`, which
  ml_collections would run as the default config) becomes one or two lines on stderr and exit
  status 2, unless --debug is given. `argv`: the command line (default sys.argv)."""
  import sys
  try:
    spec = core_cli.config_arg(sys.argv if argv is None else argv, "config")
    if spec is not None:
      core_cli.check_config_variant(spec)
    yield
  except core_cli.user_error_types() as e:
    if flags.FLAGS.is_parsed() and flags.FLAGS["debug"].value:
      raise
    core_cli.fail(core_cli.short_message(e))


def replace_flags(names: Iterable[str]) -> None:
  """Drops earlier definitions of the flags `names` before a script defines its own.

  Every script defines `--config`, `--quick`, `--workdir`, ... at import, as absl expects. A
  process that imports several of them (a pytest worker, a notebook) would otherwise fail with
  DuplicateFlagError; with this, the last script imported owns the names, which is the one a
  command line would run. Tests call the scripts' `run(...)` functions, which read no flags.
  """
  for name in names:
    if name in flags.FLAGS:
      delattr(flags.FLAGS, name)


# The merge rules live in the library's script entry (jaxrl_suite/repro/entry.py); these names
# stay for the scripts that still start up through this module.
with_overrides = entry.merge_overrides
override_paths = entry.override_paths


def config_for(module, parsed, quick: bool, argv=None):
  """The config a script runs: parsed --config, or module's quick preset plus the overrides:
  every field that differs from the file's defaults, and every field named on the command line
  (`argv`, default sys.argv). Why both: `--quick --config.x=v` with v equal to the full-mode
  default differs from nothing, yet the user asked for it over the quick preset's value."""
  if not quick:
    return parsed
  import sys
  preset = with_overrides(module.get_config("quick"), parsed, module.get_config())
  entry.copy_named_fields(preset, parsed, sys.argv if argv is None else argv)
  return preset
