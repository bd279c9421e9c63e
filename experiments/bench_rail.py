"""Benchmark: seconds per PPO update of the rail pricing variants, relational vs MLP.

Times update, rollout and env alone of each variant of configs/rail_pricing.py (what and why:
jaxrl_suite/train/rail/bench_workloads.py), in wall and process-CPU seconds, and prints the
relational / MLP ratio of each learner and action form.

  python -m experiments.bench_rail [--variants ippo_mlp,ippo_rel,mappo_mlp,mappo_rel]
                                   [--updates 4] [--repeats 2]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags
import jax

_VARIANTS = flags.DEFINE_list("variants", ["ippo_mlp", "ippo_rel", "mappo_mlp", "mappo_rel"],
                              "variants of configs/rail_pricing.py to time")
_UPDATES = flags.DEFINE_integer("updates", 4, "updates per timed call")
_REPEATS = flags.DEFINE_integer("repeats", 2, "timed calls per piece (the fastest is kept)")


def main(argv):
  del argv
  import configs.rail_pricing as cfg
  from jaxrl_suite.train.rail import bench_workloads, variants
  c = cfg.get_config()
  print(f"{c.n_seeds} seeds vmapped, {c.rl.num_envs} envs x {c.rl.num_steps} steps x {c.pad} "
        f"trains per update, {c.rl.update_epochs} epochs x {c.rl.num_minibatches} minibatches; "
        f"agent {c.agent.to_dict()}; {jax.devices()[0].platform}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
  out = {}
  for name in _VARIANTS.value:
    r = out[name] = bench_workloads.bench_variant(c, name, _UPDATES.value, _REPEATS.value)
    print(f"{name:16s} update {r['update'][0]:.3f} s wall {r['update'][1]:.3f} s CPU | rollout "
          f"{r['rollout'][0]:.3f} / {r['rollout'][1]:.3f} | env {r['env'][0]:.3f} / "
          f"{r['env'][1]:.3f} | compile {r['compile_s']:.0f} s", flush=True)
  for name in out:
    mode, att, form = variants.parse(name)
    mlp = name.replace("_rel", "_mlp")
    if att and mlp in out:
      a, b = out[name]["update"], out[mlp]["update"]
      print(f"{name} / {mlp}: x{a[0] / b[0]:.2f} wall, x{a[1] / b[1]:.2f} CPU per update "
            f"(+{a[1] - b[1]:.3f} CPU s)")


if __name__ == "__main__":
  app.run(main)
