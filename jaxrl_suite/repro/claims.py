"""A claim registered before its run: what is tested, on which unit, and the rule that judges it.

The effect d is oriented so that "better" > 0:
  scale "difference": d = ours - reference          (better = "higher"), or its negative ("lower");
  scale "log_ratio":  d = log(ours / reference)     (better = "higher"), or its negative.
The claim's numbers are written in the paper's units and mapped to d by `Claim.to_d`:
  size c: a difference, or a ratio ("+48%" -> 1.48; "-20% latency" with better="lower" -> 0.8);
  margin m, min_effect m_min: a difference, or a relative amount (0.01 = 1%) that becomes the
    symmetric log band +-log(1 + m);
  target c with tolerance t: the band [c / (1 + t), c (1 + t)] in the paper's units.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Mapping

KINDS = ("superiority", "non_inferiority", "equivalence", "target", "descriptive")
UNITS = ("seed", "seed x window", "seed x episode")
SCALES = ("difference", "log_ratio")
BETTER = ("higher", "lower")
# Which numbers each kind uses (any other number given is an error: it would be silently ignored).
_NUMBERS = {
    "superiority": ("size", "min_effect"),
    "non_inferiority": ("margin",),
    "equivalence": ("margin",),
    "target": ("size", "tolerance"),
    "descriptive": (),
}
_ALL_NUMBERS = ("size", "margin", "min_effect", "tolerance")


@dataclasses.dataclass(frozen=True)
class Claim:
  """One registered claim (see docs/reproduction.md for the verdict each kind can reach).

  id: stable identifier; a changed rule is a new id. text: the claim in words. paper: the figure
  or sentence it tests, with its source. statistic: what is computed per unit. unit: the
  independent replicate ("seed", "seed x window", "seed x episode"). kind: one of KINDS.
  size / margin / min_effect / tolerance: the kind's numbers (module doc). why: why that margin
  or tolerance. selection: what is chosen before evaluation and on which data. better: "higher"
  or "lower". scale: "difference" or "log_ratio". fair_chance: a negative verdict needs RL's
  budget sweep to be flat (flatness.py), judged with `flat_delta` on the effect scale d.
  """
  id: str
  text: str
  paper: str
  statistic: str
  unit: str
  kind: str
  why: str = ""
  selection: str = ""
  better: str = "higher"
  scale: str = "difference"
  size: float | None = None
  margin: float | None = None
  min_effect: float | None = None
  tolerance: float | None = None
  fair_chance: bool = False
  flat_delta: float | None = None

  def __post_init__(self):
    for name in ("id", "text", "paper", "statistic"):
      v = getattr(self, name)
      if not isinstance(v, str) or not v.strip():
        raise ValueError(f"Claim.{name} must be a non-empty string (got {v!r})")
    _one_of(self, "kind", KINDS)
    _one_of(self, "unit", UNITS)
    _one_of(self, "scale", SCALES)
    _one_of(self, "better", BETTER)
    for name in _ALL_NUMBERS + ("flat_delta",):
      v = getattr(self, name)
      if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                            or not math.isfinite(v)):
        raise ValueError(f"Claim {self.id!r}: {name} must be a finite number or None (got {v!r})")
    used = _NUMBERS[self.kind]
    for name in _ALL_NUMBERS:
      if name not in used and getattr(self, name) is not None:
        raise ValueError(f"Claim {self.id!r}: field {name!r} is not used by kind {self.kind!r} "
                         f"(it uses {list(used) or 'none'}); remove it or change the kind")
    if self.kind in ("non_inferiority", "equivalence"):
      self._need_positive("margin")
    if self.kind == "target":
      self._need_positive("tolerance")
      if self.size is None:
        raise ValueError(f"Claim {self.id!r}: kind 'target' needs field 'size' (the paper's "
                         "value c)")
    if self.kind == "superiority":
      if self.size is not None and self.min_effect is not None:
        raise ValueError(f"Claim {self.id!r}: superiority takes 'size' (a claimed size) or "
                         "'min_effect' (the smallest effect that matters), not both")
      if self.min_effect is not None:
        self._need_positive("min_effect")
    if self.kind in ("superiority", "target") and self.size is not None:
      if self.scale == "log_ratio" and self.size <= 0:
        raise ValueError(f"Claim {self.id!r}: size must be a positive ratio on scale "
                         f"'log_ratio' (got {self.size})")
      if not self.to_d(self.size) > 0:
        raise ValueError(f"Claim {self.id!r}: size {self.size} is not an improvement for "
                         f"better={self.better!r} on scale {self.scale!r}; a claimed size must "
                         "point the better way")
    has_numbers = any(getattr(self, n) is not None for n in _ALL_NUMBERS)
    if has_numbers and not self.why.strip():
      raise ValueError(f"Claim {self.id!r}: field 'why' must say why the "
                       f"{'/'.join(n for n in used if getattr(self, n) is not None)} was chosen")
    if self.fair_chance:
      if self.flat_delta is None or self.flat_delta <= 0:
        raise ValueError(f"Claim {self.id!r}: fair_chance=True needs flat_delta > 0 (the "
                         "flatness threshold on the effect scale, e.g. half the margin)")
    elif self.flat_delta is not None:
      raise ValueError(f"Claim {self.id!r}: flat_delta is only used with fair_chance=True")

  def _need_positive(self, name: str):
    v = getattr(self, name)
    if v is None or v <= 0:
      raise ValueError(f"Claim {self.id!r}: kind {self.kind!r} needs field {name!r} > 0 "
                       f"(got {v!r})")

  # -- the effect scale d ------------------------------------------------------------------------
  def to_d(self, value: float) -> float:
    """A value in the paper's units (a difference or a ratio) on the oriented effect scale d."""
    v = math.log(value) if self.scale == "log_ratio" else float(value)
    return v if self.better == "higher" else -v

  def from_d(self, d: float) -> float:
    """Inverse of `to_d`: an effect d back in the paper's units."""
    v = d if self.better == "higher" else -d
    if self.scale != "log_ratio":
      return v
    return math.inf if v == math.inf else (0.0 if v == -math.inf else math.exp(v))

  def band_d(self, amount: float) -> float:
    """A symmetric margin (m, m_min) on d: m for differences, log(1 + m) for ratios."""
    return math.log1p(amount) if self.scale == "log_ratio" else float(amount)

  def target_band_d(self) -> tuple[float, float]:
    """[L, U] on d of the target band [c / (1 + t), c (1 + t)] (c > 0 on d)."""
    c, t = self.size, self.tolerance
    ends = sorted((self.to_d(c / (1 + t)), self.to_d(c * (1 + t))))
    return ends[0], ends[1]

  # -- JSON -------------------------------------------------------------------------------------
  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> "Claim":
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(d) - set(names))
    if unknown:
      raise ValueError(f"Claim record has unknown fields {unknown}; known: {names}")
    missing = [n for n in ("id", "text", "paper", "statistic", "unit", "kind") if n not in d]
    if missing:
      raise ValueError(f"Claim record lacks fields {missing}")
    return cls(**d)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), sort_keys=True)

  @classmethod
  def from_json(cls, s: str) -> "Claim":
    return cls.from_dict(json.loads(s))


def _one_of(claim: Claim, name: str, allowed: tuple[str, ...]):
  v = getattr(claim, name)
  if v not in allowed:
    raise ValueError(f"Claim {claim.id!r}: {name} {v!r} is not one of {allowed}")
