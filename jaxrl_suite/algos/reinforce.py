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
from jaxrl_suite.core import losses, run_config
from jaxrl_suite.algos.agent import Eval


def default_config() -> ml_collections.ConfigDict:
  config = on_policy.base_config()
  config.algo = "reinforce"
  config.gae_lambda = 1.0
  config.lr = 1e-3
  config.update_epochs = 1
  config.num_minibatches = 1
  return run_config.add_host_defaults(config)   # chunks, checkpoints, logging


def reinforce_loss(ev: Eval, batch: on_policy.Batch, config):
  traj = batch.traj
  w = traj.weight
  # batch.targets = G (lambda = 1); the advantage G - V(s) uses rollout-time V as the baseline.
  adv = on_policy.normalize(batch.targets - traj.value, config.normalize_advantages, w)
  adv, values, _, scale = on_policy.live_rows(w, adv, ev.value, traj.value, batch.targets)
  pg = on_policy.rescale(losses.reinforce_loss(ev.log_prob, adv, jnp.zeros_like(adv)), scale)
  vf = on_policy.rescale(0.5 * jnp.mean(jnp.square(values - batch.targets)), scale)
  ent = on_policy.weighted_mean(ev.entropy, w)
  total = pg + config.vf_coef * vf - config.ent_coef * ent
  return total, {"loss": total, "policy_loss": pg, "value_loss": vf, "entropy": ent}


# The learner's pure functions (init, update, run, train, policy) and the two shortcuts.
make_learner, make_train, make_policy = on_policy.entry_points(reinforce_loss)
