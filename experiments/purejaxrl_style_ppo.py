"""A single-file PPO in purejaxrl's style, used ONLY as the speed reference of `bench_ppo`.

The issue quotes purejaxrl's speed on "this machine kind", but load, CPU model and jax version
move wall-clock numbers by 2x on a shared 2-core box. Timing this file in the same process,
interleaved with our learner, gives a ratio that survives all three. It follows purejaxrl's
`ppo.py` structure (one closure, dict-free NamedTuple transitions, `jnp.take` shuffles, no
truncation bootstrap, no action masks) with the same hyper-parameters as
`jaxrl_suite.algos.ppo.default_config()`. It is deliberately not part of the library.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState
from gymnax.wrappers import LogWrapper

# flax's orthogonal initialiser (QR) deadlocks XLA:CPU when vmapped over seeds on 2 cores;
# this one returns the same matrices without LAPACK (see jaxrl_suite/core/initializers.py).
from jaxrl_suite.core.initializers import orthogonal


class _ActorCritic(nn.Module):
  num_actions: int

  @nn.compact
  def __call__(self, x):
    def dense(n, scale):
      return nn.Dense(n, kernel_init=orthogonal(scale),
                      bias_init=nn.initializers.constant(0.0))
    a = nn.tanh(dense(64, np.sqrt(2))(x))
    a = nn.tanh(dense(64, np.sqrt(2))(a))
    c = nn.tanh(dense(64, np.sqrt(2))(x))
    c = nn.tanh(dense(64, np.sqrt(2))(c))
    return dense(self.num_actions, 0.01)(a), dense(1, 1.0)(c)[..., 0]


class _Step(NamedTuple):
  done: jax.Array
  action: jax.Array
  value: jax.Array
  reward: jax.Array
  log_prob: jax.Array
  obs: jax.Array
  episode_return: jax.Array


def _log_prob(logits, action):
  return jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]


def _gae(traj: _Step, last_value, gamma: float, lam: float):
  """Advantages [T, E] by the reverse GAE scan (purejaxrl's, no truncation bootstrap)."""
  def gae_step(carry, t):
    adv, next_value = carry
    delta = t.reward + gamma * next_value * (1 - t.done) - t.value
    adv = delta + gamma * lam * (1 - t.done) * adv
    return (adv, t.value), adv

  _, advantages = jax.lax.scan(gae_step, (jnp.zeros_like(last_value), last_value), traj,
                               reverse=True, unroll=16)
  return advantages


def _loss(p, net, t: _Step, adv, tgt, clip_eps, vf_coef, ent_coef):
  """purejaxrl's PPO loss on one minibatch: clipped surrogate, clipped value, entropy."""
  logits, v = net.apply(p, t.obs)
  ratio = jnp.exp(_log_prob(logits, t.action) - t.log_prob)
  a = (adv - adv.mean()) / (adv.std() + 1e-8)
  pg = -jnp.minimum(ratio * a, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * a).mean()
  v_clip = t.value + (v - t.value).clip(-clip_eps, clip_eps)
  vf = 0.5 * jnp.maximum((v - tgt) ** 2, (v_clip - tgt) ** 2).mean()
  ent = -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1).mean()
  return pg + vf_coef * vf - ent_coef * ent


def make_train(num_envs=4, num_steps=128, total_timesteps=500_000, update_epochs=4,
               num_minibatches=4, lr=2.5e-4, gamma=0.99, lam=0.95, clip_eps=0.2,
               vf_coef=0.5, ent_coef=0.01, max_grad_norm=0.5, env_name="CartPole-v1"):
  """Returns `train(key) -> mean returned-episode return per update [num_updates]`."""
  env, params = gymnax.make(env_name)
  env = LogWrapper(env)
  net = _ActorCritic(env.action_space(params).n)
  num_updates = total_timesteps // num_envs // num_steps
  batch = num_envs * num_steps

  def schedule(count):
    return lr * (1.0 - (count // (num_minibatches * update_epochs)) / num_updates)

  def train(key):
    key, k_net, k_env = jax.random.split(key, 3)
    tx = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=1e-5))
    ts = TrainState.create(apply_fn=net.apply, tx=tx,
                           params=net.init(k_net, jnp.zeros(env.observation_space(params).shape)))
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_env, num_envs),
                                                            params)

    def update(runner, _):
      def env_step(runner, _):
        ts, env_state, obs, key = runner
        key, k_act, k_step = jax.random.split(key, 3)
        logits, value = net.apply(ts.params, obs)
        action = jax.random.categorical(k_act, logits)
        obs2, env_state, reward, term, trunc, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, num_envs), env_state,
                                               action, params)
        return (ts, env_state, obs2, key), _Step(term | trunc, action, value, reward,
                                                 _log_prob(logits, action), obs,
                                                 info["returned_episode_returns"])

      runner, traj = jax.lax.scan(env_step, runner, None, num_steps)
      ts, env_state, obs, key = runner
      _, last_value = net.apply(ts.params, obs)

      advantages = _gae(traj, last_value, gamma, lam)
      targets = advantages + traj.value

      def epoch(carry, _):
        ts, key = carry

        def minibatch(ts, mb):
          t, adv, tgt = mb

          grads = jax.grad(_loss)(ts.params, net, t, adv, tgt, clip_eps, vf_coef, ent_coef)
          return ts.apply_gradients(grads=grads), None

        key, k_perm = jax.random.split(key)
        perm = jax.random.permutation(k_perm, batch)
        data = jax.tree.map(lambda x: x.reshape((batch,) + x.shape[2:]),
                            (traj, advantages, targets))
        data = jax.tree.map(lambda x: jnp.take(x, perm, axis=0).reshape(
            (num_minibatches, -1) + x.shape[1:]), data)
        ts, _ = jax.lax.scan(minibatch, ts, data)
        return (ts, key), None

      (ts, key), _ = jax.lax.scan(epoch, (ts, key), None, update_epochs)
      return (ts, env_state, obs, key), traj.episode_return.mean()

    _, returns = jax.lax.scan(update, (ts, env_state, obs, key), None, num_updates)
    return returns

  return train
