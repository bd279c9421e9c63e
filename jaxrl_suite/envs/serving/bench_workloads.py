"""The serving speed benchmark's rows (experiments/bench_serving.py): the vmapped JAX env vs the
numpy reference simulator (reference_sim.py), simulated requests per CPU-second.

Same workload for both sides of a row: windows of K consecutive requests of a shipped trace.
The JAX side runs `num_envs` episodes at once (vmap + jit, compiled when the row is built); the
reference runs enough episodes one after another to simulate about `ref_requests` requests.
`time_rows` times every row's two sides in `reps` interleaved rounds (core/bench.py) and keeps
each side's best wall and CPU seconds: best-of-n estimates the undisturbed speed, applied to both
sides alike; interleaving puts a change in the machine's background load on every row alike.

Why per CPU-second: wall-clock ratios on a shared machine mostly track how much CPU each side
happened to get (the same code gave 24x to 77x), and XLA may use several threads; process_time
counts all threads of the process. Run pinned to one core with XLA's intra-op pool off
(`core.bench.pin_and_reexec`): the reference is single-threaded Python, and on two cores XLA's
pool threads add spin time that process_time counts (at 2,048 requests the unpinned JAX side
needed ~1.6-2x the CPU time per request for the same work).

Episode lengths: the engine works on an active-request window of `window` slots (engine.py), so
each event costs O(window), not O(K), and the cost per simulated request should not grow with K.
The reference keeps only unfinished requests per GPU, so it is linear in K too (a fair
reference). Arrivals beyond the window are rejected (both simulators, same rule); the row
reports the share. Two decode-engine tricks keep the JAX side fast: decode fast-forward (a run
of identical pure-decode iterations is one exact "span" event: events vs iterations per request
in the table) and one flat event-or-decision loop (`evaluate.rollout_events`).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import bench
from jaxrl_suite.envs.serving import (batching, cost_model, engine, evaluate, heuristics,
                                      reference_sim, routing, traces)

MAX_EVENTS = 4096  # per decision step: a safety bound only (a run that hits it is an error)


class BenchRow:
  """Both sides of one benchmark row, compiled and ready: `jax()` runs the JAX side's episodes,
  `ref()` the reference's; `result(jax_timing, ref_timing)` turns their best times into the
  row's figures."""

  def __init__(self, env, p, policy, pparams, k: int, num_envs: int, rate: float,
               run_ref: Callable, ref_requests: int, trace: str = "azure_conv",
               max_model_len: int = 4096):
    """run_ref(window_trace) -> (finished, rejected) of one reference episode on that window;
    the JAX side runs `num_envs` vmapped episodes of k requests, the reference about
    `ref_requests` requests of episodes on windows of the same trace."""
    tr = traces.load_shipped(trace)
    starts = np.linspace(0, len(tr) - k, num_envs).round().astype(np.int32)

    def one(start, key):
      pp = p.replace(window_start=start, rate_scale=rate)
      st, _, _ = evaluate.rollout(env, pp, policy, pparams, key, 20 * k)
      if not hasattr(st, "eng"):                       # static batching has no event engine
        z = jnp.int32(0)
        return jnp.sum(st.status == 3), z, z, z, z
      res = engine.results(st.eng)
      return (jnp.sum(res.status == engine.DONE), st.eng.n_events, jnp.sum(st.eng.n_iter),
              st.eng.cap_hits, st.eng.n_rejected)

    f = jax.jit(jax.vmap(one))
    args = (jnp.asarray(starts), jax.random.split(jax.random.PRNGKey(0), num_envs))
    self.jax = lambda: f(*args)
    self.compile_s = bench.time_call(self.jax)[0]
    clipped = tr.clipped(max_model_len, 2048)
    self.n_ref = max(1, min(num_envs, -(-ref_requests // k)))
    windows = [clipped.slice(int(s), int(s) + k)
               for s in starts[np.linspace(0, num_envs - 1, self.n_ref).astype(int)]]
    self.ref = lambda: [run_ref(w) for w in windows]
    self.k, self.num_envs = k, num_envs

  def result(self, jax_timing: bench.Timing, ref_timing: bench.Timing) -> dict:
    """Requests per CPU-second and per second of each side, their ratio, the JAX side's CPU
    microseconds per request, compile seconds, events / iterations per episode, rejections."""
    done, events, iters, cap_hits, rejected = jax_timing.output
    if int(cap_hits.sum()):
      raise RuntimeError(f"{int(cap_hits.sum())} decision steps hit max_events={MAX_EVENTS}")
    (jax_wall, jax_cpu), (ref_wall, ref_cpu) = jax_timing.best(), ref_timing.best()
    n_ref_done = sum(d for d, _ in ref_timing.output)
    n_jax = float(done.sum())
    return {"jax_req_per_cpu_s": n_jax / jax_cpu, "ref_req_per_cpu_s": n_ref_done / ref_cpu,
            "ratio_cpu": (n_jax / jax_cpu) / (n_ref_done / ref_cpu),
            "jax_req_per_s": n_jax / jax_wall, "ref_req_per_s": n_ref_done / ref_wall,
            "jax_cpu_us_per_req": 1e6 * jax_cpu / n_jax,
            "ref_cpu_us_per_req": 1e6 * ref_cpu / n_ref_done,
            "jax_compile_s": self.compile_s, "events_per_episode": float(events.mean()),
            "iterations_per_episode": float(iters.mean()),
            "rejected_share": float(rejected.sum()) / (self.num_envs * self.k),
            "ref_rejected_share": sum(r for _, r in ref_timing.output) / (self.n_ref * self.k),
            "k": self.k}


def time_rows(rows: list[BenchRow], reps: int,
              after_round: Callable[[int], None] | None = None) -> list[dict]:
  """Every row's `result` after `reps` interleaved rounds (each round: row 1 JAX, row 1 ref,
  row 2 JAX, ...); the JAX sides were warmed when built."""
  fns = {}
  for i, row in enumerate(rows):
    fns[f"{i}/jax"], fns[f"{i}/ref"] = row.jax, row.ref
  t = bench.interleaved(fns, reps, warmup=False, after_round=after_round)
  return [row.result(t[f"{i}/jax"], t[f"{i}/ref"]) for i, row in enumerate(rows)]


def _ref_counts(out) -> tuple[int, int]:
  return int((out["status"] == 3).sum()), int((out["status"] == reference_sim.REJECTED).sum())


def _jsq(sim, i) -> int:
  """Join-shortest-queue on the reference cluster."""
  return int(np.argmin(sim.outstanding()))


def bench_routing(num_envs, k, ref_requests, rate=1.0, window=32, fast_forward=True,
                  iteration_cost: str = "analytic") -> BenchRow:
  """Routing (continuous batching on the default 4-GPU cluster: H100 + A100 + 2 x L4),
  join-shortest-queue router (round-robin overloads the L4s at this rate: the window fills and
  requests are rejected); both sides price iterations with `iteration_cost`."""
  env, p = routing.make_routing(table_size=k, train_frac=None, cap=32, max_events=MAX_EVENTS,
                                pred_acc=1.0, fast_forward=fast_forward, window=window,
                                iteration_cost=iteration_cost)
  specs = [cost_model.GPU_TYPES[c] for c in routing.DEFAULT_CLUSTER]

  def run_ref(w):
    ref = reference_sim.RefCluster(specs, w.arrival / rate, w.prompt, w.output, cap=32,
                                   window=env.window, iteration_cost=iteration_cost)
    return _ref_counts(ref.run_routing(_jsq))

  return BenchRow(env, p, heuristics.make_router("jsq", env.n_gpus), {}, k, num_envs, rate,
                  run_ref, ref_requests)


def bench_prefix_cache(num_envs, k, ref_requests, window=32, cache=True) -> BenchRow:
  """Routing with the prefix cache: the Mooncake conversation sample served by Llama-3.1-8B on
  the default 4-GPU cluster (its 51,792-token context, ~100 blocks per prompt, each GPU's whole
  KV as 512-token cache blocks), JSQ; `cache=False`: the same replay without it (what the
  cache costs per request is the ratio of the two rows' JAX us/r)."""
  specs = routing.cluster_specs(routing.DEFAULT_CLUSTER, cost_model.LLAMA31_8B.name)
  mml = routing.context_of(specs)
  blocks = routing.default_cache_blocks(specs) if cache else None
  env, p = routing.make_routing(table_size=k, trace="mooncake_conv", train_frac=None, cap=32,
                                max_events=MAX_EVENTS, pred_acc=1.0, cluster=specs,
                                window=window, max_model_len=mml, cache_blocks=blocks)

  def run_ref(w):
    ref = reference_sim.RefCluster([cost_model.GPU_TYPES[c] for c in specs], w.arrival,
                                   w.prompt, w.output, cap=32, window=env.window,
                                   hashes=w.hash_ids if cache else None, cache_blocks=blocks)
    return _ref_counts(ref.run_routing(_jsq))

  return BenchRow(env, p, heuristics.make_router("jsq", env.n_gpus), {}, k, num_envs, 1.0,
                  run_ref, ref_requests, trace="mooncake_conv", max_model_len=mml)


def bench_static(num_envs, k, ref_requests, rate=0.2, b=8) -> BenchRow:
  """Static batching (ServingBatch-v0 static mode), idle-only dispatch of up to b requests."""
  env, p = batching.make_batching("static", table_size=k, train_frac=None)
  b_idx = list(batching.STATIC_LEVELS).index(b)

  def run_ref(w):
    return _ref_counts(reference_sim.simulate_static(
        cost_model.A100_7B, w.arrival / rate, w.prompt, w.output, lambda v: b, p.wait_dt))

  return BenchRow(env, p, heuristics.idle_only, {"b_idx": b_idx}, k, num_envs, rate, run_ref,
                  ref_requests)


def bench_continuous(num_envs, k, ref_requests, rate=1.0, cap_idx=6, window=32) -> BenchRow:
  """Continuous batching on one GPU (ServingBatch-v0 continuous mode), constant max_num_seqs."""
  env, p = batching.make_batching("continuous", table_size=k, train_frac=None,
                                  max_events=MAX_EVENTS, window=window)
  cap = batching.CAP_LEVELS[cap_idx]

  def run_ref(w):
    ref = reference_sim.RefCluster([cost_model.A100_7B], w.arrival / rate, w.prompt, w.output,
                                   cap=cap, window=env.window)
    return _ref_counts(ref.run_single(None, p.decision_dt))

  return BenchRow(env, p, heuristics.fixed_cap, {"a": cap_idx}, k, num_envs, rate, run_ref,
                  ref_requests)


def table_lines(rows: list[tuple[str, dict]]) -> list[str]:
  """The header and one line per (workload name, `result`) row."""
  head = (f"{'workload':44s} {'JAX r/cs':>9s} {'ref r/cs':>9s} {'ratio':>7s} {'JAX us/r':>8s} "
          f"{'JAX r/s':>9s} {'ref r/s':>9s} {'ev/req':>6s} {'it/req':>6s} {'rej':>6s} "
          f"{'cmp s':>6s}")
  return [head] + [
      f"{name:44s} {r['jax_req_per_cpu_s']:9.0f} {r['ref_req_per_cpu_s']:9.0f} "
      f"{r['ratio_cpu']:6.1f}x {r['jax_cpu_us_per_req']:8.1f} {r['jax_req_per_s']:9.0f} "
      f"{r['ref_req_per_s']:9.0f} {r['events_per_episode'] / r['k']:6.1f} "
      f"{r['iterations_per_episode'] / r['k']:6.1f} {r['rejected_share']:6.3f} "
      f"{r['jax_compile_s']:6.1f}" for name, r in rows]
