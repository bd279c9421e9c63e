"""gymnax boilerplate shared by the serving environments (one place for the spaces and name)."""

from __future__ import annotations

import flax.struct as struct
import jax.numpy as jnp
from gymnax.environments import environment, spaces

from jaxrl_suite.envs.serving import engine, workload


@struct.dataclass
class ServingParams:
  """Params every serving env shares: hardware, workload replay knobs and the SLO."""
  hw: engine.Hardware
  trace: workload.TraceArrays
  rate_scale: float = 1.0
  rate_mults: tuple = (1.0,)     # load multipliers; reset draws one per episode
  window_start: int = -1         # -1: a random window per episode
  pred_acc: float = 0.8          # accuracy of the output-length bucket predictor
  slo_ttft: float = 2.0          # s
  slo_tpot: float = 0.2          # s per output token after the first
  max_steps_in_episode: int = 4096


class ServingEnv(environment.Environment):
  """A gymnax env with `Discrete(num_actions)` actions and a float32 `Box(obs_low, obs_high,
  (obs_dim,))` observation. Subclasses set `env_name`, `obs_dim` and `_num_actions` (or override
  the `num_actions` property) and may narrow the bounds."""

  env_name: str = ""
  obs_low: float = -10.0
  obs_high: float = 100.0
  obs_dim: int
  _num_actions: int

  @property
  def name(self) -> str:
    return self.env_name

  @property
  def num_actions(self) -> int:
    return self._num_actions

  def action_space(self, params=None) -> spaces.Discrete:
    return spaces.Discrete(self.num_actions)

  def observation_space(self, params=None) -> spaces.Box:
    return spaces.Box(self.obs_low, self.obs_high, (self.obs_dim,), jnp.float32)
