"""REINFORCE with a learned state-value baseline (Williams 1992).

One gradient step per rollout on L = -mean(log pi(a|s) (G - V(s))) + vf_coef * 0.5 (V - G)^2
- ent_coef * H. Returns G are Monte-Carlo returns computed by `gae` with lambda = 1 (so a rollout
cut by its length or by truncation bootstraps from V of the true successor, and termination
zeroes it), which makes G - V(s) exactly the baseline-subtracted return.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections

from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import losses
from jaxrl_suite.core.networks import apply_action_mask


def default_config() -> ml_collections.ConfigDict:
  config = on_policy.base_config()
  config.algo = "reinforce"
  config.gae_lambda = 1.0
  config.lr = 1e-3
  config.update_epochs = 1
  config.num_minibatches = 1
  return config


def reinforce_loss(params, apply_fn, batch: on_policy.Batch, config):
  traj = batch.traj
  logits, values = apply_fn(params, traj.obs)
  logits = apply_action_mask(logits, traj.mask)
  log_prob = losses.categorical_log_prob(logits, traj.action)
  # batch.targets = G (lambda = 1); the advantage G - V(s) uses rollout-time V as the baseline.
  adv = on_policy.normalize(batch.targets - traj.value, config.normalize_advantages)
  pg = losses.reinforce_loss(log_prob, adv, jnp.zeros_like(adv))
  vf = 0.5 * jnp.mean(jnp.square(values - batch.targets))
  ent = jnp.mean(losses.categorical_entropy(logits))
  total = pg + config.vf_coef * vf - config.ent_coef * ent
  return total, {"loss": total, "policy_loss": pg, "value_loss": vf, "entropy": ent}


# The learner's pure functions (init, update, run, train, policy) and the two shortcuts.
make_learner, make_train, make_policy = on_policy.entry_points(reinforce_loss)
