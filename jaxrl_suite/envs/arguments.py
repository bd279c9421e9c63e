"""Keyword checking for environment factories: one message for a misspelt argument.

The registry (`registry.make`) and the factories themselves (`make_batching`, `make_routing`,
`make_rail`, `make_probe`) check keywords with these helpers before building anything, so a direct
call and a call by name give the same message. This module imports no environment: the factories
sit above it and the registry above them (no import cycle).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any, Iterable, Mapping


def keywords(obj: Any) -> set[str]:
  """Named keyword parameters of a callable or class constructor; a dataclass gives its fields."""
  if dataclasses.is_dataclass(obj) and isinstance(obj, type):
    return {f.name for f in dataclasses.fields(obj) if f.init}
  is_cls = isinstance(obj, type)
  params = list(inspect.signature(obj.__init__ if is_cls else obj).parameters.values())
  keep = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
  return {p.name for p in params[1 if is_cls else 0:] if p.kind in keep}   # [1:]: self


def valid_from(sources: Iterable[Any], exclude: Iterable[str] = ()) -> tuple[str, ...]:
  """Sorted union of the keywords of `sources` (a factory, then what its **overrides reach),
  less `exclude` (keywords the factory passes on itself)."""
  names: set[str] = set()
  for obj in sources:
    names |= keywords(obj)
  return tuple(sorted(names - set(exclude)))


def close(word: str, options: Iterable[str]) -> list[str]:
  """Close matches, case-insensitively (`cartpole-v1` -> CartPole-v1)."""
  lower = {o.lower(): o for o in options}
  return [lower[m] for m in difflib.get_close_matches(word.lower(), list(lower), n=3, cutoff=0.6)]


def check(env_name: str, kwargs: Mapping[str, Any], valid: Iterable[str],
          where: str = "docs/environments.md") -> None:
  """Raises ValueError naming every key of `kwargs` not in `valid`, with a close match each and
  the valid ones, and where to read their meaning."""
  valid = tuple(valid)
  bad = sorted(k for k in kwargs if k not in valid)
  if not bad:
    return
  parts = []
  for k in bad:
    near = close(k, valid)
    parts.append(f"{k!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
  raise ValueError(f"{env_name}: unknown argument{'s' if len(bad) > 1 else ''} {', '.join(parts)}. "
                   f"Valid arguments: {', '.join(valid) or '(none)'}. "
                   f"See {where} for their meaning and defaults.")
