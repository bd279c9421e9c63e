"""Text environments from the command line: token-level PPO (`lm.token_ppo.make_train_step`) of a
small decoder LM trained from random initialisation, driven by the CLI's host loop.

  python -m jaxrl_suite.train --env=KVLookup-v0
  python -m jaxrl_suite.train --env=GoalHouse-v0 --config.token_ppo.advantage=grpo \
      --config.token_ppo.group_size=4

One update = one `make_train_step` step: `num_envs` trajectories of up to `num_turns` turns
sampled at `temperature`, then `token_ppo.epochs` x `token_ppo.num_minibatches` token-PPO steps
(`config.token_ppo` holds every `TokenPPOConfig` field but value_clip). Its env steps are
counted as num_envs * num_turns (an upper bound: episodes may end earlier). The metric
`returned_episode_returns` is the batch's mean trajectory return (rollout_metrics' "return").

The context: `window` slots (the model's max_len). The default is the smallest window that holds
a whole episode when that is at most 128 slots (KVLookup 28, SceneCap 83), else 64 with the
oldest turns truncated (`truncate_oldest`; GoalHouse, StreamLedger: their episodes are longer
than the window on purpose). From random weights the policy samples tokens uniformly at first:
the experiments start from a behaviour-cloned model instead (docs/lm.md).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_collections

from jaxrl_suite.core import run_config
from jaxrl_suite.envs import registry
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import token_ppo
from jaxrl_suite.lm import value as lm_value
from jaxrl_suite.train import routes

MAX_WHOLE_EPISODE = 128   # the default window holds a whole episode up to this many slots
TRUNCATED_WINDOW = 64


def _episode_len(env_params) -> int:
  for name in ("max_steps_in_episode", "max_steps"):
    if hasattr(env_params, name):
      return int(getattr(env_params, name))
  raise ValueError(f"{type(env_params).__name__} has no max_steps_in_episode / max_steps field")


def _slots(env, turns: int) -> tuple[int, int]:
  """(slots of a whole episode, slots of [task][one observation][one action])."""
  o, a = env.obs_len, env.max_action_len
  so = min(env.max_step_obs_len, o)
  return o + (turns - 1) * so + turns * a, o + so + a


def default_config(env_name: str) -> ml_collections.ConfigDict:
  """The CLI config of a text environment (sizes from its default parameters): 100 updates of
  16 trajectories, a 2-layer d_model=64 LM with a shared value head."""
  env, params = registry.make(env_name)
  turns = _episode_len(params)
  whole, one = _slots(env, turns)
  truncate = whole > MAX_WHOLE_EPISODE
  c = ml_collections.ConfigDict(dict(
      algo="ppo", agent="lm", env_name=env_name, env_kwargs={}, seed=0, num_seeds=1,
      num_envs=16, num_turns=turns, total_timesteps=100 * 16 * turns,
      window=max(TRUNCATED_WINDOW, one) if truncate else whole, truncate_oldest=truncate,
      temperature=1.0, value="shared",
      model=dict(d_model=64, num_layers=2, num_heads=2, d_ff=128)))
  fields = {f.name: f.default for f in dataclasses.fields(token_ppo.TokenPPOConfig)
            if f.name != "value_clip"}   # None: not a typed ConfigDict field
  c.token_ppo = ml_collections.ConfigDict(fields)
  run_config.add_host_defaults(c)
  c.updates_per_chunk, c.checkpoint_every = 10, 50
  return c


def _configs(config, env):
  """(LMConfig, ValueConfig, TokenPPOConfig, RolloutConfig); ValueError names the field."""
  try:
    pcfg = token_ppo.TokenPPOConfig(**config.token_ppo.to_dict())
  except (ValueError, TypeError) as e:
    raise ValueError(f"config.token_ppo: {e}") from None
  try:
    cfg = lm_model.LMConfig(f"cli_{config.env_name}", vocab_size=env.vocab.size,
                            max_len=int(config.window), tokenizer_version=env.vocab.version,
                            **config.model.to_dict())
  except (ValueError, TypeError) as e:
    raise ValueError(f"config.model: {e}") from None
  overflow = lm_rollout.TruncateOldest() if config.truncate_oldest else None
  rcfg = lm_rollout.RolloutConfig(num_turns=int(config.num_turns), window=int(config.window),
                                  overflow=overflow, temperature=float(config.temperature))
  return cfg, lm_value.ValueConfig(config.value), pcfg, rcfg


def validate(config) -> None:
  """Raises ValueError naming the first bad field (the env is made: text envs are cheap)."""
  routes.positive_ints(config, ("num_envs", "num_turns", "window", "total_timesteps",
                                "num_seeds"))
  routes.positive_floats(config, ("temperature",))
  if config.value not in ("shared", "none"):
    raise ValueError(f"config.value must be 'shared' (a value head on the LM) or 'none', got "
                     f"{config.value!r}")
  env, _ = registry.make(config.env_name, **dict(config.env_kwargs))
  cfg, _, pcfg, rcfg = _configs(config, env)
  for name, k in (("token_ppo.num_minibatches", pcfg.num_minibatches),
                  ("token_ppo.group_size", pcfg.group_size)):
    if config.num_envs % k:
      raise ValueError(f"config.{name}={k} must divide config.num_envs={config.num_envs}")
  try:
    lm_rollout.check_fits(rcfg, cfg, env)
  except ValueError as e:
    raise ValueError(f"config.window / num_turns / truncate_oldest: {e}") from None
  if config.total_timesteps < config.num_envs * config.num_turns:
    raise ValueError(f"config.total_timesteps={config.total_timesteps} is less than one update "
                     f"(num_envs * num_turns = {config.num_envs * config.num_turns})")


def plan(config) -> routes.Plan:
  """Token PPO as the host loop's Plan (routes.Plan)."""
  env, env_params = registry.make(config.env_name, **dict(config.env_kwargs))
  cfg, vcfg, pcfg, rcfg = _configs(config, env)
  init_state, step = token_ppo.make_train_step(cfg, vcfg, pcfg, env, env_params, rcfg,
                                               int(config.num_envs))
  per_update = int(config.num_envs) * int(config.num_turns)
  base = jax.random.PRNGKey(int(config.seed))

  def init_seed(key):
    k_pi, k_v = jax.random.split(key)
    params = lm_model.init_params(cfg, k_pi)
    return init_state(params, lm_value.init_value_params(vcfg, cfg, k_v), params)

  def run_seed(state, key, n, done):
    keys = jax.random.split(jax.random.fold_in(key, done), n)
    state, m = jax.lax.scan(step, state, keys)
    return state, {**m, "returned_episode_returns": m["return"]}

  runners: dict[int, object] = {}

  def run(state, n, done):
    if n not in runners:   # at most two chunk sizes: the chunk and a shorter last one
      runners[n] = jax.jit(jax.vmap(lambda s, k, d: run_seed(s, k, n, d), in_axes=(0, 0, None)))
    seeds = jax.tree.leaves(state)[0].shape[0]
    keys = jax.random.split(jax.random.fold_in(base, 1), seeds)
    return runners[n](state, keys, jnp.int32(done))

  def init(keys):
    return jax.jit(jax.vmap(init_seed))(jax.random.split(base, len(keys)))

  return routes.Plan(init, run, per_update=per_update,
                     total=int(config.total_timesteps) // per_update)
