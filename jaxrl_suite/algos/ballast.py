"""The one learner (algos/ppo) set up for the ballast agents: their PPO configs and the
multi-layout trainer of the BallastHydro agent.

  default_config(version)   the PPO config of the BallastNet-v0 agents (agents/ballast.py "v1"
                            route scorer, agents/ballast_v2.py "v2" pump pairs)
  learner_config(c, n)      the PPO config of the BallastHydro-v0 agent (agents/ballast_hydro.py)
                            from an experiment config's `ppo` block, for a budget of n updates
  make_trainer(c, env, ...) (init, chunk): PPO on one layout's tables at a time, jitted once for
                            a whole layout family, vmapped over seeds
  train_seeds(cfg, env, p, keys)  BallastNet-v0 PPO, one jit vmapped over seeds [S]: (params
                            [S, ...], metrics {name: [S, updates]})
  seed_params(params, s)    seed s's slice of params [S, ...]
  seed_evidence(params, metrics)  that the S seeds are different agents: parameter distance to
                            seed 0, the learned residual weights, the curve at five updates
  half_budget_sweep(cfg, train, score, full)  the fair-chance budget sweep: RL retrained at half
                            its budget, each seed scored like the full-budget run

These were in the agent modules; they need the learner, and agents/ sits below algos/ in the
layer order (ARCHITECTURE.md), so they live here and agents/ never imports algos/.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import ml_collections
import numpy as np

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


# learner metric -> the name the ballast report uses (episode means are 0, not NaN, in rollouts
# where no episode finished)
TRAIN_METRICS = {"episode_return": "returned_episode_returns", "episode_length": "episode_length",
                 "success_rate": "success_rate", "off_top_share": "off_top_share",
                 "entropy": "ent", "aux_loss": "aux", "policy_loss": "pg", "value_loss": "vf",
                 "episodes": "episodes"}
# the learner metrics seed_evidence samples along the training curve
CURVE_METRICS = ("returned_episode_returns", "episode_length", "success_rate", "off_top_share",
                 "ent")


def train_seeds(cfg: ml_collections.ConfigDict, env, env_params, keys: jax.Array):
  """PPO with cfg's ballast agent (cfg.agent) through the one learner, one jit vmapped over the
  seed keys [S]. Returns (params [S, ...], {TRAIN_METRICS value: numpy [S, U]}) with U the
  number of PPO updates; NaN episode means (no episode finished in that rollout) read 0."""
  train = jax.jit(jax.vmap(ppo.make_train(cfg, env, env_params)))
  rs, metrics = jax.block_until_ready(train(keys))
  metrics = jax.device_get(metrics)
  return rs.train_state.params, {new: np.nan_to_num(np.asarray(metrics[old]))
                                 for old, new in TRAIN_METRICS.items()}


def seed_params(params: Any, s: int) -> Any:
  """Seed s's parameters from a pytree whose leaves are [S, ...]."""
  return jax.tree.map(lambda x: x[s], params)


def seed_evidence(params: Any, metrics: dict) -> dict:
  """Evidence that vmapped seeds trained different agents, from params (leaves [S, ...]) and
  train_seeds' metrics ([S, U]). Returns {"max_abs_param_diff_vs_seed0": [S] (max |x_s - x_0|
  over every leaf), "w_resid": {head module: [S]} (the learned residual weight of each head
  with a `w_resid` leaf), "curve": {CURVE_METRICS name: {update: [S]}} at updates 0, U/4, U/2,
  3U/4 and U - 1}."""
  leaves = jax.tree_util.tree_leaves_with_path(jax.device_get(params))
  n = leaves[0][1].shape[0]
  dist = [float(max(np.max(np.abs(np.asarray(x)[s] - np.asarray(x)[0])) for _, x in leaves))
          for s in range(n)]
  # {head module name: [w per seed]} from paths like ['params']['pi0']['w_resid']
  w = {jax.tree_util.keystr(path).split("'")[-4]: [float(v) for v in np.asarray(x)]
       for path, x in leaves if "w_resid" in jax.tree_util.keystr(path)}
  n_up = np.asarray(metrics["returned_episode_returns"]).shape[1]
  pts = sorted({0, n_up // 4, n_up // 2, 3 * n_up // 4, n_up - 1})
  curve = {k: {int(u): [float(v) for v in np.asarray(metrics[k])[:, u]] for u in pts}
           for k in CURVE_METRICS}
  return {"max_abs_param_diff_vs_seed0": dist, "w_resid": w, "curve": curve}


def half_budget_sweep(cfg: ml_collections.ConfigDict, train: Callable, score: Callable,
                      full_scores) -> dict | None:
  """The budget sweep of the fair-chance rule: the agent trained at half its budget (a complete
  run with the same seeds: train(cfg) -> params [S, ...]) and at its budget, each seed scored by
  score(seed params) -> scalar (lower is better; the caller scores on selection episodes, never
  evaluation ones); full_scores [S] are the full-budget run's scores.

  Returns {"scores": [[S] half, [S] full], "budgets": [U/2, U] (PPO updates), "scale":
  "log_ratio", "better": "lower"}, or None when the budget is not an even number U >= 2 of
  updates (no half run matches it)."""
  batch = cfg.num_envs * cfg.num_steps
  n_up = cfg.total_timesteps // batch
  if n_up < 2 or n_up % 2:
    return None
  half = cfg.copy_and_resolve_references()
  half.total_timesteps = (n_up // 2) * batch
  params = train(half)
  steps_half = [float(score(seed_params(params, s))) for s in range(len(full_scores))]
  return {"scores": [steps_half, [float(x) for x in full_scores]],
          "budgets": [n_up // 2, n_up], "scale": "log_ratio", "better": "lower"}
