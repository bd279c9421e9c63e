"""Bootstrap statistics of the BallastHydro-v0 study over seeds x paired episodes.

  rl_stat_ci(x [S, N], n_boot) -> (mean, lo, hi)               seeds and episodes resampled
  reduction_ci(rl [S, N], base [N], n_boot) -> (r, lo, hi)     r = 1 - mean(rl) / mean(base)
  f1_ci(tp, fp, fn [S, N], n_boot, base=None) -> (f1, lo, hi)  micro F1 (or paired difference)
  per_seed_f1(tp, fp, fn [S, N]) -> [S]                        micro F1 per seed, NaN if empty
  paired_delta(a, b) -> [S, L * n]                             b - a on common episodes
  flattening(sweep, n_boot, flat_tol) -> dict                  change per budget doubling

Intervals are 95% percentile intervals; each resample draws seeds and episodes independently
(rng = default_rng(seed), seeds first), and a paired comparison resamples both sides with the
same episode indices. Report statistics only: the verdicts come from jaxrl_suite.repro.
"""

from __future__ import annotations

import numpy as np


def _boot(rng, n_boot: int, n: int) -> np.ndarray:
  """Resampled indices [n_boot, n] into an axis of length n."""
  return rng.integers(0, n, (n_boot, n))


def _interval(b: np.ndarray) -> tuple[float, float]:
  return float(np.quantile(b, 0.025)), float(np.quantile(b, 0.975))


def rl_stat_ci(x: np.ndarray, n_boot: int, seed: int = 0):
  """mean [lo, hi] of x [S, N] (seeds x paired episodes), seeds and episodes resampled."""
  x = np.asarray(x, np.float64)
  rng = np.random.default_rng(seed)
  si, ei = _boot(rng, n_boot, x.shape[0]), _boot(rng, n_boot, x.shape[1])
  b = np.array([x[si[i]][:, ei[i]].mean() for i in range(n_boot)])
  return (float(x.mean()),) + _interval(b)


def reduction_ci(rl: np.ndarray, base: np.ndarray, n_boot: int, seed: int = 0):
  """1 - mean(rl) / mean(base) with rl [S, N], base [N] paired by episode; bootstrap over seeds
  and episodes jointly."""
  rl, base = np.asarray(rl, np.float64), np.asarray(base, np.float64)
  rng = np.random.default_rng(seed)
  si, ei = _boot(rng, n_boot, rl.shape[0]), _boot(rng, n_boot, rl.shape[1])
  b = np.array([1.0 - rl[si[i]][:, ei[i]].mean() / base[ei[i]].mean() for i in range(n_boot)])
  return (float(1.0 - rl.mean() / base.mean()),) + _interval(b)


def f1_ci(tp, fp, fn, n_boot: int, seed: int = 0, base=None):
  """Micro F1 = 2 TP / (2 TP + FP + FN) of counts [S, N] (seeds x paired episodes) with a
  bootstrap CI resampling seeds and episodes; with base = (tp, fp, fn) of a second diagnoser on
  the same rows, the paired difference F1 - F1_base instead. No positives at all scores 0."""
  def f1(a, b, c):
    return 2.0 * a / max(2.0 * a + b + c, 1.0)

  def stat(si, ei):
    pick = lambda x: np.asarray(x, np.float64)[si][:, ei].sum()
    v = f1(pick(tp), pick(fp), pick(fn))
    return v if base is None else v - f1(*(pick(x) for x in base))

  S, N = np.shape(tp)
  rng = np.random.default_rng(seed)
  si, ei = _boot(rng, n_boot, S), _boot(rng, n_boot, N)
  b = np.array([stat(si[i], ei[i]) for i in range(n_boot)])
  return (float(stat(np.arange(S), np.arange(N))),) + _interval(b)


def per_seed_f1(tp, fp, fn) -> np.ndarray:
  """Micro F1 per seed of counts [S, N] (pooled over episodes) -> [S]; NaN with no positives
  (the repro layer's per-seed samples)."""
  tp, fp, fn = (np.asarray(x, np.float64).sum(-1) for x in (tp, fp, fn))
  den = 2 * tp + fp + fn
  return np.where(den > 0, 2 * tp / np.maximum(den, 1e-12), np.nan)


def paired_delta(a, b) -> np.ndarray:
  """b - a [S, L * n] on the episodes both checkpoints scored: a, b are [S, L, n_a] / [S, L,
  n_b] (seeds x layouts x the first n paired episodes of each layout; [S, N] is read as one
  layout), n = min(n_a, n_b)."""
  a, b = (np.asarray(x, np.float64) for x in (a, b))
  a, b = (x[:, None] if x.ndim == 2 else x for x in (a, b))
  n = min(a.shape[-1], b.shape[-1])
  d = b[..., :n] - a[..., :n]
  return d.reshape(d.shape[0], -1)


def flattening(sweep, n_boot: int, flat_tol: float) -> dict:
  """Change in steps_eff per budget doubling of a sweep [{"updates", "steps_eff" [S, L, n]}]
  (seeds x episodes bootstrap, paired_delta), and whether the last one is flat (no improvement
  beyond flat_tol: its CI's lower end above -flat_tol). Returns {"steps": [{from, to,
  delta_steps: (mean, lo, hi), episodes}], "flattened", "last_delta"} ("steps" empty and
  flattened False for fewer than two checkpoints)."""
  steps = []
  for a, b in zip(sweep[:-1], sweep[1:]):
    d = paired_delta(a["steps_eff"], b["steps_eff"])
    m, lo, hi = rl_stat_ci(d, n_boot)
    steps.append({"from": a["updates"], "to": b["updates"], "delta_steps": [m, lo, hi],
                  "episodes": int(d.shape[-1])})
  if not steps:
    return {"steps": [], "flattened": False}
  last = steps[-1]["delta_steps"]
  return {"steps": steps, "flattened": bool(last[1] > -flat_tol), "last_delta": last}
