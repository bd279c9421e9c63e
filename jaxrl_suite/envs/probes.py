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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


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


PROBES = {"ProbeOneStep-v0": ProbeOneStep, "ProbeObsReward-v0": ProbeObsReward,
          "ProbeTwoStep-v0": ProbeTwoStep, "ProbeAction-v0": ProbeAction,
          "ProbeMasked-v0": ProbeMasked,
          "ProbeTimeLimit-v0": ProbeTimeLimit}


def make_probe(name: str):
  env = PROBES[name]()
  return env, env.default_params
