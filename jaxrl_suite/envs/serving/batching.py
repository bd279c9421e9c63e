"""`ServingBatch-v0`: when and how much to batch on one GPU, static or continuous batching.

Static mode (`StaticBatching`, request-level batching, FasterTransformer / Orca's baseline):
  decisions happen when the GPU is idle and requests are queued. Action a picks a batch size
  B = batch_levels[a] (B = 0: wait `wait_dt` seconds, or until the next arrival if that is
  sooner). The batch takes the first min(B, queue, KV slots) queued requests (FCFS), reserves
  max-length KV (ceil(max_model_len / 16) blocks) per slot, runs one unchunked prefill and then
  padded decode steps until its longest member finishes (`cost_model.static_batch_time`);
  arrivals wait. Latency is per-token streaming, as a serving engineer measures it (TTFT and TPOT
  are stream metrics; DistServe, vLLM's benchmark): a member's first token leaves after the
  prefill, each decode step streams one more, and a member with o output tokens is complete when
  its last token leaves, after prefill + D(o - 1) (`cost_model.static_decode_time`), not when the
  batch ends. Its slot keeps computing padding until the longest member ends: the GPU is busy
  (and the next batch waits) until then. (Before, members finished at the batch end, which
  charged every short member the longest member's decode in its TPOT.)
Continuous mode (`ContinuousBatching`): the GPU runs the iteration-level engine (`engine.py`) and
  the agent sets its admission cap max_num_seqs = cap_levels[a] every `decision_dt` seconds.
Reward: requests finished within the SLO (TTFT <= slo_ttft and TPOT <= slo_tpot) during the step.
The episode ends when the K requests of the window have finished.

Static observation (float32 [13]): queue / 32, queued prompt tokens / 16384, oldest wait (s),
newest wait (s), all-arrived flag, arrivals in the last second / 16, predicted output-bucket
histogram of the first `max_slots` queued (4, / 32), KV slots / 32, log1p(max queued prompt) / 9,
time to next arrival (s, capped at 10; 10 if none).
Continuous observation (float32 [12]): waiting (arrived) / 32, waiting prompt tokens / 16384,
running / 64, decoding / 64, KV used fraction, oldest wait (s), arrivals in the last second / 16,
current cap / 256, predicted output-bucket histogram of waiting requests (4, / 32).
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.struct as struct
import jax
import jax.numpy as jnp

from jaxrl_suite.envs import arguments
from jaxrl_suite.envs.serving import cost_model, engine, env_base, profiled_cost, traces, workload

STATIC_LEVELS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 28)
CAP_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
STATIC_OBS_DIM = 13
CONT_OBS_DIM = 12


@struct.dataclass
class EnvParams(env_base.ServingParams):
  levels: jax.Array = None        # int32 [A]: batch sizes (static) or caps (continuous)
  wait_dt: float = 0.05           # static: length of one "wait" action
  decision_dt: float = 0.25       # continuous: time between cap decisions
  max_model_len: int = 4096       # static: KV reserved per slot


@struct.dataclass
class StaticState:
  req: engine.Requests
  status: jax.Array   # int32 [K]: 0 = not dispatched, 3 = done
  ttft: jax.Array     # float [K]
  finish: jax.Array   # float [K]
  t: jax.Array
  n_good: jax.Array
  n_batches: jax.Array
  time: jax.Array


@struct.dataclass
class ContState:
  eng: engine.Engine
  req: engine.Requests
  t: jax.Array
  nxt: jax.Array          # next request to enter the engine's window (K when all have)
  n_good: jax.Array
  time: jax.Array


class StaticBatching(env_base.ServingEnv):
  """ServingBatch-v0, static mode (see module docstring)."""

  env_name = "ServingBatch-v0"
  obs_dim = STATIC_OBS_DIM

  def __init__(self, table_size: int = 128, num_levels: int = len(STATIC_LEVELS)):
    super().__init__()
    self.table_size = table_size
    self._num_actions = num_levels

  @property
  def default_params(self) -> EnvParams:
    return default_params("static")

  def max_slots(self, params: EnvParams):
    per_slot = (params.max_model_len + cost_model.BLOCK_TOKENS - 1) // cost_model.BLOCK_TOKENS
    return params.hw.kv_blocks[0] // per_slot

  def reset_env(self, key, params):
    req = workload.sample_requests(key, params.trace, self.table_size,
                                   workload.draw_rate(key, params.rate_scale, params.rate_mults),
                                   params.window_start, params.pred_acc)
    k = self.table_size
    z = jnp.zeros((k,), req.arrival.dtype)
    zi = jnp.zeros((), jnp.int32)
    s = StaticState(req=req, status=jnp.zeros((k,), jnp.int32), ttft=z - 1, finish=z - 1,
                    t=req.arrival[0], n_good=zi, n_batches=zi, time=zi)
    return self.get_obs(s, params), s

  def step_env(self, key, s: StaticState, action, params):
    req, hw = s.req, params.hw
    ft = req.arrival.dtype
    queued = (s.status == 0) & (req.arrival <= s.t)
    b = params.levels[action]
    rank = jnp.cumsum(queued.astype(jnp.int32))
    n_max = jnp.minimum(b, self.max_slots(params))
    mem = queued & (rank <= n_max)
    n = jnp.sum(mem)
    go = n > 0
    p = jnp.where(mem, req.prompt, 0)
    sum_p = jnp.sum(p).astype(ft)
    sum_pairs = jnp.sum(cost_model.prefill_pairs(0.0, p.astype(ft)))   # causal, in float
    max_o = jnp.max(jnp.where(mem, req.output, 1)).astype(ft)
    t_pref, t_tot, t_own = _static_times(hw, n.astype(ft), p.astype(ft), sum_p, sum_pairs,
                                         max_o, (req.output - 1).astype(ft))
    ttft = jnp.where(mem, s.t + t_pref, s.ttft)
    finish = jnp.where(mem, s.t + t_own, s.finish)
    status = jnp.where(mem, engine.DONE, s.status).astype(jnp.int32)
    t_new = jnp.where(go, s.t + t_tot, s.t + params.wait_dt)
    # Skip idle time: with nothing queued, the next decision is at the next arrival.
    pending = status == 0
    next_arr = jnp.min(jnp.where(pending, req.arrival, jnp.inf))
    has_queue = jnp.any(pending & (req.arrival <= t_new))
    t_new = jnp.where(has_queue | ~jnp.any(pending), t_new, jnp.maximum(t_new, next_arr))
    good = mem & (ttft - req.arrival <= params.slo_ttft) & (
        (finish - ttft) / jnp.maximum(req.output - 1, 1) <= params.slo_tpot)
    n_good = jnp.sum(good).astype(jnp.int32)
    s = s.replace(status=status, ttft=ttft, finish=finish, t=t_new, n_good=s.n_good + n_good,
                  n_batches=s.n_batches + go.astype(jnp.int32), time=s.time + 1)
    done = self.is_terminated(s, params)
    return (jax.lax.stop_gradient(self.get_obs(s, params)), jax.lax.stop_gradient(s),
            n_good.astype(jnp.float32), done, {"n_good": s.n_good})

  def is_terminated(self, s, params):
    return jnp.all(s.status == engine.DONE)

  def is_terminal(self, s, params):
    return self.is_terminated(s, params)

  def action_mask(self, s, params):
    return jnp.ones((self._num_actions,), bool)

  def get_obs(self, s: StaticState, params, key=None):
    req, t = s.req, s.t
    f = lambda x: jnp.asarray(x, jnp.float32)
    queued = (s.status == 0) & (req.arrival <= t)
    pending = s.status == 0
    q = jnp.sum(queued)
    oldest = jnp.max(jnp.where(queued, t - req.arrival, 0.0))
    newest = jnp.min(jnp.where(queued, t - req.arrival, jnp.inf))
    newest = jnp.where(q > 0, newest, 0.0)
    all_arr = ~jnp.any(pending & (req.arrival > t))
    recent = jnp.sum((req.arrival <= t) & (req.arrival > t - 1.0))
    slots = self.max_slots(params)
    first = queued & (jnp.cumsum(queued.astype(jnp.int32)) <= slots)
    hist = jnp.sum(jax.nn.one_hot(req.pred, workload.N_BUCKETS) * first[:, None], 0)
    next_arr = jnp.min(jnp.where(pending & (req.arrival > t), req.arrival - t, 10.0))
    return jnp.concatenate([
        jnp.stack([f(q) / 32, f(jnp.sum(jnp.where(queued, req.prompt, 0))) / 16384, f(oldest),
                   f(newest), f(all_arr), f(recent) / 16]),
        f(hist) / 32,
        jnp.stack([f(slots) / 32, jnp.log1p(f(jnp.max(jnp.where(queued, req.prompt, 0)))) / 9,
                   f(jnp.minimum(next_arr, 10.0))])]).astype(jnp.float32)


class ContinuousBatching(env_base.EventEnv):
  """ServingBatch-v0, continuous mode (see module docstring)."""

  env_name = "ServingBatch-v0"
  obs_dim = CONT_OBS_DIM

  def __init__(self, table_size: int = 128, max_events: int = 256,
               num_levels: int = len(CAP_LEVELS), fast_forward: bool = True,
               window: int | None = None):
    super().__init__(table_size, max_events, fast_forward, window)
    self._num_actions = num_levels

  @property
  def default_params(self) -> EnvParams:
    return default_params("continuous")

  def reset_env(self, key, params):
    req = workload.sample_requests(key, params.trace, self.table_size,
                                   workload.draw_rate(key, params.rate_scale, params.rate_mults),
                                   params.window_start, params.pred_acc)
    eng = engine.init_engine(req, 1, params.levels[-1], self.window)
    zi = jnp.zeros((), jnp.int32)
    s = ContState(eng=eng, req=req, t=req.arrival[0], nxt=zi, n_good=zi, time=zi)
    s = self._enter_until(s, s.t)
    return self.get_obs(s, params), s

  def _enter_until(self, s: ContState, horizon) -> ContState:
    """Requests arriving by `horizon` enter the engine (one GPU: they wait there and become
    admissible at their arrival), so the events up to the horizon see every one of them."""
    k = self.table_size

    def cond(c):
      _, i = c
      return (i < k) & (s.req.arrival[jnp.minimum(i, k - 1)] <= horizon)

    def body(c):
      eng, i = c
      return engine.insert(eng, s.req, i, 0), i + 1

    eng, nxt = jax.lax.while_loop(cond, body, (s.eng, s.nxt))
    return s.replace(eng=eng, nxt=nxt)

  def entries(self, s: ContState, params) -> jax.Array:
    """Arrivals by the next horizon that have not entered yet (O(log K) binary search)."""
    return (jnp.searchsorted(s.req.arrival, s.t + params.decision_dt, side="right")
            - s.nxt).astype(jnp.int32)

  def act(self, s: ContState, action, params):
    """First half of a step: sets the cap, lets the arrivals of the step enter; returns
    (state, horizon) (see routing.act)."""
    horizon = s.t + params.decision_dt
    # the decode span ends at the decision if the cap changes, else at the step's first arrival
    # (engine.cut; inf: it runs on)
    cap = params.levels[action]
    k = self.table_size
    first = jnp.where(self.entries(s, params) > 0, s.req.arrival[jnp.minimum(s.nxt, k - 1)],
                      jnp.inf)
    t_cut = jnp.where(cap != s.eng.cap[0], s.t, first)
    eng = engine.cut(s.eng, params.hw, 0, t_cut)
    s = s.replace(eng=eng.replace(cap=eng.cap.at[0].set(cap)))
    return self._enter_until(s, horizon), horizon

  def action_mask(self, s, params):
    return jnp.ones((self._num_actions,), bool)

  def get_obs(self, s: ContState, params, key=None):
    req, t = s.req, s.t
    eng = engine.at_time(s.eng, params.hw, t)   # inside decode spans: as seen at t
    sreq = eng.sreq
    f = lambda x: jnp.asarray(x, jnp.float32)
    waiting = (eng.status == engine.WAITING) & (sreq.arrival <= t)
    running = eng.status == engine.RUNNING
    decoding = running & (eng.pf >= eng.pt)
    oldest = jnp.max(jnp.where(waiting, t - sreq.arrival, 0.0))
    # arrivals in (t - 1, t] of the whole episode: two binary searches, O(log K)
    recent = (jnp.searchsorted(req.arrival, t, side="right")
              - jnp.searchsorted(req.arrival, t - 1.0, side="right"))
    hist = jnp.sum(jax.nn.one_hot(sreq.pred, workload.N_BUCKETS) * waiting[:, None], 0)
    return jnp.concatenate([
        jnp.stack([f(jnp.sum(waiting)) / 32,
                   f(jnp.sum(jnp.where(waiting, sreq.prompt, 0))) / 16384,
                   f(jnp.sum(running)) / 64, f(jnp.sum(decoding)) / 64,
                   f(eng.kv_used[0]) / f(params.hw.kv_blocks[0]), f(oldest), f(recent) / 16,
                   f(eng.cap[0]) / 256]),
        f(hist) / 32]).astype(jnp.float32)


def _static_times(hw, n, p, sum_p, sum_pairs, max_o, own_m):
  """(prefill time, batch time, per-request completion times [K]) of a static batch of n
  requests with prompts p [K] (0 outside the batch): one unchunked prefill, then max_o - 1 padded
  decode steps; request i completes after the prefill and own_m[i] = o_i - 1 of them
  (per-token streaming). Analytic: `cost_model.static_batch_time`; profiled (hw.prof):
  `profiled_cost.static_decode_time` after a prefill of t_ovh + 1e-3 L [G(sum p) +
  sum_i P(p_i, 0)], both with the GPU's ratios (`hw.prof_ratio`). The unchunked prefill may pass
  the profiled 4,096 tokens: G and P continue with the analytic slopes there."""
  t_ovh = hw.t_ovh[0]
  if hw.prof is None:
    t_pref, t_tot = cost_model.static_batch_time(jnp, t_ovh, hw.t_w[0], hw.alpha[0], hw.beta[0],
                                                 hw.gamma[0], n, sum_p, sum_pairs, max_o)
    dec = lambda m: cost_model.static_decode_time(jnp, t_ovh, hw.t_w[0], hw.alpha[0], hw.beta[0],
                                                  n, sum_p, m)
  else:
    r = engine.gpu_ratios(hw, 0)
    attn = jnp.sum(profiled_cost.prefill_ms(jnp, hw.prof, p, jnp.zeros_like(p), r))
    t_pref = profiled_cost.iteration_time(jnp, hw.prof, sum_p, attn, 0.0, 0.0, t_ovh, r=r)
    dec = lambda m: profiled_cost.static_decode_time(jnp, hw.prof, t_ovh, n, sum_p, m, r=r)
    t_tot = t_pref + dec(max_o - 1)
  return t_pref, t_tot, t_pref + dec(own_m)


def default_params(mode: str = "static", gpu: str = "A100-7B",
                   trace: str | traces.Trace = "azure_conv", train_frac: float | None = 0.6,
                   part: str = "early", max_batched_tokens: int = 2048,
                   max_model_len: int | None = None, levels: Sequence[int] | None = None,
                   model: str = cost_model.LLAMA2_7B.name, rate_window: int | None = None,
                   rate_ref: float | None = None, iteration_cost: str = "analytic",
                   **overrides: Any) -> EnvParams:
  """Params of GPU type `gpu` serving `model` (cost_model.spec_for) over (a part of) a trace;
  iteration_cost: "analytic" or "profiled" (Vidur's A100-7B profile tables, scaled to the GPU
  by its analytic constants' ratios: engine.make_hardware);
  max_model_len None = the model's context, at most the GPU's KV capacity (prompts are clipped
  to it: `traces.Trace.clip_stats` reports how much). rate_window = K: every K-request window
  offers the mean rate rate_ref (default: the trace part's own) x rate_scale
  (`workload.trace_arrays`); None: arrivals as recorded."""
  tr = traces.load_shipped(trace) if isinstance(trace, str) else trace
  if train_frac is not None:
    early, late = tr.split(train_frac)
    tr = early if part == "early" else late
  if levels is None:
    levels = STATIC_LEVELS if mode == "static" else CAP_LEVELS
  spec = cost_model.spec_for(gpu, model)
  if max_model_len is None:
    max_model_len = cost_model.max_model_len_of(spec)
  hw = engine.make_hardware([spec], max_batched_tokens, iteration_cost=iteration_cost)
  return EnvParams(hw=hw, trace=workload.trace_arrays(tr, max_model_len, rate_window=rate_window,
                                                     rate_ref=rate_ref),
                   levels=jnp.asarray(levels, jnp.int32), max_model_len=max_model_len,
                   **overrides)


def make_batching(mode: str = "static", table_size: int = 128, max_events: int = 256,
                  fast_forward: bool = True, window: int | None = None,
                  rate_per_window: bool = False, **param_overrides: Any):
  """Factory for `ServingBatch-v0`: returns (env, env_params). mode: "static" | "continuous";
  `window`: engine slots in continuous mode (None = table_size; see env_base.EventEnv);
  rate_per_window: every episode (table_size requests) offers the same mean rate, rate_ref
  (default the trace's) x rate_scale (`workload.trace_arrays`)."""
  # a typo names itself, not a bare TypeError (the registry's list: factory + what overrides reach)
  arguments.check("ServingBatch-v0", param_overrides, arguments.valid_from(
      (make_batching, default_params, EnvParams), exclude=("rate_window", "hw")))
  if mode not in ("static", "continuous"):
    raise ValueError(f"ServingBatch-v0: mode must be 'static' or 'continuous', got {mode!r}")
  params = default_params(mode, rate_window=table_size if rate_per_window else None,
                          **param_overrides)
  n = int(params.levels.shape[0])
  env = (StaticBatching(table_size, n) if mode == "static"
         else ContinuousBatching(table_size, max_events, n, fast_forward, window))
  return env, params
