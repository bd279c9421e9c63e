"""The one on-policy learner (PPO, REINFORCE) for every agent, purejaxrl-style.

Usage (any agent, single- or multi-agent environment):

    from jaxrl_suite.algos import ppo
    config = ppo.default_config()
    config.agent = "entities"                   # "mlp" | "gru" | "entities" | "ballast_v1" | ...
    config.entities.num_heads = 4               # the agent's own validated sub-config
    config.multi_agent = "mappo"                # env.num_agents > 1: "ippo" | "mappo"
    learner = ppo.make_learner(config, env, env_params)     # or agent=my_agents.Agent(...)
    rs, metrics = jax.jit(jax.vmap(learner.train))(jax.random.split(key, 8))
    # a custom policy: agents.Agent(init, initial_carry, act, evaluate, value[, label, ...])
    # (see algos/agent.py); a multi-agent env sets `num_agents`, returns obs [N, ...] and
    # rewards [N] per env, and may define `agent_mask(state, params) -> bool[N]`.

A learner is a set of pure functions over a `RunnerState` pytree:

  init(key)                      -> RunnerState
  update(runner_state)           -> (RunnerState, metrics)     one rollout + gradient epochs
  run(runner_state, num_updates) -> (RunnerState, metrics)     lax.scan of `update`
  train(key)                     -> (RunnerState, metrics)     run(init(key), num_updates)

`train` jits end to end and vmaps over seeds. `update` is what `core.distributed` shards and what
the checkpointing host loop calls in chunks. The algorithm only supplies its loss, over the
agent's `Eval` (log-prob, entropy, value of the recorded actions under new parameters):

  rollout (agent.act, T steps x B rows) -> GAE per row -> update_epochs x num_minibatches of
  grad(loss_fn(agent.evaluate(...)) + aux_coef * aux_loss)

Feed-forward agents minibatch shuffled single steps; recurrent agents minibatch whole env
sequences (rows), re-running their core from the carry stored at the start of the rollout.
Multi-agent rows are envs x agents: shared parameters, per-agent rewards and advantages (IPPO);
MAPPO's agents see every agent's observation in the critic. Rows of dead agents
(`agent_mask` False) are weighted out of every mean.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import flax.struct as struct
import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax.training.train_state import TrainState

from jaxrl_suite import agents
from jaxrl_suite.agents.interface import Agent, Eval
from jaxrl_suite.algos import rollout
from jaxrl_suite.core.gae import gae


@struct.dataclass
class RunnerState:
  train_state: TrainState
  env: rollout.EnvCarry
  key: jax.Array
  update_step: jax.Array


class Batch(NamedTuple):
  traj: rollout.Transition   # leaves [N, ...] or [T, B_mb, ...]; only the fields a loss reads
  advantages: jax.Array
  targets: jax.Array


def loss_view(traj: rollout.Transition, recurrent: bool) -> rollout.Transition:
  """The fields `evaluate` and the losses read; the rest become None / {}.

  Minibatch epochs gather every leaf of the batch once per epoch, so dropping what no loss
  uses (final_obs, rewards, episode bookkeeping) removes work from the hottest loop.
  """
  return traj.replace(reward=None, final_obs=None, terminated=None, done=None, carry=(),
                      logs={}, episode_sums={},
                      done_prev=traj.done_prev if recurrent else None)


# loss_fn(ev: Eval, batch: Batch, config) -> (loss, aux metrics dict)
LossFn = Callable[[Eval, Batch, ml_collections.ConfigDict], tuple[jax.Array, dict]]


class Learner(NamedTuple):
  init: Callable
  update: Callable
  run: Callable
  train: Callable
  policy: Callable | None
  network: Any            # the agent's flax module (inspection, tests)
  vec_env: rollout.VecEnv
  num_updates: int
  agent: Agent


def num_updates(config) -> int:
  return int(config.total_timesteps) // (int(config.num_steps) * int(config.num_envs))


def make_learner(config: ml_collections.ConfigDict, env, env_params, loss_fn: LossFn,
                 agent: Agent | None = None) -> Learner:
  """Builds the pure functions of an on-policy learner for `agent` (default: the one
  `config.agent` names, built by `jaxrl_suite.agents.make`).

  `config.update_epochs` passes over each rollout, split into `config.num_minibatches`.
  """
  update_epochs, num_minibatches = int(config.update_epochs), int(config.num_minibatches)
  vec = rollout.VecEnv(env, env_params, int(config.num_envs),
                       centralised=config.get("multi_agent", "ippo") == "mappo")
  if agent is None:
    agent = agents.make(config, vec)
  n_updates = num_updates(config)
  num_steps = int(config.num_steps)
  rows = vec.num_rows
  batch_size = num_steps * rows
  if agent.recurrent and rows % num_minibatches:
    raise ValueError(f"config.num_minibatches={num_minibatches} must divide the number of env "
                     f"sequences num_envs*num_agents={rows} (a recurrent agent minibatches "
                     f"whole sequences)")
  grad_steps_per_update = update_epochs * num_minibatches
  episode_info = tuple(config.get("episode_info", ()))
  aux_coef = float(config.get("aux_coef", 0.0))

  def lr_schedule(count):
    if not config.anneal_lr:
      return config.lr
    frac = 1.0 - (count // grad_steps_per_update) / max(n_updates, 1)
    return config.lr * jnp.maximum(frac, 0.0)  # no tiny negative rate from rounding

  opt = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                    optax.adam(learning_rate=lr_schedule, eps=1e-5))
  # optax.flatten runs clipping and Adam on one concatenated vector: a handful of fused kernels
  # per gradient step instead of a few per parameter leaf (the update is launch-bound on CPU).
  tx = optax.flatten(opt) if config.get("flat_optimizer", True) else opt

  def init(key) -> RunnerState:
    key, k_net, k_env = jax.random.split(key, 3)
    env_carry = vec.reset(k_env, agent)
    params = agent.init(k_net, vec.view(env_carry.obs))
    ts = TrainState.create(apply_fn=None, params=params, tx=tx)
    ts = ts.replace(step=jnp.zeros((), jnp.int32))  # an array, so checkpoints keep its type
    return RunnerState(ts, env_carry, key, jnp.zeros((), jnp.int32))

  def total_loss(params, carry0, mb: Batch):
    ev = agent.evaluate(params, carry0, mb.traj)
    loss, aux = loss_fn(ev, mb, config)
    if agent.label is not None:  # the agent has an auxiliary loss on privileged labels
      loss = loss + aux_coef * ev.aux_loss
      aux = dict(aux, aux_loss=ev.aux_loss, loss=loss)
    return loss, aux

  def minibatches(key, batch: Batch, carry0):
    """Shuffled minibatches [num_minibatches, ...]: of steps, or of whole sequences."""
    if agent.recurrent:
      perm = jax.random.permutation(key, rows)
      split = lambda x, ax: jnp.moveaxis(
          jnp.take(x, perm, axis=ax).reshape(x.shape[:ax] + (num_minibatches, -1)
                                             + x.shape[ax + 1:]), ax, 0)
      return (jax.tree.map(lambda x: split(x, 1), batch),
              jax.tree.map(lambda x: split(x, 0), carry0))
    flat = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]), batch)
    perm = jax.random.permutation(key, batch_size)
    mb_size = batch_size // num_minibatches
    mbs = jax.tree.map(lambda x: x[perm].reshape((num_minibatches, mb_size) + x.shape[1:]),
                       flat)
    return mbs, ()

  def update(rs: RunnerState):
    ts = rs.train_state
    carry0 = rs.env.agent_carry
    env_carry, key, traj = rollout.collect(agent, ts.params, vec, rs.env, rs.key, num_steps,
                                           episode_info)
    next_v = rollout.next_values(agent, ts.params, vec, traj, env_carry)
    advantages, targets = gae(traj.reward, traj.value, next_v, traj.terminated, traj.done,
                              config.gamma, config.gae_lambda)
    batch = Batch(loss_view(traj, agent.recurrent), advantages, targets)

    def epoch(carry, _):
      ts, key = carry
      key, k_perm = jax.random.split(key)
      mbs, c0 = minibatches(k_perm, batch, carry0)

      def minibatch(ts, inp):
        mb, c = inp
        grads, aux = jax.grad(total_loss, has_aux=True)(ts.params, c, mb)
        return ts.apply_gradients(grads=grads), aux

      ts, aux = jax.lax.scan(minibatch, ts, (mbs, c0))
      return (ts, key), aux

    (ts, key), aux = jax.lax.scan(epoch, (ts, key), None, update_epochs)
    metrics = {k: jnp.mean(v) for k, v in aux.items()}
    metrics.update(rollout.episode_stats(traj))
    for k, v in traj.logs.items():
      metrics[k] = jnp.sum(v.astype(jnp.float32)) / v.size
    metrics["returned_episode_returns"] = jnp.mean(env_carry.returned_episode_returns)
    metrics["learning_rate"] = jnp.asarray(lr_schedule(ts.step), jnp.float32)
    return RunnerState(ts, env_carry, key, rs.update_step + 1), metrics

  def run(rs: RunnerState, n: int):
    return jax.lax.scan(lambda c, _: update(c), rs, None, n)

  def train(key):
    return run(init(key), n_updates)

  return Learner(init, update, run, train, agent.policy, agent.module, vec, n_updates, agent)


def entry_points(loss_fn: LossFn):
  """`(make_learner, make_train, make_policy)` of the learner whose loss is `loss_fn`.

  Each takes `(config, env, env_params, agent=None)`: `make_learner` returns the `Learner`,
  `make_train` its pure `train(key) -> (runner_state, metrics)`, `make_policy` its
  `policy(params, obs, key, mask=None, greedy=False) -> action` (feed-forward agents).
  """
  def learner(config, env, env_params, agent: Agent | None = None) -> Learner:
    return make_learner(config, env, env_params, loss_fn, agent)

  def train(config, env, env_params, agent: Agent | None = None):
    return learner(config, env, env_params, agent).train

  def policy(config, env, env_params, agent: Agent | None = None):
    return learner(config, env, env_params, agent).policy

  return learner, train, policy


def base_config() -> ml_collections.ConfigDict:
  """Fields shared by every on-policy learner (purejaxrl's CartPole defaults) and the agents'
  sub-configs (`jaxrl_suite.agents.default_configs`)."""
  config = ml_collections.ConfigDict(dict(
      env_name="CartPole-v1",
      env_kwargs={},
      num_envs=4,
      num_steps=128,
      total_timesteps=500_000,
      lr=2.5e-4,
      anneal_lr=True,
      gamma=0.99,
      gae_lambda=0.95,
      vf_coef=0.5,
      ent_coef=0.01,
      max_grad_norm=0.5,
      hidden_sizes=(64, 64),
      activation="tanh",
      normalize_advantages=True,
      flat_optimizer=True,     # optax.flatten (faster on CPU); False: per-leaf clip + Adam
      aux_coef=0.0,            # weight of an agent's auxiliary loss (agents with `label`)
      episode_info=(),         # info fields averaged over finished episodes (`<k>_rate`)
      agent="mlp",
      multi_agent="ippo",      # for envs with num_agents > 1: "ippo" | "mappo"
      seed=0,
      num_seeds=1,
  ))
  config.update(agents.default_configs())
  return config


def weighted_mean(x: jax.Array, weight: jax.Array | None) -> jax.Array:
  """mean(x) or sum(w x) / sum(w) (live rows only)."""
  if weight is None:
    return jnp.mean(x)
  return jnp.sum(x * weight) / jnp.maximum(jnp.sum(weight), 1.0)


def normalize(adv: jax.Array, enabled: bool, weight: jax.Array | None = None) -> jax.Array:
  """(A - mean) / (std + 1e-8) over the minibatch (over live rows when weighted)."""
  if not enabled:
    return adv
  if weight is None:
    return (adv - adv.mean()) / (adv.std() + 1e-8)
  m = weighted_mean(adv, weight)
  return (adv - m) / (jnp.sqrt(weighted_mean(jnp.square(adv - m), weight)) + 1e-8)


def live_rows(weight: jax.Array | None, advantages, values, old_values, targets):
  """Masks dead rows out of mean-based losses: their advantage becomes 0 and their value
  predictions equal the target (zero loss, zero gradient); `scale` = N / #live turns the means
  over all rows into means over live rows. Identity (scale None) without weights."""
  if weight is None:
    return advantages, values, old_values, None
  live = weight > 0
  scale = weight.size / jnp.maximum(jnp.sum(weight), 1.0)
  return (advantages * weight, jnp.where(live, values, targets),
          jnp.where(live, old_values, targets), scale)


def rescale(x: jax.Array, scale) -> jax.Array:
  return x if scale is None else x * scale


def validate(config: ml_collections.ConfigDict) -> None:
  """Checks a learner config (and its agent's sub-config) before anything is compiled.

  The learner does not know which environments exist (algos/ never imports envs/): a driver
  that resolves `config.env_name` checks it too (`jaxrl_suite.train.host.validate_run_config`).

  Raises:
    ValueError: naming the first bad field and what would be valid.
  """
  from jaxrl_suite.core.networks import _ACTIVATIONS

  def positive_int(name):
    v = config.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
      raise ValueError(f"config.{name} must be a positive integer, got {v!r}")

  for name in ("num_envs", "num_steps", "total_timesteps", "update_epochs", "num_minibatches"):
    positive_int(name)
  batch = config.num_envs * config.num_steps
  if batch % config.num_minibatches:
    raise ValueError(f"config.num_minibatches={config.num_minibatches} does not divide the batch "
                     f"num_envs*num_steps={batch}")
  if config.total_timesteps < batch:
    raise ValueError(f"config.total_timesteps={config.total_timesteps} is smaller than one "
                     f"rollout (num_envs*num_steps={batch})")
  for name in ("lr", "max_grad_norm"):
    if not config[name] > 0:
      raise ValueError(f"config.{name} must be > 0, got {config[name]!r}")
  for name in ("gamma", "gae_lambda"):
    if not 0.0 <= config[name] <= 1.0:
      raise ValueError(f"config.{name} must be in [0, 1], got {config[name]!r}")
  for name in ("vf_coef", "ent_coef"):
    if config[name] < 0:
      raise ValueError(f"config.{name} must be >= 0, got {config[name]!r}")
  if config.get("aux_coef", 0.0) < 0:
    raise ValueError(f"config.aux_coef must be >= 0, got {config.aux_coef!r}")
  if "clip_eps" in config and not config.clip_eps > 0:
    raise ValueError(f"config.clip_eps must be > 0, got {config.clip_eps!r}")
  if any((not isinstance(h, int)) or h <= 0 for h in config.hidden_sizes):
    raise ValueError(f"config.hidden_sizes must be positive integers, got {config.hidden_sizes!r}")
  if config.activation not in _ACTIVATIONS:
    raise ValueError(f"config.activation must be one of {sorted(_ACTIVATIONS)}, "
                     f"got {config.activation!r}")
  if config.get("multi_agent", "ippo") not in ("ippo", "mappo"):
    raise ValueError(f"config.multi_agent must be 'ippo' or 'mappo', got {config.multi_agent!r}")
  if any(not isinstance(k, str) for k in config.get("episode_info", ())):
    raise ValueError(f"config.episode_info must be info field names, got {config.episode_info!r}")
  agents.validate(config)
  positive_int("num_seeds")
