"""The two ballast environments' parameter structs and observation layouts (pure data).

BallastNet-v0 (env.py) and BallastHydro-v0 (hydro_env.py) run on the same padded pipe graph
(`routes.build_routes`); `GraphParams` holds those arrays once and both params structs extend it:

  GraphParams    the graph and route arrays both envs read (shapes below, padded sizes E edges,
                 T tanks, K routes, P pumps)
  EnvParams      GraphParams + BallastNet-v0's packed route sets, hydrostatics and knobs
  HydroParams    GraphParams + BallastHydro-v0's pump mask, hydraulics, episode bank and knobs

With the flat observation layouts (`obs_fields` / `split_obs`, `hydro_obs_fields` /
`split_hydro_obs`), this module is the bottom of the package: the baselines, the diagnoser and
the agent api (agent_api.py) import it, never the env modules, so that the envs can hand their
agent api out (`env.agent_api`) without an import cycle. env.py and hydro_env.py re-export
these names, so `from jaxrl_suite.envs.ballast.env import EnvParams` keeps working.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl_suite.envs.ballast import hydraulics as H
from jaxrl_suite.envs.ballast.routes import E_MAX, F_MAX, P_MAX, T_MAX

H_HIST = 4  # history stack length in the BallastNet-v0 observation
DEG = np.pi / 180.0


@struct.dataclass
class GraphParams:
  """The padded pipe graph of one ship layout, shared by both ballast envs (a pytree of arrays;
  a family of layouts padded to the same sizes stacks and vmaps).

  edge_mask [E] bool, edge_kind [E] int (index in layout.EDGE_KINDS), edge_len [E] m,
  can_block [E] bool, block_w / partial_w [E] (clog-prior weights, 0 on padding),
  tank_mask [T] bool, cap [T] m3, lcg / tcg [T] m (tank centres of gravity),
  route_edges [K, E] bool, route_src / route_dst [K] (tank index; the sea = T), route_pump [K],
  route_mask [K] bool, route_len [K] m, route_transfer [K] bool,
  pair_ok [K + 1, K + 1] bool (two routes on different pumps sharing no edge; NOOP = K),
  pump_rate [P] m3/h.
  """
  edge_mask: jax.Array
  edge_kind: jax.Array
  edge_len: jax.Array
  can_block: jax.Array
  block_w: jax.Array
  partial_w: jax.Array
  tank_mask: jax.Array
  cap: jax.Array
  lcg: jax.Array
  tcg: jax.Array
  route_edges: jax.Array
  route_src: jax.Array
  route_dst: jax.Array
  route_pump: jax.Array
  route_mask: jax.Array
  route_len: jax.Array
  route_transfer: jax.Array
  pair_ok: jax.Array
  pump_rate: jax.Array


def graph_arrays(graph: dict[str, Any], fields) -> dict[str, jax.Array]:
  """The entries of a `routes.build_routes` dict that are fields of a params struct, as jnp
  arrays (`fields`: the struct's `__dataclass_fields__`)."""
  return {k: jnp.asarray(graph[k]) for k in fields if k in graph}


# ---- BallastNet-v0 ------------------------------------------------------------------------------
@struct.dataclass
class EnvParams(GraphParams):
  """Static ship data (padded arrays from `routes.build_routes`) and tunable knobs.

  All leaves are arrays or Python scalars, so a batch of ships (domain randomisation) is a
  vmapped EnvParams. Units: m3, hours, degrees, metres, tonnes.
  """
  # the packed route sets (BallastNet-v0 only; routes.build_routes)
  edge_route_bits: jax.Array
  fill_bits: jax.Array
  drain_bits: jax.Array
  # hydrostatics
  displacement: float = 133000.0
  gm: float = 1.5
  mctc: float = 2900.0
  lcf: float = -5.0
  rho: float = 1.025
  # timing and sensing
  dt_h: float = 5.0 / 60.0
  sigma_level: float = 0.0025
  max_steps_in_episode: int = 96
  # clog prior [design]: P(#blocked = 0..3), P(#partial = 0..2), partial conductance range
  p_blocked: jax.Array = struct.field(default_factory=lambda: jnp.array([.3, .4, .2, .1]))
  p_partial: jax.Array = struct.field(default_factory=lambda: jnp.array([.6, .3, .1]))
  partial_lo: float = 0.15
  partial_hi: float = 0.5
  # plan generation (v1)
  jobs_min: int = 2
  jobs_max: int = 5
  amount_lo: float = 200.0
  amount_hi: float = 800.0
  p_transfer: float = 0.5
  heel_init_max: float = 2.0
  heel_plan_max: float = 4.5  # any-order bound on |heel| during a v1 plan (< heel_max)
  # v2 generation and targets
  heel0_lo: float = 1.0
  heel0_hi: float = 3.0
  trim0_lo: float = 0.2
  trim0_hi: float = 0.8
  heel_tol: float = 0.5
  trim_tol: float = 0.1
  # task tolerances, limits, reward
  tol: float = 10.0
  heel_warn: float = 2.0
  heel_max: float = 5.0
  gamma: float = 0.99
  heel_pen: float = 5.0
  success_bonus: float = 10.0
  capsize_pen: float = 20.0
  # evidence (shared belief update, design doc 4.5)
  r_fail: float = 0.1
  r_good: float = 0.85
  info_vol: float = 25.0  # m3; ~4 sigma of a sounding difference (1,800 m3 tank, 0.25%)
  # privileged: put the true clog vector into the observation (B-oracle only; -1 otherwise)
  reveal_clog: bool = False
  # optional episode bank (NetBank, net_bank.make_v2_bank: checked-finishable episodes); when
  # set, reset draws a bank row uniformly instead of generating (None: the generator below)
  bank: Any = None


@struct.dataclass
class NetBank:
  """Episodes for BallastNet-v0 reset: vol0[N, T] / target[N, T] m3, m_heel0[N] / m_trim0[N]
  cargo moments (t*m), clog[N, E] hidden conductances, n_blocked[N] int (for reports)."""
  vol0: jax.Array
  target: jax.Array
  m_heel0: jax.Array
  m_trim0: jax.Array
  clog: jax.Array
  n_blocked: jax.Array


def obs_fields(task: str = "v1") -> list[tuple[str, tuple[int, ...]]]:
  """Names and shapes of the flat observation, in order."""
  del task  # same layout for both tasks (v2 uses both rows of the per-pump fields)
  T, E, F, P = T_MAX, E_MAX, F_MAX, P_MAX
  return [("level", (T,)), ("target", (T,)), ("dlevel", (T,)), ("need_fill", (T,)),
          ("need_drain", (T,)), ("tank_mask", (T,)), ("last_route", (P, E)),
          ("last_ratio", (P,)), ("last_info", (P,)), ("heel", (1,)), ("trim_err", (1,)),
          ("time", (1,)), ("good", (E,)), ("chat", (E,)), ("exercised", (E,)),
          ("edge_mask", (E,)), ("fail_sets", (F, E)), ("fail_kind", (F,)),
          ("fail_route", (F,)), ("clog_revealed", (E,)), ("hist_route", (H_HIST, E)),
          ("hist_ratio", (H_HIST,)), ("hist_dlevel", (H_HIST, T))]


def obs_size(task: str = "v1") -> int:
  return int(sum(np.prod(s) for _, s in obs_fields(task)))


def split_obs(obs: jax.Array, task: str = "v1") -> dict[str, jax.Array]:
  """Slices a flat observation [..., D] into named fields with their shapes."""
  out, i = {}, 0
  for name, shape in obs_fields(task):
    n = int(np.prod(shape))
    out[name] = obs[..., i:i + n].reshape(obs.shape[:-1] + shape)
    i += n
  return out

# ---- BallastHydro-v0 ----------------------------------------------------------------------------
@struct.dataclass
class EpisodeBank:
  """Pre-generated episodes (episodes.py): N starts, plans and hidden clogs."""
  vol0: jax.Array       # [N, T] m3
  target: jax.Array     # [N, T] m3
  clog: jax.Array       # [N, E]
  m_heel0: jax.Array    # [N] t*m
  m_trim0: jax.Array    # [N] t*m
  n_blocked: jax.Array  # [N] int


@struct.dataclass
class HydroParams(GraphParams):
  """BallastHydro-v0: the graph arrays (GraphParams), pump_mask [P] bool (real pumps),
  hydraulics, episode bank and knobs; a pytree."""
  pump_mask: jax.Array
  hyd: H.Hydraulics
  bank: EpisodeBank
  stab: Any = None            # stability.Stability: ballast-dependent GM / heel / trim; None =
                              # the linear model of BallastNet-v0 (constant Delta GM)
  displacement: float = 133000.0
  gm: float = 1.5
  mctc: float = 2900.0
  lcf: float = -5.0
  rho: float = 1.025
  dt_h: float = 5.0 / 60.0
  sigma_level: float = 0.0025
  max_steps_in_episode: int = 96
  tol: float = 10.0
  heel_limit: float = 2.0
  gm_min: float = 0.15        # m; GM below it is a stability failure (with stab only)
  heel_terminates: bool = True
  gamma: float = 0.99
  success_bonus: float = 10.0
  violation_pen: float = 20.0
  r_fail: float = 0.1
  r_good: float = 0.85
  info_vol: float = 25.0
  reveal_clog: bool = False
  reward_scale: float = 1.0   # multiplies the reward (RL training: O(1) returns for PPO's
                              # value clip)


def hydro_obs_fields(T: int, E: int, P: int) -> list[tuple[str, tuple[int, ...]]]:
  """Names and shapes of the flat observation for padded sizes T tanks, E edges, P pumps."""
  F = F_MAX
  return [("level", (T,)), ("target", (T,)), ("dlevel", (T,)), ("need_fill", (T,)),
          ("need_drain", (T,)), ("tank_mask", (T,)), ("last_route", (P, E)),
          ("last_pumped", (P,)), ("last_ratio", (P,)), ("last_info", (P,)), ("heel", (1,)),
          ("trim", (1,)), ("gm", (1,)), ("draught", (3,)), ("time", (1,)), ("good", (E,)), ("chat", (E,)), ("exercised", (E,)),
          ("edge_mask", (E,)), ("fail_sets", (F, E)), ("fail_kind", (F,)), ("fail_route", (F,)),
          ("clog_revealed", (E,))]


def split_hydro_obs(obs: jax.Array, params: HydroParams) -> dict[str, jax.Array]:
  """Slices a flat observation [..., D] into named fields (shapes from params' arrays)."""
  T, E, P = params.cap.shape[-1], params.edge_mask.shape[-1], params.pump_rate.shape[-1]
  out, i = {}, 0
  for name, shape in hydro_obs_fields(T, E, P):
    n = int(np.prod(shape))
    out[name] = obs[..., i:i + n].reshape(obs.shape[:-1] + shape)
    i += n
  return out
