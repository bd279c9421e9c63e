"""PPO's speed benchmark (experiments/bench_ppo.py): our learner against a reference, one run.

`bench_ppo` compiles three programs, each `jit(vmap(train))` over `num_seeds` keys:
  ours      `ppo.make_train(config, env, env_params)`: the whole run;
  ref       `ref_train` (the script passes experiments/purejaxrl_style_ppo.py's, a purejaxrl-
            structured reference; the library does not import experiments);
  rollout   `rollout_only`: the same rollouts with no gradient step (where our time goes);
then times them interleaved (core/bench.py) so a burst of load hits all three alike, keeping
the best of `reps` each. The env comes in as an argument (algos/ does not import envs/).
"""

from __future__ import annotations

import time
from typing import Callable

import jax
import numpy as np

from jaxrl_suite.algos import ppo, rollout
from jaxrl_suite.core import bench


def compile_timed(fn: Callable, keys) -> tuple[Callable, float]:
  """(jit(vmap(fn)) compiled ahead for `keys` (num_seeds,), compile seconds)."""
  t0 = time.perf_counter()
  compiled = jax.jit(jax.vmap(fn)).lower(keys).compile()
  return compiled, time.perf_counter() - t0


def rollout_only(config, env, env_params) -> Callable:
  """key -> per-update reward sums (num_updates,): the same number of rollouts as a whole run,
  with no gradient step: the rollout's cost."""
  learner = ppo.make_learner(config, env, env_params)

  def run(key):
    def one(rs, _):
      carry, key, traj = rollout.collect(learner.agent, rs.train_state.params,
                                         learner.vec_env, rs.env, rs.key, int(config.num_steps))
      return rs.replace(env=carry, key=key), traj.reward.sum()
    return jax.lax.scan(one, learner.init(key), None, learner.num_updates)[1]
  return run


def bench_ppo(config, env, env_params, ref_train: Callable, num_seeds: int, reps: int) -> dict:
  """Compile and run seconds, env steps per second of ours and the reference (all seeds
  together), the rollout's share of our time and the final mean episode returns."""
  keys = jax.random.split(jax.random.key(42), num_seeds)
  ref_keys = jax.random.split(jax.random.PRNGKey(42), num_seeds)
  ours, ours_compile = compile_timed(ppo.make_train(config, env, env_params), keys)
  ref, ref_compile = compile_timed(ref_train, ref_keys)
  roll, _ = compile_timed(rollout_only(config, env, env_params), keys)
  t = bench.interleaved({"ours": lambda: ours(keys), "ref": lambda: ref(ref_keys),
                         "rollout": lambda: roll(keys)}, reps, warmup=False)
  best = {k: v.best_wall for k, v in t.items()}
  ours_return = np.asarray(t["ours"].output[1]["returned_episode_returns"])[:, -1]
  ref_return = np.asarray(t["ref"].output)[:, -1]
  steps = num_seeds * ppo.on_policy.num_updates(config) * config.num_envs * config.num_steps
  return {"seeds": num_seeds, "compile_s": ours_compile, "ref_compile_s": ref_compile,
          "run_s": best["ours"], "sps": steps / best["ours"], "ref_sps": steps / best["ref"],
          "rollout_share": best["rollout"] / best["ours"],
          "final_return_mean": float(ours_return.mean()),
          "final_return_min": float(ours_return.min()),
          "ref_return_mean": float(ref_return.mean())}
