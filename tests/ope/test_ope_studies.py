"""The FORE studies' building blocks (ope/studies/): known answers on hand-made inputs.

The studies end to end are tests/experiments/test_fore_experiment.py; here each moved helper is
checked alone: intervals against an independent formula, slopes on errors that decay exactly as
n^-1/2, table rows on arrays small enough to count by hand, and the kernels on the hub MDP at
its population weights (where FORE is exact: J = 45/38). float64 via `jax.enable_x64(True)`.
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.ope import coverage
from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M
from jaxrl_suite.ope.studies import (cartpole, dope, families, family_stats, hub, kernels, rates,
                                     report, summaries, sweep)

J_HUB = 45.0 / 38.0


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


# ---- summaries ----------------------------------------------------------------------------------

@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (95, 100), (1, 1)])
def test_binom_ci_is_the_wilson_interval(k, n):
  """scipy's Wilson interval equals coverage.wilson's closed form (written independently)."""
  np.testing.assert_allclose(summaries.binom_ci(k, n), coverage.wilson(k, n), rtol=1e-9,
                             atol=1e-12)


def test_binom_ci_without_trials_is_nan():
  assert all(math.isnan(x) for x in summaries.binom_ci(0, 0))


def test_mean_ci_and_nanmean_known_answers():
  m, lo, hi = summaries.mean_ci([1.0, 2.0, 3.0])    # sd 1, t_{0.975, 2} = 4.302652729749462
  half = 4.302652729749462 / math.sqrt(3)
  np.testing.assert_allclose([m, lo, hi], [2.0, 2.0 - half, 2.0 + half], rtol=1e-12)
  assert summaries.nanmean([np.nan, 1.0, 3.0, np.inf]) == 2.0
  assert summaries.nanmean([np.nan, np.nan]) is None


# ---- rates --------------------------------------------------------------------------------------

NS = [100, 1_000, 10_000, 100_000]


def test_rmse_slope_is_minus_half_for_root_n_errors():
  """Estimates truth +- c / sqrt(n): RMSE = c / sqrt(n) in every resample, so the slope and both
  bootstrap ends are exactly -1/2."""
  truth = 1.5
  raw = {n: truth + np.array([1.0, -1.0, 1.0, -1.0]) * 0.3 / math.sqrt(n) for n in NS}
  slope, (lo, hi) = rates.rmse_slope(NS, raw, truth)
  np.testing.assert_allclose([slope, lo, hi], [-0.5, -0.5, -0.5], atol=1e-9)


def test_per_seed_rates_drop_seeds_refused_somewhere():
  big = [n for n in NS if n >= rates.MIN_N]                          # 3 sizes
  c = np.array([0.2, 1.0, 3.0])                                       # 3 seeds
  err = [c * n ** -0.5 * (-1) ** i for i, n in enumerate(big)]       # signs do not matter
  err[1][2] = np.nan                                                  # seed 2 refused at 1e4
  cov = [np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, np.nan]), np.array([0.0, 1.0, 1.0])]
  out = rates.per_seed_rates(NS, err, cov)
  np.testing.assert_allclose(out["slope"], [-0.5, -0.5], atol=1e-12)
  assert out["slope_dropped"] == 1 and out["coverage_dropped"] == 0
  np.testing.assert_allclose(out["coverage"], [2 / 3, 2 / 3, 1.0])


# ---- kernels ------------------------------------------------------------------------------------

def test_cell_counts_and_usable():
  probs = np.array([0.5, 0.25, 0.25])
  w = kernels.cell_counts(np.random.default_rng(0), 1000, probs, 7)
  chex.assert_shape(w, (7, 3))
  assert w.dtype == np.float64 and (w.sum(1) == 1000).all()
  np.testing.assert_array_equal(
      w, kernels.cell_counts(np.random.default_rng(0), 1000, probs, 7))   # same seed, same draw
  ok = kernels.usable(np.array([1.0, np.nan, 1.0, 1.0]), np.array([10.0, 10.0, np.inf, 1e12]))
  assert ok.tolist() == [True, False, False, False]


def _hub_population_weights(scale=1e6, seeds=2):
  """Hub cell arrays and weights proportional to the cell probabilities (the population)."""
  p = M.hub_mdp()
  phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p))
  w = jnp.asarray(np.tile(M.cell_probs(p) * scale, (seeds, 1)))
  return p, (phi, phn, r, nu0), w


def test_kernels_are_exact_at_the_population_weights():
  """FORE and FORE-IV with Z = X = phi give J = 45/38 for every row of w; BRM gives the
  population BRM value (mdps.population_brm)."""
  p, (phi, phn, r, nu0), w = _hub_population_weights()
  k = kernels.build_kernels()
  v, se, cond, ident = k["fore"](phi, phn, r, w, nu0, p.gamma)
  chex.assert_shape([v, se, cond, ident], (2,))
  np.testing.assert_allclose(v, J_HUB, rtol=1e-10)
  np.testing.assert_allclose(k["iv"](phi, phi, phn, r, w, nu0, p.gamma)[0], v, rtol=1e-12)
  ex = M.problem_exact(p)
  np.testing.assert_allclose(k["brm"](phi, phn, r, w, nu0, p.gamma),
                             M.population_brm(p.phi, p.dmu, ex, p.gamma), rtol=1e-8)
  single = F.fore_core(phi, phn, r, w[0], nu0, p.gamma)
  np.testing.assert_allclose(se[0], single.se, rtol=1e-12)


def test_support_and_bootstrap_kernels():
  p, (phi, phn, r, nu0), w = _hub_population_weights(scale=1e4)
  k = kernels.build_kernels()
  sa = p.num_states * p.num_actions
  cell_x = jnp.asarray(np.arange(sa * p.num_states) // p.num_states)
  out = k["support"](phi, phn, r, w, nu0, p.gamma, cell_x, sa, 10)
  np.testing.assert_allclose(out[0], J_HUB, rtol=1e-10)
  assert ((np.asarray(out[4]) > 0) & (np.asarray(out[4]) <= 1)).all()     # ess_frac
  lo, hi = k["boot"](jax.random.PRNGKey(0), phi, phn, r, jnp.round(w), nu0, p.gamma, 30)
  chex.assert_shape([lo, hi], (2,))
  assert (np.asarray(lo) <= np.asarray(hi)).all()


# ---- hub, families ------------------------------------------------------------------------------

def test_hub_population_known_values():
  hp = hub.population()
  assert hp["J"] == pytest.approx(J_HUB, rel=1e-12)
  assert abs(hp["fore_err"]) < 1e-12 and hp["w_err"] < 1e-10     # w in span(phi): exact
  assert hp["fqe_rho"] > 1 and hp["weighted_fqe_rho"] < 1        # FQE diverges, weighted not
  assert abs(hp["brm"] - J_HUB) > 1e-3 and abs(hp["lstdq_psi"] - J_HUB) > 1e-3


def test_family_population_is_exact_and_pool_filters_on_rho():
  rng = np.random.default_rng(3)
  pop, insts, signed = families.population(rng, "severe", 4)
  assert pop["mdps"] == 4 and pop["fore_rel_err_max"] < 1e-8
  chex.assert_shape(signed, (4,))
  assert families.finite_pool(rng, "moderate", insts, 2) == insts[:2]
  pool = families.finite_pool(rng, "severe", list(insts), 2)
  assert len(pool) == 2 and all(rho > 1 for rho, _, _ in pool)


def _stats(fe, cov, passed, flag):
  a = np.asarray
  return dict(fe=a(fe), ce=a(fe), cov=a(cov), fq=a(fe), covs=a(cov), flag=a(flag),
              passed=a(passed), unseen=np.zeros(len(fe)))


def test_family_row_pools_seeds_and_keeps_per_mdp_coverage():
  nan = np.nan
  st = [_stats([0.1, 0.2, nan], [1.0, 0.0, nan], [1.0, nan, nan], [0.0, 1.0, nan]),
        _stats([nan, nan, nan], [nan, nan, nan], [nan, nan, nan], [nan, nan, nan])]
  row = family_stats.family_row(1000, st)
  assert row["refused"] == 4 and row["coverage"] == 0.5
  assert row["coverage_per_mdp"] == [0.5, None] and row["coverage_all_pass_per_mdp"] == [1.0, None]
  assert row["support_flagged_frac"] == 0.5 and row["coverage_support_flagged"] == 0.0
  assert row["all_pass_frac"] == 0.5 and row["fore_median"] == pytest.approx(0.15)
  assert row["coverage_ci"] == summaries.binom_ci(1, 2)


def test_per_mdp_row_known_answer():
  st = dict(ok=np.array([True, True, False]), ident=np.array([3.0, 1.0, 0.0]),
            hit=np.array([True, False, True]), sup_bad=np.array([False, True, False]),
            essf=np.array([0.5, 0.1, 0.0]), rare=np.array([0.0, 0.2, 1.0]),
            unseen=np.array([0.0, 0.3, 0.6]))
  row = family_stats.per_mdp_row(4, 1.2, st)
  assert row == dict(mdp=4, fqe_rho=1.2, coverage=0.5, refused_or_weak=pytest.approx(2 / 3),
                     support_flagged=0.5, ess_frac_median=pytest.approx(0.3),
                     rare_share_median=pytest.approx(0.1), unseen_target_mass=pytest.approx(0.3))


# ---- sweep, dope, cartpole, report --------------------------------------------------------------

def test_sweep_row_refuses_unidentified_and_covers_the_kept():
  v = np.array([1.0, 1.1, 5.0, np.nan])
  se = np.array([0.1, 0.01, 1.0, 1.0])
  cond = np.array([10.0, 10.0, 10.0, np.inf])      # seed 3 numerically singular: refused
  ident = np.array([5.0, 5.0, 0.5, 5.0])           # seed 2 weakly identified: refused
  row, err = sweep._row(0.5, 1e-3, 0.0, v, se, cond, ident, 1.0)
  np.testing.assert_allclose(err[:3], [0.0, 0.1, 4.0])
  assert row["flagged_frac"] == 0.5                  # seeds 2 (ident_t) and 3 (cond)
  assert row["coverage"] == 0.5                      # seed 0 hits, seed 1 misses
  assert row["median_abs_err"] == pytest.approx(0.1)


def test_dope_summary_and_groups_on_exact_estimates():
  truths = np.array([0.0, 1.0, 2.0, 4.0, 5.0, 8.0])              # 6 policies (regret@5), range 8
  exact = np.tile(truths, (3, 1))
  est = {m: exact + 0.5 for m in dope.METHODS}
  est.update({m: exact.copy() for m in ("FORE",) + dope.LINEAR_EQUALS})
  est["FQE"] = np.full_like(exact, np.nan)
  est.update(FORE_se=np.full_like(exact, 0.1), cond=np.full_like(exact, 3.0))
  D = dope.summary(est, truths, 0.01)
  assert D["value_range"] == 8.0 and D["fore_coverage"] == 1.0
  assert D["table"]["FORE"]["norm_abs_err_median"] == 0.0
  assert D["table"]["IS"]["norm_abs_err_median"] == pytest.approx(0.0625)
  assert D["equivalence_max_abs_diff"]["FQE (when converged)"] is None
  np.testing.assert_array_equal(D["units"]["equivalence_gap"], np.zeros(3))
  groups = dope.groups(D)
  assert groups[0] == ["FORE", *dope.LINEAR_EQUALS] and ["FQE"] in groups


def test_cartpole_padding_gives_ratio_one_on_padded_steps():
  back = [{"steps": {"reward": np.zeros(3)}}, {"steps": {"reward": np.zeros(2)}}]  # T = 2
  tr = dict(cluster_ids=np.array([0, 0, 1]), step=np.array([0, 1, 0]),
            rewards=np.array([1.0, 2.0, 3.0]), pi_probs=np.array([0.5, 0.5, 0.2]),
            mu_probs=np.array([0.25, 0.5, 0.4]))
  rew, pp, mp, msk, g = cartpole._padded_is_args(back, tr, 0.9)
  np.testing.assert_array_equal(rew, [[1.0, 2.0], [3.0, 0.0]])
  np.testing.assert_array_equal(msk, [[True, True], [True, False]])
  np.testing.assert_array_equal(np.asarray(pp) / np.asarray(mp), [[2.0, 1.0], [0.5, 1.0]])
  assert g == 0.9


def test_report_fmt():
  assert report.fmt(float("inf")) == "inf" and report.fmt(1.23456789) == "1.235"
  assert report.fmt(0.000123456, 3) == "0.000123"
