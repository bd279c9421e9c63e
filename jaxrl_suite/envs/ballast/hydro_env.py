"""BallastHydro-v0: the ballast-plan task with pump/pipe hydraulics and a heel limit.

A new env version beside BallastNet-v0 (env.py), whose physics and committed results stay as
they were. What changes (docs/ballast.md, "BallastHydro"):

  * Flow: each commanded route runs at its hydraulic operating point (hydraulics.py): pump
    curve H0 - k Q^2 against static head from the tank/sea surfaces plus friction ~ length Q^2
    plus clogs as added resistance, re-solved on `n_sub` sub-steps per decision step as levels
    move. A route can also run by gravity (pump bypassed) where the surfaces allow. A line-up
    change costs the valve actuation time. Pump energy (kWh) is integrated.
  * Several pumps at once: action int32[P], one command per pump slot p:
        c in [0, K)   route c with its pump running      (route c must belong to pump p)
        c in [K, 2K)  route c - K by gravity (pump p stopped, its bypass open)
        c = 2K        NOOP
    A command on another pump's route, a padded route, or one sharing a pipe with an earlier
    slot's command is ignored (NOOP); `pair_ok` tells a policy which pairs are allowed.
  * Stability (stability.py): displacement, KG, free-surface correction, fluid GM and the
    draughts follow the tank fills; heel = atan(M_heel / (Delta GM)), trim = M_trim /
    (100 MCTC), draughts from the sinkage (TPC) and the trim. The limits |heel| <= heel_limit
    (2 deg, configurable), GM >= gm_min (0.15 m), |trim| <= the ship's trim limit and the
    draught limits (stability.ship_limits) must hold during the whole operation: a step that
    breaks any ends the episode as a failure (with heel_terminates) and success requires it
    never happened; `broke` keeps which (stability.HEEL | GM | TRIM | DRAUGHT). The
    observation carries GM / GM0 and the draughts. (params.stab None: the linear model of
    BallastNet-v0, constant Delta GM, the heel limit only.)
  * Episodes come from a bank generated per layout (episodes.py): per-layout clog prior with
    the documented P(#blocked) exactly, every episode finishable by the heel-aware oracle
    within the step limit (checked at generation). Reset draws a bank index uniformly.
  * Sizes come from the layout (routes.build_routes(..., "auto") or a family's sizes), so ring
    mains with hundreds of routes and 20-tank ships load.

Plan task: per-tank targets, moves stop at the setpoints (fill valves close at the target
level, v1 semantics), success when every |vol - target| < tol and every limit held.
Evidence (no flow sensors) is v1's shared belief update with ratio = observed volume /
nominal volume, the nominal being the same hydraulics with clear pipes.

Reward: -1 per step + gamma Phi(s') - Phi(s) (Phi = -sum|vol - target| / (rate_0 dt)) +
success_bonus * success - violation_pen * [a limit first exceeded this step].
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_suite.envs.ballast import hydraulics as H
from jaxrl_suite.envs.ballast import stability as S
from jaxrl_suite.envs.ballast.agent_api import hydro_api
from jaxrl_suite.envs.ballast.env import heel_trim, update_evidence
# The params struct and the observation layout live in params.py (shared with env.py); named here.
from jaxrl_suite.envs.ballast.params import (EpisodeBank, HydroParams,  # noqa: F401
                                             graph_arrays, hydro_obs_fields, split_hydro_obs)
from jaxrl_suite.envs.ballast.routes import F_MAX


@struct.dataclass
class HydroState(environment.EnvState):
  """vol/target [T] m3, clog [E] hidden, cargo moments, soundings, last commands [P] (2K =
  NOOP), evidence (as BallastNet-v0), max |heel| deg, violated (a limit exceeded at some
  step), broke (int32 bit mask of the limits exceeded so far, stability.HEEL | GM | TRIM |
  DRAUGHT), energy kWh, success, bank index, time."""
  vol: jax.Array
  target: jax.Array
  clog: jax.Array
  m_heel0: jax.Array
  m_trim0: jax.Array
  level: jax.Array
  dlevel: jax.Array
  last_cmd: jax.Array
  last_ratio: jax.Array
  last_info: jax.Array
  good: jax.Array
  chat: jax.Array
  exercised: jax.Array
  fail_sets: jax.Array
  fail_kind: jax.Array
  fail_route: jax.Array
  fail_ptr: jax.Array
  max_heel: jax.Array
  violated: jax.Array
  broke: jax.Array
  energy_kwh: jax.Array
  success: jax.Array
  episode: jax.Array
  time: int


def decode(cmd, pump_slot: int, params: HydroParams):
  """Command c of slot p -> (route index k clipped, pumped bool, valid bool)."""
  K = params.route_mask.shape[-1]
  k = jnp.where(cmd < K, cmd, cmd - K)
  k = jnp.clip(k, 0, K - 1)
  valid = (cmd < 2 * K) & params.route_mask[k] & (params.route_pump[k] == pump_slot)
  return k, cmd < K, valid


def heel_trim_gm(vol, m_heel0, m_trim0, params: HydroParams):
  """(heel deg, trim m, GM m, draught[3] m (forward, aft, mean), broke int32 bit mask of the
  limits exceeded, stability.breaks): stability.condition with params.stab, else the linear
  model (constant Delta GM, GM = params.gm, draughts 0, the heel limit only)."""
  if params.stab is None:
    heel, trim = heel_trim(vol, m_heel0, m_trim0, params)
    broke = jnp.where(jnp.abs(heel) > params.heel_limit, S.HEEL, 0).astype(jnp.int32)
    return heel, trim, jnp.asarray(params.gm, jnp.float32), jnp.zeros(3), broke
  c = S.condition(vol, m_heel0, m_trim0, params)
  draught = jnp.stack([c.draught_fwd, c.draught_aft, c.draught])
  return c.heel, c.trim, c.gm, draught, S.breaks(c, params)


class BallastHydro(environment.Environment[HydroState, HydroParams]):
  """BallastHydro-v0 (module docstring); `n_sub` sub-steps per decision step (static)."""

  def __init__(self, n_sub: int = 5, layout_name: str = ""):
    super().__init__()
    self.n_sub = n_sub
    self.layout_name = layout_name

  @property
  def agent_api(self):
    """The env-side functions and sizes the agents need (agent_api.HydroApi),
    injected into the agent factories so that agents/ never imports envs/."""
    return hydro_api()

  @property
  def name(self) -> str:
    return "BallastHydro-v0"

  @property
  def default_params(self) -> HydroParams:
    raise ValueError("BallastHydro needs a layout: build it with make_hydro(layout)")

  def num_commands(self, params: HydroParams) -> int:
    return 2 * params.route_mask.shape[-1] + 1

  def action_space(self, params: HydroParams):
    P = params.pump_rate.shape[-1]
    return spaces.Box(0, 2 * params.route_mask.shape[-1], (P,), jnp.int32)

  def observation_space(self, params: HydroParams):
    T, E, P = params.cap.shape[-1], params.edge_mask.shape[-1], params.pump_rate.shape[-1]
    d = int(sum(np.prod(s) for _, s in hydro_obs_fields(T, E, P)))
    return spaces.Box(-jnp.inf, jnp.inf, (d,), jnp.float32)

  # ------------------------------------------------------------------ reset
  def reset_to(self, key: chex.PRNGKey, idx, params: HydroParams):
    """Reset to bank episode idx (sounding noise from key)."""
    b = params.bank
    T, E, P = params.cap.shape[-1], params.edge_mask.shape[-1], params.pump_rate.shape[-1]
    vol0 = b.vol0[idx]
    level = (vol0 + params.sigma_level * params.cap * jax.random.normal(key, (T,)))
    heel, _, _, _, broke = heel_trim_gm(vol0, b.m_heel0[idx], b.m_trim0[idx], params)
    K = params.route_mask.shape[-1]
    state = HydroState(
        vol=vol0, target=b.target[idx], clog=b.clog[idx], m_heel0=b.m_heel0[idx],
        m_trim0=b.m_trim0[idx], level=level * params.tank_mask, dlevel=jnp.zeros(T),
        last_cmd=jnp.full(P, 2 * K, jnp.int32), last_ratio=jnp.zeros(P),
        last_info=jnp.zeros(P, bool), good=jnp.zeros(E, bool), chat=jnp.ones(E),
        exercised=jnp.zeros(E, bool), fail_sets=jnp.zeros((F_MAX, E), bool),
        fail_kind=jnp.zeros(F_MAX, jnp.int32), fail_route=jnp.full(F_MAX, -1, jnp.int32),
        fail_ptr=jnp.int32(0), max_heel=jnp.abs(heel),
        violated=broke != 0, broke=broke, energy_kwh=jnp.zeros(()),
        success=jnp.array(False), episode=jnp.asarray(idx, jnp.int32), time=0)
    return self.get_obs(state, params), state

  def reset_env(self, key: chex.PRNGKey, params: HydroParams):
    k_idx, k_noise = jax.random.split(key)
    idx = jax.random.randint(k_idx, (), 0, params.bank.vol0.shape[0])
    return self.reset_to(k_noise, idx, params)

  # ------------------------------------------------------------------ dynamics
  def commands(self, action, params: HydroParams):
    """Decoded per-slot commands: (k[P], pumped[P], valid[P]) after the clash rule."""
    P = params.pump_rate.shape[-1]
    K = params.route_mask.shape[-1]
    acts = jnp.clip(jnp.reshape(jnp.asarray(action, jnp.int32), (P,)), 0, 2 * K)
    ks, pumped, valid = [], [], []
    for p in range(P):
      k, pm, ok = decode(acts[p], p, params)
      for q in range(p):  # a pipe shared with an earlier live command -> ignored
        ok = ok & (~valid[q] | params.pair_ok[ks[q], k])
      ks.append(k)
      pumped.append(pm)
      valid.append(ok)
    return jnp.stack(ks), jnp.stack(pumped), jnp.stack(valid)

  def integrate(self, vol, target, ks, pumped, valid, switched, clog, params: HydroParams):
    """Moves water for one decision step on n_sub sub-steps (operating point re-solved on each).

    Setpoints: a source stops at its target, a sink at its target (plan semantics); SEA is
    unlimited. Returns (vol', dv[P] m3 moved per slot, energy[P] kWh).
    """
    T = vol.shape[-1]
    P = ks.shape[0]
    h = params.dt_h / self.n_sub
    floor = jnp.concatenate([jnp.maximum(target, 0.0), jnp.array([-jnp.inf])])
    ceil = jnp.concatenate([jnp.minimum(target, params.cap), jnp.array([jnp.inf])])
    src, dst = params.route_src[ks], params.route_dst[ks]
    eye = jnp.eye(T + 1)[:, :T]

    def sub_step(carry, i):  # a scan, not an unrolled loop: keeps the compiled step small
      vol, dv, energy = carry
      frac = H.open_fraction(i * h, (i + 1) * h, switched, params.hyd)
      for p in range(P):
        q, head = H.route_flow(ks[p], pumped[p], vol, params.cap, clog, params, params.hyd)
        v_ext = jnp.concatenate([vol, jnp.array([jnp.inf])])
        avail = jnp.where(src[p] == T, jnp.inf, v_ext[src[p]] - floor[src[p]])
        room = jnp.where(dst[p] == T, jnp.inf, ceil[dst[p]] - v_ext[dst[p]])
        want = q * h * frac[p]
        move = jnp.where(valid[p], jnp.clip(jnp.minimum(want, jnp.minimum(avail, room)), 0.0),
                         0.0)
        vol = vol + move * (eye[dst[p]] - eye[src[p]])
        dv = dv.at[p].add(move)
        run = jnp.where(want > 0, move / jnp.maximum(want, 1e-9), 0.0) * frac[p]
        energy = energy.at[p].add(jnp.where(valid[p] & pumped[p],
                                            H.pump_power_kw(q, head, params.hyd) * h * run, 0.0))
      return (vol, dv, energy), None

    (vol, dv, energy), _ = jax.lax.scan(sub_step, (vol, jnp.zeros(P), jnp.zeros(P)),
                                        jnp.arange(self.n_sub, dtype=jnp.float32))
    return jnp.clip(vol, 0.0, params.cap), dv, energy

  def step_env(self, key: chex.PRNGKey, state: HydroState, action, params: HydroParams):
    T = params.cap.shape[-1]
    K = params.route_mask.shape[-1]
    ks, pumped, valid = self.commands(action, params)
    cmd = jnp.where(valid, jnp.where(pumped, ks, ks + K), 2 * K)
    switched = cmd != state.last_cmd
    # true clogs and clear pipes (the nominal volume of the evidence ratio) in one vmapped call
    vols, dvs, energies = jax.vmap(
        lambda c: self.integrate(state.vol, state.target, ks, pumped, valid, switched, c,
                                 params))(jnp.stack([state.clog, jnp.ones_like(state.clog)]))
    vol, dv, energy, nominal = vols[0], dvs[0], energies[0], dvs[1]
    level = (vol + params.sigma_level * params.cap * jax.random.normal(key, (T,)))
    level = level * params.tank_mask
    dlevel = level - state.level
    dl = jnp.concatenate([dlevel, jnp.zeros(1)])
    ev = (state.good, state.chat, state.exercised, state.fail_sets, state.fail_kind,
          state.fail_route, state.fail_ptr)
    ratios, infos = [], []
    for p in range(ks.shape[0]):
      s, d = params.route_src[ks[p]], params.route_dst[ks[p]]
      n_ends = (s < T).astype(jnp.float32) + (d < T).astype(jnp.float32)
      obs_dv = (jnp.where(d < T, dl[d], 0.0) - jnp.where(s < T, dl[s], 0.0)) / jnp.maximum(
          n_ends, 1.0)
      informative = valid[p] & (nominal[p] >= params.info_vol)
      ratio = jnp.where(valid[p], jnp.abs(obs_dv) / jnp.maximum(nominal[p], 1.0), 0.0)
      ev = update_evidence(ev, ks[p], valid[p], ratio, informative, params)
      ratios.append(ratio)
      infos.append(informative)
    heel, trim, gm, draught, broke = heel_trim_gm(vol, state.m_heel0, state.m_trim0, params)
    over = broke != 0
    violated = state.violated | over
    done_plan = jnp.all((jnp.abs(vol - state.target) < params.tol) | ~params.tank_mask)
    success = done_plan & ~violated
    new = state.replace(
        vol=vol, level=level, dlevel=dlevel, last_cmd=cmd, last_ratio=jnp.stack(ratios),
        last_info=jnp.stack(infos), good=ev[0], chat=ev[1], exercised=ev[2], fail_sets=ev[3],
        fail_kind=ev[4], fail_route=ev[5], fail_ptr=ev[6],
        max_heel=jnp.maximum(state.max_heel, jnp.abs(heel)), violated=violated,
        broke=state.broke | broke,
        energy_kwh=state.energy_kwh + energy.sum(), success=success, time=state.time + 1)
    phi0 = self._potential(state.vol, state.target, params)
    phi1 = jnp.where(success, 0.0, self._potential(vol, state.target, params))
    reward = params.reward_scale * (
        -1.0 + params.gamma * phi1 - phi0 + params.success_bonus * success -
        params.violation_pen * (over & ~state.violated))
    terminated = success | (violated & params.heel_terminates) | done_plan
    info = {"success": success, "heel": heel, "trim": trim, "gm": gm, "draught": draught,
            "dv": dv, "energy_kwh": energy, "violated": violated, "broke": new.broke, "cmd": cmd}
    return self.get_obs(new, params), new, reward.astype(jnp.float32), terminated, info

  def _potential(self, vol, target, params: HydroParams):
    return -jnp.sum(jnp.abs(vol - target) * params.tank_mask) / (params.pump_rate[0] *
                                                                  params.dt_h)

  # ------------------------------------------------------------------ observation
  def get_obs(self, state: HydroState, params: HydroParams, key=None) -> jax.Array:
    T, E, P = params.cap.shape[-1], params.edge_mask.shape[-1], params.pump_rate.shape[-1]
    K = params.route_mask.shape[-1]
    cap = jnp.where(params.tank_mask, params.cap, 1.0)
    heel, trim, gm, draught, _ = heel_trim_gm(state.vol, state.m_heel0, state.m_trim0, params)
    need_fill = (state.target - state.vol > params.tol) & params.tank_mask
    need_drain = (state.vol - state.target > params.tol) & params.tank_mask
    live = state.last_cmd < 2 * K
    k_last = jnp.clip(jnp.where(state.last_cmd < K, state.last_cmd, state.last_cmd - K), 0,
                      K - 1)
    fields = {
        "level": state.level / cap, "target": state.target / cap * params.tank_mask,
        "dlevel": state.dlevel / (params.pump_rate[0] * params.dt_h), "need_fill": need_fill,
        "need_drain": need_drain, "tank_mask": params.tank_mask,
        "last_route": params.route_edges[k_last] & live[:, None],
        "last_pumped": live & (state.last_cmd < K), "last_ratio": state.last_ratio,
        "last_info": state.last_info, "heel": heel[None] / params.heel_limit,
        "trim": trim[None], "gm": gm[None] / params.gm, "draught": draught, "time": jnp.array([state.time / params.max_steps_in_episode]),
        "good": state.good, "chat": state.chat, "exercised": state.exercised,
        "edge_mask": params.edge_mask, "fail_sets": state.fail_sets,
        "fail_kind": state.fail_kind, "fail_route": state.fail_route,
        "clog_revealed": jnp.where(params.reveal_clog, state.clog, -1.0)}
    return jnp.concatenate([jnp.ravel(fields[n]).astype(jnp.float32)
                            for n, _ in hydro_obs_fields(T, E, P)])

  def is_terminal(self, state: HydroState, params: HydroParams) -> jax.Array:
    done_plan = jnp.all((jnp.abs(state.vol - state.target) < params.tol) | ~params.tank_mask)
    return (state.success | done_plan | (state.violated & params.heel_terminates) |
            (state.time >= params.max_steps_in_episode))


def hydro_params(layout: dict[str, Any], graph: dict[str, np.ndarray], bank: EpisodeBank,
                 **overrides: Any) -> HydroParams:
  """HydroParams for a validated layout, its graph (routes.build_routes) and an episode bank."""
  fields = set(HydroParams.__dataclass_fields__)
  bad = [k for k in overrides if k not in fields]
  if bad:
    raise ValueError(f"unknown BallastHydro parameter(s) {bad}; valid: {sorted(fields)}")
  arrays = graph_arrays(graph, fields)
  n_p = len(layout["pump_rate_m3h"])
  hydro = layout["hydrostatics"]
  hyd = H.make_hydraulics(layout, graph)
  return HydroParams(
      **arrays, pump_mask=jnp.arange(graph["pump_rate"].shape[0]) < n_p,
      hyd=hyd, bank=bank, stab=S.make_stability(layout, graph, hyd.z_bottom, hyd.height),
      displacement=float(hydro["displacement_t"]), gm=float(hydro["gm_m"]),
      mctc=float(hydro["mctc_tm_per_cm"]), lcf=float(hydro["lcf_m"]),
      rho=float(hydro["rho_t_per_m3"]), **overrides)
