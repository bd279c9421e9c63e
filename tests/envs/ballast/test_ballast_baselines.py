"""Dijkstra-family baselines and the reference diagnoser on hand-made cases."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import make_ballast, split_obs
from jaxrl_suite.envs.ballast.diagnosis import diagnosis_metrics, reference_diagnosis
from jaxrl_suite.envs.ballast.env import obs_fields
from jaxrl_suite.envs.ballast.routes import E_MAX, F_MAX, K_MAX

ENV, PARAMS = make_ballast(sigma_level=0.0)  # noiseless soundings: deterministic evidence
BP = B.make_params(PARAMS, bayes=False)
RESET = jax.jit(ENV.reset)  # eager reset dispatches hundreds of small ops
GET_OBS = jax.jit(ENV.get_obs)


def _run(policy_name, state, params, n=60):
  """Python loop (jitted pieces) from a given state; returns (actions, ratios, final obs, state)."""
  pol = jax.jit(B.POLICIES[policy_name])
  obs = GET_OBS(state, params)
  acts, ratios = [], []
  for i in range(n):
    a = pol(BP, obs, None)
    obs, state, _, term, _ = _step(jax.random.PRNGKey(i), state, a, params)
    acts.append(int(a))
    ratios.append(float(state.last_ratio[0]))
    if bool(term):
      break
  return acts, ratios, obs, state


_step = jax.jit(ENV.step_env)


def _fill_job_state(seed=0):
  """A reset state reduced to one fill job on DB2P (tank 3), no clogs."""
  _, s = RESET(jax.random.PRNGKey(seed), PARAMS)
  target = s.vol.at[3].set(s.vol[3] + 400.0)
  target = jnp.where(jnp.arange(target.shape[0]) == 3, jnp.minimum(target, PARAMS.cap - 1),
                     s.vol)
  p = PARAMS  # cargo moments that make the plan end upright (as the env does)
  return s.replace(target=target, clog=jnp.ones(E_MAX),
                   m_heel0=-p.rho * jnp.sum(target * p.tcg),
                   m_trim0=-p.rho * jnp.sum(target * (p.lcg - p.lcf)))


def test_replan_routes_around_a_single_blocked_edge():
  s = _fill_job_state()
  # the route B-replan picks first, and one main edge on it (not shared by every fill route)
  k0 = int(jax.jit(B.replan_policy)(BP, GET_OBS(s, PARAMS), None))
  edges0 = np.flatnonzero(np.asarray(PARAMS.route_edges[k0]))
  kinds = np.asarray(PARAMS.edge_kind)[edges0]
  e_block = int(edges0[np.flatnonzero(kinds == 3)[0]])  # a "main" edge
  assert bool(PARAMS.can_block[e_block])
  s_blk = s.replace(clog=jnp.ones(E_MAX).at[e_block].set(0.0))
  acts, ratios, obs, st = _run("replan", s_blk, PARAMS)
  assert acts[0] == k0 and ratios[0] < 0.1          # tries the believed-best route, it fails
  assert bool(st.success)
  re = np.asarray(PARAMS.route_edges)
  # after the failure it never again commands a route that holds the whole failure set
  fset = np.asarray(split_obs(obs)["fail_sets"][0] > 0.5)
  assert fset[e_block]
  for a in acts[1:]:
    assert not (fset & ~re[a]).sum() == 0
  # every wasted step is a failed probe, all of them through the blocked main (a CTP replanner
  # learns one failure set per probe); once water flows it keeps a route around the blockage
  fails = [a for a, r in zip(acts, ratios) if r < 0.1]
  # measured on this hand-made case: 4 distinct believed-cheaper routes through the blocked main
  # are probed before a bypass (a regression pin; the oracle check below gives the same count)
  assert len(fails) == 4 and len(set(fails)) == len(fails)
  assert all(re[a, e_block] for a in fails)
  assert all(not re[a, e_block] for a, r in zip(acts, ratios) if r >= 0.1)
  acts_o, _, _, st_o = _run("oracle", s_blk, PARAMS.replace(reveal_clog=True))
  assert bool(st_o.success) and len(acts) == len(acts_o) + len(fails)
  assert not re[acts_o[0], e_block]
  # the reference diagnoser blames an edge of the failed route
  pred = np.asarray(reference_diagnosis(obs, PARAMS))
  assert pred.sum() == 1 and fset[np.argmax(pred)]


def test_tabu_is_never_better_than_replan_on_a_blocked_main():
  s = _fill_job_state(1)
  k0 = int(jax.jit(B.replan_policy)(BP, GET_OBS(s, PARAMS), None))
  edges0 = np.flatnonzero(np.asarray(PARAMS.route_edges[k0]))
  e_block = int(edges0[np.flatnonzero(np.asarray(PARAMS.edge_kind)[edges0] == 3)[0]])
  s_blk = s.replace(clog=jnp.ones(E_MAX).at[e_block].set(0.0))
  acts_r, ratios_r, _, st_r = _run("replan", s_blk, PARAMS)
  acts_t, ratios_t, _, st_t = _run("tabu", s_blk, PARAMS)
  assert bool(st_r.success) and bool(st_t.success)
  fails_r = sum(r < 0.1 for r in ratios_r)
  fails_t = sum(r < 0.1 for r in ratios_t)
  assert fails_r == 4   # same case as test_replan_routes_around_a_single_blocked_edge
  assert fails_t >= fails_r
  assert len(acts_t) >= len(acts_r)
  # tabu bans only exact routes: it never repeats a failed route, but may reuse the blockage
  failed_t = [a for a, r in zip(acts_t, ratios_t) if r < 0.1]
  assert len(set(failed_t)) == len(failed_t)


def test_known_bad_count_matches_numpy():
  rng = np.random.default_rng(0)
  obs = np.zeros(sum(int(np.prod(s)) for _, s in obs_fields()), np.float32)
  f = split_obs(jnp.asarray(obs))
  good = rng.random(E_MAX) < 0.2
  sets = rng.random((F_MAX, E_MAX)) < 0.08
  kind = rng.integers(0, 3, F_MAX)
  o = dict((k, np.asarray(v)) for k, v in f.items())
  o["good"], o["fail_sets"], o["fail_kind"] = good * 1.0, sets * 1.0, kind * 1.0
  flat = jnp.concatenate([jnp.ravel(jnp.asarray(o[n], jnp.float32)) for n, _ in obs_fields()])
  _, _, fail, n_contain, edge_count = B.evidence(split_obs(flat), BP)
  re = np.asarray(PARAMS.route_edges)
  exp = np.zeros(K_MAX, int)
  for j in range(F_MAX):
    fs = sets[j] & ~good
    if kind[j] == 1 and fs.any():
      exp += np.all(~fs[None, :] | re, axis=1)
  np.testing.assert_array_equal(np.asarray(n_contain), exp)


def test_no_clog_all_baselines_agree_and_are_vmappable():
  s = _fill_job_state(2)
  obs = GET_OBS(s, PARAMS)
  obs_o = GET_OBS(s, PARAMS.replace(reveal_clog=True))
  bp = B.make_params(PARAMS, bayes=True)
  acts = {n: int(jax.jit(B.POLICIES[n])(bp, obs_o if n == "oracle" else obs, None))
          for n in B.BASELINES}
  assert len(set(acts.values())) == 1, acts
  batch = jnp.stack([obs, obs, obs])
  out = jax.vmap(B.replan_policy, in_axes=(None, 0, None))(BP, batch, None)
  assert out.shape == (3,) and (out == acts["replan"]).all()


def test_reference_diagnoser_prefers_strainers_on_ties():
  obs = jnp.zeros(sum(int(np.prod(s)) for _, s in obs_fields()))
  f = {k: np.array(v) for k, v in split_obs(obs).items()}
  kinds = np.asarray(PARAMS.edge_kind)
  strainer = int(np.flatnonzero(kinds == 0)[0])
  main = int(np.flatnonzero(kinds == 3)[0])
  f["fail_sets"][0, [strainer, main]] = 1.0
  f["fail_kind"][0] = 1.0
  flat = jnp.concatenate([jnp.ravel(jnp.asarray(f[n], jnp.float32)) for n, _ in obs_fields()])
  pred = np.asarray(reference_diagnosis(flat, PARAMS))
  assert pred[strainer] and pred.sum() == 1
  # a confirmed-good strainer leaves the main as the singleton explanation
  f["good"][strainer] = 1.0
  flat = jnp.concatenate([jnp.ravel(jnp.asarray(f[n], jnp.float32)) for n, _ in obs_fields()])
  pred = np.asarray(reference_diagnosis(flat, PARAMS))
  assert pred[main] and pred.sum() == 1


def test_diagnosis_metrics_by_hand():
  pred = np.array([[1, 0, 0, 1], [0, 0, 0, 0]], bool)
  label = np.array([[1, 0, 1, 0], [0, 0, 0, 0]], bool)
  mask = np.ones_like(pred)
  m = diagnosis_metrics(pred, label, mask)
  assert m["exact"] == 0.5
  np.testing.assert_allclose(m["f1"], 2 * 1 / (2 * 1 + 1 + 1))
  np.testing.assert_allclose(m["bal_acc"], 0.5 * (1 / 2 + 5 / 6))
  # restricting to exercised edges drops the unidentifiable miss
  mask2 = mask.copy()
  mask2[0, 2] = False
  assert diagnosis_metrics(pred, label, mask2)["f1"] > m["f1"]
