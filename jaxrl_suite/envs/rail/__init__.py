"""RailRM-v0: relational multi-agent rail pricing (trains on a line, Poisson-MNL demand).

`make_rail(instance="ecml", action_mode="bucket", **overrides) -> (env, env_params)`;
`instance` is a name in `instance.INSTANCES` or an instance dict, overrides are EnvParams fields
(e.g. demand_level=1.2, reward_mode="operator", stochastic=0.0, information="pooled": what
the RM baselines may see, see information.py).
"""

from __future__ import annotations

from typing import Any

from jaxrl_suite.envs import arguments
from jaxrl_suite.envs.rail.env import (ACTION_MODES, N_TYPES, REWARD_MODES, EnvParams, EnvState,
                                       RailRM, field_slice, own_features, params_from_instance,
                                       relations, token_columns, token_dim, token_fields)
from jaxrl_suite.envs.rail.information import INFORMATION_MODES
from jaxrl_suite.envs.rail.instance import INSTANCES


def make_rail(instance: Any = "ecml", action_mode: str = "bucket", pad: int | None = None,
              **overrides: Any):
  """`pad`: train slots for a named instance (default: its own default, 12 for ecml).

  Raises ValueError before building anything for an unknown instance name, action mode or
  override (envs.arguments.check: the message names the valid ones and a close match)."""
  arguments.check("RailRM-v0", overrides, arguments.valid_from((make_rail, EnvParams)))
  if action_mode not in ACTION_MODES:
    raise ValueError(f"RailRM-v0: action_mode={action_mode!r} is not one of {ACTION_MODES}")
  if isinstance(instance, str) and instance not in INSTANCES:
    raise ValueError(f"RailRM-v0: instance={instance!r} is not a shipped instance "
                     f"({', '.join(sorted(INSTANCES))}) nor an instance dict (rail/instance.py)")
  if isinstance(instance, str):
    inst = INSTANCES[instance]() if pad is None else INSTANCES[instance](pad=pad)
  else:
    inst = instance
  env = RailRM(inst, action_mode=action_mode)
  return env, params_from_instance(inst, **overrides)


__all__ = ["ACTION_MODES", "INFORMATION_MODES", "N_TYPES", "REWARD_MODES", "EnvParams", "EnvState", "RailRM",
           "field_slice", "make_rail", "own_features", "params_from_instance", "relations",
           "token_columns", "token_dim", "token_fields"]
