"""PPO training loop shared by the BallastNet agents (v1 route scorer, v2 pump-pair policy).

The purejaxrl structure: `train(key)` is one pure function (jittable, `jax.jit(jax.vmap(train))`
over seeds): `lax.scan` over updates of [rollout of num_steps x num_envs (gymnax auto-reset) ->
GAE (jaxrl_suite.core.gae) -> update_epochs x num_minibatches Adam steps]. Per minibatch

  L = ppo_clip_loss(log_prob, old_log_prob, A_norm) + vf_coef * clipped_value_loss
      - ent_coef * mean(entropy) + aux_coef * aux_loss

with A_norm the minibatch-normalised advantages (jaxrl_suite.core.losses).

An agent plugs in through `AgentFns` (all functions of batched arrays, B envs):
  init(key, obs[B, D]) -> params
  observe(params, obs[B, D]) -> (pre, value[B]): everything acting needs from an observation
      (features, first-head logits). The loop calls it once per step on the concatenation
      [final_observation; next observation] (one network call instead of two in the compiled
      graph: compile time dominates short runs) and carries the second half to the next step.
  act(params, pre, key) -> (env_action[B, ...], record, log_prob[B], off_top[B] bool): samples
      an action; `record` (a pytree) is all `loss_terms` needs to re-evaluate it under new params;
      off_top flags actions that differ from the agent's baseline choice (logged).
  loss_terms(params, record, label) -> (log_prob[B], entropy[B], value[B], aux_loss scalar)
  label(state) -> aux labels [B, ...] from the privileged env state (aux loss only; never
      observed by the policy).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax.training.train_state import TrainState

from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import losses
from jaxrl_suite.core.gae import gae


class AgentFns(NamedTuple):
  init: Callable
  observe: Callable
  act: Callable
  loss_terms: Callable
  label: Callable


class Transition(NamedTuple):
  record: Any
  log_prob: jax.Array
  value: jax.Array
  reward: jax.Array
  next_value: jax.Array
  terminated: jax.Array
  done: jax.Array
  label: Any


def default_config() -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(
      num_envs=64, num_steps=32, total_timesteps=200_000, update_epochs=4, num_minibatches=4,
      lr=1e-3, anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, vf_coef=0.5,
      ent_coef=0.003, aux_coef=0.5, max_grad_norm=0.5, hidden=64))


def num_updates(c: ml_collections.ConfigDict) -> int:
  return int(c.total_timesteps // (c.num_envs * c.num_steps))


def make_ppo_train(c: ml_collections.ConfigDict, env, env_params, agent: AgentFns):
  """Returns train(key) -> (train_state, metrics[n_updates]); the whole run jits."""
  n_updates = num_updates(c)
  batch = c.num_envs * c.num_steps
  mb = batch // c.num_minibatches
  n = c.num_envs

  def lr_sched(count):
    frac = 1.0 - (count // (c.num_minibatches * c.update_epochs)) / max(n_updates, 1)
    return c.lr * jnp.where(c.anneal_lr, frac, 1.0)

  def loss_fn(params, tr: Transition, adv, targets):
    log_prob, ent, value, aux = agent.loss_terms(params, tr.record, tr.label)
    adv_n = on_policy.normalize(adv, True)
    pg = losses.ppo_clip_loss(log_prob, tr.log_prob, adv_n, c.clip_eps)
    vl = losses.clipped_value_loss(value, tr.value, targets, c.clip_eps)
    ent = ent.mean()
    total = pg + c.vf_coef * vl - c.ent_coef * ent + c.aux_coef * aux
    return total, {"pg": pg, "vf": vl, "ent": ent, "aux": aux}

  def train(key):
    key, k_init, k_reset = jax.random.split(key, 3)
    obs, state = jax.vmap(env.reset_env, in_axes=(0, None))(jax.random.split(k_reset, n),
                                                             env_params)
    tx = optax.chain(optax.clip_by_global_norm(c.max_grad_norm),
                     optax.adam(learning_rate=lr_sched, eps=1e-5))
    ts = TrainState.create(apply_fn=None, params=agent.init(k_init, obs), tx=tx)

    def env_step(carry, _):
      ts, (pre, value), _, state, key, ep_ret, ep_len, stats = carry
      key, ka, ks = jax.random.split(key, 3)
      action, record, log_prob, off_top = agent.act(ts.params, pre, ka)
      label = agent.label(state)
      obs2, state2, reward, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
          jax.random.split(ks, n), state, action, env_params)
      done = term | trunc
      # bootstrap from the pre-reset observation on truncation (gymnax 1.x final_observation)
      pre_b, value_b = agent.observe(ts.params,
                                     jnp.concatenate([info["final_observation"], obs2]))
      nxt = (jax.tree.map(lambda x: x[n:], pre_b), value_b[n:])
      ep_ret = ep_ret + reward
      ep_len = ep_len + 1
      stats = (stats[0] + jnp.sum(jnp.where(done, ep_ret, 0.0)),
               stats[1] + jnp.sum(jnp.where(done, ep_len, 0)),
               stats[2] + jnp.sum(done), stats[3] + jnp.sum(done & info["success"]),
               stats[4] + jnp.sum(off_top))
      ep_ret = jnp.where(done, 0.0, ep_ret)
      ep_len = jnp.where(done, 0, ep_len)
      tr = Transition(record, log_prob, value, reward, value_b[:n], term, done, label)
      return (ts, nxt, obs2, state2, key, ep_ret, ep_len, stats), tr

    def update(carry, _):
      ts, obs, state, key, ep_ret, ep_len = carry
      pre_val = agent.observe(ts.params, obs)  # params changed since the last step
      zi = jnp.zeros((), jnp.int32)
      stats0 = (jnp.zeros(()), zi, zi, zi, zi)
      (ts, _, obs, state, key, ep_ret, ep_len, stats), traj = jax.lax.scan(
          env_step, (ts, pre_val, obs, state, key, ep_ret, ep_len, stats0), None, c.num_steps)
      adv, targets = gae(traj.reward, traj.value, traj.next_value, traj.terminated, traj.done,
                         c.gamma, c.gae_lambda)

      def epoch(carry, _):
        ts, key = carry
        key, kp = jax.random.split(key)
        perm = jax.random.permutation(kp, batch)
        flat = jax.tree.map(lambda x: x.reshape((batch,) + x.shape[2:]), (traj, adv, targets))
        shuf = jax.tree.map(lambda x: x[perm].reshape((c.num_minibatches, mb) + x.shape[1:]),
                            flat)

        def mb_step(ts, b):
          tr, a, t = b
          (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(ts.params, tr, a, t)
          return ts.apply_gradients(grads=grads), aux

        ts, aux = jax.lax.scan(mb_step, ts, shuf)
        return (ts, key), aux

      (ts, key), aux = jax.lax.scan(epoch, (ts, key), None, c.update_epochs)
      n_done = jnp.maximum(stats[2], 1)
      metrics = {"returned_episode_returns": stats[0] / n_done,
                 "episode_length": stats[1] / n_done, "success_rate": stats[3] / n_done,
                 "episodes": stats[2], "off_top_share": stats[4] / batch,
                 **jax.tree.map(jnp.mean, aux)}
      return (ts, obs, state, key, ep_ret, ep_len), metrics

    (ts, *_), metrics = jax.lax.scan(update, (ts, obs, state, key, jnp.zeros(n),
                                              jnp.zeros(n, jnp.int32)), None, n_updates)
    return ts, metrics

  return train
