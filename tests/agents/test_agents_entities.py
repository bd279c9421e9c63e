"""The entity-set agent: value invariant and per-entity logits equivariant under entity
permutation, absent entities ignored, entity types reach the keys; it learns the entities
probe through the one learner."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.agents import entities
from jaxrl_suite.core.losses import MASKED_LOGIT

K, F = 6, 4    # feature 0 = present, feature 3 = type in {0, 1, 2}


def _agent(num_actions=K, **kw):
  kw = {"mask_feature": 0, "type_feature": 3, "num_types": 3, **kw}
  return entities.make(num_actions, (K, F), embed_dim=16, num_heads=2, num_layers=2, **kw)


def _obs(seed, n_present=4):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(K, F)).astype(np.float32)
  x[:, 0] = (np.arange(K) < n_present)
  x[:, 3] = rng.integers(0, 3, K)
  return x


AGENT = _agent()
NOOP_AGENT = _agent(K + 1)
PARAMS = AGENT.init(jax.random.key(0), jnp.zeros((1, K * F)))
NOOP_PARAMS = NOOP_AGENT.init(jax.random.key(0), jnp.zeros((1, K * F)))


def _inputs(obs):
  x = obs[None]
  present = x[..., 0] > 0.5
  types = x[..., 3].astype(jnp.int32)
  return x, present, types, jnp.zeros((1, 0))


def _logits_value(params, agent_obs, num_actions=K):
  net = entities.EntityActorCritic(num_actions, 16, 2, 2, 3)
  return net.apply(params, *_inputs(agent_obs))


_LV = jax.jit(_logits_value, static_argnums=2)   # one compile per action count


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, K))
def test_value_invariant_and_logits_equivariant_under_permutation(seed, n):
  obs = _obs(seed, n)
  perm = np.random.default_rng(seed + 1).permutation(K)
  lg, v = _LV(PARAMS, jnp.asarray(obs))
  lg_p, v_p = _LV(PARAMS, jnp.asarray(obs[perm]))
  np.testing.assert_allclose(v_p, v, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(lg_p)[0], np.asarray(lg)[0][perm], rtol=1e-4, atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, K - 1))
def test_absent_entities_are_ignored(seed, n):
  obs = _obs(seed, n)
  other = obs.copy()
  other[n:, 1:] = np.random.default_rng(seed + 7).normal(size=(K - n, F - 1)) * 10
  for net_params, actions in ((PARAMS, K), (NOOP_PARAMS, K + 1)):
    lg, v = _LV(net_params, jnp.asarray(obs), actions)
    lg2, v2 = _LV(net_params, jnp.asarray(other), actions)
    np.testing.assert_allclose(v2, v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lg2, lg, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(lg)[0, n:K] == MASKED_LOGIT)   # absent slots are never chosen


def test_entity_types_change_the_attention():
  obs = _obs(3, K)
  other = obs.copy()
  other[:, 3] = (obs[:, 3] + 1) % 3
  lg, _ = _LV(PARAMS, jnp.asarray(obs))
  lg2, _ = _LV(PARAMS, jnp.asarray(other))
  assert not np.allclose(lg, lg2, atol=1e-6)


def test_interface_shapes_and_evaluate_matches_act():
  obs = jnp.stack([jnp.asarray(_obs(s, 1 + s % K)).reshape(-1) for s in range(8)])
  step = jax.jit(AGENT.act)(PARAMS, (), obs, jnp.zeros(8, bool), jax.random.key(2))
  assert step.action.shape == step.log_prob.shape == step.value.shape == (8,)
  present = np.asarray(obs.reshape(8, K, F)[..., 0] > 0.5)
  assert present[np.arange(8), np.asarray(step.action)].all()
  from jaxrl_suite.algos.rollout import Transition
  seq = Transition(record=step.record, action=step.action, log_prob=None, value=None,
                   reward=None, final_obs=None, terminated=None, done=None, done_prev=None,
                   mask=None, weight=None, label=None, carry=(), logs={}, episode_sums={})
  ev = jax.jit(AGENT.evaluate)(PARAMS, (), seq)
  np.testing.assert_allclose(ev.log_prob, step.log_prob, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ev.value, step.value, rtol=1e-5, atol=1e-6)


@pytest.mark.slow   # ~45 s
def test_entities_agent_learns_the_entities_probe():
  """ProbeEntities: pick the present entity of largest value among 1-4 (uniform ~0.52);
  budget 60 updates of 16 envs x 16 steps."""
  from jaxrl_suite.algos import ppo
  from jaxrl_suite.envs import registry
  env, params = registry.make("ProbeEntities-v0")
  c = ppo.default_config()
  c.agent = "entities"
  c.num_envs, c.num_steps, c.total_timesteps = 16, 16, 16 * 16 * 60
  c.lr, c.anneal_lr, c.num_minibatches = 3e-3, False, 2
  _, m = jax.jit(ppo.make_train(c, env, params))(jax.random.key(0))
  ret = np.asarray(m["episode_return"])
  assert ret[:3].mean() < 0.7 and ret[-5:].mean() > 0.95, ret
