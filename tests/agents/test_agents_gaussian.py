"""The tanh-squashed Gaussian agent: log-prob and entropy against float64 numpy references."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents import gaussian


def _ref_log_prob(u, mean, log_std, low, high):
  u, mean, log_std = (np.asarray(x, np.float64) for x in (u, mean, log_std))
  std = np.exp(log_std)
  base = np.sum(-0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi), -1)
  jac = np.sum(np.log((high - low) / 2.0 * (1.0 - np.tanh(u) ** 2)), -1)
  return base - jac


def test_squashed_log_prob_matches_float64_reference():
  rng = np.random.default_rng(0)
  low, high = np.array([-2.0, 0.0]), np.array([2.0, 512.0])
  mean, log_std = rng.normal(size=(16, 2)), rng.normal(size=2) * 0.5
  u = mean + np.exp(log_std) * rng.normal(size=(16, 2))
  got = gaussian.squashed_log_prob(jnp.float32(u), jnp.float32(mean), jnp.float32(log_std),
                                   jnp.float32(low), jnp.float32(high))
  np.testing.assert_allclose(np.asarray(got), _ref_log_prob(u, mean, log_std, low, high),
                             rtol=1e-5, atol=1e-4)


def test_entropy_matches_closed_form_and_density_integrates_to_one():
  log_std = np.array([0.3, -0.7])
  ref = np.sum(0.5 + 0.5 * np.log(2 * np.pi) + log_std)
  np.testing.assert_allclose(float(gaussian.gaussian_entropy(jnp.float32(log_std))), ref,
                             rtol=1e-6)
  # 1-D squashed density over the action interval integrates to 1 (change of variables)
  low, high = np.array([-2.0]), np.array([2.0])
  u = np.linspace(-8, 8, 20001)[:, None]
  a = low + (np.tanh(u) + 1) / 2 * (high - low)
  p = np.exp(_ref_log_prob(u, np.zeros((1, 1)), np.array([0.2]), low, high))
  assert abs(np.trapezoid(p, a[:, 0]) - 1.0) < 1e-3


def test_act_and_evaluate_agree_and_actions_in_bounds():
  agent = gaussian.make([-2.0], [2.0], (8,))
  obs = jnp.ones((5, 3))
  params = agent.init(jax.random.key(0), obs)
  step = agent.act(params, (), obs, jnp.zeros(5, bool), jax.random.key(1))
  assert step.action.shape == (5, 1)
  assert bool(jnp.all(jnp.abs(step.action) <= 2.0))

  class Seq:
    record = step.record
  ev = agent.evaluate(params, (), Seq)
  np.testing.assert_allclose(np.asarray(ev.log_prob), np.asarray(step.log_prob), rtol=1e-6)


def test_train_cli_trains_pendulum_with_the_gaussian_agent(tmp_path):
  """Pendulum-v1 (Box actions) through the CLI's training path: the default mlp agent is
  switched to the Gaussian one, the run finishes and logs finite returns."""
  import json
  from jaxrl_suite.algos import ppo
  from jaxrl_suite.train import host
  config = ppo.default_config()
  config.env_name = "Pendulum-v1"
  config.total_timesteps, config.num_envs, config.num_steps = 2048, 4, 128
  host._pick_box_agent(config)
  assert config.agent == "gaussian"
  _, done = host.run_training(config, str(tmp_path), progress=False)
  assert done == 4
  rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
  assert all(np.isfinite(r["loss"]) for r in rows if "loss" in r)
