"""RailRM-v0: multi-agent dynamic pricing of trains on a line (pure gymnax 1.x environment).

Agents are trains (A <= A_MAX = 12 slots, padded per instance; `agent_mask` marks real ones). Each of H booking periods:

  1. every train sets one fare multiplier on its base fare vector: price[a, m] =
     base_fare[m] * min(mult[a], cap_mult[m]) (regulated caps). Two action forms (constructor):
       "bucket": Discrete(L) per train, mult = levels[k] (L = 8 buckets 0.8 ... 1.5);
       "delta":  Discrete(3) per train, mult <- clip(mult * (1 + (k - 1) * delta_step)), the
                 paper's +/-5% per period.
  2. arrivals per market and segment N ~ Poisson(lam[m, g] * w[g, h] * level * shock), where
     `shock` is a per-episode lognormal demand level (hidden) and `level` the scenario's demand
     level (the held-out shift); MNL choice among available trains plus an outside option;
     Poisson splitting; proportional rationing on every leg (see `demand`); optionally one
     recapture round in which spilled passengers re-choose among trains with seats left.
  3. reward per train [A]: own revenue ("agent"), the operator's revenue ("operator"), or own
     revenue + welfare_weight * consumer surplus / n_agents ("welfare"); times reward_scale.

Observation [A_MAX, A_MAX, F] (leading axis: the observing train i; second: entity tokens j):
  public features of every train j (price multiplier, departure time, operator one-hot, the
  stations it stops at, periods to go), private features only on j == i (remaining seats
  per leg / capacity, last period's bookings per leg / capacity, cumulative revenue, load so
  far), the relation of j to i (self, same market, same operator, overlapping legs, connecting)
  and j's validity bit. Other trains' sales and capacity are masked, as in the paper's code.
  `token_fields()` names the columns; `own_features(obs)` is the MLP ablation's input;
  column "rel_type" is the relation as one integer type (for relation-type embeddings).

The episode terminates after H periods (departure). `info` carries the per-period metrics the
evaluators sum: revenue [A], bookings per segment [G], consumer surplus, spill, seat-km sold.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_suite.envs.rail import demand, information as info_mod
from jaxrl_suite.envs.rail.instance import G, H, LEVELS, M_MAX, NL_MAX, O_MAX, S_MAX

REWARD_MODES = ("agent", "operator", "welfare")
ACTION_MODES = ("bucket", "delta")
N_REL = 5  # self, same market, same operator, overlapping legs, connecting


@struct.dataclass
class EnvState(environment.EnvState):
  """remaining [A, NL] seats, mult [A], prev_mult [A], shock (per-episode demand level),
  sales_last [A, NL] seats booked last period, revenue_cum [A], booked_cum [A] (bookings),
  nominal_cum [A] (bookings expected at the charged prices with shock 1: what a revenue
  manager's forecast would have predicted; baselines re-forecast the shock from the ratio),
  nominal_op_cum [A] (the same under the train's operator's view of availability: rivals'
  trains taken as open, see information.py), time (period index)."""
  remaining: jax.Array
  mult: jax.Array
  prev_mult: jax.Array
  shock: jax.Array
  sales_last: jax.Array
  revenue_cum: jax.Array
  booked_cum: jax.Array
  nominal_cum: jax.Array
  nominal_op_cum: jax.Array
  time: int


@struct.dataclass
class EnvParams:
  """Every number of the simulator (instance arrays padded to fixed sizes; see instance.py)."""
  legs: jax.Array          # [M, NL] market uses leg
  leg_km: jax.Array        # [NL]
  market_mask: jax.Array   # [M]
  orig: jax.Array          # [M] int
  dest: jax.Array          # [M] int
  base_fare: jax.Array     # [M] GBP
  lam: jax.Array           # [M, G] expected arrivals per episode at demand level 1
  booking_curve: jax.Array  # [G, H]
  alpha: jax.Array         # [M, G]
  beta: jax.Array          # [M, G] per GBP
  gamma: jax.Array         # [G] per hour
  pref_time: jax.Array     # [G, 2] hours
  operator: jax.Array      # [A] int
  dep_time: jax.Array      # [A] hours
  capacity: jax.Array      # [A, NL] seats (0 where the train does not run)
  serves: jax.Array        # [A, M]
  agent_mask: jax.Array    # [A]
  cap_mult: jax.Array      # [M] regulated cap on the multiplier
  levels: jax.Array = struct.field(default_factory=lambda: jnp.asarray(LEVELS, jnp.float32))
  init_mult: float = 1.0
  delta_step: float = 0.05
  demand_level: float = 1.0     # scenario demand level (held-out shift changes it)
  demand_cv: float = 0.2        # sd of the per-episode lognormal shock
  recapture: float = 1.0        # 1: one recapture round for spilled passengers
  stochastic: float = 1.0       # 0: fluid (expected counts, no flooring) for planning
  reward_mode: int = 0          # index into REWARD_MODES
  welfare_weight: float = 0.0
  reward_scale: float = 1e-3    # revenue GBP -> reward units
  information: int = 0          # RM baselines' information, index into INFORMATION_MODES
  max_steps_in_episode: int = H


def params_from_instance(inst: dict, **overrides: Any) -> EnvParams:
  fields = {f for f in EnvParams.__dataclass_fields__}
  arrays = {k: jnp.asarray(inst[k]) for k in fields if k in inst}
  from jaxrl_suite.envs.rail.instance import booking_curves
  arrays["booking_curve"] = jnp.asarray(booking_curves(), jnp.float32)
  if "reward_mode" in overrides and isinstance(overrides["reward_mode"], str):
    overrides["reward_mode"] = REWARD_MODES.index(overrides["reward_mode"])
  if "information" in overrides:
    overrides["information"] = info_mod.information_index(overrides["information"])
  bad = [k for k in overrides if k not in fields]
  if bad:
    raise ValueError(f"unknown RailRM parameter(s) {bad}; valid: {sorted(fields)}")
  arrays.update(overrides)
  return EnvParams(**arrays)


def n_agents(params: EnvParams) -> int:
  """The padded number of train slots (a static shape: agent_mask marks the real trains)."""
  return params.agent_mask.shape[0]


def token_fields() -> list[tuple[str, int]]:
  """(name, width) of the token feature columns, in order."""
  return [("mult", 1), ("dep_time", 1), ("operator", O_MAX), ("stops", S_MAX), ("to_go", 1),
          ("remaining", NL_MAX), ("sales_last", NL_MAX), ("revenue_cum", 1), ("load", 1),
          ("relation", N_REL), ("rel_type", 1), ("valid", 1)]


N_TYPES = 17  # relation type id: 16 = self, else same_market + 2 same_op + 4 overlap + 8 connect


def relation_type(rel: jax.Array) -> jax.Array:
  """rel [..., N_REL] bits -> integer relation type in [0, N_TYPES) (as float, a token column)."""
  bits = rel[..., 1] + 2 * rel[..., 2] + 4 * rel[..., 3] + 8 * rel[..., 4]
  return jnp.where(rel[..., 0] > 0, 16.0, bits)


def token_dim() -> int:
  return sum(w for _, w in token_fields())


def field_slice(name: str) -> slice:
  start = 0
  for n, w in token_fields():
    if n == name:
      return slice(start, start + w)
    start += w
  raise KeyError(name)


def token_columns() -> dict[str, int]:
  """The token layout an agent needs, as plain ints (agents/ may not import envs/: the experiment
  passes these to `agents.rail_features.make(..., **token_columns())`): the validity column, the
  integer relation-type column, the first relation column (the `self` bit; the relation bits run
  from it to the type column) and the number of relation types."""
  return {"valid_col": field_slice("valid").start, "type_col": field_slice("rel_type").start,
          "self_col": field_slice("relation").start, "num_types": N_TYPES}


def own_features(obs: jax.Array) -> jax.Array:
  """[..., A, A, F] -> [..., A, F]: each train's own token (the MLP ablation's input)."""
  return jnp.diagonal(obs, axis1=-3, axis2=-2).swapaxes(-1, -2)


def relations(params: EnvParams) -> jax.Array:
  """rel[i, j, r] in {0, 1}: self, same market, same operator, overlapping legs, connecting."""
  s = params.serves
  runs = (params.capacity > 0).astype(jnp.float32)
  valid = params.agent_mask[:, None] * params.agent_mask[None, :]
  eye = jnp.eye(n_agents(params))
  same_market = ((s @ s.T) > 0).astype(jnp.float32) * (1 - eye)
  same_op = (params.operator[:, None] == params.operator[None, :]).astype(jnp.float32) * (1 - eye)
  overlap = ((runs @ runs.T) > 0).astype(jnp.float32) * (1 - eye)
  first, last = _first_last(params)
  connect = jnp.logical_or(last[:, None] == first[None, :], first[:, None] == last[None, :])
  connect = connect.astype(jnp.float32) * (1 - eye)
  rel = jnp.stack([eye, same_market, same_op, overlap, connect], -1)
  return rel * valid[..., None]


def stops(params: EnvParams) -> jax.Array:
  """[A, S_MAX] 1 where the train stops (origin or destination of a market it serves)."""
  o = jax.nn.one_hot(params.orig, S_MAX)
  d = jax.nn.one_hot(params.dest, S_MAX)
  return ((params.serves @ (o + d)) > 0).astype(jnp.float32)


def _first_last(params: EnvParams):
  runs = params.capacity > 0
  idx = jnp.arange(NL_MAX)
  first = jnp.min(jnp.where(runs, idx, NL_MAX), axis=1)
  last = jnp.max(jnp.where(runs, idx + 1, 0), axis=1)
  return first, last


def prices(mult: jax.Array, params: EnvParams) -> jax.Array:
  """price[a, m] = base_fare[m] * min(mult[a], cap_mult[m])."""
  return params.base_fare[None] * jnp.minimum(mult[:, None], params.cap_mult[None])


def period_demand(state_time, shock, params: EnvParams) -> jax.Array:
  """Expected arrivals lam_t[m, g] in period `state_time`."""
  w = params.booking_curve[:, jnp.clip(state_time, 0, H - 1)]        # [G]
  return params.lam * w[None] * params.demand_level * shock * params.market_mask[:, None]


class RailRM(environment.Environment[EnvState, EnvParams]):
  """RailRM-v0; `action_mode` in ACTION_MODES (it changes the action space)."""

  def __init__(self, inst: dict, action_mode: str = "bucket"):
    super().__init__()
    if action_mode not in ACTION_MODES:
      raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
    self.inst = inst
    self.action_mode = action_mode
    self.n_agents = int(inst["n_agents"])
    self.num_agents = int(inst["agent_mask"].shape[0])  # learner's agent axis (padded slots)

  @property
  def default_params(self) -> EnvParams:
    return params_from_instance(self.inst)

  @property
  def name(self) -> str:
    return "RailRM-v0"

  @property
  def num_actions(self) -> int:
    return len(LEVELS) if self.action_mode == "bucket" else 3

  def action_space(self, params: EnvParams | None = None):
    """Per-agent action space (the joint action is int32[A_MAX])."""
    return spaces.Discrete(self.num_actions)

  def observation_space(self, params: EnvParams | None = None):
    n = self.num_agents
    return spaces.Box(-1.0, float(N_TYPES), (n, n, token_dim()), jnp.float32)

  def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
    """[A, num_actions]: every action valid for real trains (padding slots: action 0 only)."""
    m = jnp.ones((self.num_agents, self.num_actions), bool)
    return jnp.where(params.agent_mask[:, None] > 0, m, jnp.arange(self.num_actions) == 0)

  def agent_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
    """bool [A_MAX]: real trains (padding slots are weighted out of the learner's means)."""
    del state
    return params.agent_mask > 0

  # ---------------------------------------------------------------- dynamics
  def new_mult(self, state: EnvState, action: jax.Array, params: EnvParams) -> jax.Array:
    action = jnp.asarray(action, jnp.int32)
    if self.action_mode == "bucket":
      mult = params.levels[jnp.clip(action, 0, params.levels.shape[0] - 1)]
    else:
      mult = state.mult * (1.0 + (jnp.clip(action, 0, 2) - 1) * params.delta_step)
      mult = jnp.clip(mult, params.levels[0], params.levels[-1])
    return jnp.where(params.agent_mask > 0, mult, params.init_mult)

  def reset_env(self, key: chex.PRNGKey, params: EnvParams):
    sd = params.demand_cv
    shock = jnp.exp(sd * jax.random.normal(key) - 0.5 * sd * sd)
    shock = jnp.where(params.stochastic > 0, shock, 1.0)
    mult = jnp.full((n_agents(params),), params.init_mult, jnp.float32)
    z = jnp.zeros((n_agents(params),), jnp.float32)
    state = EnvState(remaining=params.capacity, mult=mult, prev_mult=mult, shock=shock,
                     sales_last=jnp.zeros((n_agents(params), NL_MAX)), revenue_cum=z,
                     booked_cum=z, nominal_cum=z, nominal_op_cum=z, time=0)
    return self.get_obs(state, params), state

  def book(self, key, remaining, mult, time, shock, params: EnvParams):
    return book(key, remaining, mult, time, shock, params)

  def step_env(self, key: chex.PRNGKey, state: EnvState, action, params: EnvParams):
    mult = self.new_mult(state, action, params)
    return step_with_mult(key, state, mult, params)

  def is_terminal(self, state: EnvState, params: EnvParams) -> jax.Array:
    return jnp.asarray(state.time >= params.max_steps_in_episode)

  def get_obs(self, state: EnvState, params: EnvParams, key=None) -> jax.Array:
    return observation(state, params)


def book(key, remaining, mult, time, shock, params: EnvParams):
  """One period of demand at multipliers `mult` [A]: returns (accepted [A, M, G], stats dict).

  Pure function of its arrays (used by the env step, the fluid planners and the baselines).
  """
  price = prices(mult, params)
  dist = demand.time_distance(params.dep_time, params.pref_time)
  u = demand.utilities(price, params.alpha, params.beta, params.gamma, dist)
  lam_t = period_demand(time, shock, params)
  avail = demand.available(params.serves, remaining, params.legs) * params.agent_mask[:, None]
  p, _ = demand.mnl_shares(u, avail)
  sto = params.stochastic > 0
  mean = lam_t[None] * p
  n = jnp.where(sto, demand.split_poisson(key, lam_t, p), mean)
  acc = jnp.where(sto, demand.ration(n, remaining, params.legs, True),
                  demand.ration(n, remaining, params.legs, False))
  rem1 = remaining - demand.seats_used(acc, params.legs)
  spilled = (n - acc).sum(0)                                        # [M, G]
  # recapture: spilled passengers re-choose among trains that still have seats (expected split)
  avail2 = demand.available(params.serves, rem1, params.legs) * params.agent_mask[:, None]
  p2, _ = demand.mnl_shares(u, avail2)
  n2 = spilled[None] * p2 * params.recapture
  n2 = jnp.where(sto, jnp.floor(n2), n2)
  acc2 = jnp.where(sto, demand.ration(n2, rem1, params.legs, True),
                   demand.ration(n2, rem1, params.legs, False))
  acc_all = acc + acc2
  cs = jnp.sum(lam_t * demand.logsum(u, avail) / params.beta)      # GBP, expected
  # the same expectation as each operator can compute it: rivals' trains taken as open
  lam0 = lam_t / jnp.maximum(shock, 1e-9)
  avail_open = demand.available(params.serves, params.capacity, params.legs)
  own = info_mod.same_operator(params.operator)                    # [A_obs, A]
  views = jnp.where(own[..., None] > 0, avail[None], avail_open[None]) * params.agent_mask[:, None]
  p_view = jax.vmap(lambda av: demand.mnl_shares(u, av)[0])(views)   # [A_obs, A, M, G]
  p_seen = jnp.einsum("aamg->amg", p_view)                         # observer a, train a
  stats = {"revenue": jnp.einsum("amg,am->a", acc_all, price),
           "bookings_g": acc_all.sum((0, 1)),
           "spill": spilled.sum() - acc2.sum(),
           "cs": cs,
           "nominal": jnp.einsum("mg,amg->a", lam0, p),
           "nominal_op": jnp.einsum("mg,amg->a", lam0, p_seen),
           "arrivals_mean": lam_t.sum()}
  return acc_all, stats

def step_with_mult(key, state: EnvState, mult, params: EnvParams):
  """The transition once the multipliers [A] are set (shared by both action forms)."""
  acc, st = book(key, state.remaining, mult, state.time, state.shock, params)
  used = demand.seats_used(acc, params.legs)
  remaining = state.remaining - used
  rev = st["revenue"] * params.agent_mask
  same_op = (params.operator[:, None] == params.operator[None, :]).astype(jnp.float32)
  op_rev = same_op @ rev
  n_ag = jnp.maximum(params.agent_mask.sum(), 1.0)
  r = jnp.stack([rev, op_rev, rev + params.welfare_weight * st["cs"] / n_ag])
  reward = r[params.reward_mode] * params.reward_scale * params.agent_mask
  bookings = acc.sum((1, 2))
  new = EnvState(remaining=remaining, mult=mult, prev_mult=state.mult, shock=state.shock,
                 sales_last=used, revenue_cum=state.revenue_cum + rev,
                 booked_cum=state.booked_cum + bookings,
                 nominal_cum=state.nominal_cum + st["nominal"],
                 nominal_op_cum=state.nominal_op_cum + st["nominal_op"], time=state.time + 1)
  done = jnp.asarray(new.time >= params.max_steps_in_episode)
  info = {"revenue": rev, "bookings_g": st["bookings_g"], "spill": st["spill"], "cs": st["cs"],
          "seat_km": jnp.sum(used * params.leg_km[None]),
          "price_change": jnp.abs(jnp.log(mult / state.mult)) * params.agent_mask,
          "mult": mult, "discount": 1.0 - done.astype(jnp.float32)}
  return (jax.lax.stop_gradient(observation(new, params)), jax.lax.stop_gradient(new),
          reward, done, info)


def observation(state: EnvState, params: EnvParams) -> jax.Array:
  """Tokens [A_MAX, A_MAX, F] (see the module docstring and `token_fields`)."""
  am = params.agent_mask
  cap = jnp.maximum(params.capacity, 1.0)
  to_go = (params.max_steps_in_episode - state.time) / params.max_steps_in_episode
  seat_km_cap = jnp.maximum(jnp.sum(params.capacity * params.leg_km[None], 1), 1.0)
  sold_km = jnp.sum((params.capacity - state.remaining) * params.leg_km[None], 1)
  fare_scale = jnp.sum(params.capacity * params.leg_km[None], 1) * 0.15 + 1.0
  public = jnp.concatenate([
      state.mult[:, None] - 1.0, params.dep_time[:, None] / 24.0,
      jax.nn.one_hot(params.operator, O_MAX), stops(params),
      jnp.full((n_agents(params), 1), to_go)],
      -1)                                                                # [A, Fpub]
  private = jnp.concatenate([
      state.remaining / cap * (params.capacity > 0), state.sales_last / cap * 10.0,
      (state.revenue_cum / fare_scale)[:, None], (sold_km / seat_km_cap)[:, None]], -1)
  rel = relations(params)                                              # [A, A, R]
  eye = jnp.eye(n_agents(params))[..., None]
  pub = jnp.broadcast_to(public[None], (n_agents(params),) + public.shape)
  priv = eye * private[None]                                           # only own token
  valid = jnp.broadcast_to(am[None, :, None], (n_agents(params), n_agents(params), 1))
  tok = jnp.concatenate([pub, priv, rel, relation_type(rel)[..., None], valid], -1)
  tok = tok * valid * am[:, None, None]
  return tok.astype(jnp.float32)
