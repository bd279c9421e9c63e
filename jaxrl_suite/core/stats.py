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


N_BOOT = 2000


def _crossed_draws(s: int, w: int, n_boot: int, seed: int):
  """Index draws of a two-way (seeds x windows) bootstrap: seeds and windows resampled
  independently with replacement (a factor of size 1 is kept as is)."""
  rng = np.random.default_rng(seed)
  si = rng.integers(0, s, (n_boot, s)) if s > 1 else np.zeros((n_boot, 1), int)
  wi = rng.integers(0, w, (n_boot, w)) if w > 1 else np.zeros((n_boot, 1), int)
  return si, wi


def _boot_mean(x: np.ndarray, si, wi) -> np.ndarray:
  """Mean of x[S, W] (NaN cells ignored) over each bootstrap draw: [n_boot]."""
  sub = x[si[:, :, None], wi[:, None, :]]
  with np.errstate(invalid="ignore"):
    return np.nanmean(sub.reshape(sub.shape[0], -1), -1)


def crossed_ci(x: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
  """(mean, lo, hi): 95% percentile CI of the mean of x [S, W] (seeds x windows) under the
  two-way bootstrap that resamples seeds and windows independently (both are random factors:
  a new run has new seeds AND new traffic). Zero width only if every cell is equal."""
  x = np.asarray(x, np.float64)
  if not np.isfinite(x).any():
    return (float("nan"),) * 3
  si, wi = _crossed_draws(x.shape[0], x.shape[1], n_boot, seed)
  b = _boot_mean(x, si, wi)
  return float(np.nanmean(x)), float(np.nanpercentile(b, 2.5)), float(np.nanpercentile(b, 97.5))


def crossed_ratio_ci(x: np.ndarray, y: np.ndarray, n_boot: int = N_BOOT, seed: int = 0
                     ) -> tuple[float, float, float]:
  """(ratio, lo, hi) of mean(x) / mean(y) over paired cells [S, W] (same seed index and
  window), the same two-way bootstrap draws for numerator and denominator."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  si, wi = _crossed_draws(x.shape[0], x.shape[1], n_boot, seed)
  with np.errstate(invalid="ignore", divide="ignore"):
    b = _boot_mean(x, si, wi) / _boot_mean(y, si, wi)
    r = float(np.nanmean(x) / np.nanmean(y))
  return r, float(np.nanpercentile(b, 2.5)), float(np.nanpercentile(b, 97.5))
