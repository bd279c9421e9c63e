"""BallastNet's speed benchmark (experiments/bench_ballast.py): vmapped env steps per second.

`steps_per_second` runs `env.step` (with gymnax auto-reset) of `ships` envs under
`jax.jit(jax.vmap(...))` inside a `lax.scan` of `steps` steps, the action from `act_fn(obs,
state, key)` per ship. `net_policies` gives the BallastNet-v0 contenders: (1) env only (a fixed
route cycling through the library: measures reset + step + auto-reset select), (2) a uniformly
random masked-valid route (one uniform per ship, inverse CDF over the mask), (3) B-replan
choosing the routes; `cartpole_reference` is gymnax CartPole-v1 with random actions in the same
harness, the reference of the ratio.

Where the time went before the reset rewrite (4096 ships, 2-core CPU): the gymnax auto-reset
evaluates reset_env on every step, and reset drew 4 (plan, clog) candidates with ~1,000 PRNG
words and 5 argsorts each (XLA:CPU sorts are slow under vmap): ~5k steps/s. Now reset draws one
plan and 4 clog candidates from ~130 uniforms, uses top_k / inverse-CDF draws and packed route
bit sets for the feasibility test.
"""

from __future__ import annotations

from typing import Callable

import gymnax
import jax
import jax.numpy as jnp

from jaxrl_suite.core import bench
from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast.env import _categorical_icdf


def steps_per_second(env, params, act_fn: Callable, ships: int,
                     steps: int) -> tuple[float, float]:
  """(env steps per wall second, env steps per process-CPU second) of one compiled call (after
  a warm-up call on another key). On a shared machine the wall rate drops with other people's
  load; steps per CPU second times the number of cores estimates the rate the machine would
  give alone."""

  def run(key):
    keys = jax.random.split(key, ships)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

    def body(carry, k):
      obs, state = carry
      ka, ks = jax.random.split(k)
      a = jax.vmap(act_fn, in_axes=(0, 0, 0))(obs, state, jax.random.split(ka, ships))
      obs, state, r, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
          jax.random.split(ks, ships), state, a, params)
      return (obs, state), r.sum()

    return jax.lax.scan(body, (obs, state), jax.random.split(key, steps))[1].sum()

  f = jax.jit(run)
  jax.block_until_ready(f(jax.random.PRNGKey(0)))
  wall, cpu, _ = bench.time_call(lambda: f(jax.random.PRNGKey(1)))
  return ships * steps / wall, ships * steps / cpu


def net_policies(env, params) -> dict[str, Callable]:
  """{row name: act_fn(obs, state, key)} of the three BallastNet-v0 contenders (module doc)."""
  bp = B.make_params(params, bayes=False)

  def fixed(obs, state, key):
    del obs, key
    return (state.time * 7) % env.num_actions

  def random_masked(obs, state, key):
    # one uniform + inverse CDF over the mask (a Gumbel per action would cost 257 PRNG words)
    m = env.action_mask(state, params)
    return _categorical_icdf(jax.random.uniform(key), m.astype(jnp.float32))

  def replan(obs, state, key):
    return B.replan_policy(bp, obs, key)

  return {"env only (fixed route)": fixed, "random masked routes": random_masked,
          "B-replan routes": replan}


def cartpole_reference(ships: int, steps: int) -> tuple[float, float]:
  """`steps_per_second` of gymnax CartPole-v1 with uniformly random actions."""
  cp, cp_params = gymnax.make("CartPole-v1")
  return steps_per_second(cp, cp_params, lambda o, s, k: jax.random.randint(k, (), 0, 2),
                          ships, steps)
