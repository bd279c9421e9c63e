"""Task v2 (stability target, two pumps) on BallastNet-v0, covered like v1 (issue #21, "v2
covered like v1"; docs/ballast.md, "Task v2: coverage"): water conserved and levels in bounds
with two pumps at once (hypothesis), the clog prior's law of #blocked and the start heel / trim
bands at generation, the oracle routing around several blocked pipes; and, as a strict xfail
(slow), the finishability that v1 has on BallastHydro-v0 and v2 does not have yet.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from clog_checks import assert_clog_prior
from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import make_ballast
from jaxrl_suite.envs.ballast.env import heel_trim
from jaxrl_suite.envs.ballast.rollout import make_evaluate
from jaxrl_suite.envs.ballast.routes import K_MAX, T_MAX

ENV, PARAMS = make_ballast(task="v2")
# one compiled batched reset for the generation and the oracle tests (same batch shape)
RESET_N = jax.jit(jax.vmap(ENV.reset_env, in_axes=(0, None)))
KEYS = jax.random.split(jax.random.PRNGKey(0), 1000)


def _random_two_pump_rollout(seed: int, n: int = 30):
  """Random masked commands on both pumps; per-step volumes before / after and moves [P]."""

  def step(state, key):
    ka, ks = jax.random.split(key)
    mask = ENV.action_mask(state, PARAMS)                             # [2, K+1]
    a = jax.random.categorical(ka, jnp.where(mask, 0.0, -1e9), axis=-1).astype(jnp.int32)
    _, s2, _, _, info = ENV.step_env(ks, state, a, PARAMS)
    return s2, (state.vol, s2.vol, info["dv"], info["route_src"], info["route_dst"])

  key = jax.random.PRNGKey(seed)
  _, s0 = ENV.reset_env(key, PARAMS)
  return jax.lax.scan(step, s0, jax.random.split(key, n))[1]


_rollout = jax.jit(_random_two_pump_rollout, static_argnums=1)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_v2_water_is_conserved_with_two_pumps(seed):
  vol, vol2, dv, src, dst = (np.asarray(x, np.float64) for x in _rollout(seed, 30))
  cap = np.asarray(PARAMS.cap, np.float64)
  assert (vol2 >= -1e-3).all() and (vol2 <= cap + 1e-3).all() and (dv >= 0).all()
  d_tanks = vol2.sum(1) - vol.sum(1)
  sea_in = np.where(src == T_MAX, dv, 0.0).sum(1)                      # both pumps
  sea_out = np.where(dst == T_MAX, dv, 0.0).sum(1)
  np.testing.assert_allclose(d_tanks, sea_in - sea_out, atol=1e-2)


def test_v2_generation_prior_and_start_bands():
  _, s = RESET_N(KEYS, PARAMS)
  # v2 has no per-tank jobs, so no clog draw is rejected: the documented law holds as drawn
  assert_clog_prior(s.clog, PARAMS.can_block, atol=0.05)
  heel, trim = jax.vmap(heel_trim, in_axes=(0, 0, 0, None))(s.vol, s.m_heel0, s.m_trim0, PARAMS)
  h, t = np.abs(np.asarray(heel)), np.abs(np.asarray(trim - s.trim_star))
  p = PARAMS
  assert (h >= p.heel0_lo - 1e-3).all() and (h <= p.heel0_hi + 1e-3).all()
  assert (t >= p.trim0_lo - 1e-3).all() and (t <= p.trim0_hi + 1e-3).all()
  np.testing.assert_array_equal(np.asarray(s.vol), np.asarray(s.target))   # no plan in v2


def test_v2_oracle_never_commands_a_route_through_a_blocked_pipe():
  """The multi-block regime: with 2-3 blocked pipes the true-clog v2 controller's moves all
  avoid them (the belief-based one may probe them)."""
  p = PARAMS.replace(reveal_clog=True, sigma_level=0.0)
  obs, s = RESET_N(KEYS, p)
  vp = B.make_v2_params(p, oracle=True)
  a = np.asarray(jax.jit(jax.vmap(B.v2_greedy_policy, in_axes=(None, 0)))(vp, obs))   # [N, 2]
  re = np.asarray(p.route_edges)
  blocked = np.asarray(s.clog) <= 0
  multi = blocked.sum(1) >= 2
  assert multi.sum() >= 100
  for i in np.flatnonzero(multi):
    for k in a[i][a[i] < K_MAX]:
      assert not (re[k] & blocked[i]).any()


@pytest.mark.slow  # ~15 CPU-s (one v2 oracle rollout on 512 episodes)
@pytest.mark.xfail(strict=True, reason="BallastNet-v0 v2 episodes are not checked for "
                   "finishability: the true-clog v2 controller fails ~36% of the >= 2-blocked "
                   "episodes on direct10 (docs/ballast.md, Task v2: coverage)")
def test_v2_episodes_are_finishable_by_the_oracle():
  env, p = make_ballast(layout="direct10", task="v2", sigma_level=0.0)
  p = p.replace(reveal_clog=True)
  ev = make_evaluate(env, B.v2_greedy_policy, num_steps=int(p.max_steps_in_episode))
  out = ev(p, B.make_v2_params(p, oracle=True), jax.random.split(jax.random.PRNGKey(0), 512))
  assert bool(np.asarray(out["success"]).all())
