"""The one verdict vocabulary and the rule table that maps (claim, interval) to a verdict.

With the 95% CI [lo, hi] of the effect d (claims.py: oriented so "better" > 0):

  superiority with size c:  reproduced lo > 0 and hi >= c; partly reproduced lo > 0 and hi < c;
    not reproduced lo <= 0 <= hi < c; contradicted hi < 0; inconclusive lo <= 0 and hi >= c.
  superiority (m_min):      reproduced lo > 0; not reproduced lo <= 0 <= hi < m_min;
    contradicted hi < 0; inconclusive otherwise.
  equivalence within +-m:   reproduced -m < lo and hi < m (TOST); contradicted hi < -m or
    lo > m; inconclusive otherwise.
  non-inferiority by m:     reproduced lo > -m; contradicted hi < -m; inconclusive otherwise.
  target c, tolerance t:    reproduced CI inside [L, U]; partly reproduced lo > 0 and hi < L;
    contradicted hi < 0; inconclusive otherwise.

[L, U] = the band [c / (1 + t), c (1 + t)] on d. A target CI above the band (lo > U) is
"reproduced (exceeds the paper)", with the overshoot in the reason. "descriptive" claims get no
verdict. Every "inconclusive" carries its reason (underpowered / fair chance not shown /
selection failed / testbed cannot express the claim). Verdict words are produced only here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from scipy import stats as _st

from jaxrl_suite.repro.claims import Claim
from jaxrl_suite.repro.intervals import Interval

REPRODUCED = "reproduced"
PARTLY_REPRODUCED = "partly reproduced"
NOT_REPRODUCED = "not reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
DESCRIPTIVE = "descriptive"
VERDICTS = (REPRODUCED, PARTLY_REPRODUCED, NOT_REPRODUCED, CONTRADICTED, INCONCLUSIVE)
WORDS = VERDICTS + (DESCRIPTIVE,)
EXCEEDS = "reproduced (exceeds the paper)"
# Verdicts that say RL did not deliver: they stand only when RL had a fair chance.
NEGATIVE = (NOT_REPRODUCED, CONTRADICTED)
# The four kinds of "inconclusive" (the reason starts with one of them).
UNDERPOWERED = "underpowered"
FAIR_CHANCE_NOT_SHOWN = "fair chance not shown"
SELECTION_FAILED = "selection failed"
CANNOT_EXPRESS = "testbed cannot express the claim"


@dataclasses.dataclass(frozen=True)
class Verdict:
  """A verdict `word` (one of WORDS), its display `label` (EXCEEDS for a target overshoot, else
  the word) and the `reason` in words."""
  word: str
  reason: str
  label: str = ""

  def __post_init__(self):
    if self.word not in WORDS:
      raise ValueError(f"Verdict.word {self.word!r} is not one of {WORDS}")
    if not self.label:
      object.__setattr__(self, "label", self.word)
    if self.word == INCONCLUSIVE and not self.reason.strip():
      raise ValueError("an inconclusive Verdict needs its reason")

  def to_dict(self) -> dict[str, str]:
    return {"word": self.word, "label": self.label, "reason": self.reason}

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
    return cls(d["word"], d.get("reason", ""), d.get("label", ""))


def effect_interval(claim: Claim, iv: Interval) -> tuple[float, float, float]:
  """(estimate, lo, hi) of the interval on the claim's oriented effect scale d."""
  if claim.scale == "difference":
    if iv.scale != "difference":
      raise ValueError(f"claim {claim.id!r} is on scale 'difference' but the interval is on "
                       f"{iv.scale!r}; use paired_difference / crossed on differences")
    e, lo, hi = iv.estimate, iv.lo, iv.hi
  elif iv.scale == "log_ratio":
    e, lo, hi = iv.estimate, iv.lo, iv.hi
  elif iv.scale == "ratio":
    e, lo, hi = (_log(v) for v in (iv.estimate, iv.lo, iv.hi))
  else:
    raise ValueError(f"claim {claim.id!r} is on scale 'log_ratio' but the interval is on "
                     f"{iv.scale!r}; use log_ratio / fieller / crossed on log-ratios")
  if claim.better == "lower":
    e, lo, hi = -e, -hi, -lo
  return e, lo, hi


def _log(v: float) -> float:
  # A ratio interval reaching 0 or below (Fieller, unbounded) has no upper/lower log bound.
  return math.log(v) if v > 0 else -math.inf


def units_needed(sd: float, half_width: float, confidence: float = 0.95,
                 max_units: int = 100_000) -> int | None:
  """Smallest n with t_{1-a/2, n-1} sd / sqrt(n) <= half_width (None if over max_units).

  The number of independent units at which the CI of a mean of per-unit values with SD `sd`
  would have the given half-width (the t quantile keeps it honest at small n).
  """
  if not (sd > 0 and half_width > 0 and math.isfinite(sd)):
    return None
  n = max(2, math.ceil((_st.norm.ppf(0.5 + confidence / 2) * sd / half_width) ** 2))
  while n > 2 and _st.t.ppf(0.5 + confidence / 2, n - 2) * sd / math.sqrt(n - 1) <= half_width:
    n -= 1
  while _st.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n) > half_width:
    n += 1
    if n > max_units:
      return None
  return n


def _underpowered(claim: Claim, iv: Interval, half_width: float | None, what: str) -> str:
  """The "underpowered" reason: how many units would give the half-width that decides."""
  unit = claim.unit.split(" x ")[0]
  if iv.n_units == 0:
    return (f"{UNDERPOWERED}: no samples (0 {unit}s measured), so there is no interval; at "
            f"least 3 {unit}s are needed")
  if iv.n_units < 2 or not math.isfinite(iv.hi - iv.lo):
    return (f"{UNDERPOWERED}: {iv.n_units} {unit}(s) give no finite interval; at least 3 "
            f"{unit}s are needed")
  if iv.sd == 0:
    return (f"{UNDERPOWERED}: every {unit} gave the same value (SD 0), so more {unit}s cannot "
            f"narrow the CI; it straddles {what}")
  if iv.sd is None or half_width is None or half_width <= 0:
    return f"{UNDERPOWERED}: the CI straddles {what} (no sample-size estimate for this interval)"
  n = units_needed(iv.sd, half_width, iv.confidence)
  need = f"about {n}" if n else "more than 100000"
  return (f"{UNDERPOWERED}: {need} {unit}s needed at the observed SD {iv.sd:.3g} for a "
          f"half-width of {half_width:.3g} (have {iv.n_units}, half-width "
          f"{iv.half_width:.3g}); the CI straddles {what}")


def _show(claim: Claim, d: float) -> str:
  """A threshold on d, in the paper's units too when the claim is about a ratio."""
  if claim.scale == "log_ratio":
    return f"{claim.from_d(d):.4g}x (d {d:.3g})"
  return f"{d:.3g}"


def _table(claim: Claim, iv: Interval) -> Verdict:
  """The verdict table (module doc) on the oriented CI, without the fair-chance rule."""
  e, lo, hi = effect_interval(claim, iv)
  ci = f"d = {e:.3g} [{lo:.3g}, {hi:.3g}]"
  if claim.scale == "log_ratio":   # say it in the paper's units too
    r_lo, r_hi = sorted((claim.from_d(lo), claim.from_d(hi)))
    ci = f"ratio {claim.from_d(e):.4g} [{r_lo:.4g}, {r_hi:.4g}], " + ci
  kind = claim.kind
  if kind == "superiority" and claim.size is not None:
    c = claim.to_d(claim.size)
    if lo > 0 and hi >= c:
      return Verdict(REPRODUCED,
                     f"{ci}: above 0 and the claimed size {_show(claim, c)} is not excluded")
    if lo > 0:
      return Verdict(PARTLY_REPRODUCED,
                     f"{ci}: a real effect, smaller than the claimed {_show(claim, c)}")
    if hi < 0:
      return Verdict(CONTRADICTED, f"{ci}: the effect points the other way")
    if hi < c:
      return Verdict(NOT_REPRODUCED,
                     f"{ci}: no effect shown, the claimed size {_show(claim, c)} excluded")
    return Verdict(INCONCLUSIVE, _underpowered(claim, iv, c / 2, f"0 and {_show(claim, c)}"))
  if kind == "superiority":
    if lo > 0:
      return Verdict(REPRODUCED, f"{ci}: above 0")
    if hi < 0:
      return Verdict(CONTRADICTED, f"{ci}: the effect points the other way")
    if claim.min_effect is not None:
      m = claim.band_d(claim.min_effect)
      # hi = 0 included: a zero-width CI at 0 (e.g. a policy identical to its baseline on
      # every unit) excludes every effect that matters, as with a registered size above.
      if lo <= 0 <= hi < m:
        return Verdict(NOT_REPRODUCED, f"{ci}: no effect shown, every effect that matters "
                                       f"(>= {_show(claim, m)}) excluded")
      return Verdict(INCONCLUSIVE, _underpowered(claim, iv, m / 2, f"0 and {m:.3g}"))
    return Verdict(INCONCLUSIVE, _underpowered(claim, iv, abs(e), "0") +
                   " (no smallest effect that matters registered: min_effect)")
  if kind == "equivalence":
    m = claim.band_d(claim.margin)
    if -m < lo and hi < m:
      return Verdict(REPRODUCED, f"{ci}: inside +-{m:.3g} (TOST)")
    if hi < -m or lo > m:
      return Verdict(CONTRADICTED, f"{ci}: outside +-{m:.3g}")
    return Verdict(INCONCLUSIVE, _underpowered(claim, iv, abs(m - abs(e)), f"+-{m:.3g}"))
  if kind == "non_inferiority":
    m = claim.band_d(claim.margin)
    if lo > -m:
      return Verdict(REPRODUCED, f"{ci}: above -{m:.3g}")
    if hi < -m:
      return Verdict(CONTRADICTED, f"{ci}: below -{m:.3g}")
    return Verdict(INCONCLUSIVE, _underpowered(claim, iv, abs(e + m), f"-{m:.3g}"))
  if kind == "target":
    band_lo, band_hi = claim.target_band_d()
    band = f"[{band_lo:.3g}, {band_hi:.3g}]"
    if claim.scale == "log_ratio":
      t = claim.tolerance
      band = f"[{claim.size / (1 + t):.4g}x, {claim.size * (1 + t):.4g}x] (d {band})"
    if band_lo <= lo and hi <= band_hi:
      return Verdict(REPRODUCED, f"{ci}: inside the target band {band}")
    if lo > band_hi:
      over = claim.from_d(e) / claim.size if claim.scale == "log_ratio" else claim.from_d(e) - \
          claim.size
      how = f"{over:.3g}x the paper's" if claim.scale == "log_ratio" else f"{over:+.3g} over"
      return Verdict(REPRODUCED, f"{ci}: above the target band {band}: ours "
                     f"{claim.from_d(e):.4g} vs the paper's {claim.size:.4g} ({how})",
                     EXCEEDS)
    if lo > 0 and hi < band_lo:
      return Verdict(PARTLY_REPRODUCED, f"{ci}: a real effect below the target band {band}")
    if hi < 0:
      return Verdict(CONTRADICTED, f"{ci}: the effect points the other way")
    dist = min(abs(e - band_lo), abs(e - band_hi))
    return Verdict(INCONCLUSIVE, _underpowered(claim, iv, dist, f"the band {band}"))
  return Verdict(DESCRIPTIVE, f"descriptive: {ci}, no verdict registered")


def judge(claim: Claim, interval: Interval, fair_chance=None, selection=None,
          cannot_express: str | None = None) -> Verdict:
  """The verdict of `claim` given the CI of its effect.

  fair_chance: a `flatness.Flatness` of RL's budget sweep. When the claim registers
    fair_chance=True, a negative verdict (NEGATIVE) stands only if the sweep is flat (or
    degrading, then said in the reason); rising / unknown / missing -> inconclusive.
  selection: a `selection.Selection` (or a list of them); a failed one -> inconclusive.
  cannot_express: why the testbed cannot express the claim -> inconclusive.
  """
  if claim.kind == "descriptive":
    return _table(claim, interval)
  if cannot_express:
    return Verdict(INCONCLUSIVE, f"{CANNOT_EXPRESS} ({cannot_express})")
  sels = [] if selection is None else (selection if isinstance(selection, (list, tuple))
                                       else [selection])
  failed = [s for s in sels if not s.ok]
  if failed:
    return Verdict(INCONCLUSIVE, f"{SELECTION_FAILED} (" +
                   "; ".join(f"{s.what}: {s.reason}" for s in failed) + ")")
  v = _table(claim, interval)
  if v.word == PARTLY_REPRODUCED and fair_chance is not None and not fair_chance.fair:
    # Real but smaller than claimed while RL was still improving: the size may be understated.
    return Verdict(v.word, f"{v.reason}; RL's budget sweep is {fair_chance.state}, so the size "
                           f"may be understated: {fair_chance.reason}", v.label)
  if v.word not in NEGATIVE:
    return v
  if fair_chance is None:
    if claim.fair_chance:
      return Verdict(INCONCLUSIVE, f"{FAIR_CHANCE_NOT_SHOWN} (no budget sweep given; the table "
                                   f"alone says {v.word}: {v.reason})")
    return v
  if fair_chance.state == "flat":
    return Verdict(v.word, f"{v.reason}; RL's budget is flat: {fair_chance.reason}", v.label)
  if fair_chance.state == "degrading":
    return Verdict(v.word, f"{v.reason}; RL's budget sweep is degrading: {fair_chance.reason}",
                   v.label)
  return Verdict(INCONCLUSIVE, f"{FAIR_CHANCE_NOT_SHOWN} (RL's budget sweep is "
                               f"{fair_chance.state}: {fair_chance.reason}; the table alone says "
                               f"{v.word})")
