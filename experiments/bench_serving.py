"""Benchmark: simulated requests per CPU-second, vmapped JAX env vs the numpy reference simulator
(the rows, how they are timed and why per CPU-second: jaxrl_suite/envs/serving/bench_workloads.py).

Rows: routing by join-shortest-queue over the default heterogeneous cluster (H100 + A100 + 2 x
L4) with continuous batching at each K of `--tables` (the table prints the JAX CPU cost per
request, largest / smallest K: it should not grow with K); static and 1-GPU continuous batching
at the smallest K (`--extra_rows`); routing at the smallest K under the profiled iteration cost
(`--cost_rows`); the Mooncake prefix cache off and on (`--cache_rows`); Vidur
0.0.26 beside the engine where a python that imports vidur is found (envs/serving/bench_vidur.py).
With `--pin` (default) the process re-executes itself pinned to one core, XLA threads off.

  python -m experiments.bench_serving [--num_envs 64] [--window 32] [--tables 64,256,1024,2048,8192]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags

from jaxrl_suite.core import bench
from jaxrl_suite.envs.serving import bench_workloads as W

_NUM_ENVS = flags.DEFINE_integer("num_envs", 64, "episodes simulated at once by the JAX env")
_TABLES = flags.DEFINE_list("tables", ["64", "256", "1024", "2048", "8192"],
                            "requests per episode (one row each)")
_WINDOW = flags.DEFINE_integer("window", 32, "engine window slots (requests in flight)")
_REF = flags.DEFINE_integer("ref_requests", 4096, "requests simulated by the reference per rep")
_RATE = flags.DEFINE_float("rate_scale", 1.0, "load knob (x the trace rate)")
_REPS = flags.DEFINE_integer("reps", 3, "timed rounds over all rows (best per side kept)")
_EXTRA = flags.DEFINE_bool("extra_rows", True, "also time static / 1-GPU continuous batching")
_CACHE = flags.DEFINE_integer("cache_rows", 256, "K of the prefix-cache rows (Mooncake, cache "
                              "off and on; 0 = none)")
_CACHE_WINDOW = flags.DEFINE_integer("cache_window", 128, "engine window of the prefix-cache rows "
                                     "(Mooncake's long prompts fill a 32-slot one: ~40% rejected)")
_VIDUR = flags.DEFINE_string("vidur_python", None,
                             "python with vidur 0.0.26 (the [peers] extra): adds the Vidur rows; "
                             "default $JAXRL_VIDUR_PYTHON, else this python if it imports vidur")
_VIDUR_REQ = flags.DEFINE_integer("vidur_requests", 1024,
                                  "requests of the Vidur rows (first of azure_conv, recorded rate)")
_VMAP = flags.DEFINE_integer("vidur_vmap", 16, "copies vmapped in the 'vmap' Vidur-row variant")
_PIN = flags.DEFINE_bool("pin", True, "run on one core, XLA intra-op threads off (module doc)")
_COST = flags.DEFINE_bool("cost_rows", True, "also time routing at the smallest K under the "
                          "profiled iteration cost (both sides), beside its analytic row")


def main(argv):
  del argv
  if _PIN.value and bench.pinned_core() is None:
    bench.pin_and_reexec("experiments.bench_serving")
  n, w, reps, refq = _NUM_ENVS.value, _WINDOW.value, _REPS.value, _REF.value
  tables = [int(x) for x in _TABLES.value]
  # Compile every row first, then time them in interleaved rounds (W.time_rows).
  rows = [(f"ServingRoute-v0, 4 GPUs, K={k}", W.bench_routing(n, k, refq, _RATE.value, w, True))
          for k in tables]
  if _EXTRA.value:
    k = tables[0]
    rows.append((f"ServingBatch-v0 continuous, 1 GPU, K={k}",
                 W.bench_continuous(n, k, refq, window=w)))
    rows.append((f"ServingBatch-v0 static, 1 GPU, K={k}", W.bench_static(n, k, refq)))
  if _COST.value:
    rows.append((f"ServingRoute-v0, 4 GPUs, K={tables[0]}, profiled cost",
                 W.bench_routing(n, tables[0], refq, _RATE.value, w, True, "profiled")))
  if _CACHE.value:
    k = _CACHE.value
    rows += [(f"ServingRoute-v0 Mooncake 8B, cache {'on' if on else 'off'}, K={k}",
              W.bench_prefix_cache(n, k, refq, _CACHE_WINDOW.value, on)) for on in (False, True)]
  from experiments import validate_vidur as vv  # pylint: disable=import-outside-toplevel
  vpy, why = vv.find_vidur_python(_VIDUR.value)
  if vpy:
    from jaxrl_suite.envs.serving import bench_vidur  # pylint: disable=import-outside-toplevel
    c = vv.get_config(False, requests=_VIDUR_REQ.value, vidur_python=vpy)
    c.vidur_python = vpy
    vidur = bench_vidur.bench_vidur(c, vv.vidur_run, reps, _VMAP.value)
  results = W.time_rows([sides for _, sides in rows], reps,
                        lambda r: print(f"round {r + 1} / {reps} timed", flush=True))
  rows = [(name, r) for (name, _), r in zip(rows, results)]
  per_req = [r["jax_cpu_us_per_req"] for _, r in rows[:len(tables)]]
  core = bench.pinned_core()
  pinned = (f"pinned to core {core}, XLA intra-op threads off" if core is not None
            else f"unpinned ({len(os.sched_getaffinity(0))} cores)")
  print(f"\nJAX: vmap x{n} episodes, window {w} slots, rate x{_RATE.value}; reference: about "
        f"{refq} requests per rep; best of {reps}; CPU seconds = time.process_time (all threads);"
        f" {pinned}; load average {os.getloadavg()[0]:.1f}")
  print("\n".join(W.table_lines(rows)))
  print(f"JAX CPU cost per request, largest / smallest over K = {tables}: "
        f"{max(per_req) / min(per_req):.2f}x (target <= 1.5x)")
  if _COST.value:
    prof = rows[-3 if _CACHE.value else -1][1]
    print(f"Profiled / analytic iteration cost (routing, K={tables[0]}): JAX CPU per request "
          f"{prof['jax_cpu_us_per_req'] / rows[0][1]['jax_cpu_us_per_req']:.2f}x, reference "
          f"{prof['ref_cpu_us_per_req'] / rows[0][1]['ref_cpu_us_per_req']:.2f}x")
  print("\n".join(bench_vidur.vidur_lines(vidur)) if vpy else f"\nVidur rows skipped: {why}")
  if _CACHE.value:
    off, on = rows[-2][1], rows[-1][1]
    print(f"Prefix cache (Mooncake, K={_CACHE.value}): JAX CPU per request with / without it "
          f"{on['jax_cpu_us_per_req'] / off['jax_cpu_us_per_req']:.1f}x; JAX / reference per "
          f"CPU-second with it {on['ratio_cpu']:.1f}x")


if __name__ == "__main__":
  app.run(main)
