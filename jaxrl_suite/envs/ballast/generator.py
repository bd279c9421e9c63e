"""Procedural ship layouts for training across a layout family (docs/ballast.md).

`generate_layout(rng, **choices) -> layout dict` (the JSON schema of layout.py, strict-valid)
draws a plausible container-ship ballast system:

  * a port and a starboard main, each a chain of junctions J1P..JnP / J1S..JnS from aft
    junctions JA_P / JA_S (joined by the aft crossover) towards the bow;
  * main = "ring": the two mains meet at a forward junction JF (FPT hangs off it), so every tank
    is reachable both ways round; main = "split": no forward junction (FPT on the starboard main),
    each pump serves one side only (direct mains, like `direct10`); main = "branch": one
    centreline main JA_C..JnC (a duct keel) with both sides' tanks on branches off it, every
    pump on JA_C (a tree: each tank has exactly one path to each pump, no transfers);
  * `n_cross` extra crossovers J_iP - J_iS between the mains (ring only);
  * 1-3 pumps with a sea chest and an overboard line each; on a ring every pump reaches both
    aft junctions, on split mains pump i serves side i % 2;
  * 8-20 tanks: APT (aft, centre), FPT (fore, centre), then port/starboard pairs of
    double-bottom (DB, low and wide) and wing (WB, tall) tanks along the mains, one pair of
    heeling tanks (HP/HS, wing) when there is room; transfers HP<->HS and FPT<->APT on a ring;
  * geometry scaled from a ship length L in [150, 350] m: beam L/6.7, draught beam/3.7,
    block coefficient 0.65 -> displacement, MCTC ~ displacement * 2.2 L / (100 L); KG with
    empty tanks = the draught; tank heights, capacities, LCG/TCG and free-surface breadths
    (peak 0.4, double bottom 0.3, wing 0.1 x beam) from the hull size; a GM of 1-2 m drawn for
    the condition with every tank half full (all slack), from which the empty-tank GM the
    layout stores follows by stability.py's equations (`_gm_empty`): without it a 150 m ship
    with 20,000 m3 of slack tanks would float at negative GM; pump rates 500-1,500 m3/h, rated
    heads 20-35 m; length_m = L, TPC from a water-plane coefficient of 0.80, and a load-line
    draught (max_draught_m) leaving room for 75-95% of the full ballast load.

Every generated layout passes `layout.validate_layout` and `routes.build_routes(..., "auto")`
(a hypothesis test draws seeds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAINS = ("ring", "split", "branch")


def _tank(node, cap, lcg, tcg, z, h, b):
  return {"node": node, "capacity": round(float(cap), 1), "lcg": round(float(lcg), 1),
          "tcg": round(float(tcg), 1), "z_bottom_m": round(float(z), 2),
          "height_m": round(float(h), 2), "breadth_m": round(float(b), 2)}


def _gm_empty(tanks, disp, kg0, gm_half, rho=1.025):
  """GM with every tank empty such that the GM with every tank half full (all slack) is gm_half:
  GM(v) = KG0 + GM0 - KG(v) - FSC(v) (stability.py) solved for GM0 at v = cap / 2."""
  w = np.array([rho * t["capacity"] / 2.0 for t in tanks])
  vcg = np.array([t["z_bottom_m"] + t["height_m"] / 4.0 for t in tanks])
  i_fs = np.array([t["capacity"] / t["height_m"] / t["breadth_m"] * t["breadth_m"] ** 3 / 12.0
                   for t in tanks])
  delta = disp + w.sum()
  kg = (disp * kg0 + (w * vcg).sum()) / delta
  return gm_half + kg - kg0 + rho * i_fs.sum() / delta


def generate_layout(rng: np.random.Generator | int, n_tanks: int | None = None,
                    n_pumps: int | None = None, main: str | None = None,
                    n_cross: int | None = None, name: str | None = None) -> dict[str, Any]:
  """One random layout; unspecified choices are drawn (n_tanks 8-20, n_pumps 1-3, main ring
  with probability 0.7, n_cross 0-3 on a ring)."""
  rng = np.random.default_rng(rng)
  n_tanks = int(rng.integers(8, 21)) if n_tanks is None else n_tanks
  n_pumps = int(rng.integers(1, 4)) if n_pumps is None else n_pumps
  main = ("ring" if rng.random() < 0.7 else "split") if main is None else main
  if not 8 <= n_tanks <= 20 or not 1 <= n_pumps <= 3 or main not in MAINS:
    raise ValueError(f"n_tanks must be in 8..20, n_pumps in 1..3, main one of {MAINS}; got "
                     f"{n_tanks}, {n_pumps}, {main!r}")
  n_pairs = (n_tanks - 2) // 2            # P/S pairs besides APT and FPT
  extra = n_tanks - 2 - 2 * n_pairs        # odd count: one more centre tank (a DB centre)
  n_sec = max(2, -(-n_pairs // 2))         # main junctions per side; <= 2 pairs per junction
  if n_cross is None:
    n_cross = int(rng.integers(0, min(3, n_sec) + 1)) if main == "ring" else 0
  if main != "ring" and n_cross:
    raise ValueError(f"{main} mains have no crossovers besides the aft one (n_cross must be 0)")
  n_cross = min(n_cross, n_sec)
  L = float(rng.uniform(150, 350))
  beam = L / 6.7
  draught = beam / 3.7
  disp = 1.025 * L * beam * draught * 0.65
  gm = float(rng.uniform(1.0, 2.0))
  hull_h = draught * 1.6                   # depth to the main deck
  tpc = 1.025 * 0.80 * L * beam / 100.0    # t/cm, water-plane coefficient 0.80
  nodes = [{"name": "SEA", "type": "sea"}]
  pumps = [f"BP{i + 1}" for i in range(n_pumps)]
  nodes += [{"name": p, "type": "pump"} for p in pumps]
  if main == "branch":  # one centreline main (duct keel): both sides' tanks hang off it
    port = stbd = ["JA_C"] + [f"J{i + 1}C" for i in range(n_sec)]
    nodes += [{"name": j, "type": "junction"} for j in port]
  else:
    port = ["JA_P"] + [f"J{i + 1}P" for i in range(n_sec)]
    stbd = ["JA_S"] + [f"J{i + 1}S" for i in range(n_sec)]
    nodes += [{"name": j, "type": "junction"} for j in port + stbd]
  edges = []

  def pipe(u, v, kind, length):
    edges.append({"u": u, "v": v, "kind": kind, "length": round(float(length), 1)})

  for i, p in enumerate(pumps):
    pipe("SEA", p, "seachest", rng.uniform(3, 6))
    pipe(p, "SEA", "overboard", rng.uniform(4, 8))
    sides = {"ring": ("JA_P", "JA_S"), "split": (("JA_P", "JA_S")[i % 2],),
             "branch": ("JA_C",)}[main]
    for j in sides:
      pipe(p, j, "pumpside", rng.uniform(3, 8))
  if main != "branch":
    pipe("JA_P", "JA_S", "main", beam * rng.uniform(0.2, 0.35))
  seg = 0.75 * L / (n_sec + 1)             # main segment length between junctions
  for side in ((port,) if main == "branch" else (port, stbd)):
    for a, b in zip(side[:-1], side[1:]):
      pipe(a, b, "main", seg * rng.uniform(0.85, 1.15))
  if main == "ring":
    nodes.append({"name": "JF", "type": "junction"})
    pipe(port[-1], "JF", "main", seg * rng.uniform(1.0, 1.4))
    pipe(stbd[-1], "JF", "main", seg * rng.uniform(1.0, 1.4))
  for i in sorted(rng.choice(np.arange(1, n_sec + 1), n_cross, replace=False)):
    pipe(port[i], stbd[i], "main", beam * rng.uniform(0.5, 0.8))
  tanks = []

  def hang(node, junction, kind, spec):
    nodes.append({"name": node, "type": "tank"})
    pipe(junction, node, kind, rng.uniform(5, 12))
    tanks.append(spec)

  x_aft, x_fwd = -0.45 * L, 0.47 * L
  b_peak, b_db, b_wing = 0.4 * beam, 0.3 * beam, 0.1 * beam   # free-surface breadths [design]
  hang("APT", port[0], "branch", _tank("APT", rng.uniform(800, 1800), x_aft, 0.0,
                                       rng.uniform(0, 2), hull_h * rng.uniform(0.7, 0.9),
                                       b_peak))
  fwd_j = "JF" if main == "ring" else stbd[-1]
  hang("FPT", fwd_j, "branch", _tank("FPT", rng.uniform(1500, 3000), x_fwd, 0.0,
                                      rng.uniform(0, 2), hull_h * rng.uniform(0.7, 0.9),
                                      b_peak))
  heel_pair = n_pairs >= 3
  kinds = ["DB", "WB"] * n_pairs
  for k in range(n_pairs):
    sec = 1 + k // 2
    lcg = -0.35 * L + 0.7 * L * (sec - 0.5) / n_sec
    last_pair = heel_pair and k == n_pairs - 1
    kind = "H" if last_pair else kinds[k]
    for side, j, sgn in (("P", port[sec], -1.0), ("S", stbd[sec], 1.0)):
      if kind == "DB":
        spec = (rng.uniform(800, 2000), sgn * beam * rng.uniform(0.12, 0.2), 0.0,
                rng.uniform(1.5, 2.5))
        name_k, branch = f"DB{sec}{side}_{k}", "branch_db"
      else:
        spec = (rng.uniform(600, 1500), sgn * beam * rng.uniform(0.35, 0.45),
                rng.uniform(1.5, 2.5), hull_h * rng.uniform(0.55, 0.75))
        name_k, branch = (f"H{side}" if kind == "H" else f"WB{sec}{side}_{k}"), "branch"
      cap, tcg, z, h = spec
      hang(name_k, j, branch, _tank(name_k, cap, lcg + rng.uniform(-5, 5), tcg, z, h,
                                    b_db if kind == "DB" else b_wing))
  for c in range(extra):
    nm = f"DBC{c}"
    hang(nm, port[1], "branch_db", _tank(nm, rng.uniform(800, 1500), -0.1 * L, 0.0, 0.0,
                                          rng.uniform(1.5, 2.5), b_db))
  transfers = []
  if main == "ring":
    transfers = [["FPT", "APT"], ["APT", "FPT"]]
    if heel_pair:
      transfers += [["HP", "HS"], ["HS", "HP"]]
  pump_rates = [round(float(rng.uniform(500, 1500)), 0) for _ in pumps]
  heads = [round(float(rng.uniform(20, 35)), 1) for _ in pumps]
  # the assigned load line leaves room for a share of the full ballast load (the rest is cargo):
  # a plan that fills before it drains can push an end draught past it (drawn last, so that the
  # earlier draws, and so the family's pipes and tanks, are those of the layouts before it)
  load_line_room = (1.025 * float(rng.uniform(0.75, 0.95)) * sum(t["capacity"] for t in tanks)
                    / (100.0 * tpc))
  return {
      "name": name or f"gen_{main}{n_tanks}_p{n_pumps}_x{n_cross}",
      "description": "procedurally generated (generator.py)",
      "nodes": nodes, "edges": edges, "tanks": tanks, "transfers": transfers,
      "hydrostatics": {"displacement_t": round(disp, 0),
                       "gm_m": round(_gm_empty(tanks, round(disp, 0), draught, gm), 2),
                       "kg_m": round(draught, 2),
                       "mctc_tm_per_cm": round(disp * 2.2 / 100.0, 1),
                       "lcf_m": round(-0.015 * L, 2), "rho_t_per_m3": 1.025,
                       "draught_m": round(draught, 2), "length_m": round(L, 1),
                       "tpc_t_per_cm": round(tpc, 1),
                       "max_draught_m": round(draught + load_line_room, 2)},
      "pump_rate_m3h": pump_rates,
      "hydraulics": {"pump_head_m": heads},
  }
