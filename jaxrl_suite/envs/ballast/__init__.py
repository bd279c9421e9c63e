"""BallastNet-v0: ballast routing with hidden pipe clogs (docs/ballast.md).

`make_ballast(**overrides) -> (env, env_params)`; overrides: `layout` (shipped name or JSON path,
default "ring14"), `task` ("v1" ballast plan | "v2" stability target), and any EnvParams field
(e.g. dt_h=15/60, sigma_level=0.005, max_steps_in_episode=96).
"""

from __future__ import annotations

from typing import Any

from jaxrl_suite.envs.ballast.env import BallastNet, EnvParams, EnvState, obs_fields, split_obs
from jaxrl_suite.envs.ballast.layout import LayoutError, load_layout, validate_layout
from jaxrl_suite.envs.ballast.routes import build_routes


def make_ballast(layout: str = "ring14", task: str = "v1", **overrides: Any):
  """Builds (BallastNet env, EnvParams) for a layout; unknown override names raise ValueError."""
  lay = load_layout(layout)
  graph = build_routes(lay)
  env = BallastNet(graph, task=task, layout_name=lay["name"])
  params = env.default_params
  hydro = lay["hydrostatics"]
  params = params.replace(displacement=float(hydro["displacement_t"]), gm=float(hydro["gm_m"]),
                          mctc=float(hydro["mctc_tm_per_cm"]), lcf=float(hydro["lcf_m"]),
                          rho=float(hydro["rho_t_per_m3"]))
  fields = set(EnvParams.__dataclass_fields__)
  bad = [k for k in overrides if k not in fields]
  if bad:
    raise ValueError(f"unknown BallastNet parameter(s) {bad}; valid: {sorted(fields)}")
  return env, params.replace(**overrides)


__all__ = ["BallastNet", "EnvParams", "EnvState", "LayoutError", "build_routes", "load_layout",
           "make_ballast", "obs_fields", "split_obs", "validate_layout"]
