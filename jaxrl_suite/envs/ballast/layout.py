"""Ship layouts as plain data (dict / JSON) and their validator.

A layout is a JSON object::

  {"name": str,
   "nodes": [{"name": str, "type": "sea" | "pump" | "junction" | "tank"}, ...],
   "edges": [{"u": node, "v": node, "kind": KIND, "length": float > 0,
              "can_block": bool (optional; default: true unless the edge is a bridge)}, ...],
   "tanks": [{"node": tank node, "capacity": m3 > 0, "lcg": m, "tcg": m}, ...],
   "transfers": [[src tank, dst tank], ...]   (optional tank -> pump -> tank jobs),
   "hydrostatics": {"displacement_t", "gm_m", "mctc_tm_per_cm", "lcf_m", "rho_t_per_m3"},
   "pump_rate_m3h": [float per pump],
   "hydraulics": {...}, "clog_prior": {...}, "description": str   (optional)}

Optional keys, units and plausible ranges are in `schema.py` (tanks may give z_bottom_m and
height_m, hydrostatics draught_m, kg_m and the ship's length / TPC / trim and draught limits
(stability.ship_limits), edges diameter_m; `hydraulics` holds pump and pipe data for
the hydraulic model, `clog_prior` overrides the documented clog prior for this layout). The
loader is strict: unknown or misspelt keys, wrong types, non-finite or implausible values and
duplicate pipes are errors naming the file and the field.

KIND is one of `EDGE_KINDS`. A `seachest` edge joins SEA to a pump (intake), an `overboard` edge a
pump to SEA (discharge); every tank hangs off a junction by exactly one `branch`/`branch_db` edge.
`validate_layout` rejects broken files with a message that names the offending entry; route-level
checks (every tank must be fillable and drainable) live in `routes.build_routes`, which calls it.
"""

from __future__ import annotations

import importlib.resources
import json
import os
from typing import Any, Mapping

from jaxrl_suite.envs.ballast.schema import SchemaError, check_schema

EDGE_KINDS = ("seachest", "overboard", "pumpside", "main", "branch", "branch_db")
NODE_TYPES = ("sea", "pump", "junction", "tank")
# Shipped layouts are package data (see setup.cfg), read through importlib.resources so that they
# are found in a wheel or zip install as well as in a checkout.
LAYOUTS = importlib.resources.files("jaxrl_suite.envs.ballast") / "layouts"
_HYDRO_KEYS = ("displacement_t", "gm_m", "mctc_tm_per_cm", "lcf_m", "rho_t_per_m3")


class LayoutError(ValueError):
  """A ship layout file is malformed; the message names the offending entry."""


def available_layouts() -> list[str]:
  """Names of the layouts shipped in `layouts/` (without `.json`)."""
  return sorted(f.name[:-5] for f in LAYOUTS.iterdir() if f.name.endswith(".json"))


def load_layout(name_or_path: str) -> dict[str, Any]:
  """Loads and validates a layout by shipped name ("ring14") or by JSON file path.

  Every failure (missing file, not UTF-8 text, not JSON, invalid layout) is a LayoutError whose
  message names the file.
  """
  if os.path.exists(name_or_path):
    path, source = name_or_path, None
  elif name_or_path in available_layouts():
    source = LAYOUTS / f"{name_or_path}.json"
    path = f"{name_or_path} (shipped layout)"
  else:
    raise LayoutError(f"no layout file {name_or_path!r}; shipped layouts: {available_layouts()}")
  try:
    text = source.read_text(encoding="utf-8") if source is not None else _read_text(path)
    layout = json.loads(text)
  except UnicodeDecodeError:
    raise LayoutError(f"{path}: not a UTF-8 text file (a layout is JSON)") from None
  except json.JSONDecodeError as err:
    raise LayoutError(f"{path}: not valid JSON ({err})") from err
  if not isinstance(layout, dict):
    raise LayoutError(f"{path}: a layout is a JSON object, got {type(layout).__name__}")
  try:
    validate_layout(layout)
  except LayoutError as err:
    raise LayoutError(f"{path}: {err}") from None
  return layout


def _read_text(path: str) -> str:
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except IsADirectoryError:
    raise LayoutError(f"{path}: is a directory, not a layout JSON file") from None


def validate_layout(layout: Mapping[str, Any]) -> None:
  """Raises LayoutError with a clear message if `layout` is structurally broken.

  Checks: required fields; unique node names and known node types; exactly one SEA node; at least
  one pump; every edge refers to existing nodes (no dangling edges), has a known kind and a
  positive length; seachest/overboard edges join SEA and a pump; every tank node is listed in
  `tanks` with a positive capacity and hangs off exactly one branch edge; transfer pairs name
  tanks; hydrostatics are positive; one pump rate per pump, each positive.
  """
  for field in ("name", "nodes", "edges", "tanks", "hydrostatics", "pump_rate_m3h"):
    if field not in layout:
      raise LayoutError(f"layout lacks required field {field!r}")
  name = layout["name"]
  try:
    check_schema(layout)
  except SchemaError as err:
    raise LayoutError(f"{name}: {err}") from None
  types: dict[str, str] = {}
  for i, n in enumerate(layout["nodes"]):
    if "name" not in n or "type" not in n:
      raise LayoutError(f"{name}: nodes[{i}] needs 'name' and 'type', got {n}")
    if n["type"] not in NODE_TYPES:
      raise LayoutError(f"{name}: node {n['name']!r} has unknown type {n['type']!r}; "
                        f"valid: {NODE_TYPES}")
    if n["name"] in types:
      raise LayoutError(f"{name}: duplicate node name {n['name']!r}")
    types[n["name"]] = n["type"]
  seas = [n for n, t in types.items() if t == "sea"]
  pumps = [n for n, t in types.items() if t == "pump"]
  if len(seas) != 1:
    raise LayoutError(f"{name}: need exactly one node of type 'sea', found {seas}")
  if not pumps:
    raise LayoutError(f"{name}: no pump node")
  degree = {n: 0 for n in types}
  branch_count = {n: 0 for n, t in types.items() if t == "tank"}
  pipes: dict[tuple, int] = {}
  for i, e in enumerate(layout["edges"]):
    for key in ("u", "v", "kind", "length"):
      if key not in e:
        raise LayoutError(f"{name}: edges[{i}] lacks {key!r}: {e}")
    for end in ("u", "v"):
      if e[end] not in types:
        raise LayoutError(f"{name}: dangling edge edges[{i}] {e['u']}-{e['v']}: node "
                          f"{e[end]!r} does not exist")
    if e["u"] == e["v"]:
      raise LayoutError(f"{name}: edges[{i}] is a self-loop on {e['u']!r}")
    # One pipe per node pair and direction class: a second SEA-pump pipe is fine only if it is
    # the other kind (a pump has one sea chest and one overboard line); any other repeat is a
    # copy-paste duplicate that would double the route library and the clog prior mass.
    pair = (frozenset((e["u"], e["v"])), e["kind"] if e["kind"] in ("seachest", "overboard")
            else "pipe")
    if pair in pipes:
      raise LayoutError(f"{name}: edges[{i}] {e['u']}-{e['v']} duplicates edges[{pipes[pair]}] "
                        "(same pipe twice); delete one, or put a junction between parallel "
                        "pipes")
    pipes[pair] = i
    if e["kind"] not in EDGE_KINDS:
      raise LayoutError(f"{name}: edges[{i}] {e['u']}-{e['v']} has unknown kind {e['kind']!r}; "
                        f"valid: {EDGE_KINDS}")
    if not float(e["length"]) > 0:
      raise LayoutError(f"{name}: edges[{i}] {e['u']}-{e['v']} has non-positive length "
                        f"{e['length']}")
    ends = {types[e["u"]], types[e["v"]]}
    if e["kind"] in ("seachest", "overboard") and ends != {"sea", "pump"}:
      raise LayoutError(f"{name}: {e['kind']} edge edges[{i}] {e['u']}-{e['v']} must join the "
                        "sea node and a pump")
    if "sea" in ends and e["kind"] not in ("seachest", "overboard"):
      raise LayoutError(f"{name}: edge edges[{i}] {e['u']}-{e['v']} touches SEA but is of kind "
                        f"{e['kind']!r} (must be seachest or overboard)")
    if "tank" in ends:
      if e["kind"] not in ("branch", "branch_db"):
        raise LayoutError(f"{name}: edge edges[{i}] {e['u']}-{e['v']} touches a tank but is of "
                          f"kind {e['kind']!r} (must be branch or branch_db)")
      if ends != {"tank", "junction"}:
        raise LayoutError(f"{name}: branch edges[{i}] {e['u']}-{e['v']} must join a tank to a "
                          "junction")
      t = e["u"] if types[e["u"]] == "tank" else e["v"]
      branch_count[t] += 1
    degree[e["u"]] += 1
    degree[e["v"]] += 1
  for n, d in degree.items():
    if d == 0:
      raise LayoutError(f"{name}: node {n!r} has no edges (isolated)")
  listed = {}
  for i, t in enumerate(layout["tanks"]):
    for key in ("node", "capacity", "lcg", "tcg"):
      if key not in t:
        raise LayoutError(f"{name}: tanks[{i}] lacks {key!r}")
    if t["node"] not in types or types[t["node"]] != "tank":
      raise LayoutError(f"{name}: tanks[{i}] refers to {t['node']!r}, which is not a tank node")
    if not float(t["capacity"]) > 0:
      raise LayoutError(f"{name}: tank {t['node']!r} has non-positive capacity {t['capacity']}")
    if t["node"] in listed:
      raise LayoutError(f"{name}: tank {t['node']!r} listed twice in 'tanks'")
    listed[t["node"]] = t
  for n, c in branch_count.items():
    if n not in listed:
      raise LayoutError(f"{name}: tank node {n!r} has no entry in 'tanks' (capacity, lcg, tcg)")
    if c != 1:
      raise LayoutError(f"{name}: tank {n!r} must hang off exactly one branch edge, has {c}")
  for i, pair in enumerate(layout.get("transfers", [])):
    if len(pair) != 2 or any(p not in listed for p in pair) or pair[0] == pair[1]:
      raise LayoutError(f"{name}: transfers[{i}] {pair} must name two different tanks")
  for key in _HYDRO_KEYS:
    if key not in layout["hydrostatics"]:
      raise LayoutError(f"{name}: hydrostatics lacks {key!r}")
    if key != "lcf_m" and not float(layout["hydrostatics"][key]) > 0:
      raise LayoutError(f"{name}: hydrostatics {key!r} must be positive, got "
                        f"{layout['hydrostatics'][key]}")
  rates = layout["pump_rate_m3h"]
  if len(rates) != len(pumps):
    raise LayoutError(f"{name}: pump_rate_m3h has {len(rates)} entries for {len(pumps)} pumps")
  if any(not float(r) > 0 for r in rates):
    raise LayoutError(f"{name}: pump rates must be positive, got {rates}")
  heads = layout.get("hydraulics", {}).get("pump_head_m")
  if heads is not None and len(heads) != len(pumps):
    raise LayoutError(f"{name}: hydraulics.pump_head_m has {len(heads)} entries for "
                      f"{len(pumps)} pumps; give one rated head (m) per pump, in node order")
  for i, t in enumerate(layout["tanks"]):
    top = t.get("z_bottom_m", 0.0) + t.get("height_m", 0.0)
    if top > 60.0:
      raise LayoutError(f"{name}: tanks[{i}] ({t['node']}) tops out at {top} m above the keel "
                        "(z_bottom_m + height_m > 60 m); check the unit (m)")
