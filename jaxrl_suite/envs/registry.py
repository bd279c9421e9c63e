"""Environment registry: `make("ServingRoute-v0") -> (env, env_params)`.

Our environments are imported lazily so that importing the registry costs nothing. gymnax's own
environments (CartPole-v1, Breakout-MinAtar, ...) are reachable through the same `make`.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnax

# name -> "module:factory"; each factory takes keyword overrides and returns (env, env_params).
_OURS = {
    "ServingBatch-v0": "jaxrl_suite.envs.serving:make_batching",
    "ServingRoute-v0": "jaxrl_suite.envs.serving:make_routing",
    "BallastNet-v0": "jaxrl_suite.envs.ballast:make_ballast",
    "RailRM-v0": "jaxrl_suite.envs.rail:make_rail",
    # text environments for LM agents (observations are token blocks, actions token sequences)
    "KVLookup-v0": "jaxrl_suite.envs.text.kv_lookup:make_kv_lookup",
    "StreamLedger-v0": "jaxrl_suite.envs.text.stream_ledger:make_stream_ledger",
    "GoalHouse-v0": "jaxrl_suite.envs.text.goal_house:make_goal_house",
    "SceneCap-v0": "jaxrl_suite.envs.text.scene_cap:make_scene_cap",
}


def _probe_names() -> list[str]:
  from jaxrl_suite.envs import probes
  return sorted(probes.PROBES)


def registered_names() -> list[str]:
  """All names `make` accepts: ours first, then the probes, then gymnax's."""
  return sorted(_OURS) + _probe_names() + sorted(gymnax.registered_envs)


def make(name: str, **kwargs: Any):
  """Builds an environment by name. Returns (env, env_params).

  Raises:
    ValueError: if `name` is unknown; the message lists the valid names.
  """
  if name in _OURS:
    module, factory = _OURS[name].split(":")
    return getattr(importlib.import_module(module), factory)(**kwargs)
  if name in gymnax.registered_envs:
    return gymnax.make(name, **kwargs)
  if name in _probe_names():
    from jaxrl_suite.envs import probes
    return probes.make_probe(name)
  raise ValueError(f"unknown environment {name!r}; valid names: {', '.join(registered_names())}")


def is_registered(name: str) -> bool:
  return name in _OURS or name in gymnax.registered_envs or name in _probe_names()
