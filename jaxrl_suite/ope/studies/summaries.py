"""Small statistics of the FORE study tables: binomial (Wilson) and t intervals, NaN-aware means.

`binom_ci(k, n)`   Wilson score 95% interval of a share k/n (scipy's binomtest), (nan, nan) at n=0.
`mean_ci(x)`       [mean, lo, hi] of the t 95% interval of the mean of x [m] (core.stats.mean_ci).
`nanmean(x)`       mean of the finite entries of x, None when there are none (a unit without a
                   value, distinct from a value of 0).
"""
from __future__ import annotations

import numpy as np

from jaxrl_suite.core.stats import mean_ci as _mean_ci
from jaxrl_suite.ope import coverage


def binom_ci(k, n) -> tuple[float, float]:
  """Wilson 95% interval of k successes in n trials; (nan, nan) when n == 0."""
  return coverage.wilson(int(k), int(n))


def mean_ci(x) -> list[float]:
  """[mean, lo, hi]: the t 95% interval of the mean of x [m], as a JSON-ready list."""
  return list(_mean_ci(np.asarray(x, np.float64)))


def nanmean(x) -> float | None:
  """Mean of the finite entries (None when there are none: the unit has no value)."""
  x = np.asarray(x, np.float64)
  x = x[np.isfinite(x)]
  return float(x.mean()) if x.size else None
