"""Probe environments with analytically known values, for debugging learners (after Andy Jones'
"Debugging RL, Without the Agonizing Pain"; rejax uses the same idea in its tests).

  ProbeOneStep     one action, obs 0, one step, reward +1         V(s) = 1
  ProbeObsReward   one action, obs +-1, one step, reward = obs     V(+1) = +1, V(-1) = -1
  ProbeTwoStep     one action, obs 0 then 1, reward +1 at the end  V(0) = gamma, V(1) = 1
  ProbeAction      two actions, obs 0, one step, reward = +1 if a == 1 else -1
                                                                    pi(1) -> 1, V -> 1
  ProbeMasked      three actions, the best one masked: pi -> action 1, return 0.5
  ProbeTimeLimit   one action, obs 0, reward +1 forever, truncated after `max_steps_in_episode`
                                                                    V = 1 / (1 - gamma) (truncation
                                                                    must bootstrap, not zero)
  ProbeMemory      a cue +-1 shown at t = 0 only; at the last of `memory_length` steps the
                   action must name it (+1, else -1)   memory: return 1; any policy of the
                                                       current observation: 0 (the last
                                                       observation is the same for both cues)
  ProbeEntities    K entity slots [present, value]; pick the present entity of largest value
                   (+1, else 0); absent slots are masked            optimum 1, uniform ~0.5
  ProbeCoordination  multi-agent (`num_agents` slots, `live_agents` used, the rest masked):
                   at t = 0 each agent grabs (+grab_reward now) or waits; at t = 1 every agent
                   gets +meet_reward iff all live agents waited.  Greedy (immediate-reward)
                   play: grab_reward per agent; optimum: all wait, meet_reward per agent
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_suite.envs import arguments


@struct.dataclass
class ProbeState(environment.EnvState):
  obs: jax.Array
  time: int


@struct.dataclass
class ProbeParams(environment.EnvParams):
  max_steps_in_episode: int = 100


class _Probe(environment.Environment):
  n_actions = 1
  episode_length = 1

  @property
  def default_params(self) -> ProbeParams:
    return ProbeParams()

  def initial_obs(self, key):
    return jnp.zeros((), jnp.float32)

  def next_obs(self, state):
    return state.obs

  def reward(self, state, action):
    return jnp.ones((), jnp.float32)

  def reset_env(self, key, params):
    state = ProbeState(obs=self.initial_obs(key), time=0)
    return self.get_obs(state), state

  def step_env(self, key, state, action, params):
    reward = self.reward(state, action)
    state = ProbeState(obs=self.next_obs(state), time=state.time + 1)
    terminated = self.is_terminal(state, params)
    return self.get_obs(state), state, reward, terminated, {}

  def get_obs(self, state, params=None, key=None):
    return state.obs[None]

  def is_terminal(self, state, params):
    return jnp.asarray(state.time >= self.episode_length)

  def action_space(self, params=None):
    return spaces.Discrete(self.n_actions)

  def observation_space(self, params):
    return spaces.Box(-1.0, 1.0, (1,), jnp.float32)

  @property
  def num_actions(self) -> int:
    return self.n_actions


class ProbeOneStep(_Probe):
  pass


class ProbeObsReward(_Probe):

  def initial_obs(self, key):
    return jnp.where(jax.random.bernoulli(key), 1.0, -1.0).astype(jnp.float32)

  def reward(self, state, action):
    return state.obs


class ProbeTwoStep(_Probe):
  episode_length = 2

  def next_obs(self, state):
    return jnp.ones((), jnp.float32)

  def reward(self, state, action):
    return jnp.where(state.time == 1, 1.0, 0.0).astype(jnp.float32)


class ProbeAction(_Probe):
  n_actions = 2

  def reward(self, state, action):
    return jnp.where(action == 1, 1.0, -1.0).astype(jnp.float32)


class ProbeMasked(_Probe):
  """Three actions; action 2 would pay +1 but is always masked, action 1 pays +0.5, action 0 -1.

  A learner that honours `action_mask` converges to action 1 and never earns more than 0.5.
  """
  n_actions = 3

  def reward(self, state, action):
    return jnp.select([action == 2, action == 1], [1.0, 0.5], -1.0).astype(jnp.float32)

  def action_mask(self, state, params):
    return jnp.array([True, True, False])


class ProbeTimeLimit(_Probe):
  episode_length = 10**9  # never terminates; only the time limit ends an episode

  @property
  def default_params(self) -> ProbeParams:
    return ProbeParams(max_steps_in_episode=5)


@struct.dataclass
class MemoryState(environment.EnvState):
  cue: jax.Array      # 0 or 1
  time: int


@struct.dataclass
class MemoryParams(environment.EnvParams):
  memory_length: int = 4         # steps per episode; the cue is shown at t = 0 only
  max_steps_in_episode: int = 100


class ProbeMemory(environment.Environment):
  """obs = [cue sign at t = 0 else 0, t / memory_length]; two actions."""

  @property
  def default_params(self) -> MemoryParams:
    return MemoryParams()

  def reset_env(self, key, params):
    state = MemoryState(cue=jax.random.bernoulli(key).astype(jnp.int32), time=0)
    return self.get_obs(state, params), state

  def get_obs(self, state, params=None, key=None):
    params = self.default_params if params is None else params
    cue = jnp.where(state.time == 0, 2.0 * state.cue - 1.0, 0.0)
    return jnp.stack([cue, state.time / params.memory_length]).astype(jnp.float32)

  def step_env(self, key, state, action, params):
    last = state.time == params.memory_length - 1
    reward = jnp.where(last, jnp.where(action == state.cue, 1.0, -1.0), 0.0).astype(jnp.float32)
    state = state.replace(time=state.time + 1)
    return self.get_obs(state, params), state, reward, self.is_terminal(state, params), {}

  def is_terminal(self, state, params):
    return jnp.asarray(state.time >= params.memory_length)

  def action_space(self, params=None):
    return spaces.Discrete(2)

  def observation_space(self, params):
    return spaces.Box(-1.0, 1.0, (2,), jnp.float32)

  @property
  def num_actions(self) -> int:
    return 2


@struct.dataclass
class EntitiesState(environment.EnvState):
  present: jax.Array   # [K] bool
  value: jax.Array     # [K]
  time: int


@struct.dataclass
class EntitiesParams(environment.EnvParams):
  min_entities: int = 1
  max_steps_in_episode: int = 1


class ProbeEntities(environment.Environment):
  """One step; obs [K, 2] = (present, value); action = a slot; masked: absent slots."""

  def __init__(self, num_slots: int = 4):
    super().__init__()
    self.k = num_slots

  @property
  def default_params(self) -> EntitiesParams:
    return EntitiesParams()

  def reset_env(self, key, params):
    k_n, k_perm, k_v = jax.random.split(key, 3)
    n = jax.random.randint(k_n, (), params.min_entities, self.k + 1)
    present = jax.random.permutation(k_perm, jnp.arange(self.k) < n)
    state = EntitiesState(present=present, value=jax.random.uniform(k_v, (self.k,)), time=0)
    return self.get_obs(state), state

  def get_obs(self, state, params=None, key=None):
    return jnp.stack([state.present.astype(jnp.float32),
                      jnp.where(state.present, state.value, 0.0)], -1)

  def step_env(self, key, state, action, params):
    best = jnp.argmax(jnp.where(state.present, state.value, -1.0))
    reward = (action == best).astype(jnp.float32)
    state = state.replace(time=state.time + 1)
    return self.get_obs(state), state, reward, jnp.array(True), {}

  def is_terminal(self, state, params):
    return jnp.array(True)

  def action_mask(self, state, params):
    return state.present

  def action_space(self, params=None):
    return spaces.Discrete(self.k)

  def observation_space(self, params):
    return spaces.Box(0.0, 1.0, (self.k, 2), jnp.float32)

  @property
  def num_actions(self) -> int:
    return self.k


@struct.dataclass
class CoordState(environment.EnvState):
  waited: jax.Array    # [N] bool: the agent waited at t = 0
  time: int


@struct.dataclass
class CoordParams(environment.EnvParams):
  live_agents: int = 2           # agent slots in use; the rest are masked (padding)
  grab_reward: float = 0.5
  meet_reward: float = 2.0
  max_steps_in_episode: int = 10


class ProbeCoordination(environment.Environment):
  """Two-step coordination game with a leading agent axis: obs [N, 3] = (t == 0, t == 1,
  waited), rewards [N], one shared episode end; action 0 = grab, 1 = wait."""

  def __init__(self, num_agents: int = 3):
    super().__init__()
    self.num_agents = num_agents

  @property
  def default_params(self) -> CoordParams:
    return CoordParams()

  def reset_env(self, key, params):
    state = CoordState(waited=jnp.zeros(self.num_agents, bool), time=0)
    return self.get_obs(state), state

  def get_obs(self, state, params=None, key=None):
    t = jnp.full(self.num_agents, state.time)
    return jnp.stack([t == 0, t == 1, state.waited], -1).astype(jnp.float32)

  def agent_mask(self, state, params):
    return jnp.arange(self.num_agents) < params.live_agents

  def step_env(self, key, state, action, params):
    live = self.agent_mask(state, params)
    first = state.time == 0
    grab = jnp.where(first & (action == 0), params.grab_reward, 0.0)
    all_waited = jnp.all(state.waited | ~live)
    meet = jnp.where(~first & all_waited, params.meet_reward, 0.0)
    reward = jnp.where(live, grab + meet, 0.0).astype(jnp.float32)
    waited = jnp.where(first, action == 1, state.waited)
    state = CoordState(waited=waited & live, time=state.time + 1)
    return self.get_obs(state), state, reward, self.is_terminal(state, params), {}

  def is_terminal(self, state, params):
    return jnp.asarray(state.time >= 2)

  def action_space(self, params=None):
    return spaces.Discrete(2)

  def observation_space(self, params):
    return spaces.Box(0.0, 1.0, (self.num_agents, 3), jnp.float32)

  @property
  def num_actions(self) -> int:
    return 2


PROBES = {"ProbeMemory-v0": ProbeMemory, "ProbeEntities-v0": ProbeEntities,
          "ProbeCoordination-v0": ProbeCoordination, "ProbeOneStep-v0": ProbeOneStep,
          "ProbeObsReward-v0": ProbeObsReward, "ProbeTwoStep-v0": ProbeTwoStep,
          "ProbeAction-v0": ProbeAction, "ProbeMasked-v0": ProbeMasked,
          "ProbeTimeLimit-v0": ProbeTimeLimit}


def params_type(name: str) -> type:
  """The params dataclass of probe `name` (its fields are `make_probe` keywords)."""
  return {ProbeMemory: MemoryParams, ProbeEntities: EntitiesParams,
          ProbeCoordination: CoordParams}.get(PROBES[name], ProbeParams)


def make_probe(name: str, **kwargs):
  """(env, env_params) of probe `name`. Keywords: the env's constructor arguments (num_slots of
  ProbeEntities, num_agents of ProbeCoordination: static shapes) and its params fields
  (max_steps_in_episode, memory_length, live_agents, ...). A wrong keyword raises ValueError
  (envs.arguments.check) naming it and the valid ones."""
  if name not in PROBES:
    raise ValueError(f"unknown probe {name!r}; valid: {', '.join(sorted(PROBES))}")
  arguments.check(name, kwargs, arguments.valid_from((PROBES[name], params_type(name))))
  ctor = set(inspect.signature(PROBES[name].__init__).parameters) - {"self"}
  env = PROBES[name](**{k: v for k, v in kwargs.items() if k in ctor})
  return env, env.default_params.replace(**{k: v for k, v in kwargs.items() if k not in ctor})
