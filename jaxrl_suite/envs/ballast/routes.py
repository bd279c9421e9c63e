"""Offline route library: every simple pipe path through exactly one pump, as padded arrays.

Built once in Python at config time from a validated layout (`layout.py`). Because the library
holds *every* simple path, "Dijkstra on the believed graph" is exactly an `argmin` over library
routes of believed cost, which is vmappable and needs no priority queue (design doc section 4.1).

Route kinds (src/dst are tank indices; SEA is index T_max):
  fill       SEA --seachest--> pump --> ... --> tank
  deballast  tank --> ... --> pump --overboard--> SEA
  transfer   tank --> ... --> pump --> ... --> tank   (only for pairs listed in `transfers`)
Intermediate nodes are junctions only (never SEA, another pump, or another tank); paths are
node-simple, and the two legs of a transfer share only the pump.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from jaxrl_suite.envs.ballast.layout import EDGE_KINDS, LayoutError, validate_layout

# Padded sizes of BallastNet-v0 (design doc 4.1). Every array carries a mask. The hydraulic env
# (hydro_env.py) is sized from its layouts instead (`layout_sizes`), so ring mains with many
# crossovers (hundreds of routes) and 20-tank ships load; v0 keeps these constants because its
# committed results, agents and action space were built on them.
N_MAX, E_MAX, T_MAX, P_MAX, K_MAX, F_MAX = 32, 48, 16, 2, 256, 16
assert K_MAX % 32 == 0  # route sets are packed into uint32 words
V0_SIZES = {"N": N_MAX, "E": E_MAX, "T": T_MAX, "P": P_MAX, "K": K_MAX}
# Enumeration guard, not a padded size: the library lists every simple path, which grows
# exponentially with crossovers; past this many routes use fewer crossovers (or a per-step
# shortest-path search, not built).
ROUTE_LIMIT = 8192
# Clog-prior weights per edge kind [design]: strainers (sea chest / overboard) block 3x as often
# as mains; double-bottom branches clog partially 2x as often as other edges.
BLOCK_WEIGHT = {"seachest": 3.0, "overboard": 3.0, "pumpside": 1.0, "main": 1.0,
                "branch": 1.0, "branch_db": 1.0}
PARTIAL_WEIGHT = {"seachest": 1.0, "overboard": 1.0, "pumpside": 1.0, "main": 1.0,
                  "branch": 1.0, "branch_db": 2.0}


def _simple_paths(adj, types, start, goal, forbidden):
  """All node-simple paths start -> goal; yields (node list, edge-index list)."""
  out = []

  def dfs(node, nodes, edges):
    if node == goal:
      out.append((list(nodes), list(edges)))
      if len(out) > ROUTE_LIMIT:
        raise LayoutError(f"more than {ROUTE_LIMIT} simple paths between {start} and {goal}: "
                          "too many crossovers for an enumerated route library")
      return
    for nxt, ei in adj[node]:
      if nxt in nodes or nxt in forbidden:
        continue
      if nxt != goal and types[nxt] != "junction":
        continue  # only junctions are pass-through nodes
      nodes.append(nxt)
      edges.append(ei)
      dfs(nxt, nodes, edges)
      nodes.pop()
      edges.pop()

  dfs(start, [start], [])
  return out


def enumerate_routes(layout: Mapping[str, Any]) -> list[dict[str, Any]]:
  """Lists every route of the layout as dicts {src, dst, pump, edges, kind} (unpadded).

  src/dst are tank indices (order of `layout["tanks"]`) or -1 for SEA; pump is a pump index.
  """
  types = {n["name"]: n["type"] for n in layout["nodes"]}
  pumps = [n["name"] for n in layout["nodes"] if n["type"] == "pump"]
  tanks = [t["node"] for t in layout["tanks"]]
  adj: dict[str, list] = {n: [] for n in types}
  chest = {p: [] for p in pumps}
  overboard = {p: [] for p in pumps}
  for i, e in enumerate(layout["edges"]):
    if e["kind"] == "seachest":
      chest[e["u"] if types[e["u"]] == "pump" else e["v"]].append(i)
    elif e["kind"] == "overboard":
      overboard[e["u"] if types[e["u"]] == "pump" else e["v"]].append(i)
    else:
      adj[e["u"]].append((e["v"], i))
      adj[e["v"]].append((e["u"], i))
  routes = []
  for ti, t in enumerate(tanks):
    for pi, p in enumerate(pumps):
      for _, path in _simple_paths(adj, types, p, t, forbidden=set()):
        for c in chest[p]:
          routes.append({"src": -1, "dst": ti, "pump": pi, "edges": [c] + path, "kind": "fill"})
  for ti, t in enumerate(tanks):
    for pi, p in enumerate(pumps):
      for _, path in _simple_paths(adj, types, t, p, forbidden=set()):
        for o in overboard[p]:
          routes.append({"src": ti, "dst": -1, "pump": pi, "edges": path + [o],
                         "kind": "deballast"})
  for a, b in layout.get("transfers", []):
    ai, bi = tanks.index(a), tanks.index(b)
    for pi, p in enumerate(pumps):
      for n1, e1 in _simple_paths(adj, types, a, p, forbidden=set()):
        for _, e2 in _simple_paths(adj, types, p, b, forbidden=set(n1[:-1])):
          routes.append({"src": ai, "dst": bi, "pump": pi, "edges": e1 + e2, "kind": "transfer"})
  if len(routes) > ROUTE_LIMIT:
    raise LayoutError(f"{layout['name']}: {len(routes)} routes exceed the enumeration limit "
                      f"{ROUTE_LIMIT}; use fewer crossovers or fewer transfer pairs")
  return routes


def layout_sizes(layouts: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  """Smallest padded sizes {N, E, T, P, K} holding every layout of `layouts` (K a multiple of
  32, for the packed route bit sets). Validates each layout."""
  sizes = {"N": 1, "E": 1, "T": 1, "P": 1, "K": 32}
  for lay in layouts:
    validate_layout(lay)
    n_routes = len(enumerate_routes(lay))
    pumps = sum(n["type"] == "pump" for n in lay["nodes"])
    for key, n in (("N", len(lay["nodes"])), ("E", len(lay["edges"])),
                   ("T", len(lay["tanks"])), ("P", pumps), ("K", -(-n_routes // 32) * 32)):
      sizes[key] = max(sizes[key], n)
  return sizes


def build_routes(layout: Mapping[str, Any],
                 sizes: Mapping[str, int] | str | None = None) -> dict[str, np.ndarray]:
  """Validates `layout` and builds the padded graph and route arrays.

  sizes: None -> the v0 constants of this module (N_MAX, E_MAX, T_MAX, P_MAX, K_MAX);
    "auto" -> `layout_sizes([layout])` (this layout's own sizes); or a dict {N, E, T, P, K}
    (e.g. `layout_sizes` of a whole layout family, so that their EnvParams stack).
  Returns a dict of numpy arrays (shapes with the padded sizes):
    edge_mask[E] bool, edge_kind[E] int (index in EDGE_KINDS), edge_len[E] m,
    can_block[E] bool, block_w[E], partial_w[E] (clog-prior weights, 0 on padding),
    tank_mask[T] bool, cap[T] m3, lcg[T] m, tcg[T] m,
    route_edges[K,E] bool, route_src[K], route_dst[K] (tank index, SEA = T_MAX),
    route_pump[K], route_mask[K] bool, route_len[K] m, route_transfer[K] bool,
    pair_ok[K+1,K+1] bool (two routes on different pumps sharing no edge; NOOP = index K),
    edge_route_bits[E,K/32], fill_bits[T,K/32], drain_bits[T,K/32] uint32 (packed route sets),
    pump_rate[P] m3/h, and scalars n_tanks, n_edges, n_routes.
  Raises:
    LayoutError: broken layout, a tank without a fill or deballast route, a transfer pair without
      a route, or sizes above the padded maxima.
  """
  validate_layout(layout)
  if sizes is None:
    sizes = V0_SIZES
  elif sizes == "auto":
    sizes = layout_sizes([layout])
  name = layout["name"]
  n_nodes, edges, tanks = len(layout["nodes"]), layout["edges"], layout["tanks"]
  pumps = [n["name"] for n in layout["nodes"] if n["type"] == "pump"]
  for what, n, cap in (("nodes", n_nodes, sizes["N"]), ("edges", len(edges), sizes["E"]),
                       ("tanks", len(tanks), sizes["T"]), ("pumps", len(pumps), sizes["P"])):
    if n > cap:
      raise LayoutError(f"{name}: {n} {what} exceed the padded maximum {cap}"
                        + (" of BallastNet-v0; the hydraulic env (BallastHydro) sizes its "
                           "arrays from the layout" if sizes is V0_SIZES else ""))
  routes = enumerate_routes(layout)
  for ti, t in enumerate(tanks):
    for kind, key in (("fill", "dst"), ("deballast", "src")):
      if not any(r["kind"] == kind and r[key] == ti for r in routes):
        raise LayoutError(f"{name}: tank {t['node']!r} has no {kind} route (no path from a pump "
                          "through junctions to it)")
  for a, b in layout.get("transfers", []):
    names = [t["node"] for t in tanks]
    if not any(r["kind"] == "transfer" and r["src"] == names.index(a) and
               r["dst"] == names.index(b) for r in routes):
      raise LayoutError(f"{name}: transfer {a}->{b} has no route through a single pump")
  E, T, K, P = sizes["E"], sizes["T"], sizes["K"], sizes["P"]
  if len(routes) > K:
    raise LayoutError(f"{name}: {len(routes)} routes exceed the padded maximum {K}"
                      + (" of BallastNet-v0 (use the hydraulic env BallastHydro, which sizes "
                         "the library from the layout)" if sizes is V0_SIZES else ""))
  if K % 32:
    raise LayoutError(f"{name}: padded route count {K} must be a multiple of 32")
  g: dict[str, Any] = {}
  g["edge_mask"] = np.arange(E) < len(edges)
  g["edge_kind"] = np.zeros(E, np.int32)
  g["edge_len"] = np.zeros(E, np.float32)
  for i, e in enumerate(edges):
    g["edge_kind"][i] = EDGE_KINDS.index(e["kind"])
    g["edge_len"][i] = float(e["length"])
  g["tank_mask"] = np.arange(T) < len(tanks)
  g["cap"] = np.zeros(T, np.float32)
  g["lcg"] = np.zeros(T, np.float32)
  g["tcg"] = np.zeros(T, np.float32)
  for i, t in enumerate(tanks):
    g["cap"][i], g["lcg"][i], g["tcg"][i] = t["capacity"], t["lcg"], t["tcg"]
  g["route_edges"] = np.zeros((K, E), bool)
  g["route_src"] = np.full(K, T, np.int32)
  g["route_dst"] = np.full(K, T, np.int32)
  g["route_pump"] = np.zeros(K, np.int32)
  g["route_mask"] = np.arange(K) < len(routes)
  g["route_len"] = np.zeros(K, np.float32)
  g["route_transfer"] = np.zeros(K, bool)
  for k, r in enumerate(routes):
    g["route_edges"][k, r["edges"]] = True
    g["route_src"][k] = T if r["src"] < 0 else r["src"]
    g["route_dst"][k] = T if r["dst"] < 0 else r["dst"]
    g["route_pump"][k] = r["pump"]
    g["route_len"][k] = sum(float(edges[i]["length"]) for i in r["edges"])
    g["route_transfer"][k] = r["kind"] == "transfer"
  # An edge may block only if every tank keeps a fill and a deballast route without it (so a
  # single blockage never makes the plan infeasible; bridges can only clog partially).
  can_block = np.zeros(E, bool)
  for i, e in enumerate(edges):
    if not e.get("can_block", True):
      continue
    ok = True
    for ti in range(len(tanks)):
      for key in ("src", "dst"):
        sel = [(r[key] == ti and i not in r["edges"]) for r in routes]
        ok &= any(sel)
    can_block[i] = ok
  g["can_block"] = can_block
  kinds = [EDGE_KINDS[k] for k in g["edge_kind"]]
  g["block_w"] = np.where(can_block, [BLOCK_WEIGHT[k] for k in kinds], 0).astype(np.float32)
  g["partial_w"] = np.where(g["edge_mask"], [PARTIAL_WEIGHT[k] for k in kinds],
                            0).astype(np.float32)
  re = g["route_edges"].astype(np.float32)
  share = (re @ re.T) > 0.5  # [K, K] without a [K, K, E] intermediate (K can be thousands)
  diff_pump = g["route_pump"][:, None] != g["route_pump"][None, :]
  valid = g["route_mask"][:, None] & g["route_mask"][None, :]
  pair = np.zeros((K + 1, K + 1), bool)
  pair[:K, :K] = valid & diff_pump & ~share
  pair[K, :K] = g["route_mask"]
  pair[:K, K] = g["route_mask"]
  pair[K, K] = True
  g["pair_ok"] = pair
  # Bit tables for the feasibility test at reset (K routes packed into K/32 uint32 words):
  # edge_route_bits[e] = routes through edge e; fill_bits[t] / drain_bits[t] = fill / deballast
  # routes of tank t. "Tank t keeps a fill route" = any(fill_bits[t] & ~OR_e blocked edge_bits[e]).
  def pack(b):  # bool [..., K] -> uint32 [..., K/32], bit j of word w is route 32*w + j
    w = b.reshape(b.shape[:-1] + (K // 32, 32)).astype(np.uint64)
    return (w << np.arange(32, dtype=np.uint64)).sum(-1).astype(np.uint32)
  g["edge_route_bits"] = pack(g["route_edges"].T)
  tank_ids = np.arange(T)[:, None]
  fill_of = g["route_mask"] & (g["route_src"] == T) & (g["route_dst"] == tank_ids)
  drain_of = g["route_mask"] & (g["route_dst"] == T) & (g["route_src"] == tank_ids)
  g["fill_bits"], g["drain_bits"] = pack(fill_of), pack(drain_of)
  g["pump_rate"] = np.zeros(P, np.float32)
  g["pump_rate"][:len(pumps)] = layout["pump_rate_m3h"]
  g["n_tanks"], g["n_edges"], g["n_routes"] = len(tanks), len(edges), len(routes)
  return g
