"""The agent interface of the one on-policy learner (`algos/on_policy.py`).

An agent is a NamedTuple of pure functions over batched arrays (B rows = envs, or envs x agents
in a multi-agent environment). The learner never looks inside params, carries or records:

  init(key, obs [B, ...]) -> params
  initial_carry(batch: int) -> carry            leading axis [B]; () for feed-forward agents
  act(params, carry, obs [B, ...], done_prev [B] bool, key, mask [B, A] | None) -> Step
      samples an action; `done_prev` marks rows whose episode (re)started at this step, so a
      recurrent agent resets its carry there. Step.record is all `evaluate` needs to re-score
      the action (the observation, or precomputed features); Step.logs {name: [B]} are
      averaged over the rollout into the update's metrics.
  evaluate(params, carry0, seq: Transition) -> Eval(log_prob, entropy, value, aux_loss)
      under new params. Feed-forward agents get flat rows, seq leaves [N, ...], carry0 = ();
      recurrent agents get whole env sequences, seq leaves [T, B, ...] and carry0 [B, ...] the
      carry at the start of the rollout (the learner then minibatches over envs, never time).
  value(params, carry, obs [B, ...]) -> [B]     V of an observation reached with `carry`
      (the bootstrap of `final_obs` at truncations; carry = the carry after the step).
  label(env_state) -> labels [B, ...] (optional): privileged labels stored in the rollout for
      `evaluate`'s auxiliary loss (never observed by the policy).
  recurrent: bool; module: the flax module (for inspection), or None.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp


class Step(NamedTuple):
  carry: Any
  action: jax.Array      # [B, ...] what the environment receives
  log_prob: jax.Array    # [B]
  value: jax.Array       # [B]
  record: Any            # pytree with leading [B]
  logs: dict             # {name: [B]}


class Eval(NamedTuple):
  log_prob: jax.Array    # [...]
  entropy: jax.Array     # [...]
  value: jax.Array       # [...]
  aux_loss: jax.Array    # scalar; 0 for agents without an auxiliary loss


class Agent(NamedTuple):
  init: Callable
  initial_carry: Callable
  act: Callable
  evaluate: Callable
  value: Callable
  label: Callable | None = None
  recurrent: bool = False
  module: Any = None
  policy: Callable | None = None   # policy(params, obs [..., D], key, mask, greedy) -> action


def no_carry(batch: int):
  """The carry of a feed-forward agent."""
  del batch
  return ()


ZERO = jnp.zeros((), jnp.float32)
