"""Invariants of the probes the agent tests rely on (memory, entities, coordination)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from jaxrl_suite.envs import probes, registry


def _episode(env, params, key, actions):
  obs, state = env.reset_env(key, params)
  out = [(obs, 0.0, False)]
  for a in actions:
    obs, state, r, term, _ = env.step_env(key, state, a, params)
    out.append((obs, float(r), bool(term)))
  return out


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**30), length=st.integers(2, 6),
       actions=st.lists(st.integers(0, 1), min_size=6, max_size=6))
def test_memory_probe_cue_only_at_start_reward_only_at_the_end(seed, length, actions):
  env = probes.ProbeMemory()
  params = env.default_params.replace(memory_length=length)
  steps = _episode(env, params, jax.random.key(seed), actions[:length])
  cue = int(steps[0][0][0] > 0)
  assert abs(float(steps[0][0][0])) == 1.0
  assert all(float(o[0]) == 0.0 for o, _, _ in steps[1:])          # the cue is gone after t = 0
  assert [t for _, _, t in steps[1:]] == [False] * (length - 1) + [True]
  assert all(r == 0.0 for _, r, _ in steps[1:-1])
  assert steps[-1][1] == (1.0 if actions[length - 1] == cue else -1.0)
  # the last observation is the same for both cues: no memoryless policy beats 0
  other = _episode(env, params, jax.random.key(seed + 1), actions[:length])
  np.testing.assert_array_equal(steps[-2][0], other[-2][0])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**30))
def test_entities_probe_mask_is_presence_and_reward_is_argmax(seed):
  env = probes.ProbeEntities()
  params = env.default_params
  obs, state = env.reset_env(jax.random.key(seed), params)
  present = np.asarray(obs[:, 0] > 0.5)
  assert present.any()
  np.testing.assert_array_equal(np.asarray(env.action_mask(state, params)), present)
  best = int(np.argmax(np.where(present, np.asarray(obs[:, 1]), -1)))
  for a in range(env.k):
    r = float(env.step_env(jax.random.key(0), state, a, params)[2])
    assert r == float(a == best)


def test_coordination_probe_optimum_greedy_and_mask():
  """Exhaustive play of the 2 live agents: all-wait is the unique optimum (meet_reward each),
  greedy grabbing earns grab_reward each, and the masked third slot never earns anything."""
  env, params = registry.make("ProbeCoordination-v0")
  assert env.num_agents == 3 and params.live_agents == 2
  np.testing.assert_array_equal(env.agent_mask(None, params), [True, True, False])
  returns = {}
  for a0 in itertools.product([0, 1], repeat=3):
    _, state = env.reset_env(jax.random.key(0), params)
    r = np.zeros(3)
    for a in (jnp.array(a0), jnp.zeros(3, jnp.int32)):
      _, state, rew, term, _ = env.step_env(jax.random.key(0), state, a, params)
      r += np.asarray(rew)
    assert bool(term) and r[2] == 0.0
    returns[a0[:2]] = returns.get(a0[:2], r[:2])
    np.testing.assert_array_equal(returns[a0[:2]], r[:2])   # the masked slot changes nothing
  assert max(returns, key=lambda a: returns[a].sum()) == (1, 1)
  np.testing.assert_array_equal(returns[(1, 1)], [2.0, 2.0])
  np.testing.assert_array_equal(returns[(0, 0)], [0.5, 0.5])
