"""Plain Python/numpy event-driven reference simulator of the same serving model.

Written independently of the JAX code (objects, lists and a heap, one iteration at a time, float64)
so that tests can check that, for a fixed trace and a fixed policy, both give the same per-request
first-token and completion times. Rules: see `engine.py` (continuous) and `batching.py` (static).

    ref = RefCluster(specs, arrival, prompt, output, cap=128)
    ref.run_routing(lambda sim, i: i % n)          # route request i; returns per-request arrays
    RefCluster(..., window=W)                      # at most W requests in flight, as engine.py
    RefCluster(..., hashes=H, cache_blocks=C)      # prefix cache (engine.py rules), H [K, B]
    RefCluster(..., iteration_cost="profiled")     # profiled_cost.batch_time per iteration
                                                   # (each GPU's profiled_cost.ratios)

Finished requests leave their GPU's list, so an event costs O(requests in flight) here too.
    simulate_static(spec, arrival, prompt, output, choose_b, wait_dt)
"""

from __future__ import annotations

import heapq
from typing import Callable, Sequence

import numpy as np

from jaxrl_suite.envs.serving import cost_model
from jaxrl_suite.envs.serving import profiled_cost

BLOCK = cost_model.BLOCK_TOKENS
CACHE_BLOCK = 512
UNROUTED, WAITING, RUNNING, DONE, REJECTED = 0, 1, 2, 3, 4


def _blocks(tokens: int) -> int:
  return -(-tokens // BLOCK)


def _profiled_tables(iteration_cost: str):
  """None (analytic) or the float64 A100-7B profiled tables (every GPU: scaled by its ratios)."""
  if iteration_cost == "analytic":
    return None
  if iteration_cost != "profiled":
    raise ValueError(f"iteration_cost must be 'analytic' or 'profiled', got {iteration_cost!r}")
  return profiled_cost.a100_llama2_7b()


def _profiled_time(tab, spec: cost_model.GPUSpec, batch) -> float:
  """profiled_cost.batch_time of one iteration on `spec` (its t_ovh and ratios) from (chunk,
  cached, ctx, is_decode) tuples."""
  a = np.array(batch, np.float64).reshape(-1, 4)
  return float(profiled_cost.batch_time(np, tab, a[:, 0], a[:, 1], a[:, 2], a[:, 3] > 0,
                                        spec.t_ovh, r=profiled_cost.ratios(spec)))


class Req:
  __slots__ = ("idx", "arrival", "p", "o", "gpu", "status", "pf", "pt", "gen", "chunk", "ttft",
               "finish", "npre", "h", "cached")

  def __init__(self, idx, arrival, p, o, h=()):
    self.idx, self.arrival, self.p, self.o = idx, float(arrival), int(p), int(o)
    self.h, self.cached = [int(x) for x in h if x >= 0], 0
    self.gpu, self.status, self.pf, self.pt, self.gen, self.chunk = -1, UNROUTED, 0, int(p), 0, 0
    self.ttft, self.finish, self.npre = -1.0, -1.0, 0

  def need(self) -> int:
    return self.pt if self.pf < self.pt else self.p + self.gen


class Gpu:
  def __init__(self, spec: cost_model.GPUSpec, cap: int, max_batched_tokens: int,
               watermark_frac: float, cache_blocks: int = 0):
    self.spec = spec
    self.cap = cap
    self.mbt = max_batched_tokens
    self.kv_blocks = spec.kv_blocks
    self.watermark = int(watermark_frac * spec.kv_blocks)
    self.reqs: list[Req] = []      # unfinished requests assigned here, in arrival order
    self.busy = False
    self.iter_end = np.inf
    self.kv_used = 0
    self.kv_peak = 0
    self.batch: list[Req] = []
    # prefix cache: entry j holds block id c_hash[j] (-1 empty), last used at c_time[j]
    self.c_hash = [-1] * cache_blocks
    self.c_time = [-np.inf] * cache_blocks

  def prefix_blocks(self, r: Req) -> int:
    """Leading blocks of r's prompt found in the cache."""
    have, m = set(self.c_hash), 0
    for h in r.h:
      if h not in have:
        break
      m += 1
    return m

  def touch(self, ids, t: float):
    ids = set(ids)
    for j, h in enumerate(self.c_hash):
      if h >= 0 and h in ids:
        self.c_time[j] = t

  def cache_insert(self, reqs: list[Req], te: float):
    """engine._cache_insert: refresh the cached blocks, then the new ones (request order, block
    order) take the least recently used entries (ties: lowest index)."""
    have = set(self.c_hash)
    self.touch([h for r in reqs for h in r.h if h in have], te)
    new = [h for r in reqs for h in r.h if h not in have]
    order = sorted(range(len(self.c_hash)), key=lambda j: (self.c_time[j], j))
    for j, h in zip(order, new):
      self.c_hash[j], self.c_time[j] = h, te


class RefCluster:
  """Continuous batching on N GPUs; events in time order, ties by GPU index."""

  def __init__(self, specs: Sequence[cost_model.GPUSpec], arrival, prompt, output, cap=128,
               max_batched_tokens: int | Sequence[int] = 2048, watermark_frac: float = 0.01,
               window: int | None = None, hashes=None, cache_blocks=None,
               iteration_cost: str = "analytic"):
    self.prof = _profiled_tables(iteration_cost)
    mbt = ([max_batched_tokens] * len(specs) if np.ndim(max_batched_tokens) == 0
           else list(max_batched_tokens))
    caps = [cap] * len(specs) if np.ndim(cap) == 0 else list(cap)
    self.caching = cache_blocks is not None
    cb = ([0] * len(specs) if cache_blocks is None else
          [cache_blocks] * len(specs) if np.ndim(cache_blocks) == 0 else list(cache_blocks))
    self.gpus = [Gpu(s, int(c), int(m), watermark_frac, int(b))
                 for s, c, m, b in zip(specs, caps, mbt, cb)]
    self.window = window
    self.in_flight = 0
    hs = [()] * len(arrival) if hashes is None else [list(h) for h in np.asarray(hashes)]
    self.reqs = [Req(i, a, p, o, h)
                 for i, (a, p, o, h) in enumerate(zip(arrival, prompt, output, hs))]
    self.heap: list[tuple[float, int, int]] = []
    self.version = [0] * len(specs)
    self.event_log: list[float] = []

  # -- events
  def _push(self, g: int, t: float):
    self.version[g] += 1
    heapq.heappush(self.heap, (t, g, self.version[g]))

  def _wake_time(self, gpu: Gpu) -> float:
    w = [r.arrival for r in gpu.reqs if r.status == WAITING]
    return min(w) if w else np.inf

  def _next(self):
    while self.heap:
      t, g, v = self.heap[0]
      if v != self.version[g]:
        heapq.heappop(self.heap)
        continue
      return t, g
    return np.inf, -1

  def assign(self, i: int, g: int):
    r = self.reqs[i]
    if self.window is not None and self.in_flight >= self.window:
      r.status = REJECTED              # the engine's bounded window is full (engine.py)
      return
    self.in_flight += 1
    r.gpu, r.status = g, WAITING
    gpu = self.gpus[g]
    gpu.reqs.append(r)
    if not gpu.busy:
      self._push(g, self._wake_time(gpu))

  def run_until(self, horizon: float):
    while True:
      t, g = self._next()
      if g < 0 or t > horizon:
        return
      heapq.heappop(self.heap)
      self.event_log.append(t)
      self._complete(self.gpus[g], t)
      self._schedule(g, t)

  # -- one iteration
  def _complete(self, gpu: Gpu, te: float):
    prefilled = []
    for r in gpu.batch:
      if r.pf < r.pt:
        r.pf += r.chunk
        emits = r.pf >= r.pt
        if emits:
          prefilled.append(r)
      else:
        emits = True
      if emits:
        r.gen += 1
        if r.ttft < 0:
          r.ttft = te
        if r.gen >= r.o:
          r.status, r.finish = DONE, te
          self.in_flight -= 1
      r.chunk = 0
    gpu.batch = []
    gpu.reqs = [r for r in gpu.reqs if r.status != DONE]
    if self.caching and prefilled:
      gpu.cache_insert(sorted(prefilled, key=lambda r: r.idx), te)

  def _schedule(self, g: int, t: float):
    gpu = self.gpus[g]
    running = [r for r in gpu.reqs if r.status == RUNNING]
    used, keep, stopped = 0, [], False
    for r in running:                      # keep the FCFS prefix that fits; preempt the rest
      b = _blocks(r.need())
      if not stopped and used + b <= gpu.kv_blocks:
        used += b
        keep.append(r)
      else:
        stopped = True
        r.status, r.pt, r.pf, r.npre = WAITING, r.p + r.gen, 0, r.npre + 1
    free = gpu.kv_blocks - used
    decode = [r for r in keep if r.pf >= r.pt]
    prefill = [r for r in keep if r.pf < r.pt]
    budget = gpu.mbt - len(decode)
    pre_cum = sum(r.pt - r.pf for r in prefill)
    admitted, w_blocks = [], 0
    hits = []
    for r in [r for r in gpu.reqs if r.status == WAITING and r.arrival <= t]:
      b = _blocks(r.pt)
      if (len(keep) + len(admitted) + 1 <= gpu.cap and free - (w_blocks + b) >= gpu.watermark
          and budget - pre_cum > 0):
        admitted.append(r)
        r.status = RUNNING
        w_blocks += b
        if self.caching:
          m = gpu.prefix_blocks(r)
          r.pf = min(CACHE_BLOCK * m, r.pt - 1)
          if r.npre == 0:
            r.cached = r.pf
          hits += r.h[:m]
        pre_cum += r.pt - r.pf
      else:
        break
    if hits:
      gpu.touch(hits, t)
    n_tok, sum_ctx, sum_sq, left = 0, 0, 0, budget
    batch, rows = [], []
    for r in decode:
      r.chunk = 1
      n_tok += 1
      sum_ctx += r.p + r.gen
      batch.append(r)
      rows.append((1, 0, r.p + r.gen, 1))
    for r in prefill + admitted:
      c = max(0, min(left, r.pt - r.pf))
      left -= c
      r.chunk = c
      if c > 0:
        n_tok += c
        sum_sq += c * r.pf + c * (c + 1) // 2      # causal pairs (cost_model.prefill_pairs)
        batch.append(r)
        rows.append((c, r.pf, 0, 0))
    gpu.batch = batch
    gpu.kv_used = used + w_blocks
    gpu.kv_peak = max(gpu.kv_peak, gpu.kv_used)
    s = gpu.spec
    if n_tok > 0:
      dur = (cost_model.iteration_time(np, s.t_ovh, s.t_w, s.alpha, s.beta, s.gamma,
                                       float(n_tok), float(sum_ctx), float(sum_sq))
             if self.prof is None else _profiled_time(self.prof, s, rows))
      gpu.busy, gpu.iter_end = True, t + float(dur)
      self._push(g, gpu.iter_end)
    else:
      gpu.busy, gpu.iter_end = False, np.inf
      wake = self._wake_time(gpu)
      if wake < np.inf:
        self._push(g, wake)

  # -- drivers
  def prefix_share(self, i: int) -> np.ndarray:
    """[N] float32 share of request i's prompt that each GPU's cache holds as a prefix
    (engine.prefix_match)."""
    r = self.reqs[i]
    return np.array([np.float32(min(CACHE_BLOCK * g.prefix_blocks(r), r.p)) / np.float32(max(r.p, 1))
                     for g in self.gpus], np.float32)

  def outstanding(self) -> np.ndarray:
    return np.array([len(gpu.reqs) for gpu in self.gpus])

  def run_routing(self, route: Callable[["RefCluster", int], int]) -> dict[str, np.ndarray]:
    """Routes request i at its arrival (after all events <= that time), then drains."""
    for i, r in enumerate(self.reqs):
      self.run_until(r.arrival)
      self.assign(i, int(route(self, i)))
    self.run_until(np.inf)
    return self.result()

  def run_single(self, cap_at: Callable[[float], int] | None = None, decision_dt: float = 0.25
                 ) -> dict[str, np.ndarray]:
    """One GPU; the cap may be changed every decision_dt by `cap_at(t)` (the continuous
    ServingBatch-v0 protocol). Requests are assigned at the decision before their arrival (so
    they are admissible from their arrival on), in order, as the JAX env inserts them."""
    nxt, k = 0, len(self.reqs)

    def enter(horizon):
      nonlocal nxt
      while nxt < k and self.reqs[nxt].arrival <= horizon:
        self.assign(nxt, 0)
        nxt += 1

    t = self.reqs[0].arrival
    enter(t)
    while nxt < k or self.in_flight > 0:
      if cap_at is not None:
        self.gpus[0].cap = int(cap_at(t))
      t = t + decision_dt
      enter(t)
      self.run_until(t)
    return self.result()

  def result(self) -> dict[str, np.ndarray]:
    g = lambda f: np.array([getattr(r, f) for r in self.reqs])
    return {"ttft": g("ttft"), "finish": g("finish"), "status": g("status"), "gpu": g("gpu"),
            "npre": g("npre"), "kv_peak": np.array([gp.kv_peak for gp in self.gpus]),
            "cached": g("cached")}


def simulate_static(spec: cost_model.GPUSpec, arrival, prompt, output,
                    choose_b: Callable[[dict], int], wait_dt: float = 0.05,
                    max_model_len: int = 4096, max_decisions: int = 100_000,
                    iteration_cost: str = "analytic") -> dict[str, np.ndarray]:
  """Static (request-level) batching, iterating every prefill/decode step of each batch
  (iteration_cost "profiled": `profiled_cost.batch_time` of each step).

  `choose_b(view)` gets {"queue", "oldest", "all_arrived", "t"} and returns a batch size (0 =
  wait). Returns per-request ttft/finish/status.
  """
  arrival = np.asarray(arrival, np.float64)
  k = len(arrival)
  prof = _profiled_tables(iteration_cost)
  status = np.zeros(k, int)
  ttft, finish = -np.ones(k), -np.ones(k)
  slots = spec.kv_blocks // _blocks(max_model_len)
  t = float(arrival[0])
  for _ in range(max_decisions):
    if (status == DONE).all():
      break
    queued = [i for i in range(k) if status[i] == 0 and arrival[i] <= t]
    view = {"queue": len(queued), "oldest": max([t - arrival[i] for i in queued], default=0.0),
            "all_arrived": bool(all(arrival[i] <= t for i in range(k) if status[i] == 0)),
            "t": t}
    b = int(choose_b(view))
    members = queued[:min(b, slots)]
    if members:
      ps = [int(prompt[i]) for i in members]
      n, m = len(members), max(int(output[i]) for i in members)
      # prefill iteration: one unchunked prefill of all prompts -> first token of every member
      if prof is None:
        dur = cost_model.iteration_time(np, spec.t_ovh, spec.t_w, spec.alpha, 0.0, spec.gamma,
                                        float(sum(ps)), 0.0,
                                        float(sum(p * (p + 1) // 2 for p in ps)))   # causal
      else:
        dur = _profiled_time(prof, spec, [(p, 0, 0, 0) for p in ps])
      t_first = t + dur
      total = dur
      ends = [total]                     # ends[k]: time after the prefill and k decode steps
      for step in range(1, m):           # padded decode steps until the longest member ends
        total += (cost_model.iteration_time(np, spec.t_ovh, spec.t_w, spec.alpha, spec.beta, 0.0,
                                            float(n), float(sum(ps) + n * step), 0.0)
                  if prof is None else
                  _profiled_time(prof, spec, [(1, 0, p + step, 1) for p in ps]))
        ends.append(total)
      for i in members:                  # per-token streaming: done when its last token leaves
        status[i], ttft[i], finish[i] = DONE, t_first, t + ends[int(output[i]) - 1]
      t = t + total
    else:
      t = t + wait_dt
    pending = [i for i in range(k) if status[i] == 0]
    if pending and not any(arrival[i] <= t for i in pending):
      t = max(t, min(arrival[i] for i in pending))
  return {"ttft": ttft, "finish": finish, "status": status}
