"""Environment registry: `make("ServingRoute-v0", table_size=16) -> (env, env_params)`.

Every environment of the project (and gymnax's own: CartPole-v1, Breakout-MinAtar, ...) is made
by name through `make`; `registered_names()` lists them (docs/environments.md documents ours).
Our environments are imported lazily so that importing the registry costs nothing.

Keyword arguments are checked against the factory's signature BEFORE anything is built (a trace
load or an episode bank can take a minute): an unknown name or a misspelt argument raises a
ValueError that names the environment, the argument, a close match and the valid arguments.
The valid arguments of a factory that forwards `**overrides` are its named parameters plus
those of the callables / dataclass fields it forwards to (`_Entry.forwards`), less the ones the
factory sets itself (`_Entry.exclude`: passing them would collide inside the factory).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import gymnax

from jaxrl_suite.envs import arguments

_SERVING = "jaxrl_suite.envs.serving"
_TEXT = "jaxrl_suite.envs.text"
_BALLAST = "jaxrl_suite.envs.ballast"


@dataclasses.dataclass(frozen=True)
class _Entry:
  """factory: "module:attr" returning (env, env_params); forwards: "module:attr" callables or
  dataclasses whose keywords the factory's `**overrides` reach; exclude: keywords the factory
  passes on itself ("@module:Dataclass": all its fields); summary: one line for listings."""
  factory: str
  forwards: tuple[str, ...] = ()
  exclude: frozenset[str] = frozenset()
  summary: str = ""


# what make_hydro fills from the layout, its route graph (every GraphParams field, named by the
# "@module:Dataclass" form) and the episode bank: passing one would collide inside the factory
_HYDRO_SET = frozenset({f"@{_BALLAST}.params:GraphParams", "pump_mask", "hyd", "bank",
                        "displacement", "gm", "mctc", "lcf", "rho"})

_OURS: dict[str, _Entry] = {
    "ServingBatch-v0": _Entry(
        f"{_SERVING}:make_batching",
        (f"{_SERVING}.batching:default_params", f"{_SERVING}.batching:EnvParams"),
        frozenset({"rate_window", "hw"}),
        "one GPU's LLM-serving batch size / concurrency cap per decision (token-level engine)"),
    "ServingRoute-v0": _Entry(
        f"{_SERVING}:make_routing",
        (f"{_SERVING}.routing:default_params", f"{_SERVING}.routing:EnvParams"),
        frozenset({"prefix_cache", "rate_window", "hw"}),
        "route each arriving LLM request to one GPU of a heterogeneous cluster"),
    "BallastNet-v0": _Entry(
        f"{_BALLAST}:make_ballast", (f"{_BALLAST}.params:EnvParams",), frozenset(),
        "ballast routing through a pipe network with hidden clogs (one route per step)"),
    "BallastHydro-v0": _Entry(
        "jaxrl_suite.envs.registry:_make_hydro",
        (f"{_BALLAST}:make_hydro", f"{_BALLAST}.params:HydroParams"), _HYDRO_SET,
        "ballast plan with pump/pipe hydraulics, a heel limit and one command per pump"),
    "RailRM-v0": _Entry(
        "jaxrl_suite.envs.rail:make_rail", ("jaxrl_suite.envs.rail.env:EnvParams",), frozenset(),
        "multi-agent rail revenue management: each train sets its fare multiplier"),
    # text environments for LM agents (observations are token blocks, actions token sequences)
    "KVLookup-v0": _Entry(
        f"{_TEXT}.kv_lookup:make_kv_lookup", (f"{_TEXT}.kv_lookup:EnvParams",), frozenset(),
        "3-turn key-value lookup: answer the digit of the queried key"),
    "StreamLedger-v0": _Entry(
        f"{_TEXT}.stream_ledger:make_stream_ledger",
        (f"{_TEXT}.stream_ledger:StreamLedger", f"{_TEXT}.stream_ledger:EnvParams"),
        frozenset(), "running ledger totals over a stream longer than the agent's window"),
    "GoalHouse-v0": _Entry(
        f"{_TEXT}.goal_house:make_goal_house", (f"{_TEXT}.goal_house:EnvParams",), frozenset(),
        "ALFWorld-like text house: put object X in receptacle Y (goal shown once)"),
    "SceneCap-v0": _Entry(
        f"{_TEXT}.scene_cap:make_scene_cap", (f"{_TEXT}.scene_cap:SceneCap",), frozenset(),
        "caption a token-rendered scene graph; reward = exact scene-graph F1"),
}


# one line per probe (jaxrl_suite/envs/probes.py: the analytically known values)
_PROBE_SUMMARY = {
    "ProbeOneStep-v0": "one action, one step, reward +1: V = 1",
    "ProbeObsReward-v0": "one action, obs +-1, one step, reward = obs: V(obs) = obs",
    "ProbeTwoStep-v0": "one action, two steps, reward +1 at the end: V(0) = gamma, V(1) = 1",
    "ProbeAction-v0": "two actions, one step, reward +1 for action 1 else -1",
    "ProbeMasked-v0": "three actions, the best (2) always masked: optimum action 1, return 0.5",
    "ProbeTimeLimit-v0": "reward +1 forever, truncated at max_steps_in_episode: must bootstrap",
    "ProbeMemory-v0": "a cue +-1 shown at t = 0 only must be named at the last step (memory)",
    "ProbeEntities-v0": "pick the present entity slot of largest value; absent slots masked",
    "ProbeCoordination-v0": "multi-agent: all live agents must wait at t = 0 to meet at t = 1",
}


def _make_hydro(**kwargs: Any):
  """BallastHydro-v0 through the registry's (env, env_params) convention: `make_hydro` also
  returns the episode bank's report, which `jaxrl_suite.envs.ballast.make_hydro` still gives."""
  from jaxrl_suite.envs.ballast import make_hydro
  env, params, _ = make_hydro(**kwargs)
  return env, params


def _probes():
  from jaxrl_suite.envs import probes
  return probes


def _probe_names() -> list[str]:
  return sorted(_probes().PROBES)


def _gymnax_factory(name: str):
  # gymnax 1.x keeps name -> env class in `registration._registry`; without it the kwargs of a
  # gymnax env are checked by gymnax itself (a TypeError from the class constructor)
  return getattr(getattr(gymnax, "registration", None), "_registry", {}).get(name)


def project_names() -> list[str]:
  """The project's own environments (ours, then the probes): what docs/environments.md covers."""
  return sorted(_OURS) + _probe_names()


def registered_names() -> list[str]:
  """All names `make` accepts: ours first, then the probes, then gymnax's."""
  return project_names() + sorted(gymnax.registered_envs)


def is_registered(name: str) -> bool:
  return name in _OURS or name in gymnax.registered_envs or name in _probe_names()


def summary(name: str) -> str:
  """One line: what the environment models ("" for gymnax's)."""
  _check_name(name)
  if name in _OURS:
    return _OURS[name].summary
  return _PROBE_SUMMARY.get(name, "")


def _resolve(path: str) -> Any:
  module, attr = path.split(":")
  return getattr(importlib.import_module(module), attr)




def _sources(name: str) -> tuple[list[Any], frozenset[str]]:
  """(factory followed by what its **overrides reach, keywords not to accept)."""
  if name in _OURS:
    e = _OURS[name]
    exclude = set()
    for x in e.exclude:
      exclude |= arguments.keywords(_resolve(x[1:])) if x.startswith("@") else {x}
    return [_resolve(e.factory)] + [_resolve(f) for f in e.forwards], frozenset(exclude)
  if name in _probe_names():
    probes = _probes()
    cls = probes.PROBES[name]
    return [cls, probes.params_type(name)], frozenset()
  factory = _gymnax_factory(name)
  return ([factory] if factory is not None else []), frozenset()


def valid_kwargs(name: str) -> tuple[str, ...] | None:
  """Sorted keyword arguments `make(name, ...)` accepts (None: not known, gymnax checks them).

  Raises:
    ValueError: if `name` is unknown (the message lists the valid names).
  """
  _check_name(name)
  sources, exclude = _sources(name)
  if not sources:
    return None
  return arguments.valid_from(sources, exclude)




def _check_name(name: str) -> None:
  if not isinstance(name, str) or not is_registered(name):
    near = arguments.close(name, registered_names()) if isinstance(name, str) else []
    hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    raise ValueError(f"unknown environment {name!r}.{hint} Valid names (docs/environments.md): "
                     f"{', '.join(registered_names())}")


def check_kwargs(name: str, kwargs: dict[str, Any]) -> None:
  """Raises ValueError if a key of `kwargs` is not an argument of environment `name`.

  The factories of serving, rail and the probes check their `**overrides` with the same helper
  (`envs.arguments`), so a direct call (`make_batching(tabel_size=16)`) gets the same message.
  """
  valid = valid_kwargs(name)
  if valid is None:
    return
  where = ("gymnax's documentation" if name in gymnax.registered_envs
           else "docs/environments.md")
  arguments.check(name, kwargs, valid, where)


def make(name: str, **kwargs: Any):
  """Builds an environment by name. Returns (env, env_params).

  Raises:
    ValueError: if `name` is unknown (the message lists the valid names and a close match) or a
      keyword is not an argument of its factory (named with the valid ones), before any compute.
  """
  check_kwargs(name, kwargs)
  return _build(name, kwargs)


def _build(name: str, kwargs: dict[str, Any]):
  """The factory call proper (after `check_kwargs`): where the compute happens."""
  if name in _OURS:
    return _resolve(_OURS[name].factory)(**kwargs)
  if name in _probe_names():
    return _probes().make_probe(name, **kwargs)
  return gymnax.make(name, **kwargs)
