"""Proximal Policy Optimisation (Schulman et al. 2017) as pure functions, purejaxrl-style.

    train = make_train(config, env, env_params)      # pure: key -> (runner_state, metrics)
    out = jax.jit(jax.vmap(train))(jax.random.split(key, 8))   # 8 seeds at once

Loss per minibatch: ppo_clip_loss + vf_coef * clipped_value_loss - ent_coef * entropy, with
per-minibatch advantage normalisation; Adam with global-norm gradient clipping and a linearly
annealed learning rate.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections

from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import losses
from jaxrl_suite.core.networks import apply_action_mask


def default_config() -> ml_collections.ConfigDict:
  config = on_policy.base_config()
  config.algo = "ppo"
  config.update_epochs = 4
  config.num_minibatches = 4
  config.clip_eps = 0.2
  return config


def ppo_loss(params, apply_fn, batch: on_policy.Batch, config):
  traj = batch.traj
  logits, values = apply_fn(params, traj.obs)
  logits = apply_action_mask(logits, traj.mask)
  log_prob = losses.categorical_log_prob(logits, traj.action)
  adv = on_policy.normalize(batch.advantages, config.normalize_advantages)
  pg = losses.ppo_clip_loss(log_prob, traj.log_prob, adv, config.clip_eps)
  vf = losses.clipped_value_loss(values, traj.value, batch.targets, config.clip_eps)
  ent = jnp.mean(losses.categorical_entropy(logits))
  total = pg + config.vf_coef * vf - config.ent_coef * ent
  log_ratio = log_prob - traj.log_prob
  aux = {"loss": total, "policy_loss": pg, "value_loss": vf, "entropy": ent,
         "approx_kl": jnp.mean(jnp.exp(log_ratio) - 1 - log_ratio),
         "clip_frac": jnp.mean(jnp.abs(jnp.exp(log_ratio) - 1) > config.clip_eps)}
  return total, aux


# The learner's pure functions (init, update, run, train, policy) and the two shortcuts.
make_learner, make_train, make_policy = on_policy.entry_points(ppo_loss)
