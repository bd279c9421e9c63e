"""Benchmark: simulated requests per CPU-second, vmapped JAX env vs the numpy reference simulator.

Same workload for both: windows of K consecutive requests of the Azure conv trace, routed
by join-shortest-queue over the default heterogeneous cluster (H100 + A100 + 2 x L4) with continuous
batching. The JAX side runs `--num_envs` episodes at once (vmap + jit, compile excluded); the
reference runs enough episodes one after another to simulate about `--ref_requests` requests.
Every row is compiled first, then all rows are timed in `--reps` interleaved rounds and each
side's best kept (best-of-n estimates the undisturbed speed, applied to both sides alike;
interleaving puts a change in the machine's background load on every row alike).

Why per CPU-second: wall-clock ratios on a shared machine mostly track how much CPU each side
happened to get (the same code gave 24x to 77x), and XLA may use several threads. Both sides are
timed with `time.process_time()` (all threads of the process), and wall seconds are printed too.
With `--pin` (default) the process re-executes itself pinned to one core with XLA's intra-op
thread pool off, so both sides run on one core: the reference is single-threaded Python, and
on two cores XLA's pool threads add spin time that process_time counts (at 2,048 requests the
unpinned JAX side needed ~1.6-2x the CPU time per request for the same work).

Episode lengths (`--tables`, default 64 ... 8,192): the engine works on an active-request window
of `--window` slots (engine.py), so each event costs O(window), not O(K), and the cost per
simulated request should not grow with K; the table prints it per K and the ratio of the
largest to the smallest. The reference keeps only unfinished requests per GPU, so it is linear
in K too (a fair reference). Arrivals beyond the window would be rejected (both simulators,
same rule); the table prints how many (0 = the window never filled).

Two decode-engine tricks keep the JAX side fast: decode fast-forward (a run of identical
pure-decode iterations is one exact "span" event; events/ep vs iters/ep in the table) and one
flat event-or-decision loop (`evaluate.rollout_events`). Static and 1-GPU continuous batching are
timed at the smallest K (`--extra_rows`).

  python -m experiments.bench_serving [--num_envs 64] [--window 32] [--tables 64,256,1024,2048,8192]
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

from jaxrl_suite.envs.serving import (batching, cost_model, engine, evaluate, heuristics,
                                      reference_sim, routing, traces)

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
_PINNED_ENV = "JAXRL_BENCH_PINNED"
_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _pin_and_reexec():
  """Re-executes this script pinned to one core (the affinity is inherited by every thread
  XLA starts later) with XLA's intra-op thread pool off."""
  cpu = min(os.sched_getaffinity(0))
  os.sched_setaffinity(0, {cpu})
  env = dict(os.environ, **{_PINNED_ENV: str(cpu)})
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + _ONE_THREAD).strip()
  os.execve(sys.executable, [sys.executable, "-m", "experiments.bench_serving"] + sys.argv[1:],
            env)

MAX_EVENTS = 4096  # per decision step: a safety bound only (a run that hits it is an error)


def _timed(fn):
  """(wall seconds, CPU seconds (all threads), output) of one call of fn()."""
  t, c = time.perf_counter(), time.process_time()
  out = fn()
  return time.perf_counter() - t, time.process_time() - c, out


class _Sides:
  """Both sides of one benchmark row, compiled and ready: `time_once()` times one run of each
  side (keeping the best), `result()` turns the best times into the row's figures. Rows are
  timed in interleaved rounds (main), so a change in the machine's background load over the
  run falls on every row alike instead of on whichever row was running then."""

  def __init__(self, env, p, policy, pparams, k: int, num_envs: int, rate: float, run_ref,
               ref_requests: int, trace: str = "azure_conv", max_model_len: int = 4096):
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
    self._jax = lambda: jax.block_until_ready(f(*args))
    t = time.perf_counter()
    self._jax()
    self.compile_s = time.perf_counter() - t
    clipped = tr.clipped(max_model_len, 2048)
    self.n_ref = max(1, min(num_envs, -(-ref_requests // k)))
    windows = [clipped.slice(int(s), int(s) + k)
               for s in starts[np.linspace(0, num_envs - 1, self.n_ref).astype(int)]]
    self._ref = lambda: [run_ref(w) for w in windows]
    self.k, self.num_envs = k, num_envs
    self.best = {"jax": (np.inf, np.inf), "ref": (np.inf, np.inf)}
    self.out = {}

  def time_once(self):
    for side, fn in (("jax", self._jax), ("ref", self._ref)):
      wall, cpu, self.out[side] = _timed(fn)
      self.best[side] = (min(self.best[side][0], wall), min(self.best[side][1], cpu))

  def result(self) -> dict:
    done, events, iters, cap_hits, rejected = self.out["jax"]
    if int(cap_hits.sum()):
      raise RuntimeError(f"{int(cap_hits.sum())} decision steps hit max_events={MAX_EVENTS}")
    (jax_wall, jax_cpu), (ref_wall, ref_cpu) = self.best["jax"], self.best["ref"]
    n_ref_done = sum(d for d, _ in self.out["ref"])
    n_jax = float(done.sum())
    return {"jax_req_per_cpu_s": n_jax / jax_cpu, "ref_req_per_cpu_s": n_ref_done / ref_cpu,
            "ratio_cpu": (n_jax / jax_cpu) / (n_ref_done / ref_cpu),
            "jax_req_per_s": n_jax / jax_wall, "ref_req_per_s": n_ref_done / ref_wall,
            "jax_cpu_us_per_req": 1e6 * jax_cpu / n_jax,
            "ref_cpu_us_per_req": 1e6 * ref_cpu / n_ref_done,
            "jax_compile_s": self.compile_s, "events_per_episode": float(events.mean()),
            "iterations_per_episode": float(iters.mean()),
            "rejected_share": float(rejected.sum()) / (self.num_envs * self.k),
            "ref_rejected_share": sum(r for _, r in self.out["ref"]) / (self.n_ref * self.k),
            "k": self.k}


def _ref_counts(out) -> tuple[int, int]:
  return int((out["status"] == 3).sum()), int((out["status"] == reference_sim.REJECTED).sum())


def bench_routing(num_envs, k, ref_requests, rate=1.0, window=32, fast_forward=True) -> _Sides:
  """Routing (continuous batching on the default 4-GPU cluster), join-shortest-queue router
  (round-robin overloads the L4s at this rate: the window fills and requests are rejected)."""
  env, p = routing.make_routing(table_size=k, train_frac=None, cap=32, max_events=MAX_EVENTS,
                                pred_acc=1.0, fast_forward=fast_forward, window=window)
  n = env.n_gpus
  specs = [cost_model.GPU_TYPES[c] for c in routing.DEFAULT_CLUSTER]

  def run_ref(w):
    ref = reference_sim.RefCluster(specs, w.arrival / rate, w.prompt, w.output, cap=32,
                                   window=env.window)
    return _ref_counts(ref.run_routing(lambda sim, i: int(np.argmin(sim.outstanding()))))

  return _Sides(env, p, heuristics.make_router("jsq", n), {}, k, num_envs, rate, run_ref,
                ref_requests)


def bench_prefix_cache(num_envs, k, ref_requests, window=32, cache=True) -> _Sides:
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
    return _ref_counts(ref.run_routing(lambda sim, i: int(np.argmin(sim.outstanding()))))

  return _Sides(env, p, heuristics.make_router("jsq", env.n_gpus), {}, k, num_envs, 1.0,
                run_ref, ref_requests, trace="mooncake_conv", max_model_len=mml)


def bench_static(num_envs, k, ref_requests, rate=0.2, b=8) -> _Sides:
  """Static batching (ServingBatch-v0 static mode), idle-only dispatch of up to b requests."""
  env, p = batching.make_batching("static", table_size=k, train_frac=None)
  b_idx = list(batching.STATIC_LEVELS).index(b)

  def run_ref(w):
    out = reference_sim.simulate_static(cost_model.A100_7B, w.arrival / rate, w.prompt, w.output,
                                        lambda v: b, p.wait_dt)
    return _ref_counts(out)

  return _Sides(env, p, heuristics.idle_only, {"b_idx": b_idx}, k, num_envs, rate, run_ref,
                ref_requests)


def bench_continuous(num_envs, k, ref_requests, rate=1.0, cap_idx=6, window=32) -> _Sides:
  """Continuous batching on one GPU (ServingBatch-v0 continuous mode), constant max_num_seqs."""
  env, p = batching.make_batching("continuous", table_size=k, train_frac=None,
                                  max_events=MAX_EVENTS, window=window)
  cap = batching.CAP_LEVELS[cap_idx]

  def run_ref(w):
    ref = reference_sim.RefCluster([cost_model.A100_7B], w.arrival / rate, w.prompt, w.output,
                                   cap=cap, window=env.window)
    return _ref_counts(ref.run_single(None, p.decision_dt))

  return _Sides(env, p, heuristics.fixed_cap, {"a": cap_idx}, k, num_envs, rate, run_ref,
                ref_requests)


def bench_vidur(requests: int, vidur_python: str, reps: int, copies: int) -> dict:
  """One A100 serving Llama-2-7B with chunked prefill (validate_vidur's setup: cap 128, budget
  2,048, the profiled cost, no CPU overhead on either side) on the first `requests` requests of
  azure_conv at the recorded rate: simulated requests per CPU-second of one JAX env, of
  `copies` envs in one vmapped program, and of Vidur 0.0.26's simulation (its forests are
  trained once before timing: setup CPU reported apart). Best of `reps` per side."""
  from experiments import validate_vidur as vv  # pylint: disable=import-outside-toplevel
  from jaxrl_suite.envs.serving import vidur_compare  # pylint: disable=import-outside-toplevel
  c = vv.get_config(False, requests=requests, vidur_python=vidur_python)
  c.vidur_python = vidur_python
  with jax.enable_x64(True):
    run, p = vidur_compare.rollout_fn(c, "profiled", no_overhead=True)
    key = jax.random.PRNGKey(c.seed)
    many = jax.jit(jax.vmap(run, in_axes=(None, 0)))
    keys = jax.random.split(key, copies)
    one_fn = lambda: jax.block_until_ready(run(p, key))
    many_fn = lambda: jax.block_until_ready(many(p, keys))
    st = one_fn()
    many_fn()
    done = int(jnp.sum(engine.results(st.eng).status == engine.DONE))
    best = {"one": np.inf, "vmap": np.inf, "vidur": np.inf}
    r = vidur_compare.engine_replay(c, "profiled", no_overhead=True)[0]
    import tempfile  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory(prefix="bench_vidur_") as work:
      cache = os.path.join(work, "cache")
      setup = vv.vidur_run(c, r, work, cache, "warm")["cpu_s_setup"]   # trains the forests
      for i in range(reps):
        best["one"] = min(best["one"], _timed(one_fn)[1])
        best["vmap"] = min(best["vmap"], _timed(many_fn)[1])
        v = vv.vidur_run(c, r, work, cache, f"rep{i}")
        best["vidur"] = min(best["vidur"], v["cpu_s_run"])
    v_done = int(v["completed"].sum())
  per = {"one": done / best["one"], "vmap": copies * done / best["vmap"],
         "vidur": v_done / best["vidur"]}
  return {"requests": requests, "finished_engine": done, "finished_vidur": v_done,
          "req_per_cpu_s": per, "vidur_setup_cpu_s": setup, "copies": copies,
          "one_over_vidur": per["one"] / per["vidur"], "vmap_over_one": per["vmap"] / per["one"]}


def _vidur_lines(v: dict) -> list[str]:
  per = v["req_per_cpu_s"]
  return [
      f"\nVidur 0.0.26 beside the engine (one A100, Llama-2-7B, chunked prefill 2,048, cap 128, "
      f"profiled cost, {v['requests']} azure_conv requests at the recorded rate; finished "
      f"{v['finished_engine']} / {v['finished_vidur']}):",
      f"{'simulator':44s} {'req / CPU-s':>12s} {'/ Vidur':>8s}",
      f"{'engine, one env (jit)':44s} {per['one']:12.0f} {v['one_over_vidur']:7.1f}x",
      f"{'engine, vmap x' + str(v['copies']) + ' envs (one program)':44s} {per['vmap']:12.0f} "
      f"{per['vmap'] / per['vidur']:7.1f}x",
      f"{'Vidur 0.0.26 simulation (forests trained before)':44s} {per['vidur']:12.0f} "
      f"{1.0:7.1f}x",
      f"Target (issue #35): one env >= 20x Vidur per CPU-second: "
      f"{'met' if v['one_over_vidur'] >= 20 else 'not met'}. vmap on this CPU buys "
      f"{v['vmap_over_one']:.2f}x over one env per CPU-second; Vidur's forest training took "
      f"{v['vidur_setup_cpu_s']:.0f} CPU-s once (not in its row)."]


def _row(name, r):
  return (f"{name:44s} {r['jax_req_per_cpu_s']:9.0f} {r['ref_req_per_cpu_s']:9.0f} "
          f"{r['ratio_cpu']:6.1f}x {r['jax_cpu_us_per_req']:8.1f} {r['jax_req_per_s']:9.0f} "
          f"{r['ref_req_per_s']:9.0f} {r['events_per_episode'] / r['k']:6.1f} "
          f"{r['iterations_per_episode'] / r['k']:6.1f} {r['rejected_share']:6.3f} "
          f"{r['jax_compile_s']:6.1f}")


def main(argv):
  del argv
  if _PIN.value and _PINNED_ENV not in os.environ:
    _pin_and_reexec()
  n, w, reps, refq = _NUM_ENVS.value, _WINDOW.value, _REPS.value, _REF.value
  tables = [int(x) for x in _TABLES.value]
  # Compile every row first, then time them in interleaved rounds (_Sides).
  rows = [(f"ServingRoute-v0, 4 GPUs, K={k}", bench_routing(n, k, refq, _RATE.value, w, True))
          for k in tables]
  if _EXTRA.value:
    k = tables[0]
    rows.append((f"ServingBatch-v0 continuous, 1 GPU, K={k}",
                 bench_continuous(n, k, refq, window=w)))
    rows.append((f"ServingBatch-v0 static, 1 GPU, K={k}", bench_static(n, k, refq)))
  if _CACHE.value:
    k = _CACHE.value
    rows += [(f"ServingRoute-v0 Mooncake 8B, cache {'on' if on else 'off'}, K={k}",
              bench_prefix_cache(n, k, refq, _CACHE_WINDOW.value, on)) for on in (False, True)]
  from experiments import validate_vidur as vv  # pylint: disable=import-outside-toplevel
  vpy, why = vv.find_vidur_python(_VIDUR.value)
  vidur = bench_vidur(_VIDUR_REQ.value, vpy, reps, _VMAP.value) if vpy else None
  for r in range(reps):
    for _, sides in rows:
      sides.time_once()
    print(f"round {r + 1} / {reps} timed", flush=True)
  rows = [(name, sides.result()) for name, sides in rows]
  per_req = [r["jax_cpu_us_per_req"] for _, r in rows[:len(tables)]]
  if _CACHE.value:
    off, on = rows[-2][1], rows[-1][1]
  pinned = (f"pinned to core {os.environ[_PINNED_ENV]}, XLA intra-op threads off"
            if _PINNED_ENV in os.environ else f"unpinned ({len(os.sched_getaffinity(0))} cores)")
  print(f"\nJAX: vmap x{n} episodes, window {w} slots, rate x{_RATE.value}; reference: about "
        f"{refq} requests per rep; best of {reps}; CPU seconds = time.process_time (all threads);"
        f" {pinned}; load average {os.getloadavg()[0]:.1f}")
  print(f"{'workload':44s} {'JAX r/cs':>9s} {'ref r/cs':>9s} {'ratio':>7s} {'JAX us/r':>8s} "
        f"{'JAX r/s':>9s} {'ref r/s':>9s} {'ev/req':>6s} {'it/req':>6s} {'rej':>6s} "
        f"{'cmp s':>6s}")
  for name, r in rows:
    print(_row(name, r))
  print(f"JAX CPU cost per request, largest / smallest over K = {tables}: "
        f"{max(per_req) / min(per_req):.2f}x (target <= 1.5x)")
  print("\n".join(_vidur_lines(vidur)) if vidur else f"\nVidur rows skipped: {why}")
  if _CACHE.value:
    print(f"Prefix cache (Mooncake, K={_CACHE.value}): JAX CPU per request with / without it "
          f"{on['jax_cpu_us_per_req'] / off['jax_cpu_us_per_req']:.1f}x; JAX / reference per "
          f"CPU-second with it {on['ratio_cpu']:.1f}x")


if __name__ == "__main__":
  app.run(main)
