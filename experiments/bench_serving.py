"""Benchmark: simulated requests per second, vmapped JAX env vs the numpy reference simulator.

Same workload for both: windows of K requests of the Azure conv trace, routed round-robin over
the default heterogeneous cluster (H100 + A100 + 2 x L4) with continuous batching. The JAX side
runs `--num_envs` episodes at once (vmap + jit, compile excluded); the reference runs
`--ref_windows` episodes one after another. Each side is timed `--reps` times and its best time
kept (the machine is shared; best-of-n is the usual estimate of the undisturbed speed, applied
to both sides alike). Prints both rates and their ratio, for routing (continuous batching on 4
GPUs), static batching and continuous batching on 1 GPU.

Why continuous batching is the hard case: every GPU iteration (one decode step of the batch) is
an event, and each event costs O(K) vector work over the padded request table in the JAX env,
against O(batch) Python work in the reference. Two things make it fast anyway:
  * decode fast-forward (engine.py): a run of identical pure-decode iterations is booked as one
    exact "span" event, so an episode has ~10x fewer events (the table prints both counts; the
    reference simulator has no fast-forward, and the row with `fast_forward=False` shows what
    vectorisation alone buys);
  * one flat event-or-decision loop (`evaluate.rollout_events`), so vmapped lanes do not wait for
    each other at every decision step.
Both simulators finish the same requests (checked: equal finished counts, and the reference tests
check equal per-request times).

Batch size: the routing row is also timed at a quarter of --num_envs. Measured on this 2-core
machine (K=64): quiet, x512 gave 24.4x and x128 21.8x; with other jobs running, x128 gave 21.4x
and x512 19.3x (larger batches suffer more from a shared cache).

  python -m experiments.bench_serving [--num_envs 512] [--table 64] [--reps 3]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import (batching, cost_model, evaluate, heuristics, reference_sim,
                                      routing, traces)

_NUM_ENVS = flags.DEFINE_integer("num_envs", 512, "episodes simulated at once by the JAX env")
_TABLE = flags.DEFINE_integer("table", 64, "requests per episode")
_REF = flags.DEFINE_integer("ref_windows", 16, "episodes simulated by the reference")
_RATE = flags.DEFINE_float("rate_scale", 3.0, "load knob (x the trace rate)")
_REPS = flags.DEFINE_integer("reps", 3, "timed repetitions per side (best kept)")

MAX_EVENTS = 4096  # per decision step: a safety bound only (a run that hits it is an error)


def _best_time(fn, reps: int):
  """(best wall seconds over `reps` calls of fn(), fn's last output)."""
  best, out = float("inf"), None
  for _ in range(reps):
    t = time.perf_counter()
    out = fn()
    best = min(best, time.perf_counter() - t)
  return best, out


def _compare(env, p, policy, pparams, k: int, num_envs: int, rate: float, run_ref, ref_windows: int,
             reps: int) -> dict:
  """Times `num_envs` vmapped JAX episodes and `ref_windows` reference episodes on the same windows.

  run_ref(window_trace) -> finished count of one reference episode on that window.
  """
  tr = traces.load_shipped("azure_conv")
  starts = np.linspace(0, len(tr) - k, num_envs).round().astype(np.int32)

  def one(start, key):
    pp = p.replace(window_start=start, rate_scale=rate)
    st, _, _ = evaluate.rollout(env, pp, policy, pparams, key, 20 * k)
    if not hasattr(st, "eng"):                       # static batching has no event engine
      return jnp.sum(st.status == 3), jnp.int32(0), jnp.int32(0), jnp.int32(0)
    return (jnp.sum(st.eng.status == 3), st.eng.n_events, jnp.sum(st.eng.n_iter),
            st.eng.cap_hits)

  f = jax.jit(jax.vmap(one))
  args = (jnp.asarray(starts), jax.random.split(jax.random.PRNGKey(0), num_envs))
  t = time.perf_counter()
  jax.block_until_ready(f(*args))
  compile_s = time.perf_counter() - t
  jax_s, (done, events, iters, cap_hits) = _best_time(
      lambda: jax.block_until_ready(f(*args)), reps)
  if int(cap_hits.sum()):
    raise RuntimeError(f"{int(cap_hits.sum())} decision steps hit max_events={MAX_EVENTS}")

  clipped = tr.clipped(4096, 2048)
  windows = [clipped.slice(int(s), int(s) + k)
             for s in starts[np.linspace(0, num_envs - 1, ref_windows).astype(int)]]
  ref_s, n_ref = _best_time(lambda: sum(run_ref(w) for w in windows), reps)
  jax_rps, ref_rps = float(done.sum()) / jax_s, n_ref / ref_s
  return {"jax_requests_per_s": jax_rps, "ref_requests_per_s": ref_rps, "ratio": jax_rps / ref_rps,
          "jax_compile_s": compile_s, "events_per_episode": float(events.mean()),
          "iterations_per_episode": float(iters.mean())}


def bench_routing(num_envs, k, ref_windows, rate=3.0, fast_forward=True, reps=3) -> dict:
  """Routing (continuous batching on the default 4-GPU cluster), round-robin router."""
  env, p = routing.make_routing(table_size=k, train_frac=None, cap=32, max_events=MAX_EVENTS,
                                pred_acc=1.0, fast_forward=fast_forward)
  n = env.n_gpus
  specs = [cost_model.GPU_TYPES[c] for c in routing.DEFAULT_CLUSTER]

  def run_ref(w):
    ref = reference_sim.RefCluster(specs, w.arrival / rate, w.prompt, w.output, cap=32)
    return int((ref.run_routing(lambda sim, i: i % n)["status"] == 3).sum())

  return _compare(env, p, heuristics.make_router("round_robin", n), {}, k, num_envs, rate,
                  run_ref, ref_windows, reps)


def bench_static(num_envs, k, ref_windows, rate=0.2, b=8, reps=3) -> dict:
  """Static batching (ServingBatch-v0 static mode), idle-only dispatch of up to b requests."""
  env, p = batching.make_batching("static", table_size=k, train_frac=None)
  b_idx = list(batching.STATIC_LEVELS).index(b)

  def run_ref(w):
    out = reference_sim.simulate_static(cost_model.A100_7B, w.arrival / rate, w.prompt, w.output,
                                        lambda v: b, p.wait_dt)
    return int((out["status"] == 3).sum())

  return _compare(env, p, heuristics.idle_only, {"b_idx": b_idx}, k, num_envs, rate, run_ref,
                  ref_windows, reps)


def bench_continuous(num_envs, k, ref_windows, rate=1.0, cap_idx=6, reps=3) -> dict:
  """Continuous batching on one GPU (ServingBatch-v0 continuous mode), constant max_num_seqs."""
  env, p = batching.make_batching("continuous", table_size=k, train_frac=None,
                                  max_events=MAX_EVENTS)
  cap = batching.CAP_LEVELS[cap_idx]

  def run_ref(w):
    ref = reference_sim.RefCluster([cost_model.A100_7B], w.arrival / rate, w.prompt, w.output,
                                   cap=cap)
    return int((ref.run_single(None, p.decision_dt)["status"] == 3).sum())

  return _compare(env, p, heuristics.fixed_cap, {"a": cap_idx}, k, num_envs, rate, run_ref,
                  ref_windows, reps)


def main(argv):
  del argv
  n, k, w, reps = _NUM_ENVS.value, _TABLE.value, _REF.value, _REPS.value
  rows = [("ServingRoute-v0, continuous batching on 4 GPUs",
           bench_routing(n, k, w, _RATE.value, True, reps)),
          ("  same, without decode fast-forward", bench_routing(n, k, w, _RATE.value, False, reps)),
          (f"  same, vmap x{n // 4}", bench_routing(n // 4, k, w, _RATE.value, True, reps)),
          ("ServingBatch-v0, continuous batching, 1 GPU", bench_continuous(n, k, w, reps=reps)),
          ("ServingBatch-v0, static batching", bench_static(n, k, w, reps=reps))]
  print(f"JAX: vmap x{n} episodes of K={k} requests, best of {reps}; reference: {w} episodes, "
        f"best of {reps}")
  print(f"{'workload':50s} {'JAX req/s':>10s} {'ref req/s':>10s} {'ratio':>7s} "
        f"{'events/ep':>9s} {'iters/ep':>9s} {'compile s':>9s}")
  for name, r in rows:
    print(f"{name:50s} {r['jax_requests_per_s']:10.0f} {r['ref_requests_per_s']:10.0f} "
          f"{r['ratio']:6.1f}x {r['events_per_episode']:9.0f} {r['iterations_per_episode']:9.0f} "
          f"{r['jax_compile_s']:9.1f}")


if __name__ == "__main__":
  app.run(main)
