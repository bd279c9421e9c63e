"""Replanner baselines for BallastHydro-v0, as policies `policy(bp, obs, key) -> int32[P]`.

They read the same evidence as the BallastNet-v0 baselines (confirmed-good edges, believed flow
ratios chat_e, failure sets; baselines.evidence) and the layout's public hydraulic data (pump
curves, pipe resistances, tank geometry: the operator has the ship's drawings, not its clogs).

Predicted flow of route k from the observed levels: Q_k = Q_clear_k(levels) * prod_{e in k}
chat_e (the clear-pipe operating point scaled by the believed flow ratios), and the volume
moved this step v_k = min(Q_k dt, what the source still has to give, what the sink still needs).
The score is -log(Q_k * gain_k) + eps * length_k + w_fail * #failure sets inside k
(gain 2 for a transfer, which serves two jobs): Dijkstra on believed time, as in v0.

  replan       today's B-replan: the first open job in plan order, its best-scored route,
               heel ignored (it may cross the heel limit and so fail the operation);
  heel_replan  the limit-aware replanner (the fair Dijkstra): any open job; a route is
               admissible when heel, trim and draughts after this step stay inside the ship's
               limits less a margin whatever the route actually delivers between 0 and its
               clear-pipe volume (clogs only slow a route; trim and draughts are linear in the
               volumes and the heel is linearised at the sounded condition, so the band's
               ends suffice); the best-scored admissible route wins; if none is admissible,
               the route that leaves the least excess over the limits, then the lowest heel
               (first command only; further commands must be admissible). It orders jobs to
               stay inside the limits (e.g. drains before fills under a load line).
  oracle       heel_replan with the true clogs (obs field clog_revealed; reveal_clog=True): the
               operating point with the real resistances. Used to check that every generated
               episode is finishable (episodes.py).
With n_cmds > 1 a policy adds commands on further pumps (routes sharing no pipe with the earlier
ones, heel predicted after all of them), greedily in the same order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl_suite.envs.ballast import hydraulics as H
from jaxrl_suite.envs.ballast import stability as S
from jaxrl_suite.envs.ballast.baselines import argmin_first, evidence, pack_edges
from jaxrl_suite.envs.ballast.params import DEG, HydroParams, split_hydro_obs

HYDRO_BASELINES = ("oracle", "replan", "heel_replan")
# The limited quantities, in this order: heel (deg), trim (m), draught forward, aft and mean (m).
LIMITS = ("heel", "trim", "draught_fwd", "draught_aft", "draught_mean")
_BIG = 1e6   # stands for "no limit" (finite, so that differences stay finite)


@struct.dataclass
class HydroBaselineParams:
  env: HydroParams
  route_words: jax.Array           # [K, EW] packed route edge sets (baselines.evidence)
  dheel: jax.Array                 # [K] heel change, deg per m3 moved along route k (linear)
  dmom: jax.Array                  # [K] heel moment change, t m per m3 moved along route k
  margin: float = 0.25             # deg kept free below the heel limit
  margin_trim: float = 0.05        # m kept free inside the trim limit
  margin_draught: float = 0.02     # m kept free inside the draught limits
  w_fail: float = 1e4
  transfer_gain: float = 2.0
  eps_len: float = 1e-4
  heel_aware: bool = struct.field(pytree_node=False, default=True)
  oracle: bool = struct.field(pytree_node=False, default=False)
  n_cmds: int = struct.field(pytree_node=False, default=1)


def make_hydro_baseline(env_params: HydroParams, name: str, n_cmds: int = 1,
                        **knobs) -> HydroBaselineParams:
  """Params of baseline `name` (one of HYDRO_BASELINES) for a layout."""
  if name not in HYDRO_BASELINES:
    raise ValueError(f"unknown BallastHydro baseline {name!r}; valid: {HYDRO_BASELINES}")
  p = env_params
  tcg = jnp.concatenate([p.tcg, jnp.zeros(1)])
  dmom = p.rho * (tcg[p.route_dst] - tcg[p.route_src])
  dheel = dmom / (p.displacement * p.gm) / DEG
  return HydroBaselineParams(env=p, route_words=jnp.asarray(pack_edges(np.asarray(
      p.route_edges))), dheel=dheel, dmom=dmom, heel_aware=name != "replan", oracle=name == "oracle",
      n_cmds=n_cmds, **knobs)


def predicted_moves(bp: HydroBaselineParams, f):
  """(v_max[K] m3 this step with clear pipes (an upper bound: clogs only slow a route down),
  v[K] predicted m3 this step, score[K], useful[K], job[K] routes of the first open job)."""
  p = bp.env
  T, K = p.cap.shape[-1], p.route_mask.shape[-1]
  vol = jnp.clip(f["level"], 0.0, 1.0) * p.cap
  ks = jnp.arange(K)
  q0, _ = H.route_flow(ks, True, vol, p.cap, jnp.ones(p.edge_mask.shape), p, p.hyd)
  if bp.oracle:
    q, _ = H.route_flow(ks, True, vol, p.cap, jnp.maximum(f["clog_revealed"], 0.0), p, p.hyd)
    n_contain = jnp.zeros(K)
  else:
    _, chat, _, n_contain, _ = evidence(f, bp)
    q = q0 * jnp.exp(p.route_edges.astype(jnp.float32) @ jnp.log(jnp.maximum(chat, 0.05)))
  nf = jnp.concatenate([f["need_fill"] > 0.5, jnp.array([True])])
  nd = jnp.concatenate([f["need_drain"] > 0.5, jnp.array([True])])
  useful = p.route_mask & nf[p.route_dst] & nd[p.route_src]
  tgt = jnp.concatenate([f["target"] * p.cap, jnp.zeros(1)])
  v_ext = jnp.concatenate([vol, jnp.zeros(1)])
  give = jnp.where(p.route_src == T, jnp.inf, v_ext[p.route_src] - tgt[p.route_src])
  need = jnp.where(p.route_dst == T, jnp.inf, tgt[p.route_dst] - v_ext[p.route_dst])
  v = jnp.clip(jnp.minimum(q * p.dt_h, jnp.minimum(give, need)), 0.0)
  v_max = jnp.clip(jnp.minimum(q0 * p.dt_h, jnp.minimum(give, need)), 0.0)
  gain = jnp.where(p.route_transfer, bp.transfer_gain, 1.0)
  score = (-jnp.log(jnp.maximum(q * gain, 1e-9)) + bp.eps_len * p.route_len +
           bp.w_fail * n_contain)
  open_job = (f["need_fill"] > 0.5) | (f["need_drain"] > 0.5)
  first = jnp.argmax(open_job)
  job = (p.route_src == first) | (p.route_dst == first)
  return v_max, v, score, useful, job


def route_dheel(bp: HydroBaselineParams, f) -> jax.Array:
  """[K] heel change, deg per m3 moved along each route, at the sounded fills: rho dtcg /
  (Delta GM) of the current condition (stability.py) with ballast-dependent stability, else the
  constant of the linear model. Shared by the heel-aware baselines and the RL agent, so both
  predict heel with the same physics."""
  p = bp.env
  if p.stab is None:
    return bp.dheel
  vol = jnp.clip(f["level"], 0.0, 1.0) * p.cap
  return bp.dmom / S.heel_stiffness(vol, p) / DEG


def limit_rates(bp: HydroBaselineParams, f) -> jax.Array:
  """[K, 5] change of each LIMITS quantity per m3 moved along each route (SEA: no moment, the
  weight leaves or joins the ship): the heel from route_dheel, trim rho dx / (100 MCTC),
  mean draught rho dn / (100 TPC) (dn = +1 into a tank from the sea, -1 out to it), end
  draughts mean +- trim x their lever (stability.condition). Zero but the heel without `stab`."""
  p = bp.env
  dheel = route_dheel(bp, f)
  if p.stab is None:
    return jnp.concatenate([dheel[:, None], jnp.zeros((dheel.shape[0], 4))], -1)
  s = p.stab
  T = p.cap.shape[-1]
  x = jnp.concatenate([p.lcg - p.lcf, jnp.zeros(1)])
  inside = jnp.concatenate([jnp.ones(T), jnp.zeros(1)])
  dtrim = p.rho * (x[p.route_dst] - x[p.route_src]) / (100.0 * p.mctc)
  dmean = p.rho * (inside[p.route_dst] - inside[p.route_src]) / (100.0 * s.tpc)
  dfwd = dmean + dtrim * (0.5 * s.length - p.lcf) / s.length
  daft = dmean - dtrim * (0.5 * s.length + p.lcf) / s.length
  return jnp.stack([dheel, dtrim, dfwd, daft, dmean], -1)


def limit_now(bp: HydroBaselineParams, f) -> jax.Array:
  """[5] the LIMITS quantities at the sounded condition (observation fields)."""
  p = bp.env
  return jnp.concatenate([f["heel"] * p.heel_limit, f["trim"], f["draught"]])


def limit_bounds(bp: HydroBaselineParams) -> tuple[jax.Array, jax.Array]:
  """(lo[5], hi[5]) the admissible range of each LIMITS quantity, the margins taken off."""
  p = bp.env
  h = p.heel_limit - bp.margin
  if p.stab is None:
    return (jnp.array([-h, -_BIG, -_BIG, -_BIG, -_BIG]), jnp.array([h, _BIG, _BIG, _BIG, _BIG]))
  s = p.stab
  tr = s.trim_max - bp.margin_trim
  dmax = jnp.minimum(s.draught_max, _BIG) - bp.margin_draught
  lo = jnp.stack([-h, -tr, jnp.float32(-_BIG), jnp.float32(-_BIG),
                  s.draught_min + bp.margin_draught])
  hi = jnp.stack([h, tr, dmax, dmax, jnp.float32(_BIG)])
  return lo.astype(jnp.float32), hi.astype(jnp.float32)


def limit_excess(bp: HydroBaselineParams, q, lo, hi) -> jax.Array:
  """[...] how far quantities q[..., 5] lie outside [lo, hi], each in units of its limit
  (heel_limit deg, trim limit, 1 m of draught), summed; 0 inside."""
  p = bp.env
  trim_unit = p.stab.trim_max if p.stab is not None else 1.0
  unit = jnp.array([p.heel_limit, trim_unit, 1.0, 1.0, 1.0], jnp.float32)
  return jnp.sum(jnp.maximum(jnp.maximum(q - hi, lo - q), 0.0) / unit, -1)


def limit_tables(bp: HydroBaselineParams, f):
  """(q [5], rates [K, 5], lo [5], hi [5]): limit_now, limit_rates and limit_bounds at once,
  what the RL agent reads (agent_api), so that it predicts the limits with the baselines'
  physics."""
  return (limit_now(bp, f), limit_rates(bp, f)) + limit_bounds(bp)


def band_admissible(lo_band, hi_band, lo, hi) -> jax.Array:
  """[...] True where the band [lo_band, hi_band] (arrays [..., 5]) lies inside [lo, hi]."""
  return jnp.all((hi_band <= hi) & (lo_band >= lo), -1)


def hydro_policy(bp: HydroBaselineParams, obs: jax.Array, key=None) -> jax.Array:
  """The baseline selected by bp's flags (module docstring); int32[P] commands."""
  p = bp.env
  K, P = p.route_mask.shape[-1], p.pump_rate.shape[-1]
  f = split_hydro_obs(obs, p)
  v_max, v, score, useful, job = predicted_moves(bp, f)
  q = limit_now(bp, f)
  rates = limit_rates(bp, f)   # heel linearised at the sounded fills (ballast-dependent GM)
  lim_lo, lim_hi = limit_bounds(bp)
  # Band of each limited quantity reachable after the commands so far: a move delivers between
  # 0 and v_max (clogs and valve time only slow it), the quantities are linear in the moved
  # volumes, so the band's ends are q + the positive / negative parts of rate * v_max.
  # Admissible = every band inside its limits.
  lo = hi = q
  cmds = jnp.full(P, 2 * K, jnp.int32)
  free = useful & (v > 0.5)
  for i in range(bp.n_cmds):
    dq = rates * v_max[:, None]
    hi_k, lo_k = hi + jnp.maximum(dq, 0.0), lo + jnp.minimum(dq, 0.0)
    if bp.heel_aware:
      ok = free & band_admissible(lo_k, hi_k, lim_lo, lim_hi)
      k_ok = argmin_first(jnp.where(ok, score, jnp.inf), K)
      # nothing admissible: the first command takes the route that leaves the least excess
      # over the limits, then lists least (progress must go on); a further command is only
      # ever added when admissible
      q_after = q + rates * v[:, None]
      bad = limit_excess(bp, q_after, lim_lo, lim_hi) + jnp.abs(q_after[:, 0]) / (
          p.heel_limit * 1e3)
      k_low = argmin_first(jnp.where(free, bad, jnp.inf), K)
      k = jnp.where(k_ok < K, k_ok, k_low) if i == 0 else k_ok
    else:
      k = argmin_first(jnp.where(free & job, score, jnp.inf), K)
    live = k < K
    kk = jnp.minimum(k, K - 1)
    cmds = jnp.where(live & (jnp.arange(P) == p.route_pump[kk]), kk, cmds)
    q = jnp.where(live, q + rates[kk] * v[kk], q)
    hi, lo = jnp.where(live, hi_k[kk], hi), jnp.where(live, lo_k[kk], lo)
    # later commands: other pumps, no shared pipe (pair_ok), not the same tanks
    free = free & live & p.pair_ok[kk, :K] & (p.route_pump != p.route_pump[kk])
    job = jnp.ones_like(job) if bp.heel_aware else job & False
  return cmds.astype(jnp.int32)
