"""Small statistics used by every reproduction: means with 95% confidence intervals.

The percentile bootstraps here (`bootstrap_ci`, `paired_ratio_ci`, `crossed_ci`,
`crossed_ratio_ci`) under-cover on few units: a percentile bootstrap's spread is the plug-in SD
(biased low by sqrt((n-1)/n)) with normal tails, so at n = 4 seeds its nominal 95% interval
covers ~0.79, at n = 5 ~0.84 (tests/repro/test_repro_calibration.py). They refuse below the
sizes where simulation shows them near nominal, and say what to use instead: the intervals of
`jaxrl_suite.repro.intervals` (Student-t on per-seed values, log-ratios or Fieller for ratios,
the variance-components `crossed` interval for seeds x windows), which are calibrated at 2-10
seeds. `mean_ci` (Student-t) has no minimum.
"""

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


# Calibrated minimums (95% nominal; the same simulations as jaxrl_suite.repro.intervals, whose
# BCA_MIN_UNITS / TWO_WAY_MIN_* these must not undercut: a test checks it). One-way percentile
# bootstrap of a mean: within [0.92, 0.97] at n = 30 on normal units (tests/repro).
BOOTSTRAP_MIN_UNITS = 30
# Two-way (seeds x windows) percentile bootstrap: 0.84-0.90 at 4 x 8, 0.93-0.95 at 16 x 16.
CROSSED_MIN_SEEDS = 16
CROSSED_MIN_WINDOWS = 16


class TooFewUnitsError(ValueError):
  """A percentile bootstrap asked for on fewer units than it covers at (module doc)."""


def _need_units(fn: str, n: int, minimum: int, what: str, instead: str):
  if n < minimum:
    raise TooFewUnitsError(
        f"core.stats.{fn}: {n} {what} is below the {minimum} where a percentile bootstrap "
        f"covers its nominal 95% (at 4-5 it covers ~0.79-0.84); use {instead} "
        "(jaxrl_suite.repro.intervals, calibrated at 2-10 seeds; or repro.records.claim_record "
        "for a claim)")


def bootstrap_ci(x, statistic=np.mean, n_boot: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
  """Percentile bootstrap CI of `statistic` over samples `x` (first axis). Returns (stat, lo, hi).

  Raises TooFewUnitsError below BOOTSTRAP_MIN_UNITS samples (module doc)."""
  x = np.asarray(x, dtype=np.float64)
  _need_units("bootstrap_ci", len(x), BOOTSTRAP_MIN_UNITS, "units",
              "mean_ci here, or repro.intervals.t_mean / paired_difference")
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, len(x), size=(n_boot, len(x)))
  boots = np.array([statistic(x[i]) for i in idx])
  a = (1 - confidence) / 2
  return float(statistic(x)), float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a))


def paired_ratio_ci(a, b, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0):
  """Bootstrap CI of mean(a)/mean(b) resampling paired seeds. Returns (ratio, lo, hi).

  Raises TooFewUnitsError below BOOTSTRAP_MIN_UNITS pairs (module doc)."""
  a = np.asarray(a, dtype=np.float64)
  _need_units("paired_ratio_ci", len(a), BOOTSTRAP_MIN_UNITS, "paired units",
              "repro.intervals.fieller(a, b, paired=True) for a ratio of means, or log_ratio")
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


def _need_crossed(fn: str, shape):
  """Raises TooFewUnitsError unless both factors of an [S, W] grid have enough levels."""
  if len(shape) != 2:
    raise ValueError(f"core.stats.{fn}: expected a [seeds, windows] grid, got shape {shape}")
  _need_units(fn, shape[0], CROSSED_MIN_SEEDS, "seeds", "repro.intervals.crossed (variance "
              "components with t on the seeds), or t on per-seed means")
  _need_units(fn, shape[1], CROSSED_MIN_WINDOWS, "windows", "repro.intervals.crossed")


def crossed_ci(x: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
  """(mean, lo, hi): 95% percentile CI of the mean of x [S, W] (seeds x windows) under the
  two-way bootstrap that resamples seeds and windows independently (both are random factors:
  a new run has new seeds AND new traffic). Zero width only if every cell is equal."""
  x = np.asarray(x, np.float64)
  _need_crossed("crossed_ci", x.shape)
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
  _need_crossed("crossed_ratio_ci", x.shape)
  si, wi = _crossed_draws(x.shape[0], x.shape[1], n_boot, seed)
  with np.errstate(invalid="ignore", divide="ignore"):
    b = _boot_mean(x, si, wi) / _boot_mean(y, si, wi)
    r = float(np.nanmean(x) / np.nanmean(y))
  return r, float(np.nanpercentile(b, 2.5)), float(np.nanpercentile(b, 97.5))
