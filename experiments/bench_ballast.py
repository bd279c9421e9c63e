"""Benchmark: BallastNet-v0 environment steps per second, vmapped over 4096 ships.

Runs `env.step` (with gymnax auto-reset) under `jax.jit(jax.vmap(...))` inside a `lax.scan`:
(1) env only (a fixed route cycling through the library: measures reset + step + auto-reset
select), (2) a uniformly random masked-valid route (one uniform per ship, inverse CDF over the
mask), (3) B-replan choosing the routes. Prints steps/s and the ratio against gymnax CartPole-v1
in the same harness (reference, random actions).

  python -m experiments.bench_ballast [--ships 4096] [--steps 64]
  python -m experiments.bench_ballast --hydro [--bank 512] [--layouts ring14,direct10,gen:7]
  python -m experiments.bench_ballast --v2_bank --bank 2048 --layouts ring14,direct10
  python -m experiments.bench_ballast --train_hash 4      (also under `taskset -c 0`)
  python -m experiments.bench_ballast --resid_probe

--hydro and --v2_bank: per-layout bank reports (jaxrl_suite/envs/ballast/bench_reports.py);
--train_hash and --resid_probe: probes on the full ballast_hydro config
(jaxrl_suite/train/ballast_hydro/bench_probes.py); the harness and why the env got faster:
jaxrl_suite/envs/ballast/bench_workloads.py.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags
import jax

_SHIPS = flags.DEFINE_integer("ships", 4096, "parallel ships (vmap width)")
_STEPS = flags.DEFINE_integer("steps", 64, "scan length per timed call")
_HYDRO = flags.DEFINE_bool("hydro", False, "report BallastHydro-v0 banks and baselines instead")
_BANK = flags.DEFINE_integer("bank", 512, "episodes per bank (--hydro)")
_LAYOUTS = flags.DEFINE_list("layouts", ["ring14", "direct10", "gen:7"],
                             "layouts for --hydro: shipped names, JSON paths or gen:SEED")
_V2_BANK = flags.DEFINE_bool("v2_bank", False, "report checked BallastNet v2 banks (--layouts, "
                             "shipped names; --bank episodes) instead")
_TRAIN_HASH = flags.DEFINE_integer("train_hash", 0, "instead: train rl_gru (full ballast_hydro "
                                   "config, 16-episode banks on the first 4 training layouts) "
                                   "for this many 5-update chunks and print a parameter hash "
                                   "after each (compare processes, e.g. under taskset)")
_RESID_PROBE = flags.DEFINE_bool("resid_probe", False, "instead: the untrained residual agent "
                                 "(rl_gru_resid at init) vs the heel-aware replanner on the "
                                 "held-out and shipped layouts' >=1-blocked episodes")


def main(argv):
  del argv
  ships, steps = _SHIPS.value, _STEPS.value
  if not _V2_BANK.value and (_TRAIN_HASH.value or _RESID_PROBE.value):
    import configs.ballast_hydro as cfg_mod
    from jaxrl_suite.train.ballast_hydro import bench_probes as P
    c = cfg_mod.get_config()
    lines = P.train_hash(c, _TRAIN_HASH.value) if _TRAIN_HASH.value else P.resid_probe(c)
    for line in lines:
      print(line, flush=True)
    return
  if _V2_BANK.value or _HYDRO.value:
    from jaxrl_suite.envs.ballast import bench_reports as R
    for name in _LAYOUTS.value:
      print("\n".join(R.v2_bank_lines(name, _BANK.value) if _V2_BANK.value else
                      R.hydro_layout_lines(name, _BANK.value, ships, steps)), flush=True)
    return
  from jaxrl_suite.envs.ballast import bench_workloads as W
  from jaxrl_suite.envs.ballast import make_ballast
  env, params = make_ballast()
  rows = [(name, W.steps_per_second(env, params, act, ships, steps))
          for name, act in W.net_policies(env, params).items()]
  rows.append(("reference CartPole-v1", W.cartpole_reference(ships, steps)))
  print(f"BallastNet-v0 (ring14), {ships} ships x {steps} steps, {jax.devices()[0].platform}, "
        f"{os.cpu_count()} cores; env steps per wall second (per CPU second):")
  for name, (w, c) in rows:
    print(f"  {name:24s}: {w:12,.0f}  ({c:12,.0f} per CPU-s)")
  (sps_env, _), (sps_rand, _), (sps_replan, _), (sps_cp, _) = [r for _, r in rows]
  print(f"  ratio BallastNet/CartPole (wall) = {sps_env / sps_cp:.3f} (env only), "
        f"{sps_rand / sps_cp:.3f} (random), {sps_replan / sps_cp:.3f} (B-replan)")


if __name__ == "__main__":
  app.run(main)
