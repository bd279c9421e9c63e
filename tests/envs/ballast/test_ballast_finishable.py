"""Fast checks that every generated layout validates and every episode the bank generator emits
is finishable (docs/ballast.md, "Episodes"); the thorough oracle checks on ring14 / direct10
are the slow tests in test_ballast_episodes.py.

Two parts, so the default suite stays fast:
  * bookkeeping, pure numpy (hypothesis over generated layouts): make_bank emits only candidates
    its finishability check accepted, exactly the stratum quotas, each job routable around the
    blocked edges and the start heel inside the band; every rejection is counted;
  * the real heel-aware oracle on one small generated layout with a short step limit: the bank
    is built with it, then every emitted episode is re-run by the SAME compiled oracle rollout
    on other keys (one compile) and finishes inside the step and heel limits.
"""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from jaxrl_suite.envs.ballast import episodes as EP
from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank, hydro_params
from jaxrl_suite.envs.ballast.hydro_rollout import make_hydro_evaluate
from jaxrl_suite.envs.ballast.layout import validate_layout
from jaxrl_suite.envs.ballast.routes import build_routes


def _params(lay, g, **kw):
  T, E = g["cap"].shape[0], g["edge_mask"].shape[0]
  z = jnp.zeros((1, T))
  empty = EpisodeBank(vol0=z, target=z, clog=jnp.ones((1, E)), m_heel0=jnp.zeros(1),
                      m_trim0=jnp.zeros(1), n_blocked=jnp.zeros(1, jnp.int32))
  return hydro_params(lay, g, empty, **kw)


def _heel0(g, lay, vol0, mh):
  hyd = lay["hydrostatics"]
  m0 = hyd["rho_t_per_m3"] * np.sum(vol0 * g["tcg"]) + mh
  return np.degrees(np.arctan(m0 / (hyd["displacement_t"] * hyd["gm_m"])))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), n_tanks=st.integers(8, 20), n_pumps=st.integers(1, 3),
       ring=st.booleans(), reject=st.floats(0.0, 0.6))
def test_bank_emits_only_checked_routable_episodes_on_generated_layouts(seed, n_tanks, n_pumps,
                                                                        ring, reject):
  lay = generate_layout(seed, n_tanks=n_tanks, n_pumps=n_pumps, main="ring" if ring else "split",
                        n_cross=None if ring else 0)
  validate_layout(lay)                                  # every generated layout validates
  g = build_routes(lay, "auto")
  # the layout's own prior, capped at the blocked count it can host (as a layout file would)
  n_block = int((g["block_w"] > 0).sum())
  lay["clog_prior"] = {"p_blocked": list(EP.DEFAULT_PRIOR["p_blocked"][:n_block + 1])}
  lay["clog_prior"]["p_blocked"][-1] += 1.0 - sum(lay["clog_prior"]["p_blocked"])
  p = _params(lay, g)
  seen, verdicts = [], []
  rng = np.random.default_rng(seed)

  def check(batch, _seed):                              # a stand-in for the oracle: random
    ok = rng.random(len(batch)) >= reject
    seen.extend(batch)
    verdicts.extend(ok)
    return ok

  n = 24
  try:
    bank, rep = EP.make_bank(lay, g, p, n=n, seed=seed, check=check, max_rounds=20)
  except ValueError as err:                             # plans that rarely start upright
    assert "start heel" in str(err) or "finishable" in str(err)
    return
  accepted = {(e[0].tobytes(), e[2].tobytes()) for e, ok in zip(seen, verdicts) if ok}
  vol0, target, clog = (np.asarray(x) for x in (bank.vol0, bank.target, bank.clog))
  for i in range(n):                                    # every emitted episode was accepted
    assert (vol0[i].tobytes(), clog[i].tobytes()) in accepted
    assert EP.jobs_routable(g, vol0[i], target[i], clog[i], float(p.tol))
    assert abs(_heel0(g, lay, vol0[i], float(bank.m_heel0[i]))) <= 0.5 * float(p.heel_limit) + 1e-3
  nb = np.asarray(bank.n_blocked)
  np.testing.assert_array_equal(np.bincount(nb, minlength=len(rep["strata"])),
                                EP.quotas(n, EP.layout_prior(lay)["p_blocked"]))
  np.testing.assert_array_equal((clog <= 0).sum(-1), nb)
  for s in rep["strata"]:                               # every rejection is counted
    assert s["drawn"] >= s["no_route"] + s["accepted"]
  assert sum(s["oracle_failed"] for s in rep["strata"]) == int(np.sum(~np.asarray(verdicts)))


def test_oracle_finishes_every_emitted_episode_on_a_small_generated_layout():
  # an 8-tank, 1-pump ring (102 routes) with a 24-step limit: short enough that the oracle
  # check rejects some draws, one compiled oracle rollout for generation and the re-check
  lay = generate_layout(1, n_tanks=8, n_pumps=1, main="ring", name="gen_small")
  validate_layout(lay)
  g = build_routes(lay, "auto")
  steps = 24
  p = _params(lay, g, max_steps_in_episode=steps)
  ev = make_hydro_evaluate(BallastHydro(), HB.hydro_policy, steps)
  n = 16
  bank, rep = EP.make_bank(lay, g, p, n=n, seed=0, check=EP.oracle_check(p, ev))
  assert sum(s["oracle_failed"] for s in rep["strata"]) > 0     # the check does reject
  pb = p.replace(bank=bank, reveal_clog=True, sigma_level=0.0)
  keys = jax.random.split(jax.random.PRNGKey(9), n)
  out = ev(pb, HB.make_hydro_baseline(pb, "oracle"), jnp.arange(n), keys)
  assert bool(out["success"].all()) and not bool(out["violated"].any())
  assert int(out["steps"].max()) <= steps
