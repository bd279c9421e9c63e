"""Continuous (iteration-level) batching on N GPUs over a fixed-size window of active requests.

This is the event core shared by `ServingRoute-v0` (N heterogeneous GPUs, the agent assigns each
arrival to a GPU) and the continuous mode of `ServingBatch-v0` (1 GPU, the agent sets the admission
cap `max_num_seqs`). `reference_sim.py` implements the same rules with Python objects and a heap.

Active-request window (all [W], W = `window` slots, in arrival order): the episode's K requests
(`Requests`, [K]) enter the window one by one (`insert`, at routing) and leave it when they
finish, so each event costs work proportional to W (the requests in flight), not to K. A slot has
`rid` (its request's index in the episode, -1 = empty) and `status` 0 = empty, 1 = waiting
(assigned to GPU `gpu`), 2 = running (admitted, holds KV), 3 = finished. A request has prompt `p`,
true output length `o` (hidden from policies), prefill target `pt` (p, or p + gen after a recompute
preemption), prefill progress `pf` and generated tokens `gen`.

Slots are appended at position `hi` in arrival order, so table order is arrival order (FCFS and
"newest" below mean slot order). The table has S = 2W slots; `compact` drops the finished ones
(keeping the others' order) and hands back their records for the per-request results `res` [K].
The flat rollout (`evaluate.rollout_events`) runs the episode in rounds of at most W entries
and compacts between rounds, outside the vmapped event loop, because any [K] array updated
inside that loop costs O(K) per iteration (vmap turns the loop's per-lane predicate into a
select over every carried array); `step_env` compacts whenever the table is full. A request
offered while W requests are in flight is rejected (an SLO miss in every metric, counted in
`n_rejected`): the engine's bounded queue. `reference_sim.RefCluster(window=W)` applies the same
rule. With W >= K (the default, `window=None`) S = K, slot i holds request i and nothing is ever
compacted or rejected. `results(eng)` gives the per-request outcome [K] of an episode (final state or not).

One iteration on GPU g, scheduled at time t (vLLM-like, rules of design doc §2.3-2.4):
  1. KV check: each running request needs ceil(need/16) blocks, need = pt while prefilling and
     p + gen while decoding. If the total exceeds capacity, the newest running requests (highest
     table index = latest arrival) are preempted with RECOMPUTE: KV dropped, back to waiting with
     pt = p + gen, pf = 0.
  2. Admission (FCFS, stop at first failure) of arrived waiting requests while running count <
     cap_g (max_num_seqs), free blocks - ceil(pt/16) >= watermark (1% of blocks, vidur), and the
     token budget still has room.
  3. Token budget max_num_batched_tokens: one token per decoding request first, the rest as
     prefill chunks in FCFS order (chunked prefill, Sarathi).
  4. Duration from `cost_model.iteration_time` with N_tok = sum of scheduled tokens,
     sum_ctx = sum of decode contexts p + gen, and prefill attention pairs
     A(pf, c) = c pf + c (c + 1) / 2 per chunk (`cost_model.prefill_pairs`: causal masking, token
     j of the chunk attends to the pf earlier tokens and to j of its own; p (p + 1) / 2 for an
     unchunked prefill). With `make_hardware(..., iteration_cost="profiled")` the duration is
     instead `profiled_cost.iteration_time`: tables fitted to Vidur's A100 Llama-2-7B operator
     profiles, t_ovh + 1e-3 L [G(N_tok) + sum_i P(c_i, pf_i) + D(n_d, mean context)], linear
     beyond the profiled grid, and on any other GPU type scaled by its analytic constants'
     ratios to A100-7B's (`Hardware.prof_ratio`; profiled_cost module docstring).
At the iteration's end every scheduled request advances: prefill chunks add to pf; a request whose
prefill completes, and every decoding request, emits one token (TTFT = end of the iteration that
emits the first token); a request with gen == o finishes.

Events are processed in time order (ties: lowest GPU index) up to a horizon (the next decision
time) with a bounded `lax.while_loop`; an idle GPU wakes at the earliest arrival among its waiting
requests.

Decode fast-forward (exact, on by default). Most iterations are pure decode: every running request
has finished its prefill, nobody is admitted, and each of the n_d decoders emits one token. Such an
iteration repeats with the same batch until a request finishes, KV might run out or a new request
could be admitted, so `schedule` books n of them as ONE event ("span") of n repetitions.
Iteration j of the span (j = 0..n-1) has decode context S + n_d j, so the span lasts

  f(n) = sum_{j<n} (c0 + beta (S + n_d j)) = n c0 + beta (n S + n_d n (n - 1) / 2),
  c0 = t_ovh + max(t_w, alpha n_d),

and n = min(n_fin, n_kv, n_seg, k_b + 1) with n_fin the fewest tokens any decoder still needs, n_kv =
16 floor(free blocks / n_d) + 1 (each decoder gains at most ceil(j/16) blocks in j iterations, so
the KV check cannot preempt inside the span) and k_b the number of span boundaries at or before
the next future arrival already waiting on the GPU; n_seg = inf for the analytic cost, and for
the profiled one the iterations whose mean context stays on one linear segment of the decode
table (the last one, beyond 4,096 tokens of context, is unbounded), where the iteration time is
exactly c0 + beta s (`profiled_cost.decode_linear` gives c0, beta: `_decode_coeffs`). Admission
cannot succeed at a skipped boundary: the first arrived waiting request failed now, and its tests
(running count vs cap, free blocks vs watermark, token budget) only get harder while the batch is
unchanged.

Spans run across decisions. What can change a GPU's schedule comes only from a decision (a
request routed to it, a new cap, requests entering the table), so the decision calls `cut(eng,
hw, g, t)` on the GPU it changes, which ends g's span at the first boundary after t (the
iteration running at t, as event by event); every other GPU's span runs on untouched. (Before,
every decision ended every busy GPU's span: ~5 events per routed request instead of ~3.) So a
span may end long after the current time: observations read the engine through `at_time(eng, hw,
t)`, which reports the tokens, KV blocks, KV peak and iteration count the span has reached by
time t. `reference_sim.py` has no fast-forward: the reference tests check that both give the
same per-request times, and that every observation equals one-event-per-iteration simulation.
Why: it cuts the events per episode about 15-fold (bench_serving prints both counts).
"""

from __future__ import annotations

import flax.struct as struct
import jax
import jax.numpy as jnp

from jaxrl_suite.envs.serving import cost_model
from jaxrl_suite.envs.serving import profiled_cost

WAITING, UNROUTED, RUNNING, DONE, REJECTED = 1, 0, 2, 3, 4
EMPTY = UNROUTED   # an empty window slot
INF = jnp.inf
CACHE_BLOCK = 512  # tokens per prefix-cache block (Mooncake's hash_ids granularity)
# per-slot fields of `Engine` (permuted together by compaction); `sreq` is permuted alongside
SLOT_FIELDS = ("gpu", "status", "pf", "pt", "gen", "chunk", "ttft", "finish", "npre", "rid")


@struct.dataclass
class Hardware:
  """Per-GPU cost constants [N] (see cost_model.GPUSpec) and batching limits."""
  t_ovh: jax.Array
  t_w: jax.Array
  alpha: jax.Array
  beta: jax.Array
  gamma: jax.Array
  kv_blocks: jax.Array      # int32 [N]
  watermark: jax.Array      # int32 [N] blocks kept free at admission
  type_id: jax.Array        # int32 [N]
  max_batched_tokens: jax.Array  # int32 [N]
  # iteration cost: None = analytic (cost_model.iteration_time with the constants above); else
  # the A100-7B profile-fitted tables (profiled_cost.ProfiledTables) shared by every GPU, and
  # each GPU's analytic constants over A100-7B's ([N] each) that scale them to it
  prof: profiled_cost.ProfiledTables | None = None
  prof_ratio: profiled_cost.Ratios | None = None


ITERATION_COSTS = ("analytic", "profiled")
# GPU specs with measured profiles (profiled_cost): Llama-2-7B on one A100, TP1. Every other spec
# runs iteration_cost="profiled" on tables derived from these (profiled_cost.Ratios).
PROFILED_SPECS = (profiled_cost.PROFILED.name,)


def make_hardware(specs, max_batched_tokens=2048, watermark_frac: float = 0.01,
                  dtype=float, iteration_cost: str = "analytic") -> Hardware:
  """Hardware of the GPUs `specs`; max_batched_tokens: one for all or one per GPU.
  iteration_cost: "analytic" (cost_model.iteration_time) or "profiled" (profiled_cost: the tables
  fitted to Vidur's A100-7B profiles, scaled to each GPU by `profiled_cost.ratios`); both run
  every GPU spec. No token-budget limit: beyond the profiled 4,096 tokens the tables grow with
  the analytic slopes (GEMM alpha per token, prefill attention gamma per pair), not flat."""
  tab = cost_model.spec_table(specs)
  f = lambda x: jnp.asarray(x, dtype=jnp.result_type(dtype))
  if iteration_cost not in ITERATION_COSTS:
    raise ValueError(f"iteration_cost must be one of {ITERATION_COSTS}, got {iteration_cost!r}")
  prof, ratio = None, None
  if iteration_cost == "profiled":
    prof = profiled_cost.as_jax(profiled_cost.a100_llama2_7b(), jnp.result_type(dtype))
    ratio = profiled_cost.as_jax(profiled_cost.ratios(specs), jnp.result_type(dtype))
  return Hardware(prof=prof, prof_ratio=ratio, t_ovh=f(tab["t_ovh"]), t_w=f(tab["t_w"]),
                  alpha=f(tab["alpha"]), beta=f(tab["beta"]), gamma=f(tab["gamma"]),
                  kv_blocks=jnp.asarray(tab["kv_blocks"], jnp.int32),
                  watermark=jnp.asarray((watermark_frac * tab["kv_blocks"]).astype("int32")),
                  type_id=jnp.asarray(tab["type_id"], jnp.int32),
                  max_batched_tokens=jnp.broadcast_to(
                      jnp.asarray(max_batched_tokens, jnp.int32), (len(specs),)))


@struct.dataclass
class Requests:
  """The episode's workload, [K] each, sorted by arrival (seconds from the episode start)."""
  arrival: jax.Array
  prompt: jax.Array   # int32
  output: jax.Array   # int32, hidden from policies
  pred: jax.Array     # int32 noisy output-length bucket (what policies may see)
  hashes: jax.Array | None = None   # int32 [K, B] prompt block ids (-1 = none): prefix cache on


@struct.dataclass
class Results:
  """Per-request outcome [K] of the episode, by request index (what metrics read)."""
  status: jax.Array    # int32 [K]: 0 not yet routed, 1/2 in flight, 3 finished, 4 rejected
  gpu: jax.Array       # int32 [K], -1 = not routed
  ttft: jax.Array      # float [K] absolute time of first token, -1 if none
  finish: jax.Array    # float [K] absolute finish time, -1 if not finished
  npre: jax.Array      # int32 [K] recompute preemptions
  cached: jax.Array | None = None   # int32 [K] prompt tokens served by the prefix cache


@struct.dataclass
class Engine:
  """Dynamic state of the active-request window [W], the GPUs [N] and the results [K]."""
  gpu: jax.Array       # int32 [W], -1 = empty slot
  status: jax.Array    # int32 [W]
  pf: jax.Array        # int32 [W]
  pt: jax.Array        # int32 [W]
  gen: jax.Array       # int32 [W]
  chunk: jax.Array     # int32 [W] tokens scheduled in its GPU's current iteration
  ttft: jax.Array      # float [W] absolute time of first token, -1 if none
  finish: jax.Array    # float [W] absolute finish time, -1 if not finished
  npre: jax.Array      # int32 [W] recompute preemptions
  rid: jax.Array       # int32 [W] request index in the episode, -1 = empty slot
  sreq: Requests       # [W] the slots' requests (arrival inf in empty slots)
  hi: jax.Array        # int32 [], next free slot position
  window: jax.Array    # int32 [], W: most requests in flight (more are rejected)
  n_in: jax.Array      # int32 [], requests offered so far (entered or rejected)
  res: Results         # [K] outcomes of requests that left the table (see `results`)
  n_rejected: jax.Array  # int32 [], requests rejected because the window was full
  busy: jax.Array      # bool [N]
  iter_end: jax.Array  # float [N]
  cap: jax.Array       # int32 [N] max_num_seqs
  kv_used: jax.Array   # int32 [N] blocks held by running requests (after the last schedule)
  kv_peak: jax.Array   # int32 [N] (after a span's booking: including its last iteration)
  kv_base: jax.Array   # int32 [N] kv_peak before the GPU's current event (what `cut` restores)
  n_iter: jax.Array    # int32 [N]
  reps: jax.Array      # int32 [N] iterations in the GPU's current event (> 1: a decode span)
  t_start: jax.Array   # float [N] start time of the GPU's current event
  last_event: jax.Array  # float [], time of the last processed event (monotone)
  n_events: jax.Array  # int32 [], events processed (iterations or decode spans)
  cap_hits: jax.Array  # int32 [], decisions whose event loop hit its iteration cap
  # prefix cache (None unless the requests carry hashes and `init_engine` got cache sizes)
  cached: jax.Array | None = None   # int32 [W] prompt tokens served by the cache at admission
  c_hash: jax.Array | None = None   # int32 [N, C] block id per cache entry, -1 = empty
  c_time: jax.Array | None = None   # float [N, C] last use (LRU); -inf empty, +inf beyond capacity


def window_size(k: int, window: int | None) -> int:
  """Requests in flight W an episode of k requests allows: `window` (None = k), at most k."""
  return k if window is None else max(1, min(int(window), k))


def physical_slots(k: int, window: int | None) -> int:
  """Slots of the table: K when the window covers the episode (nothing ever leaves), else
  2 W, so that W more requests can enter between two compactions (module docstring)."""
  w = window_size(k, window)
  return k if w >= k else min(k, 2 * w)


def init_engine(req: Requests, n_gpus: int, cap: jax.Array, window: int | None = None,
                cache_blocks=None, cache_caps=None) -> Engine:
  """Empty table (`physical_slots` slots, at most `window` requests in flight) for the episode's
  requests `req` [K]. cache_blocks: prefix-cache entries per GPU (static ints, one for all or one
  per GPU; needs `req.hashes`), None = no prefix cache. cache_caps: int [n_gpus], optional, may
  be traced: entries each GPU actually uses (<= its cache_blocks, the row width), so one compiled
  env serves clusters whose GPU types sit in different slots."""
  k = req.arrival.shape[0]
  w = physical_slots(k, window)
  fz = jnp.zeros((w,), req.arrival.dtype)
  iz = jnp.zeros((w,), jnp.int32)
  fk = jnp.zeros((k,), req.arrival.dtype)
  ik = jnp.zeros((k,), jnp.int32)
  hashes = None if req.hashes is None else jnp.full((w, req.hashes.shape[1]), -1, jnp.int32)
  sreq = Requests(arrival=fz + INF, prompt=iz, output=iz + 1, pred=iz, hashes=hashes)
  cache = {}
  if cache_blocks is not None:
    if req.hashes is None:
      raise ValueError("cache_blocks needs requests with hashes (a trace with hash_ids)")
    caps = [int(c) for c in (cache_blocks if isinstance(cache_blocks, (tuple, list))
                             else [cache_blocks] * n_gpus)]
    if len(caps) != n_gpus or min(caps) < 1:
      raise ValueError(f"cache_blocks must be >= 1 per GPU ({n_gpus} GPUs), got {cache_blocks}")
    c = max(caps)
    used = jnp.asarray(caps if cache_caps is None else cache_caps, jnp.int32)
    beyond = jnp.arange(c)[None, :] >= used[:, None]     # entries never used: time +inf
    cache = dict(cached=iz, c_hash=jnp.full((n_gpus, c), -1, jnp.int32),
                 c_time=jnp.where(beyond, INF, -INF).astype(fz.dtype))
  zi = jnp.zeros((), jnp.int32)
  return Engine(gpu=iz - 1, status=iz, pf=iz, pt=iz, gen=iz, chunk=iz,
                ttft=fz - 1, finish=fz - 1, npre=iz, rid=iz - 1, sreq=sreq,
                hi=zi, window=zi + window_size(k, window), n_in=zi,
                res=Results(status=ik, gpu=ik - 1, ttft=fk - 1, finish=fk - 1, npre=ik,
                            cached=None if cache_blocks is None else ik),
                n_rejected=zi,
                busy=jnp.zeros((n_gpus,), bool), iter_end=jnp.full((n_gpus,), INF, fz.dtype),
                cap=jnp.broadcast_to(jnp.asarray(cap, jnp.int32), (n_gpus,)),
                kv_used=jnp.zeros((n_gpus,), jnp.int32), kv_peak=jnp.zeros((n_gpus,), jnp.int32),
                kv_base=jnp.zeros((n_gpus,), jnp.int32),
                n_iter=jnp.zeros((n_gpus,), jnp.int32), reps=jnp.ones((n_gpus,), jnp.int32),
                t_start=jnp.zeros((n_gpus,), fz.dtype),
                last_event=jnp.asarray(0.0, fz.dtype), n_events=jnp.zeros((), jnp.int32),
                cap_hits=jnp.zeros((), jnp.int32), **cache)


def _empty_slot_values(eng: Engine) -> dict:
  """Per-slot field values of an empty slot (SLOT_FIELDS, then the `sreq` fields)."""
  z = jnp.zeros((), jnp.int32)
  f = jnp.zeros((), eng.ttft.dtype)
  return dict(gpu=z - 1, status=z + EMPTY, pf=z, pt=z, gen=z, chunk=z, ttft=f - 1, finish=f - 1,
              npre=z, rid=z - 1, cached=z)


def _slot_fields(eng: Engine) -> tuple[str, ...]:
  """SLOT_FIELDS, plus `cached` when the prefix cache is on."""
  return SLOT_FIELDS + (("cached",) if eng.cached is not None else ())


def _rows(mask, x):
  """mask [S] broadcast against a per-slot array x [S, ...]."""
  return mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))


def _write_results(res: Results, rec: Results, rid) -> Results:
  """Rows `rec` [S] go to requests `rid` [S] of `res` [K] (rid < 0: dropped). One scatter of S
  rows: O(S), not O(K)."""
  k = res.status.shape[0]
  idx = jnp.where(rid >= 0, rid, k)
  put = lambda dst, src: dst.at[idx].set(src.astype(dst.dtype), mode="drop")
  return jax.tree.map(put, res, rec)


def slot_records(eng: Engine, mask) -> tuple[jax.Array, Results]:
  """(rid [S], Results rows [S]) of the slots in `mask` (rid -1 elsewhere)."""
  rec = Results(status=eng.status, gpu=eng.gpu, ttft=eng.ttft, finish=eng.finish, npre=eng.npre,
                cached=eng.cached)
  return jnp.where(mask, eng.rid, -1), rec


def apply_records(eng: Engine, rid, rec: Results) -> Engine:
  """Writes records (from `compact`, possibly stacked [..., S]) into the results `res` [K]."""
  return eng.replace(res=_write_results(eng.res, jax.tree.map(lambda x: x.reshape(-1), rec),
                                        rid.reshape(-1)))


def results(eng: Engine) -> Results:
  """Per-request outcome [..., K] (leading batch dims of a vmapped engine are kept): `res`
  (requests that left the table) plus the slots still held; a request that was offered
  (index < n_in) but never held a slot was rejected."""
  def one(e):
    rid, rec = slot_records(e, e.rid >= 0)
    r = _write_results(e.res, rec, rid)
    k = r.status.shape[0]
    rej = (r.status == UNROUTED) & (jnp.arange(k) < e.n_in)
    return r.replace(status=jnp.where(rej, REJECTED, r.status))
  f = one
  for _ in range(eng.rid.ndim - 1):
    f = jax.vmap(f)
  return f(eng)


def compact(eng: Engine) -> tuple[Engine, tuple[jax.Array, Results]]:
  """Drops the finished slots and moves the others to the front in their order (stable: slot
  order stays arrival order). Returns (engine, (rid, records) of the dropped slots [S]) for
  `apply_records`; the caller decides where the records go, so that no [K] array is touched
  inside the vmapped event loop (`evaluate.rollout_events`). O(S log S)."""
  s = eng.rid.shape[0]
  done = (eng.rid >= 0) & (eng.status == DONE)
  out = slot_records(eng, done)
  live = (eng.rid >= 0) & ~done
  perm = jnp.argsort(~live, stable=True)          # in-flight slots first, in slot order
  n_live = jnp.sum(live).astype(jnp.int32)
  keep = jnp.arange(s) < n_live
  empty = _empty_slot_values(eng)
  moved = {f: jnp.where(keep, getattr(eng, f)[perm], empty[f]) for f in _slot_fields(eng)}
  sr = eng.sreq
  sempty = Requests(arrival=jnp.asarray(INF, sr.arrival.dtype), prompt=jnp.int32(0),
                    output=jnp.int32(1), pred=jnp.int32(0),
                    hashes=None if sr.hashes is None else jnp.int32(-1))
  sreq = jax.tree.map(lambda x, e: jnp.where(_rows(keep, x), x[perm], e).astype(x.dtype), sr,
                      sempty)
  return eng.replace(**moved, sreq=sreq, hi=n_live), out


def compact_in_place(eng: Engine, need=True) -> Engine:
  """`compact` (if `need`) with its records written to `res` at once (the step-by-step path,
  `env_base.EventEnv.step_env`; the flat rollout collects them instead)."""
  if eng.rid.shape[0] >= eng.res.status.shape[0]:
    return eng                                      # the table holds the whole episode
  c, (rid, rec) = compact(eng)
  c = apply_records(c, jnp.where(need, rid, -1), rec)
  return jax.tree.map(lambda a, b: jnp.where(need, a, b), c, eng)


def insert(eng: Engine, req: Requests, i, g, valid=True) -> Engine:
  """Request i of the episode `req` [K] enters the table, waiting on GPU g (if `valid`).

  Appends at slot `hi`. Rejected (module docstring) if `window` requests are in flight, or if
  the table has no free slot left (the caller compacts often enough that this does not happen:
  `rollout_events` after at most W entries, `step_env` whenever the table is full). Touches
  only [S]-sized state: a rejection is implied by `n_in` (see `results`).
  """
  s, k = eng.rid.shape[0], eng.res.status.shape[0]
  valid = jnp.asarray(valid)
  ok = valid & (eng.hi < s) & (in_flight(eng) < eng.window)
  at = (jnp.arange(s) == eng.hi) & ok
  ic = jnp.clip(i, 0, k - 1)
  vals = dict(gpu=jnp.asarray(g, jnp.int32), status=jnp.int32(WAITING), pf=jnp.int32(0),
              pt=req.prompt[ic].astype(jnp.int32), gen=jnp.int32(0), chunk=jnp.int32(0),
              ttft=jnp.asarray(-1, eng.ttft.dtype), finish=jnp.asarray(-1, eng.ttft.dtype),
              npre=jnp.int32(0), rid=jnp.asarray(ic, jnp.int32), cached=jnp.int32(0))
  new = {f: jnp.where(at, vals[f], getattr(eng, f)).astype(getattr(eng, f).dtype)
         for f in _slot_fields(eng)}
  sreq = jax.tree.map(lambda x, full: jnp.where(_rows(at, x), full[ic], x).astype(x.dtype),
                      eng.sreq, req)
  return eng.replace(**new, sreq=sreq, hi=eng.hi + ok.astype(jnp.int32),
                     n_in=jnp.where(valid, jnp.maximum(eng.n_in, ic + 1), eng.n_in),
                     n_rejected=eng.n_rejected + (valid & ~ok).astype(jnp.int32))


def in_flight(eng: Engine) -> jax.Array:
  """Requests in the table that have not finished (waiting or running)."""
  return jnp.sum((eng.status == WAITING) | (eng.status == RUNNING))


def _tri_cumsum(x, dtype):
  """Inclusive cumsum over the last axis as one matmul with an upper-triangular ones matrix."""
  k = x.shape[-1]
  return x.astype(dtype) @ jnp.triu(jnp.ones((k, k), dtype))


def _cumsum(x, dtype, block: int = 8):
  """Inclusive cumsum over the last axis of small non-negative integer arrays, exact while sums
  stay below 2^24 (float32).

  Matmuls with triangular ones matrices: ~3x faster than `jnp.cumsum` (a reduce-window) on CPU
  for these sizes. A table of k slots is cut into blocks of `block`: a cumsum inside each block
  (k x block MACs) plus the blocks' running offsets ((k / block)^2), instead of one k x k matmul,
  which dominated the cost of an event at 64 slots.
  """
  k = x.shape[-1]
  if k <= 2 * block or k % block:
    return jnp.round(_tri_cumsum(x, dtype)).astype(jnp.int32)
  xb = x.astype(dtype).reshape(x.shape[:-1] + (k // block, block))
  inner = _tri_cumsum(xb, dtype)                                   # [..., k/b, b]
  offset = _tri_cumsum(inner[..., -1], dtype) - inner[..., -1]     # exclusive block offsets
  return jnp.round(inner + offset[..., None]).reshape(x.shape).astype(jnp.int32)


def _pick(x, g):
  """x[g] for a per-GPU array via a one-hot mask (batched gathers are slow on CPU under vmap)."""
  return jnp.sum(jnp.where(jnp.arange(x.shape[0]) == g, x, jnp.zeros_like(x))).astype(x.dtype)


def _put(x, g, v):
  """x.at[g].set(v) via a one-hot mask (batched scatters are slow on CPU under vmap)."""
  return jnp.where(jnp.arange(x.shape[0]) == g, v, x)


def _blocks(tokens):
  return (tokens + cost_model.BLOCK_TOKENS - 1) // cost_model.BLOCK_TOKENS


def _decode_c0(t_ovh, t_w, alpha, nd):
  """c0 = t_ovh + max(t_w, alpha nd): the context-free part of a pure-decode iteration's time
  (cost_model.iteration_time with no context and no prefill)."""
  return cost_model.iteration_time(jnp, t_ovh, t_w, alpha, 0.0, 0.0, nd, 0.0, 0.0)


def gpu_ratios(hw: Hardware, g=None) -> profiled_cost.Ratios | None:
  """GPU g's profiled-cost ratios (scalars; g None: all GPUs, [N]); None for the analytic cost."""
  if hw.prof_ratio is None or g is None:
    return hw.prof_ratio
  return profiled_cost.Ratios(*(_pick(x, g) for x in hw.prof_ratio))


def _decode_coeffs(hw: Hardware, ratio, t_ovh, t_w, alpha, beta, nd, s):
  """(c0, beta, n_seg): a pure-decode iteration of nd requests at context sum s takes c0 + beta s
  for the next n_seg iterations (float, inf = unbounded). Analytic: c0 = `_decode_c0`, the
  spec's beta, n_seg = inf. Profiled: `profiled_cost.decode_linear` with the GPU's `ratio`
  (module docstring). Arrays broadcast (one GPU or all [N])."""
  if hw.prof is None:
    return _decode_c0(t_ovh, t_w, alpha, nd), beta, jnp.full(jnp.shape(nd), INF, t_ovh.dtype)
  c0, b, n_seg = profiled_cost.decode_linear(jnp, hw.prof, nd, s, t_ovh, r=ratio)
  return c0.astype(t_ovh.dtype), b.astype(t_ovh.dtype), n_seg.astype(t_ovh.dtype)


def _iteration_time(hw: Hardware, g, n_tok, sum_ctx, sum_sq, chunk, pf, pref, nd):
  """Duration of GPU g's iteration (step 4 of the module docstring); chunk, pf, pref [W] (the
  profiled cost sums P(chunk, pf) over prefill slots), totals in the float dtype."""
  t_ovh = _pick(hw.t_ovh, g)
  if hw.prof is None:
    return cost_model.iteration_time(jnp, t_ovh, _pick(hw.t_w, g), _pick(hw.alpha, g),
                                     _pick(hw.beta, g), _pick(hw.gamma, g), n_tok, sum_ctx, sum_sq)
  ft, r = t_ovh.dtype, gpu_ratios(hw, g)
  p_ms = jnp.sum(jnp.where(pref, profiled_cost.prefill_ms(jnp, hw.prof, chunk.astype(ft),
                                                          pf.astype(ft), r), 0.0))
  mean_ctx = sum_ctx / jnp.maximum(nd, 1).astype(ft)
  return profiled_cost.iteration_time(jnp, hw.prof, n_tok, p_ms, nd.astype(ft), mean_ctx,
                                      t_ovh, r=r).astype(ft)


def decode_span_time(c0, beta, s, nd, k):
  """f(k) = sum_{j<k} (c0 + beta (s + nd j)): duration of k pure-decode iterations of nd requests
  whose first iteration has decode context sum s (module docstring)."""
  k = jnp.asarray(k).astype(c0.dtype)
  return k * c0 + beta * (k * s + nd * k * (k - 1) / 2)


def decode_steps_within(c0, beta, s, nd, h, k_max):
  """Largest k in [0, k_max] with f(k) <= h (f as in `decode_span_time`; h may be inf).

  Root of beta nd/2 k^2 + (c0 + beta s - beta nd/2) k = h in the cancellation-free form
  2h / (B + sqrt(B^2 + 4 A h)), then one step of correction each way against f itself, so the
  result is consistent with the end times the span uses.
  """
  ft = c0.dtype
  a = beta * nd.astype(ft) / 2
  b = c0 + beta * s.astype(ft) - a
  finite = jnp.isfinite(h)
  hc = jnp.where(finite, jnp.maximum(h, 0.0), 0.0)
  root = 2 * hc / (b + jnp.sqrt(b * b + 4 * a * hc))
  k_max = jnp.asarray(k_max, jnp.int32)
  k = jnp.where(finite, jnp.minimum(jnp.floor(root), k_max.astype(ft)), k_max.astype(ft))
  k = k.astype(jnp.int32)
  f = lambda k: decode_span_time(c0, beta, s, nd, k)
  k = jnp.where(f(k) > h, k - 1, k)
  k = jnp.where((k < k_max) & (f(k + 1) <= h), k + 1, k)
  return jnp.clip(k, 0, k_max)


def kv_need(eng: Engine) -> jax.Array:
  """KV tokens a running request holds: pt while prefilling, p + gen while decoding."""
  req = eng.sreq
  return jnp.where(eng.pf < eng.pt, eng.pt, req.prompt + eng.gen)


def event_times(eng: Engine) -> jax.Array:
  """[N] next event per GPU: its iteration end if busy, else its earliest waiting arrival."""
  req = eng.sreq
  n = eng.busy.shape[0]
  waiting = eng.status == WAITING
  onehot = (eng.gpu[:, None] == jnp.arange(n)[None, :]) & waiting[:, None]
  wake = jnp.min(jnp.where(onehot, req.arrival[:, None], INF), axis=0)
  return jnp.where(eng.busy, eng.iter_end, wake)


def _cache_row(x, g):
  """Row g of a per-GPU [N, C] cache array (one-hot select, as `_pick`)."""
  sel = (jnp.arange(x.shape[0]) == g)[:, None]
  return jnp.sum(jnp.where(sel, x, jnp.zeros_like(x)), 0).astype(x.dtype)


def _put_row(x, g, row):
  return jnp.where((jnp.arange(x.shape[0]) == g)[:, None], row[None, :], x)


def _lookup(srt, hashes):
  """found [..., B] bool: block ids `hashes` (-1 = none) present in a sorted cache row `srt`
  [C] (`jnp.sort(row)`: C log C once, then log C per block id instead of C).

  One search per block id: it is present iff the entry at its insertion point equals it (a
  second, right-side search doubled the cost); the unrolled scan is ~1.4x the rolled one on CPU
  for the ~10 steps a row of ~1,000 entries needs."""
  c = srt.shape[0]
  lo = jnp.searchsorted(srt, hashes, side="left", method="scan_unrolled").astype(jnp.int32)
  return (hashes >= 0) & (lo < c) & (srt[jnp.minimum(lo, c - 1)] == hashes)


def _chunks_of(mask, q: int):
  """(slot indices of `mask` [S] in slot order, padded with S to a multiple of q; q).

  The prefix-cache loops below take q of them per pass: the work of an event is then
  proportional to the slots it touches (admissions, finished prefills: 0-2 of them in most
  events), not to all S x B slot blocks."""
  s = mask.shape[0]
  q = min(q, s)
  return jnp.nonzero(mask, size=-(-s // q) * q, fill_value=s)[0], q


def _chunk(idx, q, j):
  return jax.lax.dynamic_slice(idx, (j * q,), (q,))


def _pad_row(x, value):
  """x [S, ...] with one more row of `value` (the padding slot S of `_chunks_of`)."""
  return jnp.concatenate([x, jnp.full((1,) + x.shape[1:], value, x.dtype)])


def _holders(row, hashes, sel):
  """[C] bool: the entries of a cache row [C] holding a block id of `hashes` [..., B] where
  `sel` (duplicated ids: every entry holding one). The few selected ids of a chunk are sorted
  (one operand, ~8 us for 400) and each entry is searched among them; mapping hits found in
  the sorted row back to entries would need the row's argsort, and on CPU an argsort (a
  two-operand sort) of ~860 entries costs ~90 us where sorting the values alone costs ~17 us."""
  q = jnp.sort(jnp.where(sel, hashes, -1).reshape(-1))
  pos = jnp.searchsorted(q, row, side="left", method="scan_unrolled")
  return (row >= 0) & (q[jnp.minimum(pos, q.shape[0] - 1)] == row)


def _leading(found):
  """[...] int32: the number of leading True values along the last axis of `found` [..., B]
  (the index of the first False). A min over indices: a cumprod, or an argmax that XLA fuses
  into the lookups, cost ~2x the lookups themselves on CPU at B ~ 100."""
  b = found.shape[-1]
  return jnp.min(jnp.where(found, b, jnp.arange(b, dtype=jnp.int32)), -1).astype(jnp.int32)


def prefix_match(eng: Engine, hashes, prompt) -> jax.Array:
  """[N] share of a prompt (block ids `hashes` [B], `prompt` tokens) each GPU's cache holds as a
  prefix: min(512 m_g, prompt) / prompt (what the cache-aware router reads)."""
  # all pairs (N x C x B compares, C the reduced middle axis): one request's B blocks against
  # every row costs ~36 us on CPU, sorting the N rows to search them ~650 us; and under vmap
  # the flat event loop runs this observation at every event (evaluate.rollout_events)
  found = jnp.any(eng.c_hash[:, :, None] == hashes[None, None, :], axis=1) & (hashes >= 0)[None]
  m = _leading(found)                                                         # [N]
  p = jnp.maximum(prompt, 1).astype(jnp.float32)
  return jnp.minimum(CACHE_BLOCK * m, prompt).astype(jnp.float32) / p


INSERT_CHUNK = 4  # finishing slots per pass of `_cache_insert`
ADMIT_CHUNK = 8   # waiting slots per pass of the admission loop (`_cached_admission`)


def _cache_insert(eng: Engine, g, fin, te) -> Engine:
  """The prompt blocks of the slots `fin` [S] (their prefill completed at te on GPU g) enter
  g's cache. Blocks already cached are refreshed (last use te); the others, in slot order then
  block order, take the least recently used entries (ties: lowest entry index), at most the
  GPU's capacity of them. Presence is checked against the cache before this insertion.

  Why chunks: an iteration completes the prefill of 0-2 requests, rarely more, so looking up
  all S x B slot blocks (~20k with Llama-3.1-8B) made the insert ~3 ms of a ~3.3 ms event on
  Mooncake. The finishing slots are gathered in slot order (`nonzero`), and two bounded loops
  take INSERT_CHUNK of them per pass: the first refreshes their cached blocks, the second (after
  the LRU order is taken on the refreshed times, as before) gives their new blocks entries,
  ranked across chunks by a running offset. Same result, work proportional to the finishers."""
  h = eng.sreq.hashes
  row_h, row_t = _cache_row(eng.c_hash, g), _cache_row(eng.c_time, g)
  c = row_h.shape[0]
  slots, f = _chunks_of(fin, INSERT_CHUNK)
  n_chunks = (jnp.sum(fin) + f - 1) // f
  h_pad = _pad_row(h, -1)                                       # slot S: no blocks
  srt = jnp.sort(row_h)                                         # presence: the cache before

  def chunk(j):
    hh = h_pad[_chunk(slots, f, j)]                              # [f, B]
    return hh, _lookup(srt, hh)

  def refresh(j, rt):
    hh, found = chunk(j)
    return jnp.where(_holders(row_h, hh, found), te, rt)

  row_t = jax.lax.fori_loop(0, n_chunks, refresh, row_t)
  order = jnp.argsort(row_t, stable=True)
  n_ok = jnp.sum(row_t < INF)

  def put(j, carry):
    rh, rt, off = carry
    hh, found = chunk(j)
    new = ((hh >= 0) & ~found).reshape(-1)
    rank = off + jnp.cumsum(new.astype(jnp.int32)).astype(jnp.int32) - 1
    dst = jnp.where(new & (rank < n_ok), order[jnp.clip(rank, 0, c - 1)], c)
    rh = rh.at[dst].set(hh.reshape(-1), mode="drop")
    rt = rt.at[dst].set(jnp.asarray(te, rt.dtype), mode="drop")
    return rh, rt, (off + jnp.sum(new)).astype(jnp.int32)

  row_h, row_t, _ = jax.lax.fori_loop(0, n_chunks, put, (row_h, row_t, jnp.int32(0)))
  return eng.replace(c_hash=_put_row(eng.c_hash, g, row_h), c_time=_put_row(eng.c_time, g, row_t))


def complete(eng: Engine, g, te):
  """Applies the effects of GPU g's iteration ending at te. Returns (engine, finished mask [W])."""
  req = eng.sreq
  mem = (eng.gpu == g) & (eng.status == RUNNING) & (eng.chunk > 0)
  prefilling = eng.pf < eng.pt
  pf = jnp.where(mem & prefilling, eng.pf + eng.chunk, eng.pf)
  tok = mem & jnp.where(prefilling, pf >= eng.pt, True)
  # a decode span emits `reps` tokens per member (prefilling iterations are never spans)
  gen = eng.gen + tok.astype(jnp.int32) * _pick(eng.reps, g)
  ttft = jnp.where(tok & (eng.ttft < 0), te, eng.ttft)
  done = tok & (gen >= req.output)
  if eng.c_hash is not None:
    eng = _cache_insert(eng, g, mem & prefilling & (pf >= eng.pt), te)
  return eng.replace(pf=pf.astype(jnp.int32), gen=gen.astype(jnp.int32), ttft=ttft,
                     status=jnp.where(done, DONE, eng.status).astype(jnp.int32),
                     finish=jnp.where(done, te, eng.finish),
                     chunk=jnp.where(eng.gpu == g, 0, eng.chunk)), done


def _admission(wait, rem, pt, n_keep, cap, free, watermark, budget, ft):
  """FCFS admission of the arrived waiting slots `wait` [S]: in slot order, while the batch
  cap, the KV watermark and the token budget allow (the first failure stops it). rem [S]:
  prefill tokens left per prefill candidate. One stacked cumsum for the three counters.
  Returns (admit [S], pre_cum [S] prefill tokens of the candidates before each slot,
  first_fail: index of the first waiting slot not admitted, S if none)."""
  cums = _cumsum(jnp.stack([rem, wait.astype(jnp.int32), jnp.where(wait, _blocks(pt), 0)]), ft)
  pre_cum = cums[0] - rem
  ok = (wait & (n_keep + cums[1] <= cap) & (free - cums[2] >= watermark)
        & (budget - pre_cum > 0))
  failed = wait & ~ok
  first_fail = jnp.where(jnp.any(failed), jnp.argmax(failed), failed.shape[0])
  return ok & (jnp.arange(failed.shape[0]) < first_fail), pre_cum, first_fail


def _cached_admission(eng: Engine, g, wait, running_prefill, pt, admission):
  """Cached prefix tokens of the waiting slots admission can reach, and the LRU refresh.

  ctok_i = min(512 m_i, pt_i - 1), m_i = leading prompt blocks of slot i in GPU g's cache.
  Admission at slot i depends on the ctok of the slots before it only (through the prefill
  tokens ahead of it), and nothing reads the ctok of a waiting slot after the first one that is
  not admitted, unless a running prefill comes later in slot order. So the waiting slots are
  looked up ADMIT_CHUNK at a time, in slot order, until the first failure and the last running
  prefill lie before the first slot not looked up (or all are): one pass in most events, where
  looking up all S x B slot blocks cost ~0.45 ms of a Mooncake event. The slots not looked up
  get ctok 0; `admission` is exact for every slot it can admit.

  Returns (ctok [S] int32, refresh): refresh(admit, t) -> the row's last-use times [C] with the
  leading cached blocks of the admitted slots used at t.
  """
  h = _pad_row(eng.sreq.hashes, -1)
  row_h, row_t = _cache_row(eng.c_hash, g), _cache_row(eng.c_time, g)
  srt = jnp.sort(row_h)
  s = wait.shape[0]
  idx, q = _chunks_of(wait, ADMIT_CHUNK)
  n_wait = jnp.sum(wait)
  last_run = jnp.max(jnp.where(running_prefill, jnp.arange(s), -1))
  pt_pad = _pad_row(pt, 1)

  def lookup(slots):
    hh = h[slots]
    found = _lookup(srt, hh)
    return hh, found, _leading(found)

  def body(c):
    j, ctok, _ = c
    slots = _chunk(idx, q, j)
    ctok = ctok.at[slots].set(jnp.minimum(CACHE_BLOCK * lookup(slots)[2], pt_pad[slots] - 1
                                          ).astype(jnp.int32), mode="drop")
    j = (j + 1).astype(jnp.int32)
    nxt = idx[jnp.minimum(j * q, idx.shape[0] - 1)]
    nxt = jnp.where(j * q < idx.shape[0], nxt, s)     # first waiting slot not looked up
    first_fail = admission(ctok)[2]
    return j, ctok, (j * q >= n_wait) | ((first_fail < nxt) & (last_run < nxt))

  _, ctok, _ = jax.lax.while_loop(lambda c: ~c[2], body,
                                  (jnp.int32(0), jnp.zeros((s,), jnp.int32), n_wait == 0))

  def refresh(admit, t):
    a_idx, _ = _chunks_of(admit, q)

    def one(j, rt):
      hh, _, m = lookup(_chunk(a_idx, q, j))
      lead = jnp.arange(hh.shape[1])[None, :] < m[:, None]     # leading blocks are all found
      return jnp.where(_holders(row_h, hh, lead), t, rt)

    return jax.lax.fori_loop(0, (jnp.sum(admit) + q - 1) // q, one, row_t)

  return ctok, refresh


def schedule(eng: Engine, hw: Hardware, g, t, span_bound=INF, fast_forward: bool = True
             ) -> Engine:
  """Plans GPU g's next iteration at time t (preempt, admit, allocate tokens, set its end).

  With `fast_forward`, a pure-decode iteration is booked as a span of n identical iterations that
  stops at the first boundary after `span_bound` at the latest (inf: spans run across
  decisions, and the decisions `cut` them; module docstring).
  """
  req = eng.sreq
  mine = eng.gpu == g
  cap_blocks = _pick(hw.kv_blocks, g)
  # 1. KV check of the running set; keep the largest FCFS prefix that fits (= preempt newest).
  ft = eng.iter_end.dtype
  run = mine & (eng.status == RUNNING)
  need_blk = jnp.where(run, _blocks(kv_need(eng)), 0)
  keep = run & (_cumsum(need_blk, ft) <= cap_blocks)
  pre = run & ~keep
  status = jnp.where(pre, WAITING, eng.status)
  pt = jnp.where(pre, req.prompt + eng.gen, eng.pt)
  pf = jnp.where(pre, 0, eng.pf)
  used = jnp.sum(jnp.where(keep, need_blk, 0))
  free = cap_blocks - used
  n_keep = jnp.sum(keep)
  dec = keep & (pf >= pt)
  budget = _pick(hw.max_batched_tokens, g) - jnp.sum(dec)
  # 2. FCFS admission of arrived waiting requests (one stacked cumsum for the three counters).
  wait = mine & (status == WAITING) & (req.arrival <= t)
  pref_cand = (keep & ~dec) | wait
  rem_of = lambda ctok: jnp.where(pref_cand, pt - pf - ctok, 0)
  admission = lambda ctok: _admission(wait, rem_of(ctok), pt, n_keep, _pick(eng.cap, g), free,
                                      _pick(hw.watermark, g), budget, ft)
  ctok, cache = 0, {}
  if eng.c_hash is not None:
    # prefix cache: an admitted request's prefill starts after its cached leading blocks (at
    # least its last token is computed); the chunks attend to the cached prefix (pf > 0)
    ctok, refresh = _cached_admission(eng, g, wait, keep & ~dec, pt, admission)
  rem = rem_of(ctok)
  admit, pre_cum, _ = admission(ctok)
  status = jnp.where(admit, RUNNING, status)
  if eng.c_hash is not None:
    pf = jnp.where(admit, ctok, pf)
    cache = dict(c_time=_put_row(eng.c_time, g, refresh(admit, t)),
                 cached=jnp.where(admit & (eng.npre == 0) & ~pre, ctok, eng.cached
                                  ).astype(jnp.int32))
  # 3. Token allocation: decodes 1 each, prefill chunks FCFS from the remaining budget.
  pref = (keep & ~dec) | admit
  chunk_p = jnp.clip(budget - pre_cum, 0, rem)
  chunk = jnp.where(dec, 1, jnp.where(pref, chunk_p, jnp.where(mine, 0, eng.chunk)))
  mine_chunk = jnp.where(mine, chunk, 0)
  n_tok = jnp.sum(mine_chunk)
  sum_ctx = jnp.sum(jnp.where(dec, req.prompt + eng.gen, 0))
  # causal prefill pairs, in the float dtype (c pf overflows int32 at 128k contexts)
  sum_sq = jnp.sum(jnp.where(pref, cost_model.prefill_pairs(pf.astype(ft), chunk.astype(ft)), 0))
  dur = _iteration_time(hw, g, n_tok.astype(ft), sum_ctx.astype(ft), sum_sq, chunk, pf,
                        pref & (chunk > 0), jnp.sum(dec))
  busy = n_tok > 0
  kv = used + jnp.sum(jnp.where(admit, _blocks(pt), 0))
  i32 = lambda x: x.astype(jnp.int32)
  kv = i32(kv)
  end, reps, kv_last = t + dur, jnp.ones((), jnp.int32), kv
  if fast_forward:
    # 5. Decode span: n identical pure-decode iterations as one event (module docstring).
    nd = jnp.sum(dec)
    pure = busy & ~jnp.any(pref)
    c0, beta, n_seg = _decode_coeffs(hw, gpu_ratios(hw, g), _pick(hw.t_ovh, g), _pick(hw.t_w, g),
                                     _pick(hw.alpha, g), _pick(hw.beta, g), nd.astype(ft),
                                     sum_ctx.astype(ft))
    big = jnp.iinfo(jnp.int32).max // 4
    n_fin = jnp.min(jnp.where(dec, req.output - eng.gen, big))
    n_kv = cost_model.BLOCK_TOKENS * (free // jnp.maximum(nd, 1)) + 1
    n_seg = jnp.minimum(n_seg, big).astype(jnp.int32)
    a_next = jnp.min(jnp.where(mine & (status == WAITING) & (req.arrival > t), req.arrival, INF))
    k_max = jnp.maximum(jnp.minimum(jnp.minimum(n_fin, n_kv), n_seg) - 1, 0)
    k_b = decode_steps_within(c0, beta, sum_ctx, nd, jnp.minimum(span_bound, a_next) - t,
                               k_max)
    n = jnp.where(pure, k_b + 1, 1)
    span = n > 1
    end = jnp.where(span, t + decode_span_time(c0, beta, sum_ctx, nd, n), end)
    reps = i32(n)
    kv_last = i32(jnp.where(span, jnp.sum(jnp.where(dec, _blocks(req.prompt + eng.gen + n - 1), 0)),
                            kv))
  return eng.replace(status=i32(status), pt=i32(pt), pf=i32(pf), chunk=i32(chunk),
                     npre=i32(eng.npre + pre),
                     busy=_put(eng.busy, g, busy),
                     iter_end=_put(eng.iter_end, g, jnp.where(busy, end, INF)),
                     kv_used=_put(eng.kv_used, g, kv),
                     kv_peak=_put(eng.kv_peak, g, jnp.maximum(_pick(eng.kv_peak, g), kv_last)),
                     kv_base=_put(eng.kv_base, g, _pick(eng.kv_peak, g)),
                     n_iter=_put(eng.n_iter, g, _pick(eng.n_iter, g) + jnp.where(busy, reps, 0)),
                     reps=_put(eng.reps, g, jnp.where(busy, reps, 1)),
                     t_start=_put(eng.t_start, g, t), **cache)


def _gpu_onehot(eng: Engine, dtype) -> jax.Array:
  """[W, N] float one-hot of each request's GPU (rows of unrouted requests are zero)."""
  return (eng.gpu[:, None] == jnp.arange(eng.busy.shape[0])[None, :]).astype(dtype)


def _per_gpu_sums(onehot, columns):
  """Per-GPU sums [N] of integer columns [W], as ONE matmul onehot^T @ [W, C] (a handful of
  masked reductions cost more on CPU under vmap); exact while sums stay below 2^24."""
  x = jnp.stack(columns, -1).astype(onehot.dtype)
  out = jnp.round(onehot.T @ x).astype(jnp.int32)
  return [out[:, i] for i in range(len(columns))]


def at_time(eng: Engine, hw: Hardware, t) -> Engine:
  """The engine as event-by-event simulation shows it at time t (inside decode spans).

  A span booked at t_start with n = reps iterations has completed k(t) = max{k < n: t_start +
  f(k) <= t} of them by t; its members have then emitted k more tokens, hold the KV blocks of that
  context, and the GPU is in iteration k (ending at t_start + f(k + 1)). Everything else is
  unchanged. Observations use this view; it is a view, not a state to step from.
  """
  req = eng.sreq
  ft = eng.iter_end.dtype
  onehot = _gpu_onehot(eng, ft)                                           # [K, N]
  mem = (eng.status == RUNNING) & (eng.chunk > 0) & (eng.pf >= eng.pt)
  ctx = jnp.where(mem, req.prompt + eng.gen, 0)
  nd, s = _per_gpu_sums(onehot, [mem.astype(jnp.int32), ctx])
  c0, beta, _ = _decode_coeffs(hw, gpu_ratios(hw), hw.t_ovh, hw.t_w, hw.alpha, hw.beta,
                               nd.astype(ft), s.astype(ft))
  span = eng.busy & (eng.reps > 1)
  k = decode_steps_within(c0, beta, s, nd, t - eng.t_start, jnp.maximum(eng.reps - 1, 0))
  k = jnp.where(span, k, 0)
  k_req = jnp.where(mem, jnp.round(onehot @ k.astype(ft)).astype(jnp.int32), 0)   # k[gpu]
  gen = eng.gen + k_req
  (kv,) = _per_gpu_sums(onehot, [jnp.where(mem, _blocks(req.prompt + gen), 0)])
  return eng.replace(
      gen=gen.astype(jnp.int32),
      kv_used=jnp.where(span, kv, eng.kv_used).astype(jnp.int32),
      kv_peak=jnp.where(span, jnp.maximum(eng.kv_base, kv), eng.kv_peak).astype(jnp.int32),
      iter_end=jnp.where(span, eng.t_start + decode_span_time(c0, beta, s, nd, k + 1),
                         eng.iter_end),
      n_iter=jnp.where(span, eng.n_iter - eng.reps + k + 1, eng.n_iter).astype(jnp.int32))


def cut(eng: Engine, hw: Hardware, g, t) -> Engine:
  """Ends GPU g's decode span at the first iteration boundary after t (no-op if g is not in a
  span, or if t is inf or past the span's end).

  Spans run across decisions; a decision that changes what GPU g's scheduler would see (a request
  routed to g, a new cap, requests entering with arrivals from t on) calls `cut(eng, hw, g, t)`
  first. Event by event, the iteration running at t is the span's iteration k(t) (as in
  `at_time`), and the first schedule that can see the change is at its end t_start + f(k(t) + 1):
  so the span keeps k(t) + 1 repetitions and nothing else changes. The other GPUs' spans are
  left running: their batches, caps and arrivals are unchanged, so every boundary they skip
  would have scheduled the same batch again. O(W) for one GPU.
  """
  req = eng.sreq
  ft = eng.iter_end.dtype
  mem = (eng.gpu == g) & (eng.status == RUNNING) & (eng.chunk > 0) & (eng.pf >= eng.pt)
  nd = jnp.sum(mem)
  s = jnp.sum(jnp.where(mem, req.prompt + eng.gen, 0)).astype(ft)
  reps, t0 = _pick(eng.reps, g), _pick(eng.t_start, g)
  c0, beta, _ = _decode_coeffs(hw, gpu_ratios(hw, g), _pick(hw.t_ovh, g), _pick(hw.t_w, g),
                               _pick(hw.alpha, g), _pick(hw.beta, g), nd.astype(ft), s)
  k = decode_steps_within(c0, beta, s, nd, t - t0, jnp.maximum(reps - 1, 0))
  n = jnp.where(_pick(eng.busy, g) & (reps > 1), jnp.minimum(k + 1, reps), reps)
  shorter = n < reps
  end = t0 + decode_span_time(c0, beta, s, nd, n)
  kv_last = jnp.sum(jnp.where(mem, _blocks(req.prompt + eng.gen + n - 1), 0)).astype(jnp.int32)
  pick_if = lambda x, v: _put(x, g, jnp.where(shorter, v, _pick(x, g)))
  return eng.replace(
      reps=pick_if(eng.reps, n.astype(jnp.int32)),
      iter_end=pick_if(eng.iter_end, end),
      n_iter=pick_if(eng.n_iter, (_pick(eng.n_iter, g) - reps + n).astype(jnp.int32)),
      kv_peak=pick_if(eng.kv_peak, jnp.maximum(_pick(eng.kv_base, g), kv_last)))


def next_event(eng: Engine):
  """(GPU index, time) of the earliest pending event (ties: lowest GPU index); time inf if none."""
  ev = event_times(eng)
  return jnp.argmin(ev), jnp.min(ev)


def process_event(eng: Engine, hw: Hardware, g, te, slo_ttft, slo_tpot, span_bound=INF,
                  fast_forward: bool = True):
  """Ends GPU g's iteration (or decode span) at te and schedules its next one.

  Returns (engine, requests finished within the SLO, requests finished) by this event.
  """
  eng, done = complete(eng, g, te)
  good = done & slo_met(eng, slo_ttft, slo_tpot)
  eng = schedule(eng, hw, g, te, span_bound, fast_forward)
  eng = eng.replace(last_event=jnp.maximum(eng.last_event, te), n_events=eng.n_events + 1)
  return eng, jnp.sum(good).astype(jnp.int32), jnp.sum(done).astype(jnp.int32)


def run_until(eng: Engine, hw: Hardware, horizon, max_events: int, slo_ttft, slo_tpot,
              fast_forward: bool = True):
  """Processes GPU events with time <= horizon (at most `max_events`).

  The next event (g, te) is carried in the loop state, so `event_times` runs once per event.
  Returns (engine, number of requests finished within the SLO, number finished).
  """
  def cond(c):
    _, i, _, _, _, te = c
    return (i < max_events) & (te <= horizon)

  def body(c):
    e, i, n_good, n_done, g, te = c
    e, good, done = process_event(e, hw, g, te, slo_ttft, slo_tpot, INF, fast_forward)
    g, te = next_event(e)
    return e, i + 1, n_good + good, n_done + done, g, te

  z = jnp.zeros((), jnp.int32)
  g, te = next_event(eng)
  eng, i, n_good, n_done, _, te = jax.lax.while_loop(cond, body, (eng, z, z, z, g, te))
  hit = (i >= max_events) & (te <= horizon)
  return eng.replace(cap_hits=eng.cap_hits + hit.astype(jnp.int32)), n_good, n_done


def slo_met(eng: Engine, slo_ttft, slo_tpot) -> jax.Array:
  """[W] finished with TTFT <= slo_ttft and mean time per output token after the first <= slo_tpot."""
  req = eng.sreq
  ttft = eng.ttft - req.arrival
  tpot = (eng.finish - eng.ttft) / jnp.maximum(req.output - 1, 1)
  return (eng.status == DONE) & (ttft <= slo_ttft) & (tpot <= slo_tpot)


def gpu_load(eng: Engine, pred_tokens: jax.Array):
  """Per-GPU load features [N] each: outstanding/waiting/running counts, outstanding prefill
  tokens, predicted outstanding decode tokens (from the noisy predictor, never the true length)."""
  live = (eng.status == WAITING) | (eng.status == RUNNING)
  waiting = eng.status == WAITING
  running = eng.status == RUNNING
  rem_pf = jnp.where(live, eng.pt - eng.pf, 0)
  rem_dec = jnp.where(live, jnp.maximum(pred_tokens - eng.gen, 1), 0)
  cols = _per_gpu_sums(_gpu_onehot(eng, jnp.float32),
                       [live.astype(jnp.int32), waiting.astype(jnp.int32),
                        running.astype(jnp.int32), rem_pf, rem_dec])
  return dict(zip(("outstanding", "waiting", "running", "prefill_tokens", "decode_tokens"), cols))
