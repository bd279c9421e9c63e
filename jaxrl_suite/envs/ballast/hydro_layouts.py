"""Which generated layouts the BallastHydro-v0 study trains and scores on.

  n_pumps(lay) -> int                                    pump nodes of a layout dict
  pick_layouts(seed0, n, max_routes, pumps=()) -> [lay]  the first n usable layouts from seed0
  family_layouts(seed, group, n, fp, pumps=()) -> [lay]   the first n usable family members
  plannable(lay, heel_init_max=1.0, n=500, min_rate=0.08, min_rate_limits=0.0625) -> bool

A layout is usable when its route library fits `max_routes`, it has at least 3 blockable pipes
(the clog prior places up to 3 blockages) and its plans start within half the heel limit, and
inside the trim and draught limits, often enough (`plannable`). Layouts are dicts as
generator.generate_layout returns them, named "gen{seed}"; the scan is deterministic in seed0.
`family_layouts` scans the parameterised family (family.py: ring with crossovers, split mains,
branch trees, pipe resistances) instead, along the key stream of one split (group 0 training, 1
validation, 2 held-out: family.split_keys' streams, so the three sets never share a key); its
layouts are named "{group}{j}" after their index j in that stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import jax

from jaxrl_suite.envs.ballast import episodes as EP
from jaxrl_suite.envs.ballast import family as F
from jaxrl_suite.envs.ballast import stability as S
from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.routes import build_routes, enumerate_routes


def n_pumps(lay) -> int:
  """Number of pump nodes in a layout dict."""
  return sum(1 for nd in lay["nodes"] if nd.get("type") == "pump")


def pick_layouts(seed0: int, n: int, max_routes: int, pumps=()) -> list[dict[str, Any]]:
  """The first n generated layouts from seed0 on that are usable (module docstring). With
  `pumps` (n pump counts, a multiset), a layout is taken only while its pump count is still
  wanted: the family's pump mix is then fixed instead of drawn (the default family's training
  layouts have 1 pump in 5 of 6, its held-out and shipped layouts 2-3). Raises ValueError when
  200 n seeds do not give n layouts."""
  want = list(pumps)
  if want and len(want) != n:
    raise ValueError(f"pumps={tuple(pumps)} must name one pump count per layout (n={n})")
  out, s = [], seed0
  while len(out) < n:
    lay = generate_layout(s, name=f"gen{s}")
    if want and n_pumps(lay) not in want:
      s += 1
      if s - seed0 > 200 * n:
        raise ValueError(f"too few generated layouts with pump counts {tuple(pumps)}")
      continue
    if usable(lay, max_routes):
      out.append(lay)
      if want:
        want.remove(n_pumps(lay))
    s += 1
    if s - seed0 > 200 * n:
      raise ValueError(f"config.max_routes={max_routes}: too few generated layouts fit")
  return out


def usable(lay, max_routes: int) -> bool:
  """Route library within max_routes, >= 3 blockable pipes, plans start upright often enough."""
  return (len(enumerate_routes(lay)) <= max_routes and
          int((build_routes(lay, "auto")["block_w"] > 0).sum()) >= 3 and plannable(lay))


_GROUPS = {"train": 0, "val": 1, "held_out": 2}


def family_layouts(seed: int, group: str, n: int, fp: F.FamilyParams, pumps=()
                   ) -> list[dict[str, Any]]:
  """The first n usable members of family fp along split `group`'s key stream
  (fold_in(fold_in(PRNGKey(seed), g), j), j = 0, 1, ...: family.split_keys' streams), named
  "{group}{j}"; with `pumps` (n pump counts, a multiset) a member is taken only while its pump
  count is still wanted. Usable: route library within fp.max_routes and `usable`. The family's
  own checks (family.layout_problems) already hold for every member. Raises ValueError when
  200 n keys do not give n layouts."""
  if group not in _GROUPS:
    raise ValueError(f"family_layouts: group must be one of {tuple(_GROUPS)}, got {group!r}")
  want = list(pumps)
  if want and len(want) != n:
    raise ValueError(f"pumps={tuple(pumps)} must name one pump count per layout (n={n})")
  gkey = jax.random.fold_in(jax.random.PRNGKey(seed), _GROUPS[group])
  out, j = [], 0
  while len(out) < n:
    if j >= 200 * n:
      raise ValueError(f"family_layouts({group}): {j} draws gave {len(out)} of {n} usable "
                       f"layouts{' with pump counts ' + str(tuple(pumps)) if pumps else ''}; "
                       "widen the family (config.family) or raise config.max_routes")
    lay = F.sample_layout(jax.random.fold_in(gkey, j), fp, name=f"{group}{j}")
    j += 1
    if want and n_pumps(lay) not in want:
      continue
    if usable(lay, fp.max_routes):
      out.append(lay)
      if want:
        want.remove(n_pumps(lay))
  return out


def _plan_rate(g, hydro, heel_init_max: float, n: int, limits=None) -> float:
  """Share of n single plan draws (seeded) that start within heel_init_max (and limits)."""
  rng = np.random.default_rng(0)
  ok = 0
  for _ in range(n):
    try:
      EP.draw_plan(rng, g, hydro, heel_init_max, tries=1, limits=limits)
      ok += 1
    except ValueError:
      pass
  return ok / n


def plannable(lay, heel_init_max: float = 1.0, n: int = 500, min_rate: float = 0.08,
              min_rate_limits: float = 0.0625) -> bool:
  """Whether >= min_rate of n single plan draws start within heel_init_max: make_bank draws
  thousands of plans with 200 tries each, which a layout at 3% per try fails now and then.
  The bank also keeps plans inside the trim and draught limits (stability.ship_limits), so
  the share that also meets them must be >= min_rate_limits: at r per try a 200-try draw
  fails with (1 - r)^200, under 2.5e-6 (under 1% over a 4,000-plan bank) for r >= 0.0625."""
  g, hydro = build_routes(lay, "auto"), lay["hydrostatics"]
  return (_plan_rate(g, hydro, heel_init_max, n) >= min_rate and
          _plan_rate(g, hydro, heel_init_max, n, S.ship_limits(lay)) >= min_rate_limits)
