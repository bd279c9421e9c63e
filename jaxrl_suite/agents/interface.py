"""The agent interface of the one on-policy learner (`algos/on_policy.py`).

It lives in agents/ because every agent implements it and agents/ sits below algos/ in the layer
order (ARCHITECTURE.md): the learner imports agents, never the reverse.

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


def feed_forward(init: Callable, apply: Callable, module: Any = None,
                 single_agent_policy: bool = True) -> Agent:
  """A feed-forward categorical agent from `apply(params, obs) -> (logits [B, A], value [B])`.

  record = the observation rows; act samples from the masked logits; evaluate re-scores the
  recorded actions; `policy(params, obs, key, mask=None, greedy=False)` has the heuristic-
  policy signature (single-agent observations; None when `single_agent_policy` is False).
  """
  from jaxrl_suite.core import losses
  from jaxrl_suite.core.networks import apply_action_mask

  def act(params, carry, obs, done_prev, key, mask=None):
    del done_prev
    logits, value = apply(params, obs)
    logits = apply_action_mask(logits, mask)
    action = jax.random.categorical(key, logits)
    return Step(carry, action, losses.categorical_log_prob(logits, action), value, obs, {})

  def evaluate(params, carry0, seq):
    del carry0
    logits, value = apply(params, seq.record)
    logits = apply_action_mask(logits, seq.mask)
    return Eval(losses.categorical_log_prob(logits, seq.action),
                losses.categorical_entropy(logits), value, ZERO)

  def value(params, carry, obs):
    del carry
    return apply(params, obs)[1]

  def policy(params, obs, key, mask=None, greedy: bool = False):
    """obs [..., D] -> action [...]."""
    logits, _ = apply(params, obs.reshape(obs.shape[:-1] + (-1,)).astype(jnp.float32))
    logits = apply_action_mask(logits, mask)
    return jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)

  return Agent(init, no_carry, act, evaluate, value, module=module,
               policy=policy if single_agent_policy else None)
