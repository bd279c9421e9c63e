"""Field checks shared by the configs' `validate` functions.

Each raises ValueError naming the field (`config.<prefix><field>`) and the value it got, which
`core.cli` turns into a two-line user error before anything compiles.
"""

from __future__ import annotations

from typing import Iterable


def _name(field: str, prefix: str) -> str:
  return f"config.{prefix}{field}"


def positive_ints(c, fields: Iterable[str], prefix: str = "") -> None:
  """Every `c[f]` is an integer > 0 (bools are refused: `True` is not a count)."""
  for f in fields:
    v = c[f]
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
      raise ValueError(f"{_name(f, prefix)} must be a positive integer, got {v!r}")


def positive_floats(c, fields: Iterable[str], prefix: str = "", allow_zero: bool = False) -> None:
  """Every `c[f]` is a finite number > 0 (>= 0 with allow_zero)."""
  for f in fields:
    v = c[f]
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float(
        "inf") and (v >= 0 if allow_zero else v > 0)
    if not ok:
      bound = ">= 0" if allow_zero else "> 0"
      raise ValueError(f"{_name(f, prefix)} must be a finite number {bound}, got {v!r}")


def probabilities(c, fields: Iterable[str], prefix: str = "") -> None:
  """Every `c[f]` (a number or a sequence of numbers) lies in [0, 1]."""
  for f in fields:
    vals = c[f] if isinstance(c[f], (tuple, list)) else (c[f],)
    for v in vals:
      if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{_name(f, prefix)} must be in [0, 1], got {c[f]!r}")


def one_of(c, field: str, options: Iterable, prefix: str = "") -> None:
  """`c[field]` is one of `options`."""
  options = tuple(options)
  if c[field] not in options:
    raise ValueError(f"{_name(field, prefix)} must be one of {options}, got {c[field]!r}")


def subset_of(c, field: str, options: Iterable, prefix: str = "") -> None:
  """`c[field]` is a non-empty sequence of distinct members of `options`."""
  options, vals = tuple(options), tuple(c[field])
  bad = [v for v in vals if v not in options]
  if not vals or bad or len(set(vals)) != len(vals):
    raise ValueError(f"{_name(field, prefix)} must be a non-empty list of distinct members of "
                     f"{options}, got {vals!r}")
