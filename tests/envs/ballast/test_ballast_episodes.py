"""BallastHydro episode banks: the documented clog prior holds on any layout, every episode is
finishable by the oracle (checked at generation, rejections counted), baselines on the bank."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast import make_hydro
from jaxrl_suite.envs.ballast.episodes import (DEFAULT_PRIOR, draw_clog, draw_plan, jobs_routable,
                                               layout_prior, quotas)
from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.hydro_rollout import make_hydro_evaluate
from jaxrl_suite.envs.ballast.layout import load_layout
from jaxrl_suite.envs.ballast.routes import build_routes


def test_quotas_are_largest_remainder():
  for n in (1, 7, 64, 1000, 1023):
    q = quotas(n, DEFAULT_PRIOR["p_blocked"])
    assert q.sum() == n and (np.abs(q - n * np.array(DEFAULT_PRIOR["p_blocked"])) < 1).all()


@pytest.mark.parametrize("name", ["ring14", "direct10", "gen"])
def test_clog_draws_have_the_stratum_count_on_blockable_edges(name):
  lay = generate_layout(5) if name == "gen" else load_layout(name)
  g = build_routes(lay, "auto")
  rng = np.random.default_rng(0)
  prior = layout_prior(lay)
  for b in range(4):
    for _ in range(50):
      c = draw_clog(rng, g, prior, b)
      assert (c <= 0).sum() == b and g["can_block"][c <= 0].all()
      part = (c > 0) & (c < 1)
      assert part.sum() <= 2 and ((c[part] >= 0.15) & (c[part] <= 0.5)).all()
      assert g["edge_mask"][c < 1].all()


def test_layout_clog_prior_overrides_the_default():
  lay = load_layout("ring14")
  lay["clog_prior"] = {"p_blocked": [0.5, 0.5], "partial_hi": 0.3}
  prior = layout_prior(lay)
  assert prior["p_blocked"] == [0.5, 0.5] and prior["partial_hi"] == 0.3
  assert prior["p_partial"] == DEFAULT_PRIOR["p_partial"]


def test_plans_start_within_half_the_heel_limit():
  lay = load_layout("direct10")        # the light ship: 1 deg is ~1,260 t*m
  g = build_routes(lay, "auto")
  hyd = lay["hydrostatics"]
  rng = np.random.default_rng(1)
  for _ in range(30):
    vol0, target, mh, _ = draw_plan(rng, g, hyd, 1.0)
    m0 = hyd["rho_t_per_m3"] * np.sum(vol0 * g["tcg"]) + mh
    heel0 = np.degrees(np.arctan(m0 / (hyd["displacement_t"] * hyd["gm_m"])))
    assert abs(heel0) <= 1.0 + 1e-4
    assert ((vol0 >= 0) & (vol0 <= g["cap"])).all() and ((target >= 0) & (target <= g["cap"])).all()
    assert 2 <= (np.abs(vol0 - target) > 10).sum() <= 7
    assert jobs_routable(g, vol0, target, np.ones(g["edge_mask"].shape[0]), 10.0)


def _check_bank(name, n=64):
  env, params, rep = make_hydro(name, n_bank=n, seed=3)
  nb = np.asarray(params.bank.n_blocked)
  # the documented law of #blocked, exactly (up to rounding), on this layout
  np.testing.assert_array_equal(np.bincount(nb, minlength=4), quotas(n, DEFAULT_PRIOR["p_blocked"]))
  np.testing.assert_array_equal((np.asarray(params.bank.clog) <= 0).sum(-1), nb)
  assert 0.0 <= rep["rejection_rate"] < 1.0 and sum(rep["regimes"].values()) == n
  # every bank episode is finished by the oracle (same check as at generation, other keys)
  ev = make_hydro_evaluate(env, HB.hydro_policy, int(params.max_steps_in_episode))
  p = params.replace(reveal_clog=True, sigma_level=0.0)
  keys = jax.random.split(jax.random.PRNGKey(9), n)
  out = ev(p, HB.make_hydro_baseline(p, "oracle"), jnp.arange(n), keys)
  assert bool(out["success"].all()) and not bool(out["violated"].any())
  return env, params, rep


@pytest.mark.slow  # 65-210 s per layout on the shared 2-core box, by load (oracle rollout compiles)
@pytest.mark.parametrize("name", ["ring14", "direct10"])
def test_bank_prior_and_finishability_on_two_layouts(name):
  _check_bank(name)


@pytest.mark.slow  # 105-230 s on the shared 2-core box, by load: bank + three rollouts
def test_finishability_check_rejects_and_heel_aware_replanner_violates_less():
  env, params, rep = make_hydro("ring14", n_bank=64, seed=4, max_steps_in_episode=14)
  assert sum(s["oracle_failed"] for s in rep["strata"]) > 0   # the check does reject
  ev = make_hydro_evaluate(env, HB.hydro_policy, 14)
  keys = jax.random.split(jax.random.PRNGKey(2), 64)
  orc = ev(params.replace(reveal_clog=True, sigma_level=0.0),
           HB.make_hydro_baseline(params, "oracle"), jnp.arange(64), keys)
  assert bool(orc["success"].all()) and int(orc["steps"].max()) <= 14
  res = {nm: ev(params, HB.make_hydro_baseline(params, nm), jnp.arange(64), keys)
         for nm in ("replan", "heel_replan")}
  assert float(res["heel_replan"]["violated"].mean()) < float(res["replan"]["violated"].mean())
