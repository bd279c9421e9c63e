"""Token-level advantages on `rollout.Rollout` records: per-token GAE, GRPO, GiGPO step groups.

All take a rollout (token arrays [B, K, W], per-turn arrays [B, H]) and return [B, K, W] arrays
that are zero on non-trainable slots.

Rewards on tokens. The environment's turn reward r_t is placed on the last action token of turn t
(`Rollout.action_end`); every other token gets 0 (minus beta * kl_n when a KL penalty is folded
into the reward). The trainable tokens of a trajectory, in chronological order u_1..u_N, form
the sequence GAE runs over (`core.gae.gae`, time-major):

  delta_n = r_n + gamma * V(u_{n+1}) - V(u_n),    V(u_{N+1}) = 0
  A_n     = delta_n + gamma * lam * A_{n+1}

`across_segments=True` lets the recursion continue over a window boundary (the last token of
window k bootstraps from the first trainable token of window k+1, whose context holds the
summary): it equals GAE on the concatenated token sequence. False restarts it: V_next = 0 and the
trace is cut at the last trainable token of every window (independent per-segment GAE, the
negative control of CompactionRL). The end of a rollout is terminal (text episodes end by the
environment or by the turn budget H, which is part of the task).

GRPO: A = (R - mean_G R) / (std_G R + eps) of the trajectory return, broadcast to every trainable
token. GiGPO (Feng et al. 2025, arXiv:2505.10978): the episode term plus `step_weight` times a
step term: turns of one group with the same `state_key` (not -1) form a step group, and
A^S_t = (G_t - mean G) / (std G + eps) of the discounted return-to-go G_t in that group
(singletons: 0). The step term of turn t goes to turn t's trainable tokens.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.core import gae as core_gae
from jaxrl_suite.core import losses
from jaxrl_suite.lm import rollout as lm_rollout


def token_rewards(ro: lm_rollout.Rollout) -> jax.Array:
  """float [B, K, W]: each turn's reward on its last action token."""
  b, k, w = ro.tokens.shape
  idx = jnp.where(ro.turn_valid & (ro.action_end >= 0), ro.action_end, k * w)  # k*w: dropped
  r = jnp.zeros((b, k * w + 1), jnp.float32)
  r = r.at[jnp.arange(b)[:, None], idx].add(jnp.where(ro.turn_valid, ro.rewards, 0.0))
  return r[:, :k * w].reshape(b, k, w)


def _chronological(trainable_flat: jax.Array):
  """Permutation [B, N] putting trainable slots first, in order; and their count [B]."""
  n = trainable_flat.shape[1]
  key = jnp.where(trainable_flat, 0, n) + jnp.arange(n)[None]
  return jnp.argsort(key, axis=1), trainable_flat.sum(1)


def token_gae(ro: lm_rollout.Rollout, values: jax.Array, rewards: jax.Array, gamma: float,
              lam: float, across_segments: bool = True) -> tuple[jax.Array, jax.Array]:
  """(advantages, value targets) [B, K, W] over the trainable tokens (see module doc).

  values, rewards: [B, K, W] (values of the tokens' own window contexts; `Rollout.values`).
  """
  b, k, w = ro.tokens.shape
  tr = lm_rollout.flat(ro.trainable)
  order, n_tr = _chronological(tr)
  take = lambda x: jnp.take_along_axis(lm_rollout.flat(x), order, axis=1)
  v, r, seg = take(values), take(rewards), take(ro.segment)
  idx = jnp.arange(k * w)[None]
  valid = idx < n_tr[:, None]
  last = idx >= n_tr[:, None] - 1
  boundary = jnp.concatenate([seg[:, 1:] != seg[:, :-1], jnp.ones((b, 1), bool)], axis=1)
  term = last | (boundary if not across_segments else False) | ~valid
  v = jnp.where(valid, v, 0.0)
  r = jnp.where(valid, r, 0.0)
  next_v = jnp.concatenate([v[:, 1:], jnp.zeros((b, 1))], axis=1)
  adv, tgt = core_gae.gae(r.T, v.T, next_v.T, term.T, term.T, gamma, lam)
  adv, tgt = jnp.where(valid, adv.T, 0.0), jnp.where(valid, tgt.T, 0.0)
  inv = lambda x: jnp.zeros((b, k * w), x.dtype).at[jnp.arange(b)[:, None], order].set(x)
  return inv(adv).reshape(b, k, w), inv(tgt).reshape(b, k, w)


def broadcast_turns(ro: lm_rollout.Rollout, per_turn: jax.Array) -> jax.Array:
  """[B, H] per-turn values -> [B, K, W] on each turn's trainable tokens (0 elsewhere)."""
  t = jnp.clip(ro.turn, 0, per_turn.shape[1] - 1)
  x = jnp.take_along_axis(per_turn[:, None, :], t.reshape(t.shape[0], 1, -1), axis=2)
  return jnp.where(ro.trainable, x.reshape(ro.turn.shape), 0.0)


def grpo_token_advantages(ro: lm_rollout.Rollout, group_size: int,
                          scale: bool = True) -> jax.Array:
  """Group-relative return advantage broadcast to every trainable token: [B, K, W]."""
  a = losses.grpo_advantages(ro.returns.reshape(-1, group_size), scale=scale).reshape(-1)
  return jnp.where(ro.trainable, a[:, None, None], 0.0)


def returns_to_go(ro: lm_rollout.Rollout, gamma: float = 1.0) -> jax.Array:
  """[B, H] discounted return from each turn on (0 after the episode)."""
  r = jnp.where(ro.turn_valid, ro.rewards, 0.0)
  return core_gae.discounted_returns(r.T, jnp.zeros_like(r.T), gamma).T * ro.turn_valid


def step_group_advantages(ro: lm_rollout.Rollout, group_size: int, gamma: float = 1.0,
                          scale: bool = True, eps: float = 1e-6) -> jax.Array:
  """GiGPO step-level advantages [B, H]: return-to-go normalised within same-state groups."""
  b, h = ro.rewards.shape
  g = returns_to_go(ro, gamma).reshape(-1, group_size * h)            # [B/G, G*H]
  key = ro.state_key.reshape(-1, group_size * h)
  ok = (ro.turn_valid & (ro.state_key >= 0)).reshape(-1, group_size * h)
  same = (key[:, :, None] == key[:, None, :]) & ok[:, :, None] & ok[:, None, :]
  cnt = same.sum(-1)
  mean = (same * g[:, None, :]).sum(-1) / jnp.maximum(cnt, 1)
  var = (same * (g[:, None, :] - mean[..., None]) ** 2).sum(-1) / jnp.maximum(cnt, 1)
  a = g - mean
  if scale:
    a = a / (jnp.sqrt(var) + eps)
  a = jnp.where(ok & (cnt > 1), a, 0.0)
  return a.reshape(b, h)


def gigpo_token_advantages(ro: lm_rollout.Rollout, group_size: int, step_weight: float = 1.0,
                           gamma: float = 1.0, scale: bool = True) -> jax.Array:
  """Episode GRPO term + step_weight * same-state step term, per trainable token: [B, K, W]."""
  step = step_group_advantages(ro, group_size, gamma, scale)
  return grpo_token_advantages(ro, group_size, scale) + step_weight * broadcast_turns(ro, step)
