"""RailRM-v0 environment: shapes, determinism, vmap, capacity invariant (hypothesis), obs masking."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from jaxrl_suite.envs.rail import field_slice, make_rail, own_features, relations
from jaxrl_suite.envs.rail.instance import H

ENV, P = make_rail("tiny")
STEP = jax.jit(ENV.step_env)
RESET = jax.jit(ENV.reset_env)


def _episode(seed, actions, params=P):
  obs, s = RESET(jax.random.PRNGKey(seed), params)
  out = []
  for t in range(H):
    obs, s, r, done, info = STEP(jax.random.PRNGKey(seed * 100 + t), s, actions[t], params)
    out.append((obs, s, r, done, info))
  return out


@settings(max_examples=15)
@given(st.integers(0, 1000), st.lists(st.integers(0, 7), min_size=2 * H, max_size=2 * H))
def test_no_leg_is_ever_oversold(seed, acts):
  acts = jnp.asarray(acts, jnp.int32).reshape(H, 2)
  hi = P.replace(demand_level=3.0)          # heavy demand: capacity binds
  for _, s, _, _, info in _episode(seed, acts, hi):
    assert float(jnp.min(s.remaining)) >= 0.0
    assert np.all(np.asarray(s.remaining) <= np.asarray(P.capacity))


def test_episode_terminates_after_h_periods_and_revenue_adds_up():
  acts = jnp.full((H, 2), 3, jnp.int32)
  traj = _episode(0, acts)
  dones = [bool(d) for *_, d, _ in traj]
  assert dones == [False] * (H - 1) + [True]
  s = traj[-1][1]
  rev = sum(np.asarray(i["revenue"]) for *_, i in traj)
  np.testing.assert_allclose(np.asarray(s.revenue_cum), rev, rtol=1e-5)
  # operator reward mode: two operators -> own revenue
  np.testing.assert_allclose(sum(np.asarray(r) for _, _, r, _, _ in traj), rev * 1e-3, rtol=1e-5)


def test_deterministic_and_vmappable():
  keys = jax.random.split(jax.random.PRNGKey(5), 4)
  obs, s = jax.vmap(ENV.reset_env, in_axes=(0, None))(keys, P)
  a = jnp.full((4, 2), 2, jnp.int32)
  o1 = jax.vmap(ENV.step_env, in_axes=(0, 0, 0, None))(keys, s, a, P)
  o2 = jax.vmap(ENV.step_env, in_axes=(0, 0, 0, None))(keys, s, a, P)
  chex_equal = jax.tree.map(lambda x, y: np.testing.assert_array_equal(x, y), o1, o2)
  del chex_equal
  assert o1[0].shape == (4, 2, 2, ENV.observation_space(P).shape[-1])


def test_delta_actions_move_the_multiplier_by_five_percent_and_clip():
  env, p = make_rail("tiny", action_mode="delta")
  _, s = env.reset_env(jax.random.PRNGKey(0), p)
  for _ in range(3):
    _, s, *_ = env.step_env(jax.random.PRNGKey(1), s, jnp.array([2, 0]), p)
  np.testing.assert_allclose(np.asarray(s.mult), [1.05 ** 3, 0.95 ** 3], rtol=1e-5)
  for _ in range(9):
    _, s, *_ = env.step_env(jax.random.PRNGKey(1), s, jnp.array([2, 0]), p)
  np.testing.assert_allclose(np.asarray(s.mult), [1.5, 0.8], rtol=1e-6)


def test_private_features_only_on_own_token_and_relations():
  env, p = make_rail("ecml")
  obs, s = env.reset_env(jax.random.PRNGKey(0), p)
  _, s, *_ = env.step_env(jax.random.PRNGKey(1), s, jnp.full((12,), 2), p)
  obs = np.asarray(env.get_obs(s, p))
  rem = obs[:, :, field_slice("remaining")]
  off = ~np.eye(12, dtype=bool)
  assert np.all(rem[off] == 0) and rem[0, 0].sum() > 0
  own = np.asarray(own_features(jnp.asarray(obs)))
  np.testing.assert_array_equal(own[3], obs[3, 3])
  rel = np.asarray(relations(p))
  # trains 0 and 1: same operator, same markets, overlapping legs; train 8 (op 2) vs 0: no
  # common operator; padding slots have no relations
  assert rel[0, 1, 1] == 1 and rel[0, 1, 2] == 1 and rel[0, 1, 3] == 1
  assert rel[0, 8, 2] == 0 and rel[0, 8, 1] == 1
  assert rel[10].sum() == 0 and rel[:, 10].sum() == 0
  assert obs[0, 0, field_slice("rel_type")][0] == 16
  assert np.all(obs[:, 9:] == 0)                      # padded train slots are empty tokens
