r"""Speed benchmark: PPO on gymnax CartPole-v1 with purejaxrl's configuration.

  python -m experiments.bench_ppo [--seeds=1,8] [--total_timesteps=500000] [--reps=3]
      [--agent=mlp]

4 envs x 128 steps, 5e5 timesteps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed, tanh 64-64.
For each number of vmapped seeds it prints compile time, the best of `--reps` timed runs, env
steps per second (all seeds together) and the final mean episode return, for our learner and for
`experiments/purejaxrl_style_ppo.py` (a purejaxrl-structured reference) timed in the same
process, interleaved, so the ratio between them holds under any machine load. It also prints the
ratio to the figures the issue quotes for purejaxrl on this machine kind (~120k steps/s for 1
seed, ~148k for 8 vmapped seeds, return ~488), and where our time goes (rollout vs update).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
from absl import app, flags

from experiments import purejaxrl_style_ppo
from jaxrl_suite.algos import bench_workloads, ppo
from jaxrl_suite.envs import registry

_SEEDS = flags.DEFINE_list("seeds", ["1", "8"], "Numbers of vmapped seeds to time.")
_STEPS = flags.DEFINE_integer("total_timesteps", 500_000, "Timesteps per seed.")
_REPS = flags.DEFINE_integer("reps", 3, "Timed runs per implementation (best one is kept).")
_AGENT = flags.DEFINE_string("agent", "mlp", "config.agent of our learner (the reference is "
                             "always purejaxrl's MLP; other agents show their own cost).")
QUOTED_SPS = {1: 120_000, 8: 148_000}   # purejaxrl on this machine kind, as the issue quotes
QUOTED_RETURN = 488.0


def bench(num_seeds: int, total_timesteps: int, reps: int, agent: str = "mlp") -> dict:
  """algos/bench_workloads.bench_ppo on CartPole-v1 with purejaxrl's configuration."""
  config = ppo.default_config()
  config.total_timesteps = total_timesteps
  config.agent = agent
  env, env_params = registry.make("CartPole-v1")
  ref = purejaxrl_style_ppo.make_train(total_timesteps=total_timesteps)
  return bench_workloads.bench_ppo(config, env, env_params, ref, num_seeds, reps)


def main(argv):
  del argv
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}")
  print(f"{'seeds':>5} {'compile s':>9} {'run s':>6} {'steps/s':>8} {'ref steps/s':>11} "
        f"{'vs ref':>6} {'vs quoted':>9} {'rollout':>7} {'return':>6} {'min':>5} {'ref ret':>7}")
  for n in [int(s) for s in _SEEDS.value]:
    r = bench(n, _STEPS.value, _REPS.value, _AGENT.value)
    quoted = QUOTED_SPS.get(n)
    vs_quoted = f"{r['sps'] / quoted:.2f}x" if quoted else "-"
    print(f"{n:>5} {r['compile_s']:>9.1f} {r['run_s']:>6.2f} {r['sps']:>8.0f} "
          f"{r['ref_sps']:>11.0f} {r['sps'] / r['ref_sps']:>5.2f}x {vs_quoted:>9} "
          f"{r['rollout_share']:>6.0%} {r['final_return_mean']:>6.1f} "
          f"{r['final_return_min']:>5.1f} {r['ref_return_mean']:>7.1f}", flush=True)
  print("ref = experiments/purejaxrl_style_ppo.py timed in this process; quoted = purejaxrl "
        f"figures from the issue {QUOTED_SPS} steps/s, return {QUOTED_RETURN}; rollout = share "
        "of our run time spent collecting experience (the rest is GAE and gradient epochs).")


if __name__ == "__main__":
  app.run(main)
