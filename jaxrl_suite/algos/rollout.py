"""Vectorised rollouts of any agent (`algos/agent.py`) in a gymnax environment, with `lax.scan`.

Handles what every on-policy learner here needs from the environment:
  * observations flattened to rows: [num_envs, obs_dim] (MinAtar gives [10, 10, C]);
  * multi-agent environments (`env.num_agents` > 1): observations [N, ...], rewards [N] and an
    optional `env.agent_mask(state, params) -> bool[N]` per env; the agent axis is folded into
    the rows (B = num_envs * N, env-major) and each row sees {"obs": own observation,
    "agent_id": one-hot [N]} plus, with `centralised=True` (MAPPO), "global": every agent's
    observation of that env, flattened [N * D];
  * action masks, from `env.action_mask(env_state, params)` when the environment defines one;
  * gymnax 1.x truncation: `info["final_observation"]` is kept, so GAE can bootstrap through
    time limits from V of the true successor;
  * episode statistics with LogWrapper's arithmetic (returns summed over agents).
"""

from __future__ import annotations

from typing import Any

import flax.struct as struct
import jax
import jax.numpy as jnp

from jaxrl_suite.algos.agent import Agent


@struct.dataclass
class Transition:
  """One vectorised step; leaves have leading [B] rows (time-major [T, B] after the scan)."""
  record: Any               # the agent's record of the action (e.g. the observation)
  action: jax.Array         # [B, ...]
  log_prob: jax.Array       # [B]
  value: jax.Array          # [B]
  reward: jax.Array         # [B]
  final_obs: Any            # [B, D] observation before auto-reset (== next obs unless done)
  terminated: jax.Array     # [B]
  done: jax.Array           # [B] terminated | truncated
  done_prev: jax.Array      # [B] this step starts an episode (recurrent carries reset here)
  mask: jax.Array | None    # [B, A] valid actions; None when the env has no action mask
  weight: jax.Array | None  # [B] 1.0 for live agents; None for single-agent envs
  label: Any                # agent.label(env_state) or None
  carry: Any                # carry after the step (recurrent agents' bootstrap); () otherwise
  logs: dict                # the agent's per-step logs
  episode_sums: dict        # per-step scalars over the episodes that finished at this step:
                            # n, return, length and each `episode_info` field


@struct.dataclass
class EnvCarry:
  env_state: Any
  obs: jax.Array            # [B, D] flattened rows
  mask: jax.Array | None    # [B, A]; None when the env defines no `action_mask`
  weight: jax.Array | None  # [B]; None for single-agent envs
  done_prev: jax.Array      # [B]
  agent_carry: Any          # the agent's carry [B, ...]
  episode_returns: jax.Array  # [E] running return (LogWrapper's fields)
  episode_lengths: jax.Array
  returned_episode_returns: jax.Array
  returned_episode_lengths: jax.Array


class VecEnv:
  """A gymnax env vmapped over `num_envs`, with flattening, agent folding and masks."""

  def __init__(self, env, env_params, num_envs: int, centralised: bool = False):
    self.raw_env = env
    self.params = env_params
    self.num_envs = num_envs
    self.num_agents = int(getattr(env, "num_agents", 1))
    self.multi_agent = self.num_agents > 1
    self.centralised = centralised
    self.num_rows = num_envs * self.num_agents
    space = env.action_space(env_params)
    # None for non-Discrete spaces (an agent that emits structured actions, e.g. ballast_v2)
    self.num_actions = int(space.n) if hasattr(space, "n") else None
    self.has_mask = hasattr(env, "action_mask")
    self.has_agent_mask = hasattr(env, "agent_mask")
    shape = tuple(int(s) for s in env.observation_space(env_params).shape)
    self.obs_shape = shape[1:] if self.multi_agent else shape   # one agent's observation

  @property
  def obs_dim(self) -> int:
    size = 1
    for s in self.obs_shape:
      size *= s
    return size

  def _flat(self, obs):
    return obs.reshape((self.num_rows, -1)).astype(jnp.float32)

  def _mask(self, state):
    if not self.has_mask:
      return None  # nothing to store, shuffle or apply: a measurable saving on tiny envs
    m = jax.vmap(self.raw_env.action_mask, in_axes=(0, None))(state, self.params)
    return m.reshape((self.num_rows, -1))

  def _weight(self, state):
    if not self.multi_agent:
      return None
    if not self.has_agent_mask:
      return jnp.ones(self.num_rows, jnp.float32)
    m = jax.vmap(self.raw_env.agent_mask, in_axes=(0, None))(state, self.params)
    return m.reshape(self.num_rows).astype(jnp.float32)

  def rows(self, x):
    """Per-env [E, ...] -> per-row [B, ...] (each env's value repeated for its agents)."""
    if not self.multi_agent:
      return x
    return jnp.repeat(x, self.num_agents, axis=0)

  def view(self, flat):
    """What the agent sees for rows of flat observations [..., B, D]: the array itself for a
    single agent, else the dict described in the module docstring."""
    if not self.multi_agent:
      return flat
    lead = flat.shape[:-2]
    n = self.num_agents
    ids = jnp.broadcast_to(jnp.eye(n, dtype=jnp.float32), lead + (self.num_envs, n, n))
    out = {"obs": flat.reshape(lead + (self.num_rows,) + self.obs_shape),
           "agent_id": ids.reshape(lead + (self.num_rows, n))}
    if self.centralised:
      per_env = flat.reshape(lead + (self.num_envs, 1, n * flat.shape[-1]))
      out["global"] = jnp.broadcast_to(per_env, lead + (self.num_envs, n, n * flat.shape[-1])
                                       ).reshape(lead + (self.num_rows, -1))
    return out

  def reset(self, key, agent: Agent) -> EnvCarry:
    obs, state = jax.vmap(self.raw_env.reset, in_axes=(0, None))(
        jax.random.split(key, self.num_envs), self.params)
    e = self.num_envs
    zf, zi = jnp.zeros(e, jnp.float32), jnp.zeros(e, jnp.int32)
    return EnvCarry(state, self._flat(obs), self._mask(state), self._weight(state),
                    jnp.ones(self.num_rows, bool), agent.initial_carry(self.num_rows),
                    zf, zi, zf, zi)

  def step(self, key, carry: EnvCarry, action):
    action = action.reshape((self.num_envs,) + (self.num_agents,) * self.multi_agent
                            + action.shape[1:])
    obs, state, reward, terminated, truncated, info = jax.vmap(
        self.raw_env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(key, self.num_envs), carry.env_state, action, self.params)
    reward = reward.astype(jnp.float32)
    done = jnp.logical_or(terminated, truncated)
    # LogWrapper's bookkeeping, the same arithmetic (so its metrics are reproduced exactly)
    team = reward.sum(-1) if self.multi_agent else reward
    new_ret = carry.episode_returns + team
    new_len = carry.episode_lengths + 1
    new = carry.replace(
        env_state=state, obs=self._flat(obs), mask=self._mask(state), weight=self._weight(state),
        done_prev=self.rows(done),
        episode_returns=new_ret * (1 - done), episode_lengths=new_len * (1 - done),
        returned_episode_returns=carry.returned_episode_returns * (1 - done) + new_ret * done,
        returned_episode_lengths=carry.returned_episode_lengths * (1 - done) + new_len * done)
    return new, reward.reshape(self.num_rows), terminated, truncated, done, info


def collect(agent: Agent, params, vec: VecEnv, carry: EnvCarry, key, num_steps: int,
            episode_info: tuple[str, ...] = ()):
  """Runs `num_steps` vectorised steps of the agent's stochastic policy.

  `episode_info` names boolean / numeric `info` fields (e.g. "success") summed per step over
  finished episodes for the rates in `episode_stats`.

  Returns (carry, key, Transition with leading [num_steps, B]).
  """

  def step(state, _):
    carry, key = state
    key, k_act, k_env = jax.random.split(key, 3)
    out = agent.act(params, carry.agent_carry, vec.view(carry.obs), carry.done_prev, k_act,
                    carry.mask)
    label = None if agent.label is None else agent.label(carry.env_state)
    new_carry, reward, terminated, truncated, done, info = vec.step(k_env, carry, out.action)
    new_carry = new_carry.replace(agent_carry=out.carry)
    final_obs = vec._flat(info["final_observation"])
    sums = {"n": jnp.sum(done.astype(jnp.int32)),
            "return": jnp.sum(new_carry.returned_episode_returns * done),
            "length": jnp.sum(new_carry.returned_episode_lengths * done)}
    for k in episode_info:
      sums[k] = jnp.sum(jnp.where(done, info[k], 0).astype(jnp.int32))
    tr = Transition(
        record=out.record, action=out.action, log_prob=out.log_prob, value=out.value,
        reward=reward, final_obs=final_obs,
        terminated=vec.rows(terminated), done=vec.rows(done), done_prev=carry.done_prev,
        mask=carry.mask, weight=carry.weight, label=label,
        carry=out.carry if agent.recurrent else (), logs=out.logs,
        episode_sums=sums)
    return (new_carry, key), tr

  (carry, key), traj = jax.lax.scan(step, (carry, key), None, num_steps)
  return carry, key, traj


def next_values(agent: Agent, params, vec: VecEnv, traj: Transition, carry: EnvCarry):
  """V of the true successor of every step, [T, B].

  V(s_{t+1}) is the next step's value, except where the episode ended: there the returned
  observation belongs to the reset episode, so the successor is `final_obs` (this is what lets
  GAE bootstrap through truncation). One batched critic call after the scan is much cheaper on
  CPU than a second call inside it. A recurrent agent scores `final_obs` from its carry after
  the step, and the last observation from the rollout's final carry (no reset: a reset row's
  value is never used, `done` selects `final_obs` there).
  """
  v_last = agent.value(params, carry.agent_carry, vec.view(carry.obs))
  shifted = jnp.concatenate([traj.value[1:], v_last[None]], axis=0)
  t, b = traj.value.shape
  flat = lambda x: x.reshape((t * b,) + x.shape[2:])
  c = jax.tree.map(flat, traj.carry)
  v_final = agent.value(params, c, jax.tree.map(flat, vec.view(traj.final_obs))).reshape(t, b)
  return jnp.where(traj.done, v_final, shifted)


def episode_stats(traj: Transition) -> dict[str, jax.Array]:
  """Over the episodes that finished during `traj`: mean return, mean length, the mean of each
  `episode_info` field (as `<name>_rate`), and their count; NaN where none finished. The
  per-step sums are accumulated in time order (a fixed float order)."""
  tot = jax.lax.scan(lambda c, s: (jax.tree.map(jnp.add, c, s), None),
                     jax.tree.map(lambda x: jnp.zeros((), x.dtype), traj.episode_sums),
                     traj.episode_sums)[0]
  n = tot.pop("n")
  denom = jnp.maximum(n, 1)
  mean = lambda x: jnp.where(n > 0, x / denom, jnp.nan)
  out = {"episode_return": mean(tot.pop("return")), "episode_length": mean(tot.pop("length")),
         "episodes": n}
  out.update({f"{k}_rate": mean(v) for k, v in tot.items()})
  return out
