"""Benchmark: simulated requests per second, vmapped JAX env vs the numpy reference simulator.

Same workload for both: windows of K requests of the Azure conv trace, routed round-robin over
the default heterogeneous cluster (H100 + A100 + 2 x L4) with continuous batching. The JAX side
runs `--num_envs` episodes at once (vmap + jit, compile excluded); the reference runs
`--ref_windows` episodes one after another. Prints both rates and their ratio, for routing
(continuous batching on 4 GPUs), static batching and continuous batching on 1 GPU.

Why continuous batching gains far less than static: every GPU iteration (one decode step of the
batch) is an event, and each event costs O(K) vector work over the padded request table in the
JAX env, against O(batch) Python work in the reference. Episodes run through the flat
event-or-decision loop of `evaluate.rollout_events`, so vmapped lanes do not wait for each
other at every decision step.

  python -m experiments.bench_serving [--num_envs 512] [--table 64]
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

from jaxrl_suite.envs.serving import (cost_model, evaluate, heuristics, reference_sim, routing,
                                      traces)

_NUM_ENVS = flags.DEFINE_integer("num_envs", 512, "episodes simulated at once by the JAX env")
_TABLE = flags.DEFINE_integer("table", 64, "requests per episode")
_REF = flags.DEFINE_integer("ref_windows", 8, "episodes simulated by the reference")
_RATE = flags.DEFINE_float("rate_scale", 3.0, "load knob (x the trace rate)")


def bench(num_envs: int, k: int, ref_windows: int, rate: float) -> dict:
  tr = traces.load_shipped("azure_conv")
  env, p = routing.make_routing(table_size=k, trace=tr, train_frac=None, cap=32, max_events=64,
                                pred_acc=1.0)
  n = env.n_gpus
  pol = heuristics.make_router("round_robin", n)
  starts = np.linspace(0, len(tr) - k, num_envs).round().astype(np.int32)

  def one(start, key):
    pp = p.replace(window_start=start, rate_scale=rate)
    st, steps, _ = evaluate.rollout(env, pp, pol, {}, key, 20 * k)
    return jnp.sum(st.eng.status == 3), steps

  f = jax.jit(jax.vmap(one))
  keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
  t = time.time()
  jax.block_until_ready(f(jnp.asarray(starts), keys))
  compile_s = time.time() - t
  t = time.time()
  done, _ = jax.block_until_ready(f(jnp.asarray(starts), keys))
  jax_s = time.time() - t
  jax_rps = float(done.sum()) / jax_s

  specs = [cost_model.GPU_TYPES[c] for c in routing.DEFAULT_CLUSTER]
  clipped = tr.clipped(4096, 2048)
  n_ref = 0
  t = time.time()
  for s in starts[np.linspace(0, num_envs - 1, ref_windows).astype(int)]:
    w = clipped.slice(int(s), int(s) + k)
    ref = reference_sim.RefCluster(specs, w.arrival / rate, w.prompt, w.output, cap=32)
    out = ref.run_routing(lambda sim, i: i % n)
    n_ref += int((out["status"] == 3).sum())
  ref_s = time.time() - t
  ref_rps = n_ref / ref_s
  return {"jax_requests_per_s": jax_rps, "ref_requests_per_s": ref_rps,
          "ratio": jax_rps / ref_rps, "jax_compile_s": compile_s, "num_envs": num_envs,
          "table": k}


def _jax_requests_per_s(one, starts) -> float:
  """Finished requests per second of `vmap(one)(starts, keys)`, timed after a warm-up call."""
  f = jax.jit(jax.vmap(one))
  args = (jnp.asarray(starts), jax.random.split(jax.random.PRNGKey(0), len(starts)))
  jax.block_until_ready(f(*args))
  t = time.time()
  done = jax.block_until_ready(f(*args))
  return float(done.sum()) / (time.time() - t)


def bench_static(num_envs: int, k: int, ref_windows: int, rate: float = 0.2, b: int = 8) -> dict:
  """Static batching (ServingBatch-v0 static mode), idle-only dispatch of up to b requests."""
  from jaxrl_suite.envs.serving import batching
  tr = traces.load_shipped("azure_conv")
  env, p = batching.make_batching("static", table_size=k, trace=tr, train_frac=None)
  b_idx = list(batching.STATIC_LEVELS).index(b)
  starts = np.linspace(0, len(tr) - k, num_envs).round().astype(np.int32)

  def one(start, key):
    pp = p.replace(window_start=start, rate_scale=rate)
    st, _, _ = evaluate.rollout(env, pp, heuristics.idle_only, {"b_idx": b_idx}, key, 20 * k)
    return jnp.sum(st.status == 3)

  jax_rps = _jax_requests_per_s(one, starts)
  clipped = tr.clipped(4096, 2048)
  n_ref, t = 0, time.time()
  for s in starts[np.linspace(0, num_envs - 1, ref_windows).astype(int)]:
    w = clipped.slice(int(s), int(s) + k)
    out = reference_sim.simulate_static(cost_model.A100_7B, w.arrival / rate, w.prompt, w.output,
                                        lambda v: b, p.wait_dt)
    n_ref += int((out["status"] == 3).sum())
  ref_rps = n_ref / (time.time() - t)
  return {"jax_requests_per_s": jax_rps, "ref_requests_per_s": ref_rps,
          "ratio": jax_rps / ref_rps}


def bench_continuous(num_envs: int, k: int, ref_windows: int, rate: float = 1.0,
                     cap_idx: int = 6) -> dict:
  """Continuous batching on one GPU (ServingBatch-v0 continuous mode), constant max_num_seqs."""
  from jaxrl_suite.envs.serving import batching
  tr = traces.load_shipped("azure_conv")
  env, p = batching.make_batching("continuous", table_size=k, trace=tr, train_frac=None,
                                  max_events=64)
  starts = np.linspace(0, len(tr) - k, num_envs).round().astype(np.int32)

  def one(start, key):
    pp = p.replace(window_start=start, rate_scale=rate)
    st, _, _ = evaluate.rollout(env, pp, heuristics.fixed_cap, {"a": cap_idx}, key, 20 * k)
    return jnp.sum(st.eng.status == 3)

  jax_rps = _jax_requests_per_s(one, starts)
  clipped = tr.clipped(4096, 2048)
  cap = batching.CAP_LEVELS[cap_idx]
  n_ref, t = 0, time.time()
  for s in starts[np.linspace(0, num_envs - 1, ref_windows).astype(int)]:
    w = clipped.slice(int(s), int(s) + k)
    ref = reference_sim.RefCluster([cost_model.A100_7B], w.arrival / rate, w.prompt, w.output,
                                   cap=cap)
    out = ref.run_single(None, p.decision_dt)
    n_ref += int((out["status"] == 3).sum())
  ref_rps = n_ref / (time.time() - t)
  return {"jax_requests_per_s": jax_rps, "ref_requests_per_s": ref_rps,
          "ratio": jax_rps / ref_rps}


def main(argv):
  del argv
  r = bench(_NUM_ENVS.value, _TABLE.value, _REF.value, _RATE.value)
  print(f"[ServingRoute-v0, continuous batching on 4 GPUs] JAX env (vmap x{r['num_envs']}, "
        f"K={r['table']}): {r['jax_requests_per_s']:.0f} simulated requests/s (compile "
        f"{r['jax_compile_s']:.1f} s); reference: {r['ref_requests_per_s']:.0f} requests/s")
  print(f"ratio JAX / reference (routing, continuous): {r['ratio']:.1f}x")
  s = bench_static(_NUM_ENVS.value, _TABLE.value, _REF.value)
  print(f"[ServingBatch-v0, static batching] JAX {s['jax_requests_per_s']:.0f} requests/s; "
        f"reference {s['ref_requests_per_s']:.0f} requests/s")
  print(f"ratio JAX / reference (static): {s['ratio']:.1f}x")
  s = bench_continuous(_NUM_ENVS.value, _TABLE.value, _REF.value)
  print(f"[ServingBatch-v0, continuous batching, 1 GPU] JAX {s['jax_requests_per_s']:.0f} "
        f"requests/s; reference {s['ref_requests_per_s']:.0f} requests/s")
  print(f"ratio JAX / reference (continuous, 1 GPU): {s['ratio']:.1f}x")


if __name__ == "__main__":
  app.run(main)
