"""A parameterised family of ballast pipe networks: layout = sample_layout(key, FamilyParams).

`FamilyParams` names the family (every field a range or a set, validated by
`validate_family`): tank count, pump count, topologies with their probabilities
("ring": two side mains meeting forward, with crossovers; "direct": each pump on its own side
main, generator's "split"; "branch": one centreline main with tank branches, a tree), the
number of ring crossovers, and the pipe resistances (Darcy friction factor and pipe diameter,
which set every pipe's resistance f L / D + valve loss in hydraulics.py).

`sample_layout(key, fp)` is a pure function of (key, fp): the key (a jax PRNG key or an int)
fixes one numpy generator from which every choice is drawn, then generator.generate_layout
builds the ship; the same key and params give the same layout, byte for byte. The layout
passes the strict validator (`layout.validate_layout`), its route library fits
`fp.max_routes`, and every tank can be filled from and emptied to the sea (checked; a draw that
fails is redrawn from the next sub-key, at most `max_tries` times, so the law is the family's
law conditioned on these checks).

`split_keys(key, n_train, n_val, n_eval)` gives three disjoint key sets: training layouts (RL
and heuristic choice), validation layouts (flatness and checkpoint choice) and held-out
evaluation layouts (scored once). Nothing in the family is tuned to the shipped layouts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from jaxrl_suite.envs.ballast.generator import generate_layout

TOPOLOGIES = ("ring", "direct", "branch")
_MAIN = {"ring": "ring", "direct": "split", "branch": "branch"}


@dataclasses.dataclass(frozen=True)
class FamilyParams:
  """The family's ranges (inclusive) and sets; see the module docstring."""
  n_tanks: tuple[int, int] = (8, 20)
  n_pumps: tuple[int, int] = (1, 3)
  topologies: tuple[str, ...] = TOPOLOGIES
  topology_p: tuple[float, ...] = (0.5, 0.25, 0.25)
  n_cross: tuple[int, int] = (0, 3)               # ring crossovers besides the aft one
  friction_factor: tuple[float, float] = (0.015, 0.03)
  pipe_diameter_m: tuple[float, float] = (0.25, 0.4)
  max_routes: int = 256
  max_tries: int = 50


def validate_family(fp: FamilyParams) -> None:
  """Raises ValueError naming the first bad FamilyParams field and what to do."""
  def rng_ok(name, lo, hi, kind=int):
    a, b = getattr(fp, name)
    if not (isinstance(a, kind) and isinstance(b, kind)) or not lo <= a <= b <= hi:
      raise ValueError(f"FamilyParams.{name} must be ({kind.__name__} lo, hi) with "
                       f"{lo} <= lo <= hi <= {hi}, got {getattr(fp, name)!r}")
  rng_ok("n_tanks", 8, 20)
  rng_ok("n_pumps", 1, 3)
  rng_ok("n_cross", 0, 3)
  rng_ok("friction_factor", 0.005, 0.1, float)
  rng_ok("pipe_diameter_m", 0.05, 1.5, float)
  bad = [t for t in fp.topologies if t not in TOPOLOGIES]
  if not fp.topologies or bad or len(set(fp.topologies)) != len(fp.topologies):
    raise ValueError(f"FamilyParams.topologies must be distinct names from {TOPOLOGIES}, got "
                     f"{fp.topologies!r}")
  p = np.asarray(fp.topology_p, np.float64)
  if p.shape != (len(fp.topologies),) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
    raise ValueError(f"FamilyParams.topology_p must give one probability per topology "
                     f"{fp.topologies} summing to 1, got {fp.topology_p!r}")
  if not isinstance(fp.max_routes, int) or fp.max_routes < 8:
    raise ValueError(f"FamilyParams.max_routes must be an int >= 8, got {fp.max_routes!r}")
  if not isinstance(fp.max_tries, int) or fp.max_tries < 1:
    raise ValueError(f"FamilyParams.max_tries must be an int >= 1, got {fp.max_tries!r}")


def _seed(key) -> int:
  """One 63-bit numpy seed from a jax key (or an int seed, used as is)."""
  if isinstance(key, (int, np.integer)):
    return int(key)
  bits = np.asarray(jax.random.bits(key, (2,), np.uint32), np.uint64)
  return int((bits[0] << np.uint64(31)) ^ bits[1])


def _draw(rng: np.random.Generator, fp: FamilyParams, name: str) -> dict[str, Any]:
  topo = fp.topologies[int(rng.choice(len(fp.topologies), p=np.asarray(fp.topology_p)))]
  n_t = int(rng.integers(fp.n_tanks[0], fp.n_tanks[1] + 1))
  n_p = int(rng.integers(fp.n_pumps[0], fp.n_pumps[1] + 1))
  n_x = int(rng.integers(fp.n_cross[0], fp.n_cross[1] + 1)) if topo == "ring" else 0
  ff = float(rng.uniform(*fp.friction_factor))
  d = float(rng.uniform(*fp.pipe_diameter_m))
  lay = generate_layout(rng, n_tanks=n_t, n_pumps=n_p, main=_MAIN[topo], n_cross=n_x,
                        name=name)
  lay["hydraulics"] = {**lay["hydraulics"], "friction_factor": round(ff, 4),
                       "pipe_diameter_m": round(d, 3)}
  lay["description"] = (f"family member: {topo}, {n_t} tanks, {n_p} pumps, {n_x} crossovers, "
                        f"f={ff:.4f}, D={d:.3f} m (family.py)")
  return lay


def layout_problems(lay: dict[str, Any], max_routes: int) -> list[str]:
  """Why a layout is not a usable family member ([] if it is): strict validation, a route
  library over max_routes, a tank without a fill or a deballast route, a disconnected pipe
  graph."""
  from jaxrl_suite.envs.ballast.layout import LayoutError, validate_layout
  from jaxrl_suite.envs.ballast.routes import build_routes, enumerate_routes
  try:
    validate_layout(lay)
  except LayoutError as e:
    return [f"invalid: {e}"]
  if not connected(lay):
    return ["pipe graph not connected"]
  n_r = len(enumerate_routes(lay))
  if n_r > max_routes:
    return [f"{n_r} routes > max_routes={max_routes}"]
  g = build_routes(lay, "auto")
  T, m = int(g["n_tanks"]), g["route_mask"]
  fills = {int(d) for s, d, k in zip(g["route_src"], g["route_dst"], m) if k and s == T}
  drains = {int(s) for s, d, k in zip(g["route_src"], g["route_dst"], m) if k and d == T}
  out = []
  for t in range(T):
    if t not in fills or t not in drains:
      out.append(f"tank {lay['tanks'][t]['node']} lacks a fill or deballast route")
  return out


def connected(lay: dict[str, Any]) -> bool:
  """Every node reachable from SEA along the (undirected) pipes."""
  adj: dict[str, set[str]] = {n["name"]: set() for n in lay["nodes"]}
  for e in lay["edges"]:
    adj[e["u"]].add(e["v"])
    adj[e["v"]].add(e["u"])
  seen, stack = {"SEA"}, ["SEA"]
  while stack:
    for v in adj[stack.pop()] - seen:
      seen.add(v)
      stack.append(v)
  return seen == set(adj)


def sample_layout(key, fp: FamilyParams = FamilyParams(), name: str | None = None
                  ) -> dict[str, Any]:
  """One family member, a pure function of (key, fp) (module docstring)."""
  validate_family(fp)
  rng = np.random.default_rng(_seed(key))
  problems: list[str] = []
  for _ in range(fp.max_tries):
    lay = _draw(rng, fp, name or f"fam{_seed(key) % 10**8}")
    problems = layout_problems(lay, fp.max_routes)
    if not problems:
      return lay
  raise ValueError(f"no usable layout in {fp.max_tries} draws of this family (last: "
                   f"{problems[:2]}); widen FamilyParams.max_routes or narrow n_tanks")


def split_keys(key, n_train: int, n_val: int, n_eval: int):
  """(train keys [n_train], validation keys [n_val], evaluation keys [n_eval]): disjoint
  streams folded from key, so adding evaluation layouts never changes the training ones."""
  if min(n_train, n_val, n_eval) < 0:
    raise ValueError(f"split_keys: counts must be >= 0, got {(n_train, n_val, n_eval)}")
  k = jax.random.PRNGKey(key) if isinstance(key, (int, np.integer)) else key
  part = lambda i, n: [jax.random.fold_in(jax.random.fold_in(k, i), j) for j in range(n)]
  return part(0, n_train), part(1, n_val), part(2, n_eval)


def sample_family(keys, fp: FamilyParams = FamilyParams(), prefix: str = "fam"
                  ) -> list[dict[str, Any]]:
  """One layout per key, named prefix0, prefix1, ..."""
  return [sample_layout(k, fp, name=f"{prefix}{i}") for i, k in enumerate(keys)]
