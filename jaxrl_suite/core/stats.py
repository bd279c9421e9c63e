"""Small statistics used by every reproduction: means with 95% confidence intervals."""

from __future__ import annotations

import numpy as np
from scipy import stats as _st


def mean_ci(x, confidence: float = 0.95) -> tuple[float, float, float]:
  """Mean and Student-t confidence interval over the first axis (e.g. seeds).

  Returns (mean, lo, hi). With one sample the interval is (mean, mean).
  """
  x = np.asarray(x, dtype=np.float64).ravel()
  m = float(np.mean(x))
  if x.size < 2:
    return m, m, m
  half = float(_st.t.ppf(0.5 + confidence / 2, x.size - 1) * np.std(x, ddof=1) / np.sqrt(x.size))
  return m, m - half, m + half


def bootstrap_ci(x, statistic=np.mean, n_boot: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
  """Percentile bootstrap CI of `statistic` over samples `x` (first axis). Returns (stat, lo, hi)."""
  x = np.asarray(x, dtype=np.float64)
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, len(x), size=(n_boot, len(x)))
  boots = np.array([statistic(x[i]) for i in idx])
  a = (1 - confidence) / 2
  return float(statistic(x)), float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a))


def paired_ratio_ci(a, b, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0):
  """Bootstrap CI of mean(a)/mean(b) resampling paired seeds. Returns (ratio, lo, hi)."""
  a = np.asarray(a, dtype=np.float64)
  b = np.asarray(b, dtype=np.float64)
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, len(a), size=(n_boot, len(a)))
  boots = a[idx].mean(1) / b[idx].mean(1)
  q = (1 - confidence) / 2
  return float(a.mean() / b.mean()), float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q))
