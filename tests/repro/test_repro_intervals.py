"""Each interval against an independent float64 numpy/scipy reference."""

import math

import numpy as np
import pytest
from scipy import stats

from jaxrl_suite.repro import intervals as iv

A = np.array([101.0, 97.5, 110.2, 104.8, 99.1])
B = np.array([95.0, 96.0, 101.5, 100.2, 97.0])


def test_t_mean_matches_scipy():
  x = A - B
  got = iv.t_mean(x)
  ref = stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=stats.sem(x))
  assert got.method == "t_mean" and got.df == 4 and got.n_units == 5
  np.testing.assert_allclose([got.lo, got.hi], ref, rtol=1e-12)
  assert got.sd == pytest.approx(np.std(x, ddof=1))


def test_paired_difference_is_the_t_on_differences():
  got = iv.paired_difference(A, B)
  ref = stats.ttest_rel(A, B).confidence_interval(0.95)
  np.testing.assert_allclose([got.lo, got.hi], [ref.low, ref.high], rtol=1e-12)
  assert got.method == "paired_difference" and "paired" in got.why


def test_log_ratio_reports_the_geometric_mean_ratio():
  got = iv.log_ratio(A, B)
  r = np.log(A / B)
  ref = stats.t.interval(0.95, 4, loc=r.mean(), scale=stats.sem(r))
  np.testing.assert_allclose([got.lo, got.hi], ref, rtol=1e-12)
  assert got.scale == "log_ratio"
  assert got.extra["ratio"] == pytest.approx(stats.gmean(A / B))
  assert got.extra["ratio_lo"] == pytest.approx(math.exp(ref[0]))


def test_log_ratio_refuses_non_positive_values():
  with pytest.raises(ValueError, match="positive"):
    iv.log_ratio([1.0, -1.0], [1.0, 1.0])


def _fieller_by_grid(a, b, paired):
  """Reference: the Fieller set {rho: t(rho)^2 <= q^2} found on a fine grid, where t(rho) is the
  t statistic of mean(a) - rho mean(b)."""
  n = a.size
  grid = np.linspace(0.5, 1.6, 220001)
  if paired:
    d = a[None, :] - grid[:, None] * b[None, :]
    se = d.std(1, ddof=1) / math.sqrt(n)
    q = stats.t.ppf(0.975, n - 1)
    inside = np.abs(d.mean(1)) <= q * se
  else:
    num = a.mean() - grid * b.mean()
    va, vb = a.var(ddof=1) / n, b.var(ddof=1) / n
    se = np.sqrt(va + grid ** 2 * vb)
    df = (va + grid ** 2 * vb) ** 2 / (va ** 2 / (n - 1) + grid ** 4 * vb ** 2 / (n - 1))
    # The Welch df is evaluated at the point estimate, as fieller_bounds does.
    rho = a.mean() / b.mean()
    df = (va + rho ** 2 * vb) ** 2 / (va ** 2 / (n - 1) + rho ** 4 * vb ** 2 / (n - 1))
    inside = np.abs(num) <= stats.t.ppf(0.975, df) * se
  return grid[inside].min(), grid[inside].max()


@pytest.mark.parametrize("paired", [True, False])
def test_fieller_matches_a_grid_search_of_its_defining_set(paired):
  got = iv.fieller(A, B, paired=paired)
  lo, hi = _fieller_by_grid(A, B, paired)
  assert got.estimate == pytest.approx(A.mean() / B.mean())
  assert got.lo == pytest.approx(lo, abs=1e-5) and got.hi == pytest.approx(hi, abs=1e-5)
  assert got.scale == "ratio"


def test_fieller_is_unbounded_when_the_denominator_may_be_zero():
  got = iv.fieller([1.0, 2.0, 3.0], [0.1, -0.2, 0.15])
  assert math.isinf(got.lo) and math.isinf(got.hi) and "unbounded" in got.why


def _two_way_anova(x):
  """Reference mean squares by explicit loops."""
  s, w = x.shape
  g = x.mean()
  ss_s = sum(w * (x[i].mean() - g) ** 2 for i in range(s))
  ss_w = sum(s * (x[:, j].mean() - g) ** 2 for j in range(w))
  ss_e = sum((x[i, j] - x[i].mean() - x[:, j].mean() + g) ** 2
             for i in range(s) for j in range(w))
  return ss_s / (s - 1), ss_w / (w - 1), ss_e / ((s - 1) * (w - 1))


def test_crossed_matches_a_hand_anova_with_satterthwaite_df():
  rng = np.random.default_rng(0)
  x = rng.normal(0, 1, (4, 1)) + rng.normal(0, 1, (1, 8)) + rng.normal(0, 0.5, (4, 8)) + 2.0
  ms_s, ms_w, ms_e = _two_way_anova(x)
  assert ms_s > ms_e and ms_w > ms_e   # both components present in this draw
  v = ms_s + ms_w - ms_e
  df = v ** 2 / (ms_s ** 2 / 3 + ms_w ** 2 / 7 + ms_e ** 2 / 21)
  half = stats.t.ppf(0.975, df) * math.sqrt(v / 32)
  got = iv.crossed(x)
  assert got.df == pytest.approx(df) and got.n_units == 4
  assert [got.lo, got.hi] == pytest.approx([x.mean() - half, x.mean() + half])
  assert got.extra["ms_seed"] == pytest.approx(ms_s)


def test_crossed_truncates_a_negative_component():
  """A seed mean square below the residual one means a negative seed variance estimate: it is
  set to 0, leaving S W Var = MS_W (window component kept) with df = W - 1."""
  for k in range(50):   # the first draw (seeded) where the seed component comes out negative
    rng = np.random.default_rng(k)
    x = rng.normal(0, 1, (1, 8)) + rng.normal(0, 1.0, (4, 8))   # no seed effect
    ms_s, ms_w, ms_e = _two_way_anova(x)
    if ms_s < ms_e < ms_w:
      break
  assert ms_s < ms_e < ms_w
  got = iv.crossed(x)
  assert got.df == pytest.approx(7)
  assert got.half_width == pytest.approx(stats.t.ppf(0.975, 7) * math.sqrt(ms_w / 32))


def test_crossed_with_one_seed_or_one_window():
  assert math.isinf(iv.crossed(np.ones((1, 5))).hi)
  one_window = iv.crossed(np.array([[1.0], [2.0], [4.0]]))
  ref = iv.t_mean([1.0, 2.0, 4.0])
  assert (one_window.lo, one_window.hi) == (ref.lo, ref.hi)
  assert "one window" in one_window.why


def _crossed_fieller_by_grid(a, b, grid):
  """Reference: the crossed Fieller set on a grid, each rho tested by the hand ANOVA of the
  cells a - rho b (Satterthwaite df, components truncated at 0)."""
  s, w = a.shape
  inside = []
  for rho in grid:
    d = a - rho * b
    ms = np.array(_two_way_anova(d))
    c = np.array([ms[0] > ms[2], ms[1] > ms[2], 0.0], float)
    c[2] = 1.0 - c[0] - c[1]
    v = float(c @ ms)
    den = float(((c * ms) ** 2 / np.array([s - 1, w - 1, (s - 1) * (w - 1)])).sum())
    df = v ** 2 / den if den > 0 else (s - 1) * (w - 1)
    inside.append(abs(d.mean()) <= stats.t.ppf(0.975, df) * math.sqrt(v / (s * w)))
  inside = np.array(inside)
  return grid[inside].min(), grid[inside].max()


def _goodput_cells(rng, s=4, w=8):
  """Positive goodput-like cells with seed, window and residual effects, a window at zero."""
  win = rng.gamma(4.0, 1.0, (1, w))
  b = win * (1 + 0.1 * rng.normal(size=(s, 1))) + 0.3 * rng.normal(size=(s, w)) ** 2
  a = 1.3 * win * (1 + 0.1 * rng.normal(size=(s, 1))) + 0.3 * rng.normal(size=(s, w)) ** 2
  a[:, 0] = b[:, 0] = 0.0      # a window nobody served: no log-ratio exists, Fieller is fine
  return a, b


def test_crossed_fieller_matches_a_grid_search_of_its_defining_set():
  a, b = _goodput_cells(np.random.default_rng(3))
  got = iv.crossed_fieller(a, b)
  grid = np.linspace(got.estimate - 0.6, got.estimate + 0.6, 1201)   # steps of 1e-3
  lo, hi = _crossed_fieller_by_grid(a, b, grid)
  assert lo > grid[0] and hi < grid[-1]   # the grid brackets the set
  # then steps of 1e-6 across each end
  lo = _crossed_fieller_by_grid(a, b, np.linspace(lo - 1e-3, lo, 1001))[0]
  hi = _crossed_fieller_by_grid(a, b, np.linspace(hi, hi + 1e-3, 1001))[1]
  assert got.estimate == pytest.approx(a.mean() / b.mean()) and got.scale == "ratio"
  assert got.lo == pytest.approx(lo, abs=2e-6) and got.hi == pytest.approx(hi, abs=2e-6)
  assert got.n_units == 4 and got.extra["n_windows"] == 8


def test_crossed_fieller_sees_windows_a_seed_unit_misses():
  """A deterministic policy meets the same windows on every seed: per-seed Fieller over window
  means is a point; the crossed interval keeps the traffic's spread."""
  rng = np.random.default_rng(4)
  win = rng.gamma(4.0, 1.0, 8)
  a = np.tile(2.9 * win + rng.normal(0, 0.5, 8), (4, 1))
  b = np.tile(win, (4, 1))
  seed_unit = iv.fieller(a.mean(1), b.mean(1))
  got = iv.crossed_fieller(a, b)
  assert seed_unit.hi - seed_unit.lo == pytest.approx(0.0, abs=1e-12)
  assert got.lo < got.estimate - 0.02 and got.hi > got.estimate + 0.02


def test_crossed_fieller_with_one_window_is_paired_fieller_and_unbounded_near_zero():
  rng = np.random.default_rng(5)
  a, b = rng.gamma(4.0, 1.0, (5, 1)), rng.gamma(4.0, 1.0, (5, 1))
  got, ref = iv.crossed_fieller(a, b), iv.fieller(a[:, 0], b[:, 0])
  assert (got.lo, got.hi, got.method) == (ref.lo, ref.hi, "crossed_fieller")
  b0 = rng.normal(0, 1, (4, 8))     # denominator mean not significantly nonzero
  wide = iv.crossed_fieller(rng.gamma(4.0, 1.0, (4, 8)), b0)
  assert math.isinf(wide.lo) and math.isinf(wide.hi) and "unbounded" in wide.why
  assert math.isinf(iv.crossed_fieller(np.ones((1, 8)), np.ones((1, 8))).hi)


def test_two_way_bootstrap_is_refused_below_its_calibrated_size():
  with pytest.raises(ValueError, match="crossed"):
    iv.two_way_bootstrap(np.zeros((4, 8)))
  rng = np.random.default_rng(2)
  x = rng.normal(0, 1, (16, 1)) + rng.normal(0, 1, (1, 16)) + rng.normal(0, 1, (16, 16))
  got = iv.two_way_bootstrap(x, n_boot=500)
  # Reference: the same draws by explicit indexing x[rows][:, cols].
  r = np.random.default_rng(0)
  cs = r.multinomial(16, np.full(16, 1 / 16), size=500)
  cw = r.multinomial(16, np.full(16, 1 / 16), size=500)
  means = [np.repeat(np.repeat(x, cs[k], 0), cw[k], 1).mean() for k in range(500)]
  assert [got.lo, got.hi] == pytest.approx(np.quantile(means, [0.025, 0.975]))


def test_bca_is_scipy_bca_and_refused_with_few_units():
  rng = np.random.default_rng(3)
  a, b = rng.lognormal(0.1, 0.3, 40), rng.lognormal(0, 0.3, 40)
  got = iv.bca(a, b, statistic="ratio_of_means", n_resamples=999, seed=5)
  ref = stats.bootstrap((a, b), lambda x, y, axis: x.mean(axis) / y.mean(axis), paired=True,
                        vectorized=True, n_resamples=999, method="BCa",
                        rng=np.random.default_rng(5))
  assert [got.lo, got.hi] == pytest.approx([ref.confidence_interval.low,
                                            ref.confidence_interval.high])
  assert got.scale == "ratio" and got.method == "bca"
  with pytest.raises(ValueError, match="t_mean"):
    iv.bca(a[:10])


def test_per_seed_means_averages_ragged_episodes_first():
  got = iv.per_seed_means([[1.0, 2.0, 3.0], [10.0], [4.0, 6.0]])
  np.testing.assert_allclose(got, [2.0, 10.0, 5.0])
  with pytest.raises(ValueError, match="episode"):
    iv.per_seed_means([[1.0], []])


def test_t_mean_refuses_per_episode_matrices_and_handles_one_unit():
  with pytest.raises(ValueError, match="per_seed_means"):
    iv.t_mean(np.ones((3, 4)))
  one = iv.t_mean([1.0])
  assert math.isinf(one.hi) and "one unit" in one.why


def test_interval_for_each_unit_and_compute_round_trip():
  rng = np.random.default_rng(4)
  m, samples, params, got = iv.interval_for("seed", A, B, ratio=True)
  assert m == "log_ratio" and got == iv.log_ratio(A, B)
  m, samples, params, got = iv.interval_for("seed x episode", [[1.0, 2.0], [3.0, 3.5, 4.0],
                                                               [0.5]])
  assert m == "t_mean" and got.n_units == 3 and params["average_episodes"]
  assert got.estimate == pytest.approx(np.mean([1.5, 3.5, 0.5]))
  cells_a = rng.lognormal(0, 0.1, (3, 4))
  cells_b = rng.lognormal(0, 0.1, (3, 4))
  m, samples, params, got = iv.interval_for("seed x window", cells_a, cells_b, ratio=True)
  assert m == "crossed" and got == iv.crossed(np.log(cells_a / cells_b), scale="log_ratio")
  assert iv.compute(m, samples, params) == got
  with pytest.raises(ValueError, match="unit"):
    iv.interval_for("episode", A)


def test_interval_json_round_trip_keeps_infinities():
  one = iv.t_mean([1.0])
  d = one.to_dict()
  assert d["hi"] == "inf"
  assert iv.Interval.from_dict(d) == one
  with pytest.raises(ValueError, match="unknown"):
    iv.Interval.from_dict({**d, "bogus": 1})
