"""Shared CLI plumbing of the reproduction scripts."""

from __future__ import annotations

from typing import Iterable

from absl import flags


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
