"""Strict schema of a ship layout: allowed keys, value types and plausible ranges.

`check_schema(layout)` runs before the structural checks of `layout.validate_layout`. It rejects
what a lenient loader would silently accept and turn into wrong physics or NaN observations:

  * unknown or misspelt keys (`can_blok: false` would leave a pipe blockable): the error names the
    field, e.g. `edges[12].can_blok`, and suggests the nearest valid key;
  * values of the wrong type (a string "false" for a bool, a bool where a number belongs);
  * non-finite numbers (JSON `Infinity` / `NaN`, which Python's json module accepts);
  * implausible magnitudes, outside the ranges of `RANGES` (units: m, m3, m3/h, t, t*m/cm, s).

Every message says what to do (rename the key, use a number in a range, ...). The ranges are
deliberately wide (from small feeders to the largest container ships); they exist to catch unit
mistakes (litres for m3, mm for m) and typos, not to judge a design.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Mapping

# key -> (required, kind); kind is "str", "bool", "num" (range in RANGES), "list" or "obj"
TOP_KEYS = {"name": (True, "str"), "nodes": (True, "list"), "edges": (True, "list"),
            "tanks": (True, "list"), "hydrostatics": (True, "obj"),
            "pump_rate_m3h": (True, "list"), "description": (False, "str"),
            "transfers": (False, "list"), "hydraulics": (False, "obj"),
            "clog_prior": (False, "obj")}
NODE_KEYS = {"name": (True, "str"), "type": (True, "str")}
EDGE_KEYS = {"u": (True, "str"), "v": (True, "str"), "kind": (True, "str"),
             "length": (True, "num"), "can_block": (False, "bool"),
             "diameter_m": (False, "num")}
TANK_KEYS = {"node": (True, "str"), "capacity": (True, "num"), "lcg": (True, "num"),
             "tcg": (True, "num"), "z_bottom_m": (False, "num"), "height_m": (False, "num"),
             "breadth_m": (False, "num")}
HYDRO_KEYS = {"displacement_t": (True, "num"), "gm_m": (True, "num"),
              "mctc_tm_per_cm": (True, "num"), "lcf_m": (True, "num"),
              "rho_t_per_m3": (True, "num"), "draught_m": (False, "num"),
              "kg_m": (False, "num"), "length_m": (False, "num"),
              "tpc_t_per_cm": (False, "num"), "trim_limit_m": (False, "num"),
              "min_draught_m": (False, "num"), "max_draught_m": (False, "num")}
# Pump and pipe data for the hydraulic model (hydraulics.py); every key optional, defaults there.
HYDRAULICS_KEYS = {"pump_head_m": (False, "list"), "shutoff_ratio": (False, "num"),
                   "pump_efficiency": (False, "num"), "pipe_diameter_m": (False, "num"),
                   "friction_factor": (False, "num"), "valve_loss_coeff": (False, "num"),
                   "route_minor_loss_coeff": (False, "num"), "valve_time_s": (False, "num"),
                   "overboard_height_m": (False, "num")}
CLOG_KEYS = {"p_blocked": (False, "list"), "p_partial": (False, "list"),
             "partial_lo": (False, "num"), "partial_hi": (False, "num")}

# field name -> (lo, hi) inclusive plausible range; "length" etc. apply wherever the key appears
RANGES = {
    "length": (0.1, 1000.0), "diameter_m": (0.05, 1.5), "capacity": (1.0, 50000.0),
    "lcg": (-250.0, 250.0), "tcg": (-40.0, 40.0), "z_bottom_m": (0.0, 40.0),
    "height_m": (0.3, 40.0), "breadth_m": (0.3, 80.0), "kg_m": (0.5, 60.0),
    "displacement_t": (500.0, 600000.0), "gm_m": (0.05, 15.0),
    "mctc_tm_per_cm": (5.0, 20000.0), "lcf_m": (-100.0, 100.0), "rho_t_per_m3": (0.99, 1.04),
    "draught_m": (0.5, 25.0), "length_m": (20.0, 500.0), "tpc_t_per_cm": (1.0, 500.0),
    "trim_limit_m": (0.05, 20.0), "min_draught_m": (0.0, 25.0), "max_draught_m": (0.5, 30.0),
    "pump_rate_m3h": (10.0, 10000.0), "pump_head_m": (3.0, 150.0),
    "shutoff_ratio": (1.01, 2.0), "pump_efficiency": (0.2, 0.95),
    "pipe_diameter_m": (0.05, 1.5), "friction_factor": (0.005, 0.1),
    "valve_loss_coeff": (0.0, 50.0), "route_minor_loss_coeff": (0.0, 100.0),
    "valve_time_s": (0.0, 600.0), "overboard_height_m": (0.0, 40.0),
    "partial_lo": (0.01, 1.0), "partial_hi": (0.01, 1.0), "p_blocked": (0.0, 1.0),
    "p_partial": (0.0, 1.0),
}


class SchemaError(ValueError):
  """Raised by check_schema; layout.validate_layout re-raises it as a LayoutError."""


def _is_num(x: Any) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_number(where: str, key: str, x: Any) -> None:
  """x must be a finite number inside RANGES[key] (if listed)."""
  if not _is_num(x):
    raise SchemaError(f"{where} must be a number, got {x!r} ({type(x).__name__}); write it "
                      "without quotes")
  if not math.isfinite(x):
    raise SchemaError(f"{where} is {x} (not finite); give a finite value in "
                      f"{RANGES.get(key, 'the documented range')}")
  if key in RANGES:
    lo, hi = RANGES[key]
    if x <= 0 < lo:
      raise SchemaError(f"{where} has non-positive {key} {x}; {key!r} must lie in [{lo}, {hi}]")
    if not lo <= x <= hi:
      raise SchemaError(f"{where} = {x} is outside the plausible range [{lo}, {hi}] for "
                        f"{key!r}; check the unit (m, m3, m3/h, t) or the value")


def check_object(where: str, obj: Any, spec: Mapping[str, tuple[bool, str]]) -> None:
  """Keys of obj must be in spec (required ones present); scalar values typed and in range."""
  if not isinstance(obj, dict):
    raise SchemaError(f"{where} must be a JSON object, got {type(obj).__name__}")
  for key in obj:
    if key not in spec:
      near = difflib.get_close_matches(str(key), list(spec), n=1)
      hint = f"did you mean {near[0]!r}?" if near else f"valid keys: {sorted(spec)}"
      raise SchemaError(f"{where}.{key}: unknown key ({hint}); remove or rename it")
  for key, (required, kind) in spec.items():
    if key not in obj:
      if required:
        raise SchemaError(f"{where} lacks required key {key!r}")
      continue
    x, w = obj[key], f"{where}.{key}"
    if kind == "str" and not isinstance(x, str):
      raise SchemaError(f"{w} must be a string, got {x!r}")
    if kind == "bool" and not isinstance(x, bool):
      raise SchemaError(f"{w} must be true or false (a JSON bool, no quotes), got {x!r}")
    if kind == "num":
      check_number(w, key, x)
    if kind == "list" and not isinstance(x, list):
      raise SchemaError(f"{w} must be a JSON list, got {type(x).__name__}")
    if kind == "obj" and not isinstance(x, dict):
      raise SchemaError(f"{w} must be a JSON object, got {type(x).__name__}")


def _check_prob(where: str, p: Any, key: str) -> None:
  for i, x in enumerate(p):
    check_number(f"{where}[{i}]", key, x)
  if not p or abs(sum(p) - 1.0) > 1e-6:
    raise SchemaError(f"{where} = {p} must be a non-empty list of probabilities summing to 1")


def check_schema(layout: Mapping[str, Any]) -> None:
  """Strict key/type/range checks of a whole layout (see module docstring)."""
  check_object("layout", layout, TOP_KEYS)
  for field, spec in (("nodes", NODE_KEYS), ("edges", EDGE_KEYS), ("tanks", TANK_KEYS)):
    for i, item in enumerate(layout[field]):
      check_object(f"{field}[{i}]", item, spec)
  check_object("hydrostatics", layout["hydrostatics"], HYDRO_KEYS)
  for i, r in enumerate(layout["pump_rate_m3h"]):
    check_number(f"pump_rate_m3h[{i}]", "pump_rate_m3h", r)
  hyd = layout.get("hydraulics", {})
  check_object("hydraulics", hyd, HYDRAULICS_KEYS)
  for i, h in enumerate(hyd.get("pump_head_m", [])):
    check_number(f"hydraulics.pump_head_m[{i}]", "pump_head_m", h)
  prior = layout.get("clog_prior", {})
  check_object("clog_prior", prior, CLOG_KEYS)
  for key in ("p_blocked", "p_partial"):
    if key in prior:
      _check_prob(f"clog_prior.{key}", prior[key], key)
  lo, hi = prior.get("partial_lo", 0.15), prior.get("partial_hi", 0.5)
  if lo > hi:
    raise SchemaError(f"clog_prior.partial_lo = {lo} exceeds partial_hi = {hi}; swap them")
  for i, pair in enumerate(layout.get("transfers", [])):
    if not isinstance(pair, list) or not all(isinstance(p, str) for p in pair):
      raise SchemaError(f"transfers[{i}] must be a list of two tank names, got {pair!r}")
