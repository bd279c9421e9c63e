"""The RL variants of the rail pricing study: name -> env, agent and PPO learner.

A variant is "<learner>_<policy>[_<action form>]": learner "mappo" (centralised critic) or "ippo";
policy "rel" (relational attention over train tokens) or "mlp" (own token only); action form
"delta" (+-5% fare steps) or the default "bucket" (a fare bucket per period). The config `c` is
the study's (configs/rail_pricing.py): instance, pad, reward_mode, demand_level, reward_scale,
rl (PPO fields), agent (embed_dim, num_heads, num_layers), budget_updates, rel_max_updates.
"""

from __future__ import annotations

import ml_collections

from jaxrl_suite.agents import rail_features
from jaxrl_suite.algos import ppo
from jaxrl_suite.envs.rail import make_rail, token_columns


def parse(name: str) -> tuple[str, bool, str]:
  """'mappo_rel_delta' -> ('mappo', attention=True, action_mode='delta')."""
  parts = name.split("_")
  return parts[0], parts[1] == "rel", parts[2] if len(parts) > 2 else "bucket"


def make_env(c, action_mode: str):
  """(env, params) of the variant's action form at the training demand level."""
  return make_rail(c.instance, action_mode=action_mode, pad=c.pad, reward_mode=c.reward_mode,
                   demand_level=c.demand_level, reward_scale=c.reward_scale)


def budgets(c, attention: bool) -> list[int]:
  """The variant's sweep: config.budget_updates, relational ones only up to rel_max_updates."""
  return [b for b in c.budget_updates if not attention or b <= c.rel_max_updates]


def rail_agent(env, params, agent_config, centralised: bool):
  """The train-pricing agent for a RailRM env: the env's token layout (plain ints) is passed into
  agents.rail_features here, so that agents/ never imports envs/."""
  return rail_features.from_config(env.num_actions, env.observation_space(params).shape[1:],
                                   agent_config, centralised, **token_columns())


def learner(c, env, params, name: str, **rl_overrides):
  """(PPO learner, agent) of variant `name` on (env, params): PPO's defaults, then config.rl,
  then `rl_overrides` (e.g. anneal_lr, total_timesteps); multi_agent from the name."""
  mode, att, _ = parse(name)
  cfg = ppo.default_config()
  for k, v in dict(c.rl.items(), **rl_overrides).items():
    cfg[k] = v
  cfg.multi_agent = mode
  ac = ml_collections.ConfigDict(dict(c.agent.to_dict(), attention=att))  # --config is locked
  agent = rail_agent(env, params, ac, centralised=mode == "mappo")
  return ppo.make_learner(cfg, env, params, agent=agent), agent
