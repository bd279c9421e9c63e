"""BallastHydro-v0 from the command line: the hydro trainer (`algos.ballast.make_trainer`) on one
layout, driven by the CLI's host loop (chunks, checkpoints, resume, metrics).

  python -m jaxrl_suite.train --env=BallastHydro-v0                    # ring14, 80 updates
  python -m jaxrl_suite.train --env=BallastHydro-v0 --config.env_kwargs="{'layout': 'direct10'}"

The agent is the recurrent route-entity agent of agents/ballast_hydro.py (`config.hydro` its
sizes; `hydro.residual=True` the replanner-residual ablation), the learner PPO with the values of
configs/ballast_hydro.py's `ppo` block (the reproduction's), lr held constant (the trainer's
rule). One chunk of n updates is `make_trainer`'s chunk on the layout's tables with keys
fold_in(seed key, first update of the chunk): fresh episodes each chunk, the parameters and the
optimiser state carried, so a resumed run repeats an uninterrupted one. Training across a layout
family (the reproduction) stays with experiments/ballast_hydro.py.
"""

from __future__ import annotations

import jax
import ml_collections

from jaxrl_suite.agents import ballast_hydro as AH
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.core import run_config
from jaxrl_suite.envs import registry
from jaxrl_suite.train import routes

# The learner fields of the trainer's `ppo` block that this config carries (and their values in
# configs/ballast_hydro.py, where the reward scale 0.1 and lr 1e-3 were chosen).
LEARNER = dict(num_envs=64, num_steps=32, update_epochs=4, num_minibatches=4, lr=1e-3,
               gamma=0.99, gae_lambda=0.95, ent_coef=0.01, vf_coef=0.5, clip_eps=0.2,
               max_grad_norm=0.5, aux_coef=0.5)


def default_config() -> ml_collections.ConfigDict:
  """The CLI config of BallastHydro-v0: 80 updates (163,840 env steps per seed) on ring14 with a
  bank of 128 episodes (the default 1024-episode bank takes ~1 min to build)."""
  c = ml_collections.ConfigDict(dict(
      algo="ppo", agent="ballast_hydro", env_name="BallastHydro-v0",
      env_kwargs={"layout": "ring14", "n_bank": 128, "reward_scale": 0.1},
      seed=0, num_seeds=1, total_timesteps=80 * 64 * 32, **LEARNER))
  c.hydro = AH.default_config()
  c.hydro.residual = False
  run_config.add_host_defaults(c)
  c.updates_per_chunk, c.checkpoint_every = 5, 20   # 5: the reproduction's chunk_updates
  return c


def validate(config) -> None:
  """Raises ValueError naming the first bad field (before the env or anything else is built)."""
  if config.get("agent") != "ballast_hydro":
    raise ValueError(f"config.agent must be 'ballast_hydro' for {config.env_name} (its recurrent "
                     f"route-entity agent), got {config.get('agent')!r}")
  routes.positive_ints(config, ("num_envs", "num_steps", "update_epochs", "num_minibatches",
                                "total_timesteps", "num_seeds"))
  routes.positive_ints(config.hydro, ("hidden", "gru", "slots"), "config.hydro")
  routes.positive_floats(config, ("lr", "clip_eps", "max_grad_norm"))
  routes.positive_floats(config, ("ent_coef", "vf_coef", "aux_coef"), allow_zero=True)
  for name in ("gamma", "gae_lambda"):
    if not 0 <= config[name] <= 1:
      raise ValueError(f"config.{name} must be in [0, 1], got {config[name]!r}")
  if config.num_envs % config.num_minibatches:
    raise ValueError(f"config.num_minibatches={config.num_minibatches} must divide "
                     f"config.num_envs={config.num_envs} (a recurrent agent's minibatches are "
                     "whole env sequences)")
  if config.total_timesteps < config.num_envs * config.num_steps:
    raise ValueError(f"config.total_timesteps={config.total_timesteps} is less than one update "
                     f"(num_envs * num_steps = {config.num_envs * config.num_steps})")


def trainer_config(config) -> ml_collections.ConfigDict:
  """The experiment-style config `algos.ballast.make_trainer` reads: `ppo` and `agent` blocks."""
  agent = ml_collections.ConfigDict({k: config.hydro[k] for k in ("hidden", "gru", "slots",
                                                                   "w_init")})
  return ml_collections.ConfigDict(dict(ppo={k: config[k] for k in LEARNER}, agent=agent))


def plan(config) -> routes.Plan:
  """The hydro trainer as the host loop's Plan (routes.Plan)."""
  env, params = registry.make(config.env_name, **dict(config.env_kwargs))
  tables = AH.make_tables(params, bool(config.hydro.residual), env.agent_api)
  per_update = int(config.num_envs) * int(config.num_steps)
  total = int(config.total_timesteps) // per_update
  c = trainer_config(config)
  trainers: dict[int, tuple] = {}

  def trainer(n):
    if n not in trainers:   # at most two chunk sizes: the chunk and a shorter last one
      trainers[n] = AB.make_trainer(c, env, total, n)
    return trainers[n]

  def seed_keys(seeds):
    return jax.random.split(jax.random.PRNGKey(int(config.seed)), seeds)

  def init(keys):
    return trainer(int(config.updates_per_chunk))[0](keys, tables)

  def run(state, n, done):
    seeds = jax.tree.leaves(state)[0].shape[0]
    keys = jax.vmap(lambda k: jax.random.fold_in(k, done))(seed_keys(seeds))
    return trainer(n)[1](state, tables, keys)

  return routes.Plan(lambda keys: init(seed_keys(len(keys))), run, total, per_update)
