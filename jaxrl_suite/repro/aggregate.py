"""Aggregates across tasks in the style of rliable (Agarwal et al. 2021, "Deep RL at the Edge of
the Statistical Precipice"), numpy only.

Scores are per task, a [runs] array each (runs may differ between tasks):
  IQM: the interquartile mean of all runs of all tasks pooled, i.e. the mean after dropping
    floor(0.25 N) of the N scores from each end (scipy.stats.trim_mean(x, 0.25));
  probability of improvement P(X > Y) = 1/T sum_t P(X_t > Y_t), with
    P(X_t > Y_t) = 1/(n m) sum_i sum_j [1(x_i > y_j) + 1/2 1(x_i = y_j)]  (Mann-Whitney U / nm);
  stratified bootstrap: resample runs with replacement within each task (tasks are fixed), the
    percentile CI of the statistic over the draws (rliable's default).
Scores should be normalised per task (e.g. by a heuristic and an oracle) before pooling.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from jaxrl_suite.repro.intervals import Interval


def _tasks(scores) -> list[np.ndarray]:
  if isinstance(scores, Mapping):
    scores = list(scores.values())
  elif isinstance(scores, np.ndarray) and scores.ndim == 2:
    scores = list(scores.T)   # [runs, tasks] like rliable
  out = [np.asarray(s, np.float64).ravel() for s in scores]
  if not out or any(s.size == 0 for s in out):
    raise ValueError("aggregate: need at least one task with at least one run each")
  return out


def iqm(x, axis=None) -> np.ndarray:
  """Interquartile mean: drop floor(0.25 n) values from each end, average the rest."""
  a = np.sort(np.asarray(x, np.float64), axis=-1 if axis is not None else None)
  if axis is None:
    a = a.ravel()
  n = a.shape[-1]
  k = int(0.25 * n)
  return a[..., k:n - k].mean(-1)


def _stratified_draws(tasks: Sequence[np.ndarray], n_boot: int, rng) -> list[np.ndarray]:
  """[n_boot, n_t] resampled runs of each task (within-task resampling)."""
  return [t[rng.integers(0, t.size, (n_boot, t.size))] for t in tasks]


def iqm_ci(scores, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> Interval:
  """IQM of runs pooled over tasks with its stratified-bootstrap percentile CI."""
  tasks = _tasks(scores)
  rng = np.random.default_rng(seed)
  draws = np.concatenate(_stratified_draws(tasks, n_boot, rng), axis=1)
  boots = iqm(draws, axis=-1)
  return _interval(float(iqm(np.concatenate(tasks))), boots, confidence, "iqm_stratified",
                   tasks, "aggregate over tasks: IQM, stratified bootstrap (rliable)", n_boot,
                   seed)


def _p_improve(x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """P(X > Y) + 1/2 P(X = Y) of the runs on the last axis (batched over leading axes)."""
  gt = (x[..., :, None] > y[..., None, :]).mean((-2, -1))
  eq = (x[..., :, None] == y[..., None, :]).mean((-2, -1))
  return gt + 0.5 * eq


def probability_of_improvement(x_scores, y_scores, n_boot: int = 2000,
                               confidence: float = 0.95, seed: int = 0) -> Interval:
  """P(X > Y) averaged over tasks, with a stratified-bootstrap CI (X and Y runs resampled
  independently within each task). 0.5 means no difference."""
  xs, ys = _tasks(x_scores), _tasks(y_scores)
  if len(xs) != len(ys):
    raise ValueError(f"probability_of_improvement: {len(xs)} tasks for X, {len(ys)} for Y")
  rng = np.random.default_rng(seed)
  est = float(np.mean([_p_improve(x, y) for x, y in zip(xs, ys)]))
  bx, by = _stratified_draws(xs, n_boot, rng), _stratified_draws(ys, n_boot, rng)
  boots = np.mean([_p_improve(x, y) for x, y in zip(bx, by)], axis=0)
  return _interval(est, boots, confidence, "probability_of_improvement", xs,
                   "aggregate over tasks: P(X > Y), stratified bootstrap (rliable)", n_boot, seed)


def stratified_ci(scores, statistic: Callable[[np.ndarray], np.ndarray], n_boot: int = 2000,
                  confidence: float = 0.95, seed: int = 0) -> Interval:
  """Any statistic of the pooled runs ([..., N] -> [...], e.g. np.mean along -1) with its
  stratified-bootstrap percentile CI."""
  tasks = _tasks(scores)
  rng = np.random.default_rng(seed)
  boots = statistic(np.concatenate(_stratified_draws(tasks, n_boot, rng), axis=1))
  return _interval(float(statistic(np.concatenate(tasks)[None])[0]), boots, confidence,
                   "stratified_bootstrap", tasks, "aggregate over tasks: stratified bootstrap",
                   n_boot, seed)


def _interval(est, boots, confidence, method, tasks, why, n_boot, seed) -> Interval:
  a = (1 - confidence) / 2
  lo, hi = np.quantile(boots, [a, 1 - a])
  return Interval(est, float(lo), float(hi), method, int(sum(t.size for t in tasks)),
                  "difference", None, None, confidence, why,
                  {"n_tasks": len(tasks), "n_boot": int(n_boot), "seed": int(seed)})
