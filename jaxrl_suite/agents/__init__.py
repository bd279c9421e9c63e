"""Agents for the one on-policy learner (`algos/on_policy.py`), one module per kind.

  interface   the Agent NamedTuple every agent is (init, act, evaluate, value, ...), Step, Eval
  mlp         purejaxrl's MLP actor-critic (default; IPPO / MAPPO critics for multi-agent envs)
  gru         a GRU core with the carry in the rollout, reset on episode boundaries
  entities    a set encoder: per-entity embedding, masked multi-head self-attention, optional
              entity-type embeddings on the keys, pooled value, per-entity logits
  ballast_v1  BallastNet v1 route scorer with a clog-diagnosis head (auxiliary loss)
  ballast_v2  BallastNet v2 autoregressive pump-pair policy
  ballast_hydro  the recurrent BallastHydro route-entity agent (built from a layout's tables)

agents/ imports core/ only (ARCHITECTURE.md, "Layers"): the env side of an env-specific agent
comes in as an argument, and what needs the learner (the ballast PPO configs and trainer) lives
in `algos/ballast.py`.

`make(config, vec)` builds the agent `config.agent` names from its sub-config
(`config.gru`, `config.entities`, `config.ballast`); `validate(config)` checks them.
"""

from __future__ import annotations

import ml_collections

AGENTS = ("mlp", "gru", "entities", "ballast_v1", "ballast_v2", "gaussian")


def default_configs() -> dict:
  """The agents' sub-configs, merged into every on-policy config."""
  return dict(
      gru=ml_collections.ConfigDict(dict(hidden_size=128, torso_sizes=(64,))),
      entities=ml_collections.ConfigDict(dict(
          embed_dim=32, num_heads=2, num_layers=1, mask_feature=0, type_feature=-1,
          num_types=0, noop=False)),
      ballast=ml_collections.ConfigDict(dict(hidden=64, w_init=10.0)),
  )


def _positive_ints(config, path, names):
  sub = config[path]
  for n in names:
    v = sub.get(n)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
      raise ValueError(f"config.{path}.{n} must be a positive integer, got {v!r}")


def validate(config) -> None:
  """Raises ValueError naming the first bad agent field."""
  name = config.get("agent", "mlp")
  if name not in AGENTS:
    raise ValueError(f"config.agent must be one of {list(AGENTS)}, got {name!r}")
  if name == "gru":
    _positive_ints(config, "gru", ("hidden_size",))
    if any(not isinstance(h, int) or h <= 0 for h in config.gru.torso_sizes):
      raise ValueError(f"config.gru.torso_sizes must be positive integers, got "
                       f"{config.gru.torso_sizes!r}")
  if name == "entities":
    _positive_ints(config, "entities", ("embed_dim", "num_heads", "num_layers"))
    e = config.entities
    if e.embed_dim % e.num_heads:
      raise ValueError(f"config.entities.num_heads={e.num_heads} must divide "
                       f"config.entities.embed_dim={e.embed_dim}")
    if e.type_feature >= 0 and not (isinstance(e.num_types, int) and e.num_types > 0):
      raise ValueError("config.entities.num_types must be > 0 when config.entities.type_feature "
                       f">= 0, got {e.num_types!r}")
  if name.startswith("ballast"):
    _positive_ints(config, "ballast", ("hidden",))


def make(config, vec):
  """The agent `config.agent` names, for the environment rows of `vec` (a rollout.VecEnv)."""
  validate(config)
  name = config.get("agent", "mlp")
  centralised = vec.multi_agent and config.get("multi_agent", "ippo") == "mappo"
  if name == "mlp":
    from jaxrl_suite.agents import mlp
    return mlp.make(vec.num_actions, tuple(config.hidden_sizes), config.activation,
                    len(vec.obs_shape), centralised)
  if name == "gru":
    from jaxrl_suite.agents import recurrent
    return recurrent.make(vec.num_actions, config.gru.hidden_size, tuple(config.gru.torso_sizes),
                          config.activation, len(vec.obs_shape), centralised)
  if name == "entities":
    from jaxrl_suite.agents import entities
    e = config.entities
    return entities.make(vec.num_actions, vec.obs_shape, e.embed_dim, e.num_heads, e.num_layers,
                         e.mask_feature, e.type_feature, e.num_types, centralised,
                         num_agents=vec.num_agents)
  if name == "gaussian":   # Box actions: tanh-squashed diagonal Gaussian (agents/gaussian.py)
    from jaxrl_suite.agents import gaussian
    space = vec.raw_env.action_space(vec.params)
    return gaussian.make(space.low, space.high, tuple(config.hidden_sizes), config.activation)
  if name == "ballast_v1":
    from jaxrl_suite.agents import ballast
    return ballast.make_v1(config, vec.raw_env, vec.params)
  from jaxrl_suite.agents import ballast_v2
  return ballast_v2.make_v2(config, vec.raw_env, vec.params)
