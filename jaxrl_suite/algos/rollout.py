"""Vectorised rollouts of an actor-critic in a gymnax environment, with `lax.scan`.

Handles the three things every on-policy learner here needs from the environment:
  * observations flattened to [num_envs, obs_dim] (MinAtar gives [10, 10, C]);
  * action masks, from `env.action_mask(env_state, params)` when the environment defines one;
  * gymnax 1.x truncation: the value of the true next state comes from
    `info["final_observation"]`, so GAE can bootstrap through time limits.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.struct as struct
import gymnax.wrappers
import jax
import jax.numpy as jnp

from jaxrl_suite.core.losses import categorical_log_prob
from jaxrl_suite.core.networks import apply_action_mask


@struct.dataclass
class Transition:
  """One vectorised step; every field has leading shape [num_envs] (time-major after scan)."""
  obs: jax.Array            # [E, D]
  action: jax.Array         # [E]
  log_prob: jax.Array       # [E]
  value: jax.Array          # [E]
  reward: jax.Array         # [E]
  final_obs: jax.Array      # [E, D] observation before auto-reset (== next obs unless done)
  terminated: jax.Array     # [E]
  done: jax.Array           # [E] terminated | truncated
  mask: jax.Array | None    # [E, A] valid actions; None when the env has no action mask
  episode_return: jax.Array  # [E] return of the episode finished at this step (0 otherwise)
  episode_done: jax.Array   # [E] an episode finished at this step


@struct.dataclass
class EnvCarry:
  env_state: Any
  obs: jax.Array   # [E, D] flattened
  mask: jax.Array | None  # [E, A]; None when the env defines no `action_mask`


class VecEnv:
  """A gymnax env under LogWrapper, vmapped over `num_envs`, with flattening and masks."""

  def __init__(self, env, env_params, num_envs: int):
    self.raw_env = env
    self.env = gymnax.wrappers.LogWrapper(env)
    self.params = env_params
    self.num_envs = num_envs
    self.num_actions = int(env.action_space(env_params).n)
    self.has_mask = hasattr(env, "action_mask")

  def _flat(self, obs):
    return obs.reshape((self.num_envs, -1)).astype(jnp.float32)

  def _mask(self, log_state):
    if not self.has_mask:
      return None  # nothing to store, shuffle or apply: a measurable saving on tiny envs
    return jax.vmap(self.raw_env.action_mask, in_axes=(0, None))(log_state.env_state, self.params)

  def reset(self, key) -> EnvCarry:
    obs, state = jax.vmap(self.env.reset, in_axes=(0, None))(
        jax.random.split(key, self.num_envs), self.params)
    return EnvCarry(state, self._flat(obs), self._mask(state))

  def step(self, key, carry: EnvCarry, action):
    obs, state, reward, terminated, truncated, info = jax.vmap(
        self.env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(key, self.num_envs), carry.env_state, action, self.params)
    new = EnvCarry(state, self._flat(obs), self._mask(state))
    return new, reward.astype(jnp.float32), terminated, truncated, info

  @property
  def obs_dim(self) -> int:
    shape = self.env.observation_space(self.params).shape
    size = 1
    for s in shape:
      size *= int(s)
    return size


def collect(apply_fn: Callable, params, vec: VecEnv, carry: EnvCarry, key, num_steps: int):
  """Runs `num_steps` vectorised steps of the stochastic policy.

  `apply_fn(params, obs [E, D]) -> (logits [E, A], value [E])`.
  Returns (carry, key, Transition with leading [num_steps, num_envs]).
  """

  def step(state, _):
    carry, key = state
    key, k_act, k_env = jax.random.split(key, 3)
    logits, value = apply_fn(params, carry.obs)
    logits = apply_action_mask(logits, carry.mask)
    action = jax.random.categorical(k_act, logits)
    log_prob = categorical_log_prob(logits, action)
    new_carry, reward, terminated, truncated, info = vec.step(k_env, carry, action)
    done = jnp.logical_or(terminated, truncated)
    tr = Transition(obs=carry.obs, action=action, log_prob=log_prob, value=value, reward=reward,
                    final_obs=vec._flat(info["final_observation"]), terminated=terminated,
                    done=done, mask=carry.mask,
                    episode_return=info["returned_episode_returns"] * info["returned_episode"],
                    episode_done=info["returned_episode"])
    return (new_carry, key), tr

  (carry, key), traj = jax.lax.scan(step, (carry, key), None, num_steps)
  return carry, key, traj


def next_values(apply_fn: Callable, params, traj: Transition, last_obs: jax.Array) -> jax.Array:
  """V of the true successor of every step, [T, E].

  V(s_{t+1}) is the next step's value, except where the episode ended: there the returned
  observation belongs to the reset episode, so the successor is `final_obs` (this is what lets
  GAE bootstrap through truncation). One batched critic call after the scan is much cheaper on
  CPU than a second call inside it.
  """
  _, v_last = apply_fn(params, last_obs)
  shifted = jnp.concatenate([traj.value[1:], v_last[None]], axis=0)
  _, v_final = apply_fn(params, traj.final_obs)
  return jnp.where(traj.done, v_final, shifted)


def episode_stats(traj: Transition) -> dict[str, jax.Array]:
  """Mean return of the episodes that finished during `traj`, and their count (NaN if none)."""
  n = jnp.sum(traj.episode_done)
  mean = jnp.sum(traj.episode_return) / jnp.maximum(n, 1)
  return {"episode_return": jnp.where(n > 0, mean, jnp.nan), "episodes": n}
