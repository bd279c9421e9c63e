"""BallastNet-v0: API, determinism, conservation, bounds, hydrostatics, masks."""

import gymnax.wrappers
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from clog_checks import assert_clog_prior
from jaxrl_suite.envs.ballast import make_ballast, split_obs
from jaxrl_suite.envs.ballast.env import heel_trim, obs_size
from jaxrl_suite.envs.ballast.routes import E_MAX, K_MAX, T_MAX

ENV, PARAMS = make_ballast()
# jitted entry points: eager (op-by-op) reset/step dispatch hundreds of small ops and dominated
# this module's run time
RESET = jax.jit(ENV.reset)
STEP_ENV = jax.jit(ENV.step_env)
MASK = jax.jit(ENV.action_mask)


def _random_masked_rollout(seed: int, n: int = 40):
  """Random routes among the masked-valid ones; returns per-step arrays."""

  def step(carry, key):
    state = carry
    ka, ks = jax.random.split(key)
    mask = MASK(state, PARAMS)
    a = jax.random.categorical(ka, jnp.where(mask, 0.0, -1e9))
    _, s2, r, term, info = STEP_ENV(ks, state, a, PARAMS)
    return s2, (state.vol, s2.vol, info["dv"][0], info["route_src"][0], info["route_dst"][0])

  key = jax.random.PRNGKey(seed)
  _, s0 = ENV.reset_env(key, PARAMS)
  return jax.lax.scan(step, s0, jax.random.split(key, n))[1]


_rollout = jax.jit(_random_masked_rollout, static_argnums=1)


def test_obs_shape_dtype_and_determinism():
  k = jax.random.PRNGKey(3)
  o1, s1 = RESET(k, PARAMS)
  o2, s2 = RESET(k, PARAMS)
  assert o1.shape == (obs_size(),) and o1.dtype == jnp.float32
  np.testing.assert_array_equal(o1, o2)
  a = jnp.int32(int(jnp.argmax(MASK(s1, PARAMS))))
  r1 = ENV.step(k, s1, a, PARAMS)
  r2 = ENV.step(k, s2, a, PARAMS)
  np.testing.assert_array_equal(r1[0], r2[0])
  assert float(r1[2]) == float(r2[2])
  # the hidden clog vector is not in the observation unless revealed
  assert (split_obs(o1)["clog_revealed"] == -1).all()


@given(st.integers(0, 10_000))
def test_water_is_conserved_and_levels_stay_in_bounds(seed):
  vol, vol2, dv, src, dst = (np.asarray(x, np.float64) for x in _rollout(seed, 40))
  cap = np.asarray(PARAMS.cap, np.float64)
  assert (vol2 >= -1e-3).all() and (vol2 <= cap + 1e-3).all()
  # tanks + sea: the change in tank water equals what came in from the sea minus what went out
  d_tanks = vol2.sum(1) - vol.sum(1)
  sea_in = np.where(src == T_MAX, dv, 0.0)
  sea_out = np.where(dst == T_MAX, dv, 0.0)
  np.testing.assert_allclose(d_tanks, sea_in - sea_out, atol=1e-2)
  assert (dv >= 0).all()


def test_heel_trim_match_float64_reference():
  _, s = RESET(jax.random.PRNGKey(5), PARAMS)
  with jax.enable_x64(True):
    heel, trim = heel_trim(jnp.asarray(s.vol, jnp.float64), float(s.m_heel0),
                           float(s.m_trim0), PARAMS)
  vol = np.asarray(s.vol, np.float64)
  p = PARAMS
  m_h = p.rho * (vol * np.asarray(p.tcg)).sum() + float(s.m_heel0)
  m_t = p.rho * (vol * (np.asarray(p.lcg) - p.lcf)).sum() + float(s.m_trim0)
  np.testing.assert_allclose(float(heel), np.degrees(np.arctan(m_h / (p.displacement * p.gm))),
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(float(trim), m_t / (100 * p.mctc), rtol=1e-4, atol=1e-5)


def test_clog_prior_and_plan_generation():
  keys = jax.random.split(jax.random.PRNGKey(0), 1000)
  _, s = jax.jit(jax.vmap(ENV.reset_env, in_axes=(0, None)))(keys, PARAMS)
  assert_clog_prior(s.clog, PARAMS.can_block, atol=0.06)
  blocked = np.asarray(s.clog) == 0
  heel, _ = jax.vmap(heel_trim, in_axes=(0, 0, 0, None))(s.vol, s.m_heel0, s.m_trim0, PARAMS)
  assert float(jnp.abs(heel).max()) <= PARAMS.heel_init_max + 1e-3
  n_jobs = (np.abs(np.asarray(s.vol - s.target)) > PARAMS.tol).sum(1)
  assert n_jobs.min() >= 2 and n_jobs.max() <= 7
  # any-order heel bound: the heel moment of any state between start and target is at most
  # S = rho * sum |vol0 - target| * |tcg|, which must stay below heel_plan_max (< heel_max)
  p = PARAMS
  s_any = p.rho * (np.abs(np.asarray(s.vol - s.target, np.float64)) *
                   np.abs(np.asarray(p.tcg))).sum(1)
  m_any = np.tan(np.radians(p.heel_plan_max)) * p.displacement * p.gm
  assert (s_any <= m_any * 1.001).all() and p.heel_plan_max < p.heel_max
  # every episode is feasible: each job keeps a fill/deballast route with no blocked edge
  re = np.asarray(p.route_edges)
  g_ok = ~(re[None] & blocked[:, None, :]).any(-1) & np.asarray(p.route_mask)   # [N, K]
  src, dst = np.asarray(p.route_src), np.asarray(p.route_dst)
  for i in range(200):
    for t in np.flatnonzero(np.asarray(s.target[i] - s.vol[i]) > p.tol):
      assert (g_ok[i] & (dst == t) & (src == T_MAX)).any()
    for t in np.flatnonzero(np.asarray(s.vol[i] - s.target[i]) > p.tol):
      assert (g_ok[i] & (src == t) & (dst == T_MAX)).any()


def test_blocked_route_moves_nothing_and_records_a_failure():
  _, s = RESET(jax.random.PRNGKey(11), PARAMS)
  mask = MASK(s, PARAMS)
  k = int(jnp.argmax(mask[:K_MAX]))
  e = int(jnp.argmax(PARAMS.route_edges[k]))
  s = s.replace(clog=jnp.ones(E_MAX).at[e].set(0.0))
  _, s2, r, term, info = STEP_ENV(jax.random.PRNGKey(0), s, jnp.int32(k), PARAMS)
  np.testing.assert_allclose(s2.vol, s.vol)
  assert float(info["dv"][0]) == 0.0
  assert int(s2.fail_kind[0]) == 1 and bool(s2.fail_sets[0, e])
  assert float(r) < 0
  # the same route on a clear pipe moves a full pump-step (or the remaining amount)
  s = s.replace(clog=jnp.ones(E_MAX))
  _, s3, _, _, info = STEP_ENV(jax.random.PRNGKey(0), s, jnp.int32(k), PARAMS)
  assert float(info["dv"][0]) > 0 and bool(s3.good[e])


def test_action_mask_and_noop():
  _, s = RESET(jax.random.PRNGKey(2), PARAMS)
  m = MASK(s, PARAMS)
  assert m.shape == (K_MAX + 1,) and bool(m[K_MAX])
  assert not bool(m[PARAMS.route_mask.sum():K_MAX].any())
  _, s2, _, _, info = STEP_ENV(jax.random.PRNGKey(0), s, jnp.int32(K_MAX), PARAMS)
  np.testing.assert_allclose(s2.vol, s.vol)


def test_runs_under_log_wrapper_and_jit_vmap():
  env = gymnax.wrappers.LogWrapper(ENV)
  keys = jax.random.split(jax.random.PRNGKey(0), 8)
  obs, st_ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, PARAMS)
  act = jnp.full((8,), K_MAX, jnp.int32)
  out = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))(keys, st_, act, PARAMS)
  assert out[0].shape == (8, obs_size()) and "returned_episode_returns" in out[-1]


def test_v2_two_pumps_and_clash_rule():
  env, params = make_ballast(task="v2")
  _, s = jax.jit(env.reset)(jax.random.PRNGKey(4), params)
  s = s.replace(clog=jnp.ones(E_MAX))
  m = jax.jit(env.action_mask)(s, params)
  assert m.shape == (2, K_MAX + 1)
  pair = np.asarray(params.pair_ok)
  i, j = np.argwhere(pair[:K_MAX, :K_MAX] & np.asarray(m[0, :K_MAX])[:, None] &
                     np.asarray(m[1, :K_MAX])[None, :])[0]
  step = jax.jit(env.step_env)
  _, s2, _, _, info = step(jax.random.PRNGKey(0), s, jnp.array([i, j]), params)
  assert (np.asarray(info["dv"]) > 0).all()
  # a clashing second route (same route twice) is ignored
  _, s3, _, _, info = step(jax.random.PRNGKey(0), s, jnp.array([i, i]), params)
  assert float(info["dv"][0]) > 0 and float(info["dv"][1]) == 0


def test_unknown_override_is_rejected():
  with pytest.raises(ValueError, match="unknown BallastNet parameter"):
    make_ballast(dt_minutes=5)
