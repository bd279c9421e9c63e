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
  heel_replan  the heel-aware replanner (the fair Dijkstra): any open job; a route is admissible
               when the heel after this step stays within heel_limit - margin whatever the
               route actually delivers between 0 and its clear-pipe volume (clogs only slow a
               route, heel is linear in the volumes, so the band's ends suffice); the
               best-scored admissible route wins; if none is admissible, the route whose
               predicted heel is lowest (first command only; further commands must be
               admissible). It orders jobs to stay inside the limit.
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


@struct.dataclass
class HydroBaselineParams:
  env: HydroParams
  route_words: jax.Array           # [K, EW] packed route edge sets (baselines.evidence)
  dheel: jax.Array                 # [K] heel change, deg per m3 moved along route k (linear)
  dmom: jax.Array                  # [K] heel moment change, t m per m3 moved along route k
  margin: float = 0.25             # deg kept free below the heel limit
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


def hydro_policy(bp: HydroBaselineParams, obs: jax.Array, key=None) -> jax.Array:
  """The baseline selected by bp's flags (module docstring); int32[P] commands."""
  p = bp.env
  K, P = p.route_mask.shape[-1], p.pump_rate.shape[-1]
  f = split_hydro_obs(obs, p)
  v_max, v, score, useful, job = predicted_moves(bp, f)
  heel = f["heel"][0] * p.heel_limit
  dheel = route_dheel(bp, f)   # linearised at the sounded fills (ballast-dependent GM)
  # Heel band reachable after the commands so far: a move delivers between 0 and v_max (clogs
  # and valve time only slow it), heel is linear in the moved volumes, so the band's ends are
  # heel + the positive / negative parts of dheel * v_max. Admissible = band inside the limit.
  lo = hi = heel
  cmds = jnp.full(P, 2 * K, jnp.int32)
  free = useful & (v > 0.5)
  for i in range(bp.n_cmds):
    dh = dheel * v_max
    hi_k, lo_k = hi + jnp.maximum(dh, 0.0), lo + jnp.minimum(dh, 0.0)
    if bp.heel_aware:
      ok = free & (jnp.maximum(hi_k, -lo_k) <= p.heel_limit - bp.margin)
      k_ok = argmin_first(jnp.where(ok, score, jnp.inf), K)
      # nothing admissible: the first command takes the route that lists least (progress must
      # go on); a further command is only ever added when admissible
      k_low = argmin_first(jnp.where(free, jnp.abs(heel + dheel * v), jnp.inf), K)
      k = jnp.where(k_ok < K, k_ok, k_low) if i == 0 else k_ok
    else:
      k = argmin_first(jnp.where(free & job, score, jnp.inf), K)
    live = k < K
    kk = jnp.minimum(k, K - 1)
    cmds = jnp.where(live & (jnp.arange(P) == p.route_pump[kk]), kk, cmds)
    heel = jnp.where(live, heel + dheel[kk] * v[kk], heel)
    hi, lo = jnp.where(live, hi_k[kk], hi), jnp.where(live, lo_k[kk], lo)
    # later commands: other pumps, no shared pipe (pair_ok), not the same tanks
    free = free & live & p.pair_ok[kk, :K] & (p.route_pump != p.route_pump[kk])
    job = jnp.ones_like(job) if bp.heel_aware else job & False
  return cmds.astype(jnp.int32)
