"""Proximal Policy Optimisation (Schulman et al. 2017) as pure functions, purejaxrl-style.

    train = make_train(config, env, env_params)      # pure: key -> (runner_state, metrics)
    out = jax.jit(jax.vmap(train))(jax.random.split(key, 8))   # 8 seeds at once

Loss per minibatch (any agent; `ev` = its log-prob, entropy and value of the recorded actions):
ppo_clip_loss + vf_coef * clipped_value_loss - ent_coef * entropy, with
per-minibatch advantage normalisation; Adam with global-norm gradient clipping and a linearly
annealed learning rate.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections

from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import losses, run_config
from jaxrl_suite.algos.agent import Eval


def default_config() -> ml_collections.ConfigDict:
  config = on_policy.base_config()
  config.algo = "ppo"
  config.update_epochs = 4
  config.num_minibatches = 4
  config.clip_eps = 0.2
  return run_config.add_host_defaults(config)   # chunks, checkpoints, logging


def ppo_loss(ev: Eval, batch: on_policy.Batch, config):
  """ev: the agent's log-prob / entropy / value of the recorded actions under new params."""
  traj = batch.traj
  w = traj.weight
  adv = on_policy.normalize(batch.advantages, config.normalize_advantages, w)
  adv, values, old_values, scale = on_policy.live_rows(w, adv, ev.value, traj.value,
                                                       batch.targets)
  pg = on_policy.rescale(losses.ppo_clip_loss(ev.log_prob, traj.log_prob, adv, config.clip_eps),
                         scale)
  vf = on_policy.rescale(losses.clipped_value_loss(values, old_values, batch.targets,
                                                   config.clip_eps), scale)
  ent = on_policy.weighted_mean(ev.entropy, w)
  total = pg + config.vf_coef * vf - config.ent_coef * ent
  log_ratio = ev.log_prob - traj.log_prob
  aux = {"loss": total, "policy_loss": pg, "value_loss": vf, "entropy": ent,
         "approx_kl": on_policy.weighted_mean(jnp.exp(log_ratio) - 1 - log_ratio, w),
         "clip_frac": on_policy.weighted_mean(
             jnp.abs(jnp.exp(log_ratio) - 1) > config.clip_eps, w)}
  return total, aux


# The learner's pure functions (init, update, run, train, policy) and the two shortcuts.
make_learner, make_train, make_policy = on_policy.entry_points(ppo_loss)
