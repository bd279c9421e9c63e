"""gymnax boilerplate shared by the serving environments (one place for the spaces and name)."""

from __future__ import annotations

import flax.struct as struct
import jax
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


class EventEnv(ServingEnv):
  """A serving env driven by the event engine (engine.py): one step is `act` (apply the decision,
  return the horizon), the GPU events up to the horizon, then `finish`. Its state has `eng`,
  `req`, `t`, `n_good` and `time`. `evaluate.rollout_events` calls the same three pieces, event by
  event, so vmapped lanes need not wait for each other inside a step.

  fast_forward: book runs of identical pure-decode iterations as one exact event (engine.py);
  False simulates one event per iteration (same results, ~10x more events).
  window: most requests in flight in the engine (engine.py; None = the whole episode). Each
  event costs O(window), so long steady-state replays (table_size in the thousands) use a
  window above the requests in flight; an arrival beyond it is rejected and counted.
  """

  def __init__(self, table_size: int, max_events: int, fast_forward: bool = True,
               window: int | None = None):
    super().__init__()
    self.table_size = table_size
    self.window = engine.window_size(table_size, window)
    self.slots = engine.physical_slots(table_size, window)
    self.max_events = max_events   # events per step before the step is cut (counted in cap_hits)
    self.fast_forward = fast_forward

  @property
  def windowed(self) -> bool:
    """True when requests leave the engine's table during the episode (slots < table_size)."""
    return self.slots < self.table_size

  def entries(self, state, params) -> jax.Array:
    """Requests the next `act` offers to the engine (routing: 1 until all are routed)."""
    return (state.nxt < self.table_size).astype(jnp.int32)

  def room(self, state, params) -> jax.Array:
    """Whether the next `act`'s entries fit in the table without compacting it first."""
    return state.eng.hi + self.entries(state, params) <= self.slots

  def process_event(self, state, g, te, horizon, params):
    """Ends GPU g's iteration (or decode span) at te: (state, requests finished within the SLO)."""
    del horizon   # spans run across decisions; `act` cuts the GPUs a decision changes
    eng, good, _ = engine.process_event(state.eng, params.hw, g, te, params.slo_ttft,
                                        params.slo_tpot, fast_forward=self.fast_forward)
    return state.replace(eng=eng), good

  def finish(self, state, horizon, n_good, params):
    """Second half of a step, after the events up to `horizon`: (obs, state, reward, done, info)."""
    state = state.replace(t=horizon, n_good=state.n_good + n_good, time=state.time + 1)
    done = self.is_terminal(state, params)
    info = {"n_good": state.n_good, "cap_hits": state.eng.cap_hits}
    return (jax.lax.stop_gradient(self.get_obs(state, params)), jax.lax.stop_gradient(state),
            n_good.astype(jnp.float32), done, info)

  def step_env(self, key, state, action, params):
    if self.windowed:
      state = state.replace(eng=engine.compact_in_place(state.eng, ~self.room(state, params)))
    state, horizon = self.act(state, action, params)
    eng, n_good, _ = engine.run_until(state.eng, params.hw, horizon, self.max_events,
                                      params.slo_ttft, params.slo_tpot, self.fast_forward)
    return self.finish(state.replace(eng=eng), horizon, n_good, params)

  def is_terminated(self, state, params) -> jax.Array:
    """Every request has entered the window (`state.nxt` = K) and none is still in flight."""
    return (state.nxt >= self.table_size) & (engine.in_flight(state.eng) == 0)

  def is_terminal(self, state, params) -> jax.Array:
    return self.is_terminated(state, params)
