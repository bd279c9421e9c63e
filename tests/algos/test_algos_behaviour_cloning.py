"""Behaviour cloning (algos/behaviour_cloning.py): probes with known answers."""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents import entities, mlp
from jaxrl_suite.algos import behaviour_cloning as bc
from jaxrl_suite.algos import ppo


def test_bc_reaches_a_linear_teacher_on_cartpole_and_warm_starts_ppo():
  """Teacher: push towards the pole's fall (a linear rule on angle and angular velocity). BC of
  its CartPole demonstrations into the MLP agent reaches > 0.95 accuracy (random: ~0.5), and
  the warm-started PPO learner starts from exactly those params."""
  env, params = gymnax.make("CartPole-v1")
  teacher = lambda obs, key: (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(jnp.int32)
  demos = jax.jit(lambda k: bc.collect(env, params, teacher, k, 8, 128))(jax.random.PRNGKey(0))
  assert demos.obs.shape == (8 * 128, 4) and demos.action.shape == (8 * 128,)
  np.testing.assert_array_equal(demos.action, teacher(demos.obs, None))
  agent = mlp.make(2, (32, 32), "tanh", 1)
  p0 = agent.init(jax.random.PRNGKey(1), demos.obs[:2])
  acc0 = float(bc.accuracy(agent, p0, demos))
  p, logs = jax.jit(lambda p, k: bc.fit(agent, p, demos, k, steps=1500, batch_size=256,
                                        lr=1e-2))(p0, jax.random.PRNGKey(2))
  acc = float(bc.accuracy(agent, p, demos))
  assert acc > 0.95 and acc > acc0 + 0.2, (acc0, acc)
  assert float(logs["loss"][-20:].mean()) < float(logs["loss"][:20].mean())
  cfg = ppo.default_config()
  cfg.num_envs, cfg.num_steps, cfg.total_timesteps, cfg.hidden_sizes = 4, 16, 64, (32, 32)
  learner = ppo.make_learner(cfg, env, params, agent=agent)
  rs = bc.warm_start(learner, p, jax.random.PRNGKey(3))
  for a, b in zip(jax.tree.leaves(rs.train_state.params), jax.tree.leaves(p)):
    np.testing.assert_array_equal(a, b)


def test_bc_respects_masks_with_the_entity_agent():
  """Entity agent, 5 slots x 3 features, slot k present iff feature 0 > 0.5; the teacher picks
  the present slot with the largest feature 1. Masked-out slots are never chosen and BC
  reaches > 0.95 (a per-entity score: the set structure fits the teacher)."""
  k_ent, f = 5, 3
  key = jax.random.PRNGKey(0)
  x = jax.random.uniform(key, (1024, k_ent, f))
  present = x[..., 0] > 0.3
  present = present.at[:, 0].set(True)
  x = x.at[..., 0].set(present.astype(jnp.float32))
  teacher = jnp.argmax(jnp.where(present, x[..., 1], -1.0), -1).astype(jnp.int32)
  demos = bc.Demos(x.reshape(1024, -1), teacher, present)
  agent = entities.make(k_ent, (k_ent, f), embed_dim=8, num_heads=2, mask_feature=0)
  p0 = agent.init(jax.random.PRNGKey(1), demos.obs[:2])
  p, _ = jax.jit(lambda p, k: bc.fit(agent, p, demos, k, steps=250, batch_size=64,
                                     lr=3e-3))(p0, jax.random.PRNGKey(2))
  acc = float(bc.accuracy(agent, p, demos))
  assert acc > 0.95, acc
  a = agent.policy(p, demos.obs, jax.random.PRNGKey(3), None, greedy=False)
  assert bool(jnp.all(jnp.take_along_axis(present, a[:, None], 1)))
