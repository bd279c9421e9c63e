r"""Speed benchmark: PPO on gymnax CartPole-v1 with purejaxrl's configuration.

  python -m experiments.bench_ppo [--seeds=1,8] [--total_timesteps=500000]

4 envs x 128 steps, 5e5 timesteps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed, tanh 64-64.
Prints compile time, run time, environment steps per second (all seeds together) and the final
mean episode return, each against purejaxrl's figures on the same 2-core CPU (stack.md: ~120k
steps/s for 1 seed, ~148k for 8 vmapped seeds, return ~488).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import numpy as np
from absl import app, flags

from jaxrl_suite.algos import ppo
from jaxrl_suite.envs import registry

_SEEDS = flags.DEFINE_list("seeds", ["1", "8"], "Numbers of vmapped seeds to time.")
_STEPS = flags.DEFINE_integer("total_timesteps", 500_000, "Timesteps per seed.")
REFERENCE_SPS = {1: 120_000, 8: 148_000}   # purejaxrl on this machine kind (stack.md)
REFERENCE_RETURN = 488.0


def bench(num_seeds: int, total_timesteps: int) -> dict:
  config = ppo.default_config()
  config.total_timesteps = total_timesteps
  env, env_params = registry.make("CartPole-v1")
  train = jax.jit(jax.vmap(ppo.make_train(config, env, env_params)))
  keys = jax.random.split(jax.random.key(42), num_seeds)
  t0 = time.perf_counter()
  compiled = train.lower(keys).compile()
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  _, metrics = compiled(keys)
  jax.block_until_ready(metrics)
  run_s = time.perf_counter() - t0
  steps = num_seeds * ppo.on_policy.num_updates(config) * config.num_envs * config.num_steps
  final = np.asarray(metrics["returned_episode_returns"])[:, -1]
  return {"seeds": num_seeds, "compile_s": compile_s, "run_s": run_s, "sps": steps / run_s,
          "final_return_mean": float(final.mean()), "final_return_min": float(final.min())}


def main(argv):
  del argv
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs")
  print(f"{'seeds':>5} {'compile s':>9} {'run s':>7} {'steps/s':>9} {'vs ref':>7} "
        f"{'return':>7} {'min':>6}")
  for n in [int(s) for s in _SEEDS.value]:
    r = bench(n, _STEPS.value)
    ref = REFERENCE_SPS.get(n)
    ratio = f"{r['sps'] / ref:.2f}x" if ref else "-"
    print(f"{n:>5} {r['compile_s']:>9.1f} {r['run_s']:>7.1f} {r['sps']:>9.0f} {ratio:>7} "
          f"{r['final_return_mean']:>7.1f} {r['final_return_min']:>6.1f}", flush=True)
  print(f"reference (purejaxrl, same machine kind): {REFERENCE_SPS} steps/s, "
        f"return {REFERENCE_RETURN}")


if __name__ == "__main__":
  app.run(main)
