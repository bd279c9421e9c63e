"""`ServingRoute-v0`: route each arriving LLM request to one of N heterogeneous GPUs.

Each GPU runs a vLLM-like continuous batcher (`engine.py`) with the same fixed knobs for every
policy (max_num_seqs `cap`, max_num_batched_tokens, watermark). A step = one routing decision:

  * the request `nxt` (arriving at `t`) is assigned to GPU `action`;
  * GPU events run (bounded `lax.while_loop`) until the next arrival (or `drain_dt` later once all
    requests are routed; then actions are ignored and masked to 0);
  * reward = number of requests that finished within the SLO (TTFT <= slo_ttft and
    TPOT <= slo_tpot) during the step, so the return is the episode's goodput count.
The episode ends when all K requests of the window have finished.

Observation (float32 [N * 12 + N + 6]):
  per GPU g (12 each): outstanding requests / 16, waiting / 16, running / 64, outstanding prefill
  tokens / 8192, predicted outstanding decode tokens / 2048, KV used fraction, idle flag,
  alpha * 1e4 (prefill cost per token), t_w * 100 (decode step floor), one-hot of the GPU type (3:
  H100, A100, L4-or-other);
  then a one-hot [N] of (request index mod N) (what round-robin needs), and for the request:
  log1p(prompt) / 9, its predicted output bucket one-hot (4), and a has-request flag;
  with the prefix cache on (`cache_blocks`), then [N] the share of the request's prompt each
  GPU's cache holds as a prefix (engine.prefix_match; what the cache-aware router reads).
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.struct as struct
import jax
import jax.numpy as jnp

from jaxrl_suite.envs.serving import cost_model, engine, env_base, traces, workload

PER_GPU = 12
REQ_FEATS = 6
DEFAULT_CLUSTER = ("H100-7B", "A100-7B", "L4-7B", "L4-7B")


@struct.dataclass
class EnvState:
  eng: engine.Engine
  req: engine.Requests
  t: jax.Array
  nxt: jax.Array          # index of the request to route next (K when all are routed)
  n_good: jax.Array       # finished within SLO so far
  time: jax.Array         # decision steps taken (gymnax truncation)


@struct.dataclass
class EnvParams(env_base.ServingParams):
  cap: Any = 128                  # max_num_seqs: one for every engine or a tuple per GPU
  drain_dt: float = 2.0           # s per step once every request is routed


def _type_onehot(type_id):
  """3-way GPU type code: H100 / A100 / other (L4, ...)."""
  names = list(cost_model.GPU_TYPES)
  h = type_id == names.index("H100-7B")
  a = (type_id == names.index("A100-7B")) | (type_id == names.index("A100x4-70B"))
  return jnp.stack([h, a, ~(h | a)], -1).astype(jnp.float32)


class ServingRoute(env_base.EventEnv):
  """Heterogeneous-GPU request routing; see the module docstring for the MDP."""

  env_name = "ServingRoute-v0"
  obs_high = 10.0

  def __init__(self, n_gpus: int = 4, table_size: int = 128, max_events: int = 256,
               fast_forward: bool = True, window: int | None = None, cache_blocks=None):
    super().__init__(table_size, max_events, fast_forward, window)
    self.n_gpus = n_gpus
    self.cache_blocks = (None if cache_blocks is None else tuple(int(c) for c in cache_blocks)
                         if isinstance(cache_blocks, (tuple, list)) else int(cache_blocks))

  @property
  def num_actions(self) -> int:
    return self.n_gpus

  @property
  def default_params(self) -> EnvParams:
    return default_params()

  @property
  def obs_dim(self) -> int:
    return (self.n_gpus * PER_GPU + self.n_gpus + REQ_FEATS
            + (self.n_gpus if self.cache_blocks is not None else 0))

  def reset_env(self, key, params: EnvParams):
    req = workload.sample_requests(key, params.trace, self.table_size,
                                   workload.draw_rate(key, params.rate_scale, params.rate_mults),
                                   params.window_start, params.pred_acc)
    eng = engine.init_engine(req, self.n_gpus, params.cap, self.window, self.cache_blocks)
    state = EnvState(eng=eng, req=req, t=req.arrival[0], nxt=jnp.zeros((), jnp.int32),
                     n_good=jnp.zeros((), jnp.int32), time=jnp.zeros((), jnp.int32))
    return self.get_obs(state, params), state

  def act(self, state: EnvState, action, params: EnvParams):
    """First half of a step: routes request `nxt` to GPU `action`; returns (state, horizon).

    `step_env` = `act`, then the GPU events up to the horizon (`engine.run_until`), then
    `finish`; `evaluate.rollout` interleaves the same three pieces lane by lane instead.
    """
    k = self.table_size
    i = state.nxt
    has = i < k
    ic = jnp.minimum(i, k - 1)
    # only the receiving GPU's decode span ends at the arrival; the others run on (engine.cut)
    eng = engine.cut(state.eng, params.hw, action, jnp.where(has, state.t, jnp.inf))
    eng = engine.insert(eng, state.req, ic, action, has)
    nxt = i + has.astype(jnp.int32)
    horizon = jnp.where(nxt < k, state.req.arrival[jnp.minimum(nxt, k - 1)],
                        state.t + params.drain_dt)
    return state.replace(eng=eng, nxt=nxt), horizon

  def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
    has = state.nxt < self.table_size
    return jnp.where(has, True, jnp.arange(self.n_gpus) == 0)

  def get_obs(self, state: EnvState, params: EnvParams, key=None) -> jax.Array:
    n, k = self.n_gpus, self.table_size
    req, hw = state.req, params.hw
    eng = engine.at_time(state.eng, hw, state.t)   # inside decode spans: as seen at t
    pred_tok = jnp.asarray(workload.BUCKET_TOKENS)[eng.sreq.pred]
    load = engine.gpu_load(eng, pred_tok)
    f = lambda x: x.astype(jnp.float32)
    per = jnp.concatenate([
        jnp.stack([f(load["outstanding"]) / 16, f(load["waiting"]) / 16,
                   f(load["running"]) / 64, f(load["prefill_tokens"]) / 8192,
                   f(load["decode_tokens"]) / 2048, f(eng.kv_used) / f(hw.kv_blocks),
                   f(load["outstanding"] == 0), f(hw.alpha) * 1e4, f(hw.t_w) * 100], -1),
        _type_onehot(hw.type_id)], -1)
    i = jnp.minimum(state.nxt, k - 1)
    has = state.nxt < k
    rr = jax.nn.one_hot(state.nxt % n, n)
    reqf = jnp.concatenate([
        jnp.log1p(f(req.prompt[i]))[None] / 9,
        jax.nn.one_hot(req.pred[i], workload.N_BUCKETS), f(has)[None]]) * f(has)
    parts = [per.reshape(-1), rr, reqf]
    if self.cache_blocks is not None:
      parts.append(engine.prefix_match(eng, req.hashes[i], req.prompt[i]) * f(has))
    return jnp.concatenate(parts).astype(jnp.float32)


def split_obs(obs: jax.Array, n_gpus: int) -> dict[str, jax.Array]:
  """Named views of a routing observation (used by the heuristics); "prefix_match" [N] only if
  the observation has the prefix-cache features."""
  per = obs[..., :n_gpus * PER_GPU].reshape(obs.shape[:-1] + (n_gpus, PER_GPU))
  rr = obs[..., n_gpus * PER_GPU:n_gpus * PER_GPU + n_gpus]
  base = n_gpus * PER_GPU + n_gpus
  r = obs[..., base:base + REQ_FEATS]
  extra = {}
  if obs.shape[-1] == base + REQ_FEATS + n_gpus:
    extra["prefix_match"] = obs[..., base + REQ_FEATS:]
  return extra | {"outstanding": per[..., 0] * 16, "waiting": per[..., 1] * 16, "running": per[..., 2] * 64,
          "prefill_tokens": per[..., 3] * 8192, "decode_tokens": per[..., 4] * 2048,
          "kv_frac": per[..., 5], "idle": per[..., 6], "alpha": per[..., 7] / 1e4,
          "t_w": per[..., 8] / 100, "type": per[..., 9:12], "rr": rr,
          "log_prompt": r[..., 0] * 9, "pred": r[..., 1:1 + workload.N_BUCKETS],
          "has_request": r[..., -1]}


def default_params(cluster: Sequence[str] = DEFAULT_CLUSTER, trace: str | traces.Trace =
                   "azure_conv", train_frac: float | None = 0.6, part: str = "early",
                   max_batched_tokens: int = 2048, max_model_len: int = 4096,
                   prefix_cache: bool = False, **overrides: Any) -> EnvParams:
  """Params for a cluster of GPU types over (the early part of) a trace (with its prompt
  block ids if `prefix_cache`)."""
  tr = traces.load_shipped(trace) if isinstance(trace, str) else trace
  if train_frac is not None:
    early, late = tr.split(train_frac)
    tr = early if part == "early" else late
  hw = engine.make_hardware([cost_model.GPU_TYPES[c] for c in cluster], max_batched_tokens)
  return EnvParams(hw=hw, trace=workload.trace_arrays(tr, max_model_len, hashes=prefix_cache),
                   **overrides)


def default_cache_blocks(cluster: Sequence[str]) -> tuple[int, ...]:
  """Prefix-cache entries (512-token blocks) per GPU: as many as its KV capacity holds."""
  return tuple(max(1, cost_model.GPU_TYPES[c].kv_blocks * cost_model.BLOCK_TOKENS
                   // engine.CACHE_BLOCK) for c in cluster)


def engine_settings(cluster: Sequence[str], mode: str, cap: int, max_batched_tokens: int,
                    slo_tpot: float) -> dict[str, Any]:
  """{"cap", "max_batched_tokens"} for `default_params`. mode "uniform": the given values on
  every GPU; "per_gpu": each GPU type's vLLM defaults with the token budget cut so that an
  iteration fits the TPOT SLO (`cost_model.engine_settings`)."""
  if mode == "uniform":
    return {"cap": cap, "max_batched_tokens": max_batched_tokens}
  if mode != "per_gpu":
    raise ValueError(f"engine settings mode must be 'uniform' or 'per_gpu', got {mode!r}")
  s = [cost_model.engine_settings(cost_model.GPU_TYPES[c], slo_tpot) for c in cluster]
  return {"cap": tuple(x.max_num_seqs for x in s),
          "max_batched_tokens": tuple(x.max_num_batched_tokens for x in s)}


def make_routing(n_gpus: int | None = None, table_size: int = 128, max_events: int = 256,
                 cluster: Sequence[str] = DEFAULT_CLUSTER, fast_forward: bool = True,
                 window: int | None = None, cache_blocks=None, **param_overrides: Any):
  """Factory for `ServingRoute-v0`: returns (env, env_params). `window`: engine slots (None =
  table_size; see env_base.EventEnv). cache_blocks: prefix cache entries per GPU (an int, a
  tuple, "auto" = `default_cache_blocks`, None = no cache; needs a trace with hash_ids)."""
  if n_gpus is not None and n_gpus != len(cluster):
    raise ValueError(f"n_gpus={n_gpus} does not match cluster {cluster}")
  if cache_blocks == "auto":
    cache_blocks = default_cache_blocks(cluster)
  env = ServingRoute(len(cluster), table_size, max_events, fast_forward, window, cache_blocks)
  return env, default_params(cluster=cluster, prefix_cache=cache_blocks is not None,
                             **param_overrides)
