"""The purejaxrl-style PPO that `bench_ppo` times as its speed reference still learns: on
CartPole-v1 its returned-episode return rises well above the untrained policy's within 40
updates (a broken loss or GAE after a refactor would leave it flat)."""

import jax
import numpy as np

from experiments.purejaxrl_style_ppo import make_train


def test_reference_ppo_learns_cartpole():
  returns = np.asarray(jax.jit(make_train(num_envs=4, num_steps=32,
                                          total_timesteps=4 * 32 * 40))(jax.random.PRNGKey(0)))
  assert returns.shape == (40,)
  assert returns[-5:].mean() > 2.0 * max(returns[:5].mean(), 5.0)
