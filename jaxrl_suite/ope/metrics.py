"""DOPE-style metrics of many OPE estimates against known values (Fu et al. 2021's table).

For S data seeds and P target policies, `estimates` is (S, P) and `truths` (P,). Every metric is
per seed (the seed is the replicate that confidence intervals are taken over):

  normalised absolute error   mean_p |Ĵ_sp − J_p| / (max J − min J)   (non-finite Ĵ: inf)
  Spearman rank correlation   ρ(Ĵ_s·, J)                              (nan when any Ĵ_sp is non-finite)
  regret@k                    (max J − max_{p in top-k of Ĵ_s·} J_p) / (max J − min J)

Normalising by the value range makes errors comparable across problems; regret@k is what a user
loses by deploying the best of the k policies the estimator ranks highest. Non-finite estimates
rank last. Pure numpy (float64), no JAX: these run once per table, after the estimators.
"""
from __future__ import annotations

import numpy as np
from scipy import stats as sps


def ranking_metrics(estimates, truths, k: int = 5) -> dict:
  """Per-seed DOPE metrics.

  Args:
    estimates: (S, P) estimates of P policies' values on S seeds (non-finite allowed).
    truths: (P,) true values, not all equal.
    k: the second regret cut-off (regret@1 is always returned), 1 <= k <= P.

  Returns:
    dict of (S,) float64 arrays: norm_abs_err, spearman, regret1, regret_k, and the bool (S,)
    `finite` (every estimate of the seed finite).
  """
  e = np.asarray(estimates, np.float64)
  t = np.asarray(truths, np.float64)
  if e.ndim != 2 or t.ndim != 1 or e.shape[1] != t.shape[0]:
    raise ValueError(f"estimates must be (S, P) and truths (P,), got {e.shape} and {t.shape}")
  if not 1 <= k <= t.shape[0]:
    raise ValueError(f"k must lie in [1, P={t.shape[0]}], got {k}")
  span = t.max() - t.min()
  if not span > 0:
    raise ValueError("truths must not all be equal (the value range normalises every metric)")
  fin = np.isfinite(e)
  finite = fin.all(1)
  abs_err = np.where(fin, np.abs(e - t[None]) / span, np.inf).mean(1)
  spearman = np.array([sps.spearmanr(e[i], t).statistic if finite[i] else np.nan
                       for i in range(e.shape[0])])
  order = np.argsort(-np.where(fin, e, -np.inf), axis=1)     # best first; non-finite last
  regret1 = (t.max() - t[order[:, 0]]) / span
  regret_k = (t.max() - t[order[:, :k]].max(1)) / span
  return dict(norm_abs_err=abs_err, spearman=spearman, regret1=regret1, regret_k=regret_k,
              finite=finite)
