"""The one "RL had a fair chance" rule: is RL's budget sweep flat at its last doubling?

For a sweep of training budgets b, 2b, 4b, ... with per-unit scores y_k,u on VALIDATION data
(never the evaluation set the verdict uses), the gain of the last doubling is, per unit u,
  g_u = y_K,u - y_K-1,u            (scale "difference")
  g_u = log(y_K,u / y_K-1,u)        (scale "log_ratio")
oriented so that "better" > 0, with its Student-t 95% CI [lo, hi] (variance components when the
units are seeds x windows). With a registered threshold delta > 0:
  flat       -delta < lo and hi < delta   (more budget would not have changed the answer)
  rising     lo > delta                   (RL was still improving: it had no fair chance)
  degrading  hi < -delta                  (more budget made it worse: reported as such)
  unknown    otherwise                    (e.g. 2 seeds: a t with 1 df shows nothing)
A negative verdict about RL needs "flat" or "degrading"; `verdicts.judge` turns it into
"inconclusive (fair chance not shown)" otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from jaxrl_suite.repro import intervals

STATES = ("flat", "rising", "degrading", "unknown")


@dataclasses.dataclass(frozen=True)
class Flatness:
  """The flatness verdict of a budget sweep: `state`, the last doubling's gain interval, the
  threshold, the budgets, and a one-line reason."""
  state: str
  gain: intervals.Interval
  delta: float
  budgets: tuple[float, ...]
  reason: str

  @property
  def fair(self) -> bool:
    """Whether a negative verdict about RL may stand (flat, or degrading reported as such)."""
    return self.state in ("flat", "degrading")

  def to_dict(self) -> dict[str, Any]:
    return {"state": self.state, "gain": self.gain.to_dict(), "delta": self.delta,
            "budgets": list(self.budgets), "reason": self.reason}


def classify(lo: float, hi: float, delta: float) -> str:
  """flat / rising / degrading / unknown of a gain CI [lo, hi] against threshold delta."""
  if delta <= 0:
    raise ValueError(f"flatness delta must be > 0 (got {delta})")
  if -delta < lo and hi < delta:
    return "flat"
  if lo > delta:
    return "rising"
  if hi < -delta:
    return "degrading"
  return "unknown"


def last_doubling(scores, budgets: Sequence[float], delta: float, scale: str = "difference",
                  better: str = "higher", confidence: float = 0.95) -> Flatness:
  """Flatness of a budget sweep from validation scores.

  scores: [K, S] (budget, seed) or [K, S, W] (budget, seed, validation window), K >= 2;
  budgets: K increasing budgets, each twice the one before (the rule is about doublings);
  delta: the registered threshold on the gain's scale (e.g. half the claim's margin on d);
  scale / better: how a gain is measured and which way is better (as for claims).
  """
  y = np.asarray(scores, np.float64)
  b = [float(v) for v in budgets]
  if y.ndim not in (2, 3) or y.shape[0] != len(b) or len(b) < 2:
    raise ValueError(f"flatness: scores must be [budgets, seeds] or [budgets, seeds, windows] "
                     f"with one row per budget ({len(b)} budgets, >= 2); got shape {y.shape}")
  for lo_b, hi_b in zip(b[:-1], b[1:]):
    if not np.isclose(hi_b, 2 * lo_b):
      raise ValueError(f"flatness: budgets {b} are not a doubling sweep (b, 2b, 4b, ...); "
                       f"{hi_b} != 2 x {lo_b}")
  if scale not in ("difference", "log_ratio") or better not in ("higher", "lower"):
    raise ValueError(f"flatness: scale {scale!r} / better {better!r} not understood")
  last, prev = y[-1], y[-2]
  if scale == "log_ratio":
    if np.any(last <= 0) or np.any(prev <= 0):
      raise ValueError("flatness: scale 'log_ratio' needs positive validation scores")
    g = np.log(last / prev)
  else:
    g = last - prev
  if better == "lower":
    g = -g
  gain = intervals.crossed(g, confidence) if g.ndim == 2 else intervals.t_mean(
      g, confidence, "difference",
      "gain of the last budget doubling per seed on validation data: Student-t")
  state = classify(gain.lo, gain.hi, delta)
  reason = (f"last doubling ({b[-2]:g} -> {b[-1]:g}) gains {gain.estimate:.3g} "
            f"[{gain.lo:.3g}, {gain.hi:.3g}] on validation data, threshold +-{delta:g}: {state}")
  return Flatness(state, gain, float(delta), tuple(b), reason)


def from_record(d: Mapping[str, Any]) -> Flatness:
  """Recomputes a Flatness from its stored inputs {"scores", "budgets", "delta", ...}."""
  missing = [k for k in ("scores", "budgets", "delta") if k not in d]
  if missing:
    raise ValueError(f"fair_chance record lacks {missing}; store last_doubling's inputs")
  return last_doubling(d["scores"], d["budgets"], d["delta"], d.get("scale", "difference"),
                       d.get("better", "higher"), d.get("confidence", 0.95))
