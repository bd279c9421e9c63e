"""Probe with a known answer for the Gaussian agent: a one-step continuous bandit whose optimal
action depends on the observation. PPO must put the squashed mean on the optimum.

ProbeContinuous: obs s = +-1 (fair coin), one action a in Box(-1, 1), one step,
reward r = -(a - 0.6 s)^2. Optimum a*(s) = 0.6 s, return 0. A policy that ignores s
(or the initial one, a = tanh(u), u ~ N(0, 1)) loses at least E[(0.6 s)^2] = 0.36.
"""

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from jaxrl_suite.algos import ppo
from jaxrl_suite.envs import probes

OPT_SLOPE = 0.6


class ProbeContinuous(probes.ProbeObsReward):
  """ProbeObsReward's +-1 observation, with a Box action and the quadratic reward above."""

  def reward(self, state, action):
    return -jnp.sum((action - OPT_SLOPE * state.obs) ** 2).astype(jnp.float32)

  def action_space(self, params=None):
    return spaces.Box(-1.0, 1.0, (1,), jnp.float32)


def _config():
  c = ppo.default_config()
  c.agent = "gaussian"
  c.update(dict(num_envs=32, num_steps=4, total_timesteps=32 * 4 * 150, update_epochs=4,
                num_minibatches=2, lr=3e-3, ent_coef=0.0, gamma=0.99, anneal_lr=False,
                hidden_sizes=(16,)))
  return c


def test_ppo_with_the_gaussian_agent_finds_the_continuous_bandit_optimum():
  env = ProbeContinuous()
  params = env.default_params
  learner = ppo.make_learner(_config(), env, params)
  rs, metrics = jax.jit(learner.train)(jax.random.key(0))
  ret = np.asarray(metrics["episode_return"])
  obs = jnp.array([[1.0], [-1.0]])
  greedy = np.asarray(learner.policy(rs.train_state.params, obs, jax.random.key(1), greedy=True))
  np.testing.assert_allclose(greedy[:, 0], [OPT_SLOPE, -OPT_SLOPE], atol=0.08)
  assert ret[:5].mean() < -0.3, ret[:5]    # the start loses >= 0.36 in expectation
  assert ret[-10:].mean() > -0.05, ret[-10:]
  # the policy narrowed: its std fell from the initial exp(0) = 1
  log_std = float(rs.train_state.params["params"]["log_std"][0])
  assert log_std < -0.5, log_std
