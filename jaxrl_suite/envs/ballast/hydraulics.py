"""Pump-and-pipe hydraulics of a ballast route: operating points, gravity flow, valve timing.

Units: lengths and heads in m (1 bar ~ 10.2 m of sea water), volumes in m3, flows Q in m3/h,
times in h (valve_time_h), resistances R in m / (m3/h)^2, power in kW, energy in kWh.

One route k (a pipe path SEA/tank -> pump -> tank/SEA, `routes.py`) is a series circuit:

  pump curve     H_p(Q) = H0 - k_p Q^2          falling with flow; through (Q_rated, H_rated),
                                                H0 = shutoff_ratio * H_rated (shut-off head)
  system curve   H_s(Q) = dz + R_k Q^2
     static head dz = z_out - z_in: z of the water surface the route lifts to minus the one it
                 draws from; a tank's surface is z_bottom + height * vol / cap (prismatic), the
                 sea's is the draught, an overboard outlet sits at overboard_height_m
     resistance  R_k = sum_{e in k} (f L_e / D_e + xi_valve) c_e  +  xi_route c_k  +  sum clogs
                 with c = 1 / (2 g A^2) / 3600^2 the velocity-head factor of a pipe of area A
                 (Darcy-Weisbach friction grows with pipe length and Q^2; every edge has a valve;
                 xi_route lumps bends, strainer, bellmouth and outlet)
     clog        a partial clog of severity c in (0, 1) is an orifice of open-area fraction c:
                 added loss coefficient xi(c) = (1 / (0.6 c) - 1)^2 (contraction coefficient
                 0.6); c = 0 (blocked or a stuck valve) is an infinite resistance. Resistances
                 in series add: two partial clogs no longer multiply flow fractions.

  operating point   H_p(Q) = H_s(Q)   =>   Q* = sqrt(max(H0 - dz, 0) / (k_p + R_k))
                    (both curves are quadratic in Q, so the root is closed-form; a check valve
                    stops reverse flow when dz >= H0)
  gravity           pump stopped, its bypass open: 0 = dz + R_k Q^2  =>  Q* = sqrt(max(-dz, 0) /
                    R_k): water runs downhill (sea -> a double bottom below the waterline, a high
                    tank -> sea or -> a low tank) and stops when the surfaces level out.
  valves            a line-up change takes valve_time_h before water moves (butterfly valves on
                    hydraulic actuators, ~30 s); `open_fraction` is the share of a sub-step left.
  power             P = rho g Q H_p(Q) / eta (kW); gravity flow uses no pump energy.

`make_hydraulics(layout, graph)` turns a validated layout's optional "hydraulics" block (defaults
below) into the arrays of `Hydraulics`; all other functions are pure JAX, jittable and
vmappable (shapes: T tanks, E edges, K routes, P pumps of the padded graph).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

G = 9.81               # m/s^2
RHO_KG = 1025.0        # kg/m3 sea water
ORIFICE_CD = 0.6       # contraction coefficient of a clogged section
R_BLOCKED = 1e12       # m/(m3/h)^2: resistance standing in for "blocked" (Q -> 0, no inf/NaN)
DEFAULTS = {"shutoff_ratio": 1.3, "pump_efficiency": 0.7, "pipe_diameter_m": 0.3,
            "friction_factor": 0.02, "valve_loss_coeff": 1.0, "route_minor_loss_coeff": 5.0,
            "valve_time_s": 30.0, "rated_head_m": 25.0}
# tank geometry defaults when the layout gives none: double bottoms low and flat, others tall
TANK_DEFAULTS = {"branch_db": (0.0, 2.0), "branch": (2.0, 14.0)}
DRAUGHT_DEFAULT = 10.0


@struct.dataclass
class Hydraulics:
  """Static hydraulic data of one (padded) layout; a pytree, stackable over a layout family."""
  edge_r: jax.Array       # [E] clear resistance of edge e (friction + valve), m/(m3/h)^2
  edge_vh: jax.Array      # [E] velocity-head factor 1/(2 g A^2)/3600^2 of edge e
  route_r: jax.Array      # [K] clear resistance of route k incl. minor losses
  pump_h0: jax.Array      # [P] shut-off head H0, m
  pump_k: jax.Array       # [P] pump-curve coefficient k_p, m/(m3/h)^2
  z_bottom: jax.Array     # [T] tank bottom above keel, m
  height: jax.Array       # [T] tank height, m
  draught: float = DRAUGHT_DEFAULT
  overboard_z: float = DRAUGHT_DEFAULT
  pump_eff: float = 0.7
  valve_time_h: float = 30.0 / 3600.0


def velocity_head_factor(diameter_m):
  """1 / (2 g A^2) converted to m per (m3/h)^2: h = xi * factor * Q^2 for loss coefficient xi."""
  area = np.pi * np.asarray(diameter_m, np.float64) ** 2 / 4.0
  return 1.0 / (2.0 * G * area ** 2) / 3600.0 ** 2


def make_hydraulics(layout: Mapping[str, Any], graph: Mapping[str, np.ndarray]) -> Hydraulics:
  """Hydraulic arrays for a layout validated by layout.py and its padded graph (routes.py)."""
  hyd = {**DEFAULTS, **layout.get("hydraulics", {})}
  E, T = graph["edge_mask"].shape[0], graph["cap"].shape[0]
  P = graph["pump_rate"].shape[0]
  d_pipe = float(hyd["pipe_diameter_m"])
  vh = np.zeros(E)
  r = np.zeros(E)
  for i, e in enumerate(layout["edges"]):
    d = float(e.get("diameter_m", d_pipe))
    vh[i] = velocity_head_factor(d)
    r[i] = (float(hyd["friction_factor"]) * float(e["length"]) / d +
            float(hyd["valve_loss_coeff"])) * vh[i]
  route_r = graph["route_edges"].astype(np.float64) @ r
  route_r += float(hyd["route_minor_loss_coeff"]) * velocity_head_factor(d_pipe)
  n_p = len(layout["pump_rate_m3h"])
  rated_h = np.asarray(hyd.get("pump_head_m", [hyd["rated_head_m"]] * n_p), np.float64)
  q_rated = np.asarray(layout["pump_rate_m3h"], np.float64)
  h0 = np.zeros(P)
  k = np.ones(P)
  h0[:n_p] = float(hyd["shutoff_ratio"]) * rated_h
  k[:n_p] = (h0[:n_p] - rated_h) / q_rated ** 2
  z = np.zeros(T)
  h = np.ones(T)
  kind_of = {}
  for e in layout["edges"]:
    for end in (e["u"], e["v"]):
      kind_of.setdefault(end, e["kind"])
  for i, t in enumerate(layout["tanks"]):
    z0, h0t = TANK_DEFAULTS.get(kind_of.get(t["node"], "branch"), TANK_DEFAULTS["branch"])
    z[i], h[i] = t.get("z_bottom_m", z0), t.get("height_m", h0t)
  draught = float(layout["hydrostatics"].get("draught_m", DRAUGHT_DEFAULT))
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  return Hydraulics(edge_r=f32(r), edge_vh=f32(vh), route_r=f32(route_r), pump_h0=f32(h0),
                    pump_k=f32(k), z_bottom=f32(z), height=f32(h), draught=draught,
                    overboard_z=float(hyd.get("overboard_height_m", draught)),
                    pump_eff=float(hyd["pump_efficiency"]),
                    valve_time_h=float(hyd["valve_time_s"]) / 3600.0)


def clog_loss_coeff(c: jax.Array) -> jax.Array:
  """Added loss coefficient of an edge with clog state c: 0 clear (c >= 1), orifice
  (1/(Cd c) - 1)^2 partial, R_BLOCKED-scale for c <= 0 (handled by `edge_resistance`)."""
  cc = jnp.clip(c, 1e-3, 1.0)
  return jnp.where(c >= 1.0, 0.0, (1.0 / (ORIFICE_CD * cc) - 1.0) ** 2)


def edge_clog_resistance(clog: jax.Array, hyd: Hydraulics) -> jax.Array:
  """[E] resistance added by clogs, m/(m3/h)^2 (R_BLOCKED on blocked edges)."""
  return jnp.where(clog <= 0.0, R_BLOCKED, clog_loss_coeff(clog) * hyd.edge_vh)


def surfaces(vol: jax.Array, cap: jax.Array, hyd: Hydraulics) -> jax.Array:
  """[T] water-surface height above keel, m (prismatic tanks; padded tanks at z_bottom)."""
  frac = vol / jnp.where(cap > 0, cap, 1.0)
  return hyd.z_bottom + hyd.height * jnp.clip(frac, 0.0, 1.0)


def static_head(z_tank: jax.Array, src, dst, hyd: Hydraulics):
  """dz = z_out - z_in for routes src -> dst (tank indices; SEA = T = len(z_tank)), m."""
  T = z_tank.shape[-1]
  z_in = jnp.where(src == T, hyd.draught, z_tank[jnp.minimum(src, T - 1)])
  z_out = jnp.where(dst == T, hyd.overboard_z, z_tank[jnp.minimum(dst, T - 1)])
  return z_out - z_in


def operating_point(h0, k, dz, r):
  """Flow Q* (m3/h) where the pump curve H0 - k Q^2 meets the system curve dz + r Q^2.

  Gravity flow is the case h0 = k = 0. No reverse flow (check valve / stopped at level).
  """
  return jnp.sqrt(jnp.maximum(h0 - dz, 0.0) / jnp.maximum(k + r, 1e-30))


def pump_head(h0, k, q):
  """Pump head H_p(Q) = H0 - k Q^2, m."""
  return h0 - k * q ** 2


def route_flow(k_route, pumped, vol, cap, clog, graph, hyd: Hydraulics):
  """Operating point of route(s) k_route with the pump running (pumped) or bypassed (gravity).

  Works on scalars or any broadcast shape of k_route/pumped. Returns (Q m3/h, pump head m, 0
  under gravity). `graph` holds route_edges [K,E], route_src/route_dst [K], route_pump [K].
  """
  r_clog = graph.route_edges[k_route].astype(jnp.float32) @ edge_clog_resistance(clog, hyd)
  r = hyd.route_r[k_route] + r_clog
  p = graph.route_pump[k_route]
  dz = static_head(surfaces(vol, cap, hyd), graph.route_src[k_route], graph.route_dst[k_route],
                   hyd)
  h0 = jnp.where(pumped, hyd.pump_h0[p], 0.0)
  kp = jnp.where(pumped, hyd.pump_k[p], 0.0)
  q = operating_point(h0, kp, dz, r)
  return q, jnp.where(pumped, pump_head(h0, kp, q), 0.0)


def pump_power_kw(q, head, hyd: Hydraulics):
  """Shaft power rho g Q H / eta in kW for Q m3/h and head m."""
  return RHO_KG * G * (q / 3600.0) * jnp.maximum(head, 0.0) / hyd.pump_eff / 1000.0


def open_fraction(t0_h, t1_h, switched, hyd: Hydraulics):
  """Share of the sub-step [t0, t1] (h since the command) with the valves open: a switched
  line-up starts flowing at valve_time_h, an unchanged one flows throughout."""
  t_open = jnp.where(switched, hyd.valve_time_h, 0.0)
  return jnp.clip((t1_h - jnp.maximum(t0_h, t_open)) / (t1_h - t0_h), 0.0, 1.0)
