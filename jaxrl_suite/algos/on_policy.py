"""The shared skeleton of our on-policy learners (PPO, REINFORCE), purejaxrl-style.

A learner is a set of pure functions over a `RunnerState` pytree:

  init(key)                      -> RunnerState
  update(runner_state)           -> (RunnerState, metrics)     one rollout + gradient epochs
  run(runner_state, num_updates) -> (RunnerState, metrics)     lax.scan of `update`
  train(key)                     -> (RunnerState, metrics)     run(init(key), num_updates)

`train` jits end to end and vmaps over seeds. `update` is what `core.distributed` shards and what
the checkpointing host loop calls in chunks. The algorithm only supplies its loss.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import flax.struct as struct
import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax.training.train_state import TrainState

from jaxrl_suite.algos import rollout
from jaxrl_suite.core.gae import gae
from jaxrl_suite.core.networks import ActorCritic, apply_action_mask


@struct.dataclass
class RunnerState:
  train_state: TrainState
  env: rollout.EnvCarry
  key: jax.Array
  update_step: jax.Array


class Batch(NamedTuple):
  traj: rollout.Transition   # leaves [..., E-or-N, ...]; only the fields a loss reads
  advantages: jax.Array
  targets: jax.Array


def loss_view(traj: rollout.Transition) -> rollout.Transition:
  """The fields a loss reads (obs, action, log_prob, value, mask); the rest become None.

  Minibatch epochs gather every leaf of the batch once per epoch, so dropping what no loss
  uses (final_obs, rewards, episode bookkeeping) removes work from the hottest loop.
  """
  return traj.replace(reward=None, final_obs=None, terminated=None, done=None,
                      episode_return=None, episode_done=None)


# loss_fn(params, apply_fn, batch, config) -> (loss, aux metrics dict)
LossFn = Callable[[Any, Callable, Batch, ml_collections.ConfigDict], tuple[jax.Array, dict]]


class Learner(NamedTuple):
  init: Callable
  update: Callable
  run: Callable
  train: Callable
  policy: Callable
  network: ActorCritic
  vec_env: rollout.VecEnv
  num_updates: int


def num_updates(config) -> int:
  return int(config.total_timesteps) // (int(config.num_steps) * int(config.num_envs))


def make_learner(config: ml_collections.ConfigDict, env, env_params, loss_fn: LossFn) -> Learner:
  """Builds the pure functions of an on-policy actor-critic learner.

  `config.update_epochs` passes over each rollout, split into `config.num_minibatches`.
  """
  update_epochs, num_minibatches = int(config.update_epochs), int(config.num_minibatches)
  vec = rollout.VecEnv(env, env_params, int(config.num_envs))
  network = ActorCritic(vec.num_actions, tuple(config.hidden_sizes), config.activation)
  n_updates = num_updates(config)
  batch_size = int(config.num_steps) * int(config.num_envs)
  mb_size = batch_size // num_minibatches
  grad_steps_per_update = update_epochs * num_minibatches

  def lr_schedule(count):
    if not config.anneal_lr:
      return config.lr
    frac = 1.0 - (count // grad_steps_per_update) / max(n_updates, 1)
    return config.lr * jnp.maximum(frac, 0.0)  # no tiny negative rate from rounding

  # optax.flatten runs clipping and Adam on one concatenated vector: a handful of fused kernels
  # per gradient step instead of a few per parameter leaf (the update is launch-bound on CPU).
  tx = optax.flatten(optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                                 optax.adam(learning_rate=lr_schedule, eps=1e-5)))

  def init(key) -> RunnerState:
    key, k_net, k_env = jax.random.split(key, 3)
    params = network.init(k_net, jnp.zeros((1, vec.obs_dim), jnp.float32))
    ts = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
    ts = ts.replace(step=jnp.zeros((), jnp.int32))  # an array, so checkpoints keep its type
    return RunnerState(ts, vec.reset(k_env), key, jnp.zeros((), jnp.int32))

  def update(rs: RunnerState):
    ts = rs.train_state
    env_carry, key, traj = rollout.collect(network.apply, ts.params, vec, rs.env, rs.key,
                                           int(config.num_steps))
    next_v = rollout.next_values(network.apply, ts.params, traj, env_carry.obs)
    advantages, targets = gae(traj.reward, traj.value, next_v, traj.terminated, traj.done,
                              config.gamma, config.gae_lambda)
    flat = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]),
                        Batch(loss_view(traj), advantages, targets))

    def epoch(carry, _):
      ts, key = carry
      key, k_perm = jax.random.split(key)
      perm = jax.random.permutation(k_perm, batch_size)
      mbs = jax.tree.map(lambda x: x[perm].reshape((num_minibatches, mb_size) + x.shape[1:]),
                         flat)

      def minibatch(ts, mb):
        grads, aux = jax.grad(loss_fn, has_aux=True)(ts.params, network.apply, mb, config)
        return ts.apply_gradients(grads=grads), aux

      ts, aux = jax.lax.scan(minibatch, ts, mbs)
      return (ts, key), aux

    (ts, key), aux = jax.lax.scan(epoch, (ts, key), None, update_epochs)
    metrics = {k: jnp.mean(v) for k, v in aux.items()}
    metrics.update(rollout.episode_stats(traj))
    metrics["returned_episode_returns"] = jnp.mean(
        env_carry.env_state.returned_episode_returns)
    metrics["learning_rate"] = jnp.asarray(lr_schedule(ts.step), jnp.float32)
    return RunnerState(ts, env_carry, key, rs.update_step + 1), metrics

  def run(rs: RunnerState, n: int):
    return jax.lax.scan(lambda c, _: update(c), rs, None, n)

  def train(key):
    return run(init(key), n_updates)

  def policy(params, obs, key, mask=None, greedy: bool = False):
    """Learned policy with the heuristic-policy signature: obs [..., D] -> action [...]."""
    logits, _ = network.apply(params, obs.reshape(obs.shape[:-1] + (-1,)).astype(jnp.float32))
    logits = apply_action_mask(logits, mask)
    return jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)

  return Learner(init, update, run, train, policy, network, vec, n_updates)


def entry_points(loss_fn: LossFn):
  """`(make_learner, make_train, make_policy)` of the learner whose loss is `loss_fn`.

  Each takes `(config, env, env_params)`: `make_learner` returns the `Learner`, `make_train` its
  pure `train(key) -> (runner_state, metrics)`, `make_policy` its
  `policy(params, obs, key, mask=None, greedy=False) -> action`.
  """
  def learner(config, env, env_params) -> Learner:
    return make_learner(config, env, env_params, loss_fn)

  def train(config, env, env_params):
    return learner(config, env, env_params).train

  def policy(config, env, env_params):
    return learner(config, env, env_params).policy

  return learner, train, policy


def base_config() -> ml_collections.ConfigDict:
  """Fields shared by every on-policy learner (purejaxrl's CartPole defaults)."""
  return ml_collections.ConfigDict(dict(
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
      seed=0,
      num_seeds=1,
  ))


def normalize(adv: jax.Array, enabled: bool) -> jax.Array:
  if not enabled:
    return adv
  return (adv - adv.mean()) / (adv.std() + 1e-8)


def validate(config: ml_collections.ConfigDict) -> None:
  """Checks a learner config before anything is compiled.

  Raises:
    ValueError: naming the first bad field and what would be valid.
  """
  from jaxrl_suite.core.networks import _ACTIVATIONS
  from jaxrl_suite.envs import registry

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
  if "clip_eps" in config and not config.clip_eps > 0:
    raise ValueError(f"config.clip_eps must be > 0, got {config.clip_eps!r}")
  if any((not isinstance(h, int)) or h <= 0 for h in config.hidden_sizes):
    raise ValueError(f"config.hidden_sizes must be positive integers, got {config.hidden_sizes!r}")
  if config.activation not in _ACTIVATIONS:
    raise ValueError(f"config.activation must be one of {sorted(_ACTIVATIONS)}, "
                     f"got {config.activation!r}")
  if not registry.is_registered(config.env_name):
    raise ValueError(f"config.env_name {config.env_name!r} is not a registered environment; "
                     f"valid names: {', '.join(registry.registered_names())}")
  positive_int("num_seeds")
