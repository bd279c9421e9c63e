"""Benchmark: BallastNet-v0 environment steps per second, vmapped over 4096 ships.

Runs `env.step` (with gymnax auto-reset) under `jax.jit(jax.vmap(...))` inside a `lax.scan`, with
random routes among the masked-valid ones, and the same loop with B-replan choosing the routes.
Prints steps/s and the ratio against gymnax CartPole-v1 in the same harness (reference).

  python -m experiments.bench_ballast [--ships 4096] [--steps 64]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app, flags
import gymnax
import jax
import jax.numpy as jnp

from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import make_ballast

_SHIPS = flags.DEFINE_integer("ships", 4096, "parallel ships (vmap width)")
_STEPS = flags.DEFINE_integer("steps", 64, "scan length per timed call")


def _bench(env, params, act_fn, ships: int, steps: int) -> float:
  """Returns env steps per second (ships * steps / wall time of one compiled call)."""

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
  t = time.perf_counter()
  jax.block_until_ready(f(jax.random.PRNGKey(1)))
  return ships * steps / (time.perf_counter() - t)


def main(argv):
  del argv
  ships, steps = _SHIPS.value, _STEPS.value
  env, params = make_ballast()
  bp = B.make_params(params, bayes=False)

  def random_masked(obs, state, key):
    m = env.action_mask(state, params)
    return jax.random.categorical(key, jnp.where(m, 0.0, -1e9))

  def replan(obs, state, key):
    return B.replan_policy(bp, obs, key)

  sps_rand = _bench(env, params, random_masked, ships, steps)
  sps_replan = _bench(env, params, replan, ships, steps)
  cp, cp_params = gymnax.make("CartPole-v1")
  sps_cp = _bench(cp, cp_params, lambda o, s, k: jax.random.randint(k, (), 0, 2), ships, steps)
  print(f"BallastNet-v0 (ring14), {ships} ships x {steps} steps, {jax.devices()[0].platform}:")
  print(f"  random masked routes : {sps_rand:12,.0f} env steps/s")
  print(f"  B-replan routes      : {sps_replan:12,.0f} env steps/s")
  print(f"  reference CartPole-v1: {sps_cp:12,.0f} env steps/s")
  print(f"  ratio BallastNet/CartPole = {sps_rand / sps_cp:.3f} (random), "
        f"{sps_replan / sps_cp:.3f} (B-replan)")


if __name__ == "__main__":
  app.run(main)
