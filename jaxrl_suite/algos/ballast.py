"""The one learner (algos/ppo) set up for the ballast agents: their PPO configs and the
multi-layout trainer of the BallastHydro agent.

  default_config(version)   the PPO config of the BallastNet-v0 agents (agents/ballast.py "v1"
                            route scorer, agents/ballast_v2.py "v2" pump pairs)
  learner_config(c, n)      the PPO config of the BallastHydro-v0 agent (agents/ballast_hydro.py)
                            from an experiment config's `ppo` block, for a budget of n updates
  make_trainer(c, env, ...) (init, chunk): PPO on one layout's tables at a time, jitted once for
                            a whole layout family, vmapped over seeds

These were in the agent modules; they need the learner, and agents/ sits below algos/ in the
layer order (ARCHITECTURE.md), so they live here and agents/ never imports algos/.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import ml_collections

from jaxrl_suite.agents import ballast_hydro as AH
from jaxrl_suite.algos import ppo


def default_config(version: str = "v1") -> ml_collections.ConfigDict:
  """A PPO config for the BallastNet agents (`version` "v1" route scorer, "v2" pump pairs).

  Per-leaf Adam (`flat_optimizer=False`) and these values are those of the retired ballast
  PPO loop; `ballast.hidden` is the width, `ballast.w_init` v2's residual weight.
  """
  c = ppo.default_config()
  c.env_name = "BallastNet-v0"
  c.env_kwargs = {"task": version}
  c.update(dict(num_envs=64, num_steps=32, total_timesteps=200_000, update_epochs=4,
                num_minibatches=4, lr=1e-3, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
                clip_eps=0.2, vf_coef=0.5, ent_coef=0.003, aux_coef=0.5, max_grad_norm=0.5,
                normalize_advantages=True, flat_optimizer=False, episode_info=("success",),
                agent="ballast_" + version))
  c.ballast.hidden = 64
  if version == "v2":
    c.ballast.w_init = 10.0   # initial weight of the greedy residual (nats per tolerance unit
                              # of r); 3 gave a near-uniform choice among the top slots
    c.aux_coef = 0.0
  return c


def learner_config(c: ml_collections.ConfigDict, total_updates: int) -> ml_collections.ConfigDict:
  """The ppo learner config from the experiment config's `ppo` block; lr held constant so a
  checkpoint after n updates is the policy a budget of n updates trains (the budget sweep)."""
  cfg = ppo.default_config()
  for k, v in c.ppo.items():
    cfg[k] = v
  cfg.anneal_lr = False
  cfg.total_timesteps = int(total_updates) * int(cfg.num_steps) * int(cfg.num_envs)
  cfg.episode_info = ("success", "violated")
  return cfg


class TrainState(NamedTuple):
  """What carries across layout chunks: parameters, optimiser state, gradient-step count."""
  params: Any
  opt_state: Any
  step: jax.Array


def make_trainer(c: ml_collections.ConfigDict, env, total_updates: int, chunk_updates: int):
  """(init, chunk), both jitted and vmapped over seeds.

  init(keys [S], tables) -> TrainState [S]; chunk(state [S], tables, keys [S]) -> (state,
  metrics [S, chunk_updates]): `chunk_updates` updates of the one learner (algos/ppo) on the
  layout whose tables are given (fresh episodes; the optimiser state carries over). Every layout
  must be padded to the same sizes (routes.layout_sizes), so one program serves all of them.
  """
  cfg = learner_config(c, total_updates)

  def learner(tables):
    return ppo.make_learner(cfg, env, tables.bp.env, AH.make_agent(c.agent, tables))

  def init(key, tables):
    ts = learner(tables).init(key).train_state
    return TrainState(ts.params, ts.opt_state, ts.step)

  def chunk(state: TrainState, tables, key):
    lr = learner(tables)
    rs = lr.init(key)
    rs = rs.replace(train_state=rs.train_state.replace(
        params=state.params, opt_state=state.opt_state, step=state.step))
    rs, metrics = lr.run(rs, chunk_updates)
    ts = rs.train_state
    return TrainState(ts.params, ts.opt_state, ts.step), metrics

  return (jax.jit(jax.vmap(init, in_axes=(0, None))),
          jax.jit(jax.vmap(chunk, in_axes=(0, None, 0))))
