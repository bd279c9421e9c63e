"""core.stats' percentile bootstraps refuse the few-unit designs where they under-cover, and the
minimum they use is where simulation shows them near nominal."""

import numpy as np
import pytest

from jaxrl_suite.core import stats
from jaxrl_suite.repro import intervals as iv


def test_minimums_do_not_undercut_the_repro_layer():
  assert stats.BOOTSTRAP_MIN_UNITS >= iv.BCA_MIN_UNITS
  assert stats.CROSSED_MIN_SEEDS >= iv.TWO_WAY_MIN_SEEDS
  assert stats.CROSSED_MIN_WINDOWS >= iv.TWO_WAY_MIN_WINDOWS


@pytest.mark.parametrize("n", [2, 4, 5, 10, 29])
def test_one_way_bootstraps_refuse_few_units(n):
  x = np.arange(1.0, n + 1)
  with pytest.raises(stats.TooFewUnitsError, match="repro.intervals"):
    stats.bootstrap_ci(x)
  with pytest.raises(stats.TooFewUnitsError, match="fieller"):
    stats.paired_ratio_ci(x, x + 1)


@pytest.mark.parametrize("shape", [(2, 8), (4, 8), (8, 32), (32, 8), (15, 16)])
def test_crossed_bootstraps_refuse_few_levels(shape):
  x = np.ones(shape)
  with pytest.raises(stats.TooFewUnitsError, match="crossed"):
    stats.crossed_ci(x)
  with pytest.raises(stats.TooFewUnitsError):
    stats.crossed_ratio_ci(x, x)


def test_they_run_at_the_minimum():
  rng = np.random.default_rng(0)
  x = rng.normal(10, 1, stats.BOOTSTRAP_MIN_UNITS)
  m, lo, hi = stats.bootstrap_ci(x)
  assert lo < m < hi and m == pytest.approx(x.mean())
  r, rlo, rhi = stats.paired_ratio_ci(x, x / 2)
  assert r == pytest.approx(2.0) and rlo == pytest.approx(2.0) and rhi == pytest.approx(2.0)
  g = rng.normal(0, 1, (stats.CROSSED_MIN_SEEDS, stats.CROSSED_MIN_WINDOWS))
  m, lo, hi = stats.crossed_ci(g, n_boot=200)
  assert lo < m < hi
  assert stats.mean_ci([1.0, 2.0])[0] == 1.5    # the t interval has no minimum


def test_percentile_bootstrap_covers_near_nominal_at_its_minimum():
  """At n = BOOTSTRAP_MIN_UNITS normal units the percentile bootstrap of the mean covers the
  true mean within [0.92, 0.97] (1,000 experiments x 1,000 resamples; SE of a coverage ~0.007)."""
  rng = np.random.default_rng(11)
  n, draws, n_boot = stats.BOOTSTRAP_MIN_UNITS, 1000, 1000
  x = rng.normal(0, 1, (draws, n))
  cov = 0
  for row in x:       # the draws bootstrap_ci makes (test_repro_calibration checks they match)
    idx = rng.integers(0, n, (n_boot, n))
    lo, hi = np.quantile(row[idx].mean(-1), [0.025, 0.975])
    cov += lo <= 0.0 <= hi
  assert 0.92 <= cov / draws <= 0.97, cov / draws
