"""BallastNet-v0: ballast routing with hidden pipe clogs (docs/ballast.md).

`make_ballast(**overrides) -> (env, env_params)`; overrides: `layout` (shipped name or JSON path,
default "ring14"), `task` ("v1" ballast plan | "v2" stability target), and any EnvParams field
(e.g. dt_h=15/60, sigma_level=0.005, max_steps_in_episode=96).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

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


def make_hydro(layout: str | dict = "ring14", n_bank: int = 1024, seed: int = 0,
               sizes: Any = "auto", **overrides: Any):
  """Builds (BallastHydro env, HydroParams, bank report) for a layout (shipped name, JSON path or
  dict): hydraulics from the layout, an episode bank of n_bank oracle-finishable episodes
  (episodes.make_bank), sizes "auto" (from this layout) or a family's `routes.layout_sizes`.
  Overrides are HydroParams knobs (heel_limit=2.0, dt_h, max_steps_in_episode, ...)."""
  from jaxrl_suite.envs.ballast.episodes import make_bank
  from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank, hydro_params
  lay = load_layout(layout) if isinstance(layout, str) else layout
  if not isinstance(layout, str):
    validate_layout(lay)
  graph = build_routes(lay, sizes)
  T, E = graph["cap"].shape[0], graph["edge_mask"].shape[0]
  z = jnp.zeros((1, T))
  empty = EpisodeBank(vol0=z, target=z, clog=jnp.ones((1, E)), m_heel0=jnp.zeros(1),
                      m_trim0=jnp.zeros(1), n_blocked=jnp.zeros(1, jnp.int32))
  params = hydro_params(lay, graph, empty, **overrides)
  bank, report = make_bank(lay, graph, params, n=n_bank, seed=seed)
  return BallastHydro(layout_name=lay["name"]), params.replace(bank=bank), report


__all__ = ["BallastNet", "EnvParams", "EnvState", "LayoutError", "build_routes", "load_layout",
           "make_ballast", "make_hydro", "obs_fields", "split_obs", "validate_layout"]
