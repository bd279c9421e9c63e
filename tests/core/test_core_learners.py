"""PPO and REINFORCE: probe environments with analytic values, gymnax's own environments,
vmapping over seeds, determinism and action masks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.algos import ppo, reinforce
from jaxrl_suite.envs import probes, registry


def _probe_config(module, **kw):
  c = module.default_config()
  c.num_envs, c.num_steps, c.total_timesteps = 16, 8, 16 * 8 * 80
  c.lr, c.anneal_lr, c.gamma, c.ent_coef = 3e-3, False, 0.9, 0.0
  c.hidden_sizes = (16, 16)
  if module is ppo:
    c.num_minibatches = 2
  c.update(kw)
  return c


def _values(learner, params, obs):
  _, v = learner.network.apply(params, jnp.asarray(obs, jnp.float32))
  return np.asarray(v)


@pytest.mark.parametrize("module", [ppo, reinforce])
@pytest.mark.parametrize("name,obs,expected", [
    ("ProbeOneStep-v0", [[0.0]], [1.0]),
    ("ProbeObsReward-v0", [[1.0], [-1.0]], [1.0, -1.0]),
    ("ProbeTwoStep-v0", [[0.0], [1.0]], [0.9, 1.0]),
    ("ProbeTimeLimit-v0", [[0.0]], [10.0]),  # 1 / (1 - 0.9): truncation must bootstrap
])
def test_probe_values(module, name, obs, expected):
  env, params = registry.make(name)
  kw = {"total_timesteps": 16 * 8 * 250} if name == "ProbeTimeLimit-v0" else {}
  learner = module.make_learner(_probe_config(module, **kw), env, params)
  rs, _ = jax.jit(learner.train)(jax.random.key(0))
  got = _values(learner, rs.train_state.params, obs)
  tol = 0.1 * max(1.0, abs(expected[0]))
  np.testing.assert_allclose(got, expected, atol=tol)


@pytest.mark.parametrize("module", [ppo, reinforce])
def test_probe_action_learns_the_rewarded_action(module):
  env, params = registry.make("ProbeAction-v0")
  learner = module.make_learner(_probe_config(module), env, params)
  rs, metrics = jax.jit(learner.train)(jax.random.key(1))
  logits, _ = learner.network.apply(rs.train_state.params, jnp.zeros((1, 1)))
  assert jax.nn.softmax(logits)[0, 1] > 0.9
  assert float(metrics["episode_return"][-1]) > 0.8


def test_masked_action_is_never_taken():
  env, params = registry.make("ProbeMasked-v0")
  learner = ppo.make_learner(_probe_config(ppo), env, params)
  rs, metrics = jax.jit(learner.train)(jax.random.key(2))
  returns = np.asarray(metrics["episode_return"])
  assert returns.max() <= 0.5 + 1e-6          # action 2 (+1) never happened
  assert returns[-1] > 0.45                    # and action 1 was learned
  mask = jnp.array([True, True, False])
  acts = jax.vmap(lambda k: learner.policy(rs.train_state.params, jnp.zeros((1,)), k, mask))(
      jax.random.split(jax.random.key(3), 256))
  assert not bool(jnp.any(acts == 2))


@pytest.fixture(scope="module")
def cartpole_runs():
  """PPO on CartPole-v1, 3 seeds vmapped, 1e5 steps (shared by the tests below)."""
  c = ppo.default_config()
  c.total_timesteps = 100_000
  env, params = registry.make("CartPole-v1")
  train = jax.jit(jax.vmap(ppo.make_train(c, env, params)))
  keys = jax.random.split(jax.random.key(0), 3)
  return train, keys, train(keys)


def test_ppo_learns_cartpole_and_vmaps_over_seeds(cartpole_runs):
  _, _, (rs, metrics) = cartpole_runs
  ret = np.asarray(metrics["returned_episode_returns"])
  assert ret.shape == (3, 195)
  assert ret[:, -10:].mean() > 150, ret[:, -10:].mean(1)  # random policy: ~22
  assert ret[:, :3].mean() < 60
  # Different seeds give different runs.
  assert not np.allclose(ret[0], ret[1])


def test_ppo_is_deterministic(cartpole_runs):
  train, keys, (rs, _) = cartpole_runs
  rs2, _ = train(keys)
  for a, b in zip(jax.tree.leaves(rs.train_state.params), jax.tree.leaves(rs2.train_state.params)):
    np.testing.assert_array_equal(a, b)


def test_ppo_runs_minatar_breakout():
  c = ppo.default_config()
  c.num_envs, c.num_steps, c.total_timesteps, c.hidden_sizes = 8, 32, 8 * 32 * 3, (32,)
  env, params = registry.make("Breakout-MinAtar")
  rs, metrics = jax.jit(ppo.make_train(c, env, params))(jax.random.key(0))
  assert rs.env.obs.shape == (8, 400)  # [10, 10, 4] flattened
  assert np.isfinite(np.asarray(metrics["loss"])).all()
  assert int(rs.update_step) == 3


def test_learning_rate_anneals_to_zero():
  env, params = registry.make("ProbeOneStep-v0")
  c = _probe_config(ppo, anneal_lr=True, total_timesteps=16 * 8 * 4)
  _, metrics = jax.jit(ppo.make_train(c, env, params))(jax.random.key(0))
  lr = np.asarray(metrics["learning_rate"])
  np.testing.assert_allclose(lr, [c.lr * 0.75, c.lr * 0.5, c.lr * 0.25, 0.0], rtol=1e-6)
