"""Generalised advantage estimation with gymnax 1.x termination semantics.

gymnax 1.x distinguishes `terminated` (the MDP ended: the value of the next state is 0) from
`truncated` (a time limit cut the episode: the next state still has value, and its observation is
`info["final_observation"]`, because the returned observation already belongs to the reset
episode). GAE therefore needs two masks:

  delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
  A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}

where V(s'_t) is the value of the true next state (of final_observation when done_t), and
done_t = terminated_t or truncated_t stops the trace from crossing episode boundaries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def gae(rewards: Array, values: Array, next_values: Array, terminated: Array, dones: Array,
        gamma: float, lam: float) -> tuple[Array, Array]:
  """Computes GAE advantages and value targets, time-major.

  Args:
    rewards: [T, ...] r_t.
    values: [T, ...] V(s_t).
    next_values: [T, ...] V(s'_t) of the true successor state (on truncation: the value of
      info["final_observation"], not of the reset observation).
    terminated: [T, ...] bool/0-1, true when s'_t is terminal (bootstrap zeroed).
    dones: [T, ...] bool/0-1, terminated or truncated (trace cut).
    gamma: discount.
    lam: GAE lambda.
  Returns:
    (advantages [T, ...], targets = advantages + values [T, ...]).
  """
  not_term = 1.0 - terminated.astype(rewards.dtype)
  not_done = 1.0 - dones.astype(rewards.dtype)
  deltas = rewards + gamma * not_term * next_values - values

  def step(carry, xs):
    delta, nd = xs
    adv = delta + gamma * lam * nd * carry
    return adv, adv

  # unroll: the body is a few flops, so loop overhead dominates on CPU without it.
  _, adv = jax.lax.scan(step, jnp.zeros_like(deltas[0]), (deltas, not_done), reverse=True,
                        unroll=16)
  return adv, adv + values


def discounted_returns(rewards: Array, dones: Array, gamma: float,
                       bootstrap: Array | None = None) -> Array:
  """Monte-Carlo returns G_t = r_t + gamma * (1 - done_t) * G_{t+1}, time-major [T, ...].

  `bootstrap` ([...], default 0) is the value used after the last step of a cut rollout.
  """
  not_done = 1.0 - dones.astype(rewards.dtype)
  init = jnp.zeros_like(rewards[0]) if bootstrap is None else bootstrap

  def step(carry, xs):
    r, nd = xs
    g = r + gamma * nd * carry
    return g, g

  _, g = jax.lax.scan(step, init, (rewards, not_done), reverse=True)
  return g
