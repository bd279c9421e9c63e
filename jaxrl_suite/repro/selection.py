"""Choices made before evaluation, from TRAINING (or validation) data only, with their record.

A reproduction picks things (the most favourable load, the best tuned heuristic and its
parameter, a checkpoint, greedy vs sampled actions) and must not pick them on the data its verdict
is computed from: choosing the best of k on the evaluation set biases the comparison upwards by
about the expected maximum of k noisy means. Each function takes per-candidate training scores,
returns the choice and a `Selection` record (what, candidates, scores, data used) that goes into
the claim record, so a reader can check the choice against the stored scores.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

SPLITS = ("training", "validation")


@dataclasses.dataclass(frozen=True)
class Selection:
  """What was chosen: `what` (e.g. "load"), `candidates`, their mean `scores` on `data` (a
  description: "training windows 0-7 of seeds 0-3"), the `choice`, `ok` and a `reason` when not."""
  what: str
  candidates: tuple[str, ...]
  scores: tuple[float, ...]
  choice: str | None
  data: str
  split: str = "training"
  better: str = "higher"
  ok: bool = True
  reason: str = ""

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    d["candidates"], d["scores"] = list(self.candidates), [_jf(s) for s in self.scores]
    return d

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> "Selection":
    d = dict(d)
    d["candidates"] = tuple(d["candidates"])
    d["scores"] = tuple(float(s) for s in d["scores"])
    return cls(**d)

  def recheck(self) -> "Selection":
    """The same selection recomputed from the stored scores (to catch an edited record)."""
    return _pick(self.what, list(self.candidates), np.asarray(self.scores, np.float64),
                 self.data, self.split, self.better)


def _jf(v: float):
  return v if np.isfinite(v) else str(v)


def _pick(what: str, names: list[str], means: np.ndarray, data: str, split: str,
          better: str) -> Selection:
  ok = np.isfinite(means)
  if not ok.any():
    return Selection(what, tuple(names), tuple(float(m) for m in means), None, data, split,
                     better, False, "no candidate has a finite score on the selection data")
  key = np.where(ok, means if better == "higher" else -means, -np.inf)
  i = int(np.argmax(key))   # first of tied candidates: order is the registered preference
  return Selection(what, tuple(names), tuple(float(m) for m in means), names[i], data, split,
                   better)


def pick_best(what: str, train_scores: Mapping[str, Any], data: str, split: str = "training",
              better: str = "higher") -> Selection:
  """The candidate with the best mean training score.

  train_scores: {candidate name: per-unit scores on `split` data (any shape, averaged)};
  data: which data those scores come from (saved in the record). split must be "training" or
  "validation": an evaluation split is refused.
  """
  if split not in SPLITS:
    raise ValueError(f"selection {what!r}: split {split!r} is not one of {SPLITS}; choosing on "
                     "the evaluation data biases the verdict (use training or validation data)")
  if better not in ("higher", "lower"):
    raise ValueError(f"selection {what!r}: better {better!r} must be 'higher' or 'lower'")
  if not data.strip():
    raise ValueError(f"selection {what!r}: say which data the scores come from (data=...)")
  if not train_scores:
    raise ValueError(f"selection {what!r}: no candidates")
  names = [str(k) for k in train_scores]
  means = np.array([_mean(v) for v in train_scores.values()])
  return _pick(what, names, means, data, split, better)


def _mean(v) -> float:
  a = np.asarray(v, np.float64)
  return float(np.mean(a)) if a.size and np.all(np.isfinite(a)) else float("nan")


def pick_load(loads: Sequence[float], train_effects, data: str, better: str = "higher"
              ) -> Selection:
  """The most favourable load for the claim: the load whose training effect (e.g. RL vs
  heuristic log-ratio, [L, units]) is best. Picked on training windows, reported on eval."""
  return pick_best("load", {f"{x:g}": e for x, e in zip(loads, train_effects)}, data,
                   better=better)


def pick_heuristic(families: Mapping[str, Mapping[Any, Any]], data: str,
                   better: str = "higher") -> Selection:
  """The best (family, parameter) of tuned heuristics: families = {family: {param: scores}}.
  The candidate name is "family(param)", e.g. "sita(0.5)"."""
  flat = {f"{fam}({p})": s for fam, grid in families.items() for p, s in grid.items()}
  return pick_best("heuristic", flat, data, better=better)


def pick_checkpoint(steps: Sequence[int], train_scores, data: str, split: str = "validation",
                    better: str = "higher") -> Selection:
  """The checkpoint (training step) with the best score on validation (or training) data."""
  return pick_best("checkpoint", {str(int(s)): v for s, v in zip(steps, train_scores)}, data,
                   split=split, better=better)


def pick_mode(train_scores: Mapping[str, Any], data: str, better: str = "higher") -> Selection:
  """Greedy vs sampled actions (or any set of modes), chosen on training data."""
  return pick_best("mode", train_scores, data, better=better)
