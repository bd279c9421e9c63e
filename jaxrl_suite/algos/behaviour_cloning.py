"""Behaviour cloning (BC) of a teacher's actions into an Agent's params, for any gymnax env.

A generic warm start for the one on-policy learner: roll a teacher policy (a heuristic) out in
the environment, fit the agent's policy to its actions by maximum likelihood, then hand the
params to PPO (`warm_start`). No environment imports: the env, its params and the teacher come
in as arguments.

  collect(env, env_params, teacher, key, num_envs, num_steps) -> Demos (obs rows [N, D],
      actions [N], masks [N, A] | None), N = num_envs * num_steps, from auto-resetting rollouts
      of teacher(obs [B, ...], key) -> actions [B]
  fit(agent, params, demos, key, steps, batch_size, lr) -> (params, {"loss": [steps]})
      minimises the cross entropy  L(theta) = -1/|b| sum_{i in b} log pi_theta(a_i | o_i)
      (masked logits) over random minibatches b with Adam (global-norm clipping at 1)
  accuracy(agent, params, demos) -> share of rows where argmax_a pi_theta(a | o_i) = a_i
  warm_start(learner, params, key) -> RunnerState of `learner` (an on_policy.Learner) whose
      network params are `params` (fresh optimiser state; the critic is whatever `params` has)

Feed-forward single-agent agents only (the agent's `evaluate` re-scores flat rows).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxrl_suite.algos.agent import Agent
from jaxrl_suite.algos.rollout import Transition


class Demos(NamedTuple):
  obs: jax.Array            # [N, D] float32 observation rows
  action: jax.Array         # [N] int32 teacher actions
  mask: jax.Array | None    # [N, A] bool valid actions, None if the env has no action mask


def collect(env, env_params, teacher: Callable, key, num_envs: int, num_steps: int) -> Demos:
  """Teacher demonstrations from `num_envs` auto-resetting envs over `num_steps` steps."""
  has_mask = hasattr(env, "action_mask")
  k_reset, k_loop = jax.random.split(key)
  obs, state = jax.vmap(env.reset, in_axes=(0, None))(
      jax.random.split(k_reset, num_envs), env_params)

  def step(carry, key):
    obs, state = carry
    k_t, k_s = jax.random.split(key)
    mask = jax.vmap(env.action_mask, in_axes=(0, None))(state, env_params) if has_mask else None
    a = teacher(obs, k_t).astype(jnp.int32)
    if has_mask:   # a teacher's masked choice (e.g. in a drain step) becomes the first valid one
      a = jnp.where(jnp.take_along_axis(mask, a[:, None], 1)[:, 0], a, jnp.argmax(mask, -1))
    obs2, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        jax.random.split(k_s, num_envs), state, a, env_params)
    rows = obs.reshape((num_envs, -1)).astype(jnp.float32)
    return (obs2, state), (rows, a, mask)

  _, (o, a, m) = jax.lax.scan(step, (obs, state), jax.random.split(k_loop, num_steps))
  flat = lambda x: None if x is None else x.reshape((-1,) + x.shape[2:])
  return Demos(flat(o), flat(a), flat(m))


def _log_prob(agent: Agent, params, obs, action, mask):
  n = action.shape[0]
  none = jnp.zeros((n,), jnp.float32)
  seq = Transition(record=obs, action=action, log_prob=none, value=none, reward=none,
                   final_obs=None, terminated=None, done=None, done_prev=None, mask=mask,
                   weight=None, label=None, carry=(), logs={}, episode_sums={})
  return agent.evaluate(params, (), seq).log_prob


def fit(agent: Agent, params: Any, demos: Demos, key, steps: int = 500, batch_size: int = 256,
        lr: float = 1e-3) -> tuple[Any, dict[str, jax.Array]]:
  """Maximum-likelihood fit of the agent's policy to the demonstrations (module docstring)."""
  if agent.recurrent:
    raise ValueError("behaviour_cloning.fit supports feed-forward agents only")
  n = demos.action.shape[0]
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(lr))

  def loss_fn(p, idx):
    m = None if demos.mask is None else demos.mask[idx]
    return -jnp.mean(_log_prob(agent, p, demos.obs[idx], demos.action[idx], m))

  def step(carry, k):
    p, opt = carry
    idx = jax.random.randint(k, (batch_size,), 0, n)
    loss, g = jax.value_and_grad(loss_fn)(p, idx)
    upd, opt = tx.update(g, opt, p)
    return (optax.apply_updates(p, upd), opt), loss

  (params, _), losses = jax.lax.scan(step, (params, tx.init(params)),
                                     jax.random.split(key, steps))
  return params, {"loss": losses}


def accuracy(agent: Agent, params: Any, demos: Demos) -> jax.Array:
  """Share of demonstration rows on which the agent's greedy action is the teacher's."""
  a = agent.policy(params, demos.obs, jax.random.PRNGKey(0), demos.mask, greedy=True)
  return jnp.mean((a == demos.action).astype(jnp.float32))


def warm_start(learner, params: Any, key):
  """The learner's initial RunnerState with its network params replaced by `params` (same
  structure: `learner.agent.init`'s); the optimiser state is fresh (Adam moments are zeros of
  the same shapes, so replacing the params alone is consistent)."""
  rs = learner.init(key)
  return rs.replace(train_state=rs.train_state.replace(params=params))
