"""Ballast-dependent ship stability of BallastHydro-v0: displacement, KG, free surface, GM,
heel and trim from the tank fills (docs/ballast.md, "Stability"; sources there).

The layout's `hydrostatics` describe the ship (hull + cargo) with every ballast tank EMPTY:
displacement Delta0 [t], metacentric height GM0 [m], centre of gravity KG0 [m above keel]
(`kg_m`, default the draught: a loaded container ship's KG sits near its draught), MCTC
[t m/cm], LCF [m]. Ballast w_i = rho v_i [t] in tank i (prismatic: plan area A_i = cap_i / h_i,
transverse free-surface breadth b_i, bottom z_i, height h_i; fill f_i = v_i / cap_i) gives

    Delta   = Delta0 + sum_i w_i                                      (added weight)
    VCG_i   = z_i + h_i f_i / 2                                       (centroid of the water)
    KG      = (Delta0 KG0 + sum_i w_i VCG_i) / Delta                  (moment of weights)
    FSC     = rho sum_i s_i i_i / Delta,  i_i = l_i b_i^3 / 12,  l_i = A_i / b_i
              s_i = 1 when the tank is slack (f_lo < f_i < f_hi), else 0
    GM      = KM0 - KG - FSC,   KM0 = KG0 + GM0                       (fluid GM)
    tan(heel) = M_heel / (Delta max(GM, gm_floor)),  M_heel = rho sum_i v_i tcg_i + M_heel0
    trim    = M_trim / (100 MCTC),  M_trim = rho sum_i v_i (lcg_i - LCF) + M_trim0   [m]
    T_mean  = T0 + sum_i w_i / (100 TPC)                              (parallel sinkage)
    T_fwd   = T_mean + trim (L/2 - LCF) / L,  T_aft = T_mean - trim (L/2 + LCF) / L

Limits (`ship_limits`; each can be overridden in the layout's hydrostatics): |heel| <= the
env's heel_limit; GM >= gm_min; |trim| <= 0.015 L (`trim_limit_m`; MARPOL Annex I reg. 18.2.2
bounds the trim by the stern of a ship in ballast at 0.015 L, applied here both ways); mean
draught >= 2.0 + 0.02 L (`min_draught_m`; MARPOL Annex I reg. 18.2.1); both end draughts <=
`max_draught_m` (the assigned load-line or port draught; no limit when the layout gives none).
L is `length_m` (default: the tanks' LCG span / 0.92, the generator's peak-tank placement), TPC
`tpc_t_per_cm` (default rho Awp / 100 with Awp = 1.2 Delta0 / (rho T0): water-plane
coefficient / block coefficient ~ 0.80 / 0.67 for a cargo ship), T0 `draught_m` (default 10 m).

Held constant, and why: TPC (wall-sided near the waterline), KM (wall-sided hull near its design draught: KB rises and BM falls with
draught, their sum changes slowly), MCTC and LCF (Delta GM_L ~ Delta BM_L = rho I_L, the
water-plane inertia, which does not depend on the displacement for a wall-sided hull). A tank at
or above f_hi = 0.98 counts as pressed full (no free surface) and below f_lo = 0.02 as empty
(stripped), the usual load-line convention. GM below `gm_min` (0.15 m, the IS Code's minimum
initial GM) is a stability failure in the env; the heel angle uses max(GM, gm_floor) so that it
stays finite (a ship with GM <= 0 lolls: the small-angle formula no longer applies).

Everything here is pure and jittable; arrays [T] broadcast over leading batch axes of `vol`.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

SLACK_LO = 0.02    # below: stripped (no free surface)
SLACK_HI = 0.98    # at or above: pressed full (no free surface)
GM_MIN = 0.15      # m, IS Code 2008 Part A 2.2.4: initial GM not less than 0.15 m
GM_FLOOR = 0.01    # m, keeps tan(heel) finite when GM <= 0 (already a failure by GM_MIN)
DEG = np.pi / 180.0
PLAN_ASPECT = 3.0  # default tank plan length / breadth when a layout gives no breadth_m
TRIM_FRAC = 0.015  # trim limit / L (MARPOL Annex I reg. 18.2.2, trim by the stern in ballast)
LENGTH_SPAN = 0.92  # tanks' LCG span / L when a layout gives no length_m (generator.py)
CWP_OVER_CB = 1.2  # water-plane / block coefficient, for the default TPC
# Bits of `breaks` (which limit a condition exceeds); violated = breaks != 0.
HEEL, GM, TRIM, DRAUGHT = 1, 2, 4, 8
LIMIT_BITS = {"heel": HEEL, "gm": GM, "trim": TRIM, "draught": DRAUGHT}


@struct.dataclass
class Stability:
  """Static stability data of one (padded) layout; a pytree, stackable over a family.

  z_bottom / height [T] m (tank bottom above keel, tank height), i_fs [T] m^4 (transverse
  second moment of a slack tank's free surface; 0 on padding), kg0 m (KG with empty tanks).
  """
  z_bottom: jax.Array
  height: jax.Array
  i_fs: jax.Array
  kg0: float
  length: float = 300.0
  tpc: float = 100.0
  draught0: float = 10.0
  trim_max: float = 4.5
  draught_min: float = 8.0
  draught_max: float = float("inf")
  slack_lo: float = SLACK_LO
  slack_hi: float = SLACK_HI
  gm_floor: float = GM_FLOOR


class Condition(NamedTuple):
  """The ship's condition for one ballast distribution (module docstring's symbols)."""
  heel: jax.Array          # deg, + to starboard
  trim: jax.Array          # m, the sign of M_trim (+ when the weight sits forward of LCF)
  gm: jax.Array            # m, fluid GM (free-surface corrected)
  displacement: jax.Array  # t
  kg: jax.Array            # m above keel (solid)
  fsc: jax.Array           # m, free-surface correction
  draught: jax.Array       # m, mean draught (amidships)
  draught_fwd: jax.Array   # m, at the forward perpendicular
  draught_aft: jax.Array   # m, at the aft perpendicular


def free_surface_inertia(cap, height, breadth):
  """i = l b^3 / 12 with l = (cap / height) / b: a rectangular free surface [m^4]."""
  cap, height, breadth = (np.asarray(x, np.float64) for x in (cap, height, breadth))
  length = cap / np.maximum(height, 1e-9) / np.maximum(breadth, 1e-9)
  return length * breadth ** 3 / 12.0


def ship_limits(layout: Mapping[str, Any]) -> dict[str, float]:
  """Length L, TPC, empty-ballast draught T0 and the trim / draught limits of a validated
  layout (module docstring: defaults and their sources)."""
  hydro = layout["hydrostatics"]
  lcg = [float(t["lcg"]) for t in layout["tanks"]]
  length = float(hydro.get("length_m", max(max(lcg) - min(lcg), 1.0) / LENGTH_SPAN))
  draught0 = float(hydro.get("draught_m", 10.0))
  tpc = float(hydro.get("tpc_t_per_cm", CWP_OVER_CB * float(hydro["displacement_t"]) /
                        (100.0 * draught0)))
  return {"length": length, "tpc": tpc, "draught0": draught0,
          "trim_max": float(hydro.get("trim_limit_m", TRIM_FRAC * length)),
          "draught_min": float(hydro.get("min_draught_m", 2.0 + 0.02 * length)),
          "draught_max": float(hydro.get("max_draught_m", np.inf))}


def make_stability(layout: Mapping[str, Any], graph: Mapping[str, np.ndarray],
                   z_bottom, height) -> Stability:
  """Stability data for a validated layout, its padded graph and the tanks' z_bottom / height
  [T] (hydraulics.make_hydraulics resolves their defaults). A tank's `breadth_m` (optional)
  is its free-surface breadth; default the breadth of a plan PLAN_ASPECT times longer than wide.
  """
  T = graph["cap"].shape[0]
  z = np.asarray(z_bottom, np.float64)
  h = np.asarray(height, np.float64)
  i_fs = np.zeros(T)
  for i, t in enumerate(layout["tanks"]):
    area = float(t["capacity"]) / h[i]
    b = float(t.get("breadth_m", np.sqrt(area / PLAN_ASPECT)))
    i_fs[i] = free_surface_inertia(t["capacity"], h[i], b)
  hydro = layout["hydrostatics"]
  kg0 = float(hydro.get("kg_m", hydro.get("draught_m", 10.0)))
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  return Stability(z_bottom=f32(z), height=f32(h), i_fs=f32(i_fs), kg0=kg0,
                   **ship_limits(layout))


def condition(vol, m_heel0, m_trim0, params) -> Condition:
  """The ship's condition for tank volumes vol[..., T] m3 (params: HydroParams with `stab`).

  Symbols and assumptions in the module docstring; rho in t/m3, so w = rho v in tonnes.
  """
  s = params.stab
  cap = jnp.where(params.tank_mask, params.cap, 1.0)
  vol = jnp.where(params.tank_mask, vol, 0.0)
  f = jnp.clip(vol / cap, 0.0, 1.0)
  w = params.rho * vol
  delta = params.displacement + jnp.sum(w, -1)
  vcg = s.z_bottom + 0.5 * s.height * f
  kg = (params.displacement * s.kg0 + jnp.sum(w * vcg, -1)) / delta
  slack = (f > s.slack_lo) & (f < s.slack_hi) & params.tank_mask
  fsc = params.rho * jnp.sum(jnp.where(slack, s.i_fs, 0.0), -1) / delta
  gm = (s.kg0 + params.gm) - kg - fsc
  m_heel = params.rho * jnp.sum(vol * params.tcg, -1) + m_heel0
  m_trim = params.rho * jnp.sum(vol * (params.lcg - params.lcf), -1) + m_trim0
  heel = jnp.arctan(m_heel / (delta * jnp.maximum(gm, s.gm_floor))) / DEG
  trim = m_trim / (100.0 * params.mctc)
  t_mean = s.draught0 + jnp.sum(w, -1) / (100.0 * s.tpc)
  t_fwd = t_mean + trim * (0.5 * s.length - params.lcf) / s.length
  t_aft = t_mean - trim * (0.5 * s.length + params.lcf) / s.length
  return Condition(heel=heel, trim=trim, gm=gm, displacement=delta, kg=kg, fsc=fsc,
                   draught=t_mean, draught_fwd=t_fwd, draught_aft=t_aft)


def breaks(c: Condition, params) -> jax.Array:
  """int32 bit mask of the limits condition c exceeds (HEEL | GM | TRIM | DRAUGHT; 0 = none):
  |heel| > heel_limit, GM < gm_min, |trim| > trim_max, mean draught < draught_min or an end
  draught > draught_max."""
  s = params.stab
  bits = (jnp.where(jnp.abs(c.heel) > params.heel_limit, HEEL, 0) |
          jnp.where(c.gm < params.gm_min, GM, 0) |
          jnp.where(jnp.abs(c.trim) > s.trim_max, TRIM, 0) |
          jnp.where((c.draught < s.draught_min) |
                    (jnp.maximum(c.draught_fwd, c.draught_aft) > s.draught_max), DRAUGHT, 0))
  return bits.astype(jnp.int32)


def heel_stiffness(vol, params) -> jax.Array:
  """Delta * max(GM, floor) [t m per rad, small angles] at vol: the heel of a moment change dM
  is about dM / stiffness rad (the baselines' local linearisation)."""
  c = condition(vol, 0.0, 0.0, params)
  return c.displacement * jnp.maximum(c.gm, params.stab.gm_floor)
