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

Entity-set observation (`entity_obs=True`, float32 [G, ENT_FEATS (+1 with the cache)]): one
token per GPU slot, G = `max_gpus` slots of which the cluster's N GPUs are present
(`params.present`, a [G] mask; the rest are padding with all-zero tokens that never receive a
request):
  token g = [present, the 9 load / speed features above, type one-hot (3), round-robin turn
             (g == nxt mod N), the request's 6 features (the same in every token, so a
             per-entity score sees the request it places), (prefix match of g)] * present_g.
The cluster is data (`params.hw`, `params.present`, `params.cap`), not a Python constant: one
compiled env and ONE policy serve every cluster of up to G GPUs. Permuting the GPUs permutes the
tokens (all but the round-robin turn, which is an index by definition). `FamilyRoute` wraps it
so that every episode draws its cluster (and rate) from a family inside the jitted program.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import environment, spaces

from jaxrl_suite.envs import arguments
from jaxrl_suite.envs.serving import (cost_model, engine, env_base, profiled_cost, traces,
                                      workload)

PER_GPU = 12
REQ_FEATS = 6
ENT_FEATS = 1 + PER_GPU + 1 + REQ_FEATS   # present, per-GPU, round-robin turn, request
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
  present: Any = None             # bool [G]: GPU slots of the cluster (None: all present)
  # int [G]: prefix-cache entries each GPU slot may hold (<= the env's cache_blocks, the
  # row width); None: the env's cache_blocks. Data, so one env serves clusters whose GPU
  # types (and KV capacities) sit in different slots.
  cache_caps: Any = None


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
               fast_forward: bool = True, window: int | None = None, cache_blocks=None,
               entity_obs: bool = False):
    super().__init__(table_size, max_events, fast_forward, window)
    self.n_gpus = n_gpus          # GPU slots (with entity_obs: max_gpus, some may be absent)
    self.entity_obs = entity_obs
    self.cache_blocks = (None if cache_blocks is None else tuple(int(c) for c in cache_blocks)
                         if isinstance(cache_blocks, (tuple, list)) else int(cache_blocks))

  @property
  def num_actions(self) -> int:
    return self.n_gpus

  @property
  def default_params(self) -> EnvParams:
    return default_params()

  @property
  def ent_feats(self) -> int:
    return ENT_FEATS + (self.cache_blocks is not None)

  @property
  def obs_dim(self) -> int:
    if self.entity_obs:
      return self.n_gpus * self.ent_feats
    return (self.n_gpus * PER_GPU + self.n_gpus + REQ_FEATS
            + (self.n_gpus if self.cache_blocks is not None else 0))

  def observation_space(self, params=None):
    if not self.entity_obs:
      return super().observation_space(params)
    return spaces.Box(self.obs_low, self.obs_high, (self.n_gpus, self.ent_feats), jnp.float32)

  def reset_env(self, key, params: EnvParams):
    req = workload.sample_requests(key, params.trace, self.table_size,
                                   workload.draw_rate(key, params.rate_scale, params.rate_mults),
                                   params.window_start, params.pred_acc)
    eng = engine.init_engine(req, self.n_gpus, params.cap, self.window, self.cache_blocks,
                             params.cache_caps)
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
    return jnp.where(has, present_of(params, self.n_gpus), jnp.arange(self.n_gpus) == 0)

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
    present = present_of(params, n)
    n_present = jnp.maximum(jnp.sum(present.astype(jnp.int32)), 1)
    rr = jax.nn.one_hot(state.nxt % (n_present if self.entity_obs else n), n)
    reqf = jnp.concatenate([
        jnp.log1p(f(req.prompt[i]))[None] / 9,
        jax.nn.one_hot(req.pred[i], workload.N_BUCKETS), f(has)[None]]) * f(has)
    match = (engine.prefix_match(eng, req.hashes[i], req.prompt[i]) * f(has)
             if self.cache_blocks is not None else None)
    if self.entity_obs:
      cols = [f(present)[:, None], per, rr[:, None], jnp.broadcast_to(reqf, (n, REQ_FEATS))]
      if match is not None:
        cols.append(match[:, None])
      return (jnp.concatenate(cols, -1) * f(present)[:, None]).astype(jnp.float32)
    parts = [per.reshape(-1), rr, reqf]
    if match is not None:
      parts.append(match)
    return jnp.concatenate(parts).astype(jnp.float32)


def present_of(params, n_slots: int) -> jax.Array:
  """bool [G] GPU slots of the cluster (all, unless `params.present` says otherwise)."""
  if params.present is None:
    return jnp.ones((n_slots,), bool)
  return jnp.asarray(params.present, bool)


def split_entity_obs(obs: jax.Array) -> dict[str, jax.Array]:
  """The `split_obs` views of an entity observation [..., G, F], plus "present" [..., G]; the
  request's features come from the tokens (absent tokens are zero, so the max over tokens)."""
  x = obs
  req = jnp.max(x[..., 2 + PER_GPU:2 + PER_GPU + REQ_FEATS], axis=-2)
  per = x[..., 1:1 + PER_GPU]
  extra = {"prefix_match": x[..., ENT_FEATS]} if x.shape[-1] > ENT_FEATS else {}
  return extra | _views(per, x[..., 1 + PER_GPU], req) | {"present": x[..., 0] > 0.5}


def _views(per, rr, r) -> dict[str, jax.Array]:
  return {"outstanding": per[..., 0] * 16, "waiting": per[..., 1] * 16,
          "running": per[..., 2] * 64, "prefill_tokens": per[..., 3] * 8192,
          "decode_tokens": per[..., 4] * 2048, "kv_frac": per[..., 5], "idle": per[..., 6],
          "alpha": per[..., 7] / 1e4, "t_w": per[..., 8] / 100, "type": per[..., 9:12],
          "rr": rr, "log_prompt": r[..., 0] * 9, "pred": r[..., 1:1 + workload.N_BUCKETS],
          "has_request": r[..., -1]}


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
  return extra | _views(per, rr, r)


def default_params(cluster: Sequence[str] = DEFAULT_CLUSTER, trace: str | traces.Trace =
                   "azure_conv", train_frac: float | None = 0.6, part: str = "early",
                   max_batched_tokens: int = 2048, max_model_len: int = 4096,
                   prefix_cache: bool = False, max_gpus: int | None = None,
                   rate_window: int | None = None, rate_ref: float | None = None,
                   iteration_cost: str = "analytic", **overrides: Any) -> EnvParams:
  """Params for a cluster of GPU types over (the early part of) a trace (with its prompt
  block ids if `prefix_cache`). max_gpus: pad the cluster to that many GPU slots (entity
  observation): padding slots repeat the last GPU type, are absent (`present` False) and never
  receive a request; per-GPU `cap` / `max_batched_tokens` tuples are padded the same way.
  rate_window = K: every K-request window offers the mean rate rate_ref (default: the trace
  part's own) x rate_scale (`workload.trace_arrays`); None: arrivals as recorded.
  iteration_cost: "analytic" or "profiled" (Vidur's A100-7B profile tables, scaled to each GPU
  type by its analytic constants' ratios: engine.make_hardware)."""
  tr = traces.load_shipped(trace) if isinstance(trace, str) else trace
  if train_frac is not None:
    early, late = tr.split(train_frac)
    tr = early if part == "early" else late
  n = len(cluster)
  g = n if max_gpus is None else int(max_gpus)
  if g < n:
    raise ValueError(f"max_gpus={g} is smaller than the cluster {tuple(cluster)}")
  pad = lambda x: (tuple(x) + (tuple(x)[-1],) * (g - n)) if isinstance(x, (tuple, list)) else x
  names = pad(tuple(cluster))
  hw = engine.make_hardware([cost_model.GPU_TYPES[c] for c in names], pad(max_batched_tokens),
                            iteration_cost=iteration_cost)
  if "cap" in overrides:
    overrides["cap"] = pad(overrides["cap"])
  if max_gpus is not None:
    overrides["present"] = jnp.arange(g) < n
  ta = workload.trace_arrays(tr, max_model_len, hashes=prefix_cache, rate_window=rate_window,
                            rate_ref=rate_ref)
  return EnvParams(hw=hw, trace=ta, **overrides)


def cluster_specs(cluster: Sequence[str], model: str) -> tuple[str, ...]:
  """GPU spec names (cost_model.GPU_TYPES keys) of a cluster of generic GPU types ("H100-7B",
  ...) serving `model` (cost_model.spec_for): "H100-8B" etc. for Llama-3.1-8B."""
  return tuple(cost_model.spec_for(g, model).name for g in cluster)


def context_of(specs: Sequence[str], watermark_frac: float = 0.01) -> int:
  """max_model_len a router over these GPU specs can accept: the model's context, capped at the
  smallest KV capacity left above the admission watermark (every request must fit on every GPU
  the router may pick: a request needing the whole KV of an L4 is never admitted, since the
  engine keeps `watermark_frac` of the blocks free (engine.make_hardware), and its GPU then
  spins max_events idle events per step to the episode's step cap)."""
  def fits(spec):
    free = spec.kv_blocks - int(watermark_frac * spec.kv_blocks)
    return min(cost_model.max_model_len_of(spec), free * cost_model.BLOCK_TOKENS)
  return min(fits(cost_model.GPU_TYPES[s]) for s in specs)


def default_cache_blocks(cluster: Sequence[str]) -> tuple[int, ...]:
  """Prefix-cache entries (512-token blocks) per GPU: as many as its KV capacity holds."""
  return tuple(max(1, cost_model.GPU_TYPES[c].kv_blocks * cost_model.BLOCK_TOKENS
                   // engine.CACHE_BLOCK) for c in cluster)


def engine_settings(cluster: Sequence[str], mode: str, cap: int, max_batched_tokens: int,
                    slo_tpot: float, iteration_cost: str = "analytic") -> dict[str, Any]:
  """{"cap", "max_batched_tokens"} for `default_params`. mode "uniform": the given values on
  every GPU; "per_gpu": each GPU type's vLLM defaults with the token budget cut so that the worst
  iteration of the env's cost model (`iteration_cost`: "analytic" or "profiled") fits the TPOT
  SLO (`cost_model.engine_settings`)."""
  if mode == "uniform":
    return {"cap": cap, "max_batched_tokens": max_batched_tokens}
  if mode != "per_gpu":
    raise ValueError(f"engine settings mode must be 'uniform' or 'per_gpu', got {mode!r}")
  if iteration_cost not in engine.ITERATION_COSTS:
    raise ValueError(f"iteration_cost must be one of {engine.ITERATION_COSTS}, got "
                     f"{iteration_cost!r}")
  worst = profiled_cost.worst_iteration_time if iteration_cost == "profiled" else None
  s = [cost_model.engine_settings(cost_model.GPU_TYPES[c], slo_tpot, worst) for c in cluster]
  return {"cap": tuple(x.max_num_seqs for x in s),
          "max_batched_tokens": tuple(x.max_num_batched_tokens for x in s)}


def make_routing(n_gpus: int | None = None, table_size: int = 128, max_events: int = 256,
                 cluster: Sequence[str] = DEFAULT_CLUSTER, fast_forward: bool = True,
                 window: int | None = None, cache_blocks=None, entity_obs: bool = False,
                 max_gpus: int | None = None, rate_per_window: bool = False,
                 **param_overrides: Any):
  """Factory for `ServingRoute-v0`: returns (env, env_params). `window`: engine slots (None =
  table_size; see env_base.EventEnv). cache_blocks: prefix cache entries per GPU (an int, a
  tuple, "auto" = `default_cache_blocks`, None = no cache; needs a trace with hash_ids).
  entity_obs: the entity-set observation over `max_gpus` GPU slots (default: the cluster's
  size); the old flat observation otherwise (what the measured results used).
  rate_per_window: every episode (table_size requests) offers the same mean rate, rate_ref
  (default the trace part's) x rate_scale (`workload.trace_arrays`)."""
  # a typo names itself, not a bare TypeError (the registry's list: factory + what overrides reach)
  arguments.check("ServingRoute-v0", param_overrides, arguments.valid_from(
      (make_routing, default_params, EnvParams), exclude=("prefix_cache", "rate_window", "hw")))
  if n_gpus is not None and n_gpus != len(cluster):
    raise ValueError(f"ServingRoute-v0: n_gpus={n_gpus} does not match cluster {cluster}; "
                     "leave n_gpus out (the cluster sets it) or pass a cluster of that size")
  if max_gpus is not None and not entity_obs:
    raise ValueError("ServingRoute-v0: max_gpus (padded GPU slots) needs entity_obs=True")
  if cache_blocks == "auto":
    cache_blocks = default_cache_blocks(cluster)
  slots = int(max_gpus) if max_gpus is not None else len(cluster)
  if isinstance(cache_blocks, (tuple, list)):
    # one per GPU of the cluster (padding slots repeat the last) or already one per slot
    cache_blocks = tuple(cache_blocks) + (tuple(cache_blocks)[-1],) * (slots - len(cache_blocks))
  env = ServingRoute(slots, table_size, max_events, fast_forward, window, cache_blocks,
                     entity_obs)
  return env, default_params(cluster=cluster, prefix_cache=cache_blocks is not None,
                             max_gpus=max_gpus if entity_obs else None,
                             rate_window=table_size if rate_per_window else None,
                             **param_overrides)


# ------------------------------------------------------------------------------ cluster family

@struct.dataclass
class FamilyParams:
  """A family of C clusters on one entity env: `base` (trace, SLO, ... and cluster 0's
  hardware), and per cluster c the hardware `hw` [C, G], `present` [C, G], `cap` [C, G] and the
  rate scale `scale` [C] (each cluster's own capacity, so a load means the same everywhere);
  with the prefix cache, its entries per slot `cache_caps` [C, G] (None: the env's)."""
  base: EnvParams
  hw: engine.Hardware
  present: jax.Array
  cap: jax.Array
  scale: jax.Array
  cache_caps: Any = None


def stack_family(params: Sequence[EnvParams], scales: Sequence[float]) -> FamilyParams:
  """FamilyParams of entity-env params of C clusters (same trace and slot count G)."""
  g = int(np.asarray(params[0].hw.t_w).shape[0])
  st = lambda xs: jnp.stack([jnp.asarray(x) for x in xs])
  return FamilyParams(
      base=params[0], hw=jax.tree.map(lambda *x: st(x), *[p.hw for p in params]),
      present=st([present_of(p, g) for p in params]),
      cap=st([jnp.broadcast_to(jnp.asarray(p.cap, jnp.int32), (g,)) for p in params]),
      scale=jnp.asarray(scales, jnp.float32),
      cache_caps=None if params[0].cache_caps is None else st(
          [jnp.asarray(p.cache_caps, jnp.int32) for p in params]))


def cluster_params(fp: FamilyParams, c) -> EnvParams:
  """The env params of cluster c of the family (c may be traced)."""
  out = fp.base.replace(hw=jax.tree.map(lambda x: x[c], fp.hw), present=fp.present[c],
                        cap=fp.cap[c], rate_scale=fp.scale[c])
  return out if fp.cache_caps is None else out.replace(cache_caps=fp.cache_caps[c])


@struct.dataclass
class FamilyState:
  inner: EnvState
  cluster: jax.Array     # int32 [], the episode's cluster in the family
  time: jax.Array


class FamilyRoute(environment.Environment):
  """`ServingRoute` (entity observation) whose every episode draws a cluster of the family
  (uniformly, inside the jitted program) and a load (`base.rate_mults`): what RL trains on so
  that one policy serves any cluster of the family."""

  def __init__(self, inner: ServingRoute):
    super().__init__()
    if not inner.entity_obs:
      raise ValueError("FamilyRoute needs the entity observation (entity_obs=True)")
    self.inner = inner

  @property
  def name(self) -> str:
    return "ServingRouteFamily-v0"

  @property
  def num_actions(self) -> int:
    return self.inner.num_actions

  def action_space(self, params=None):
    return self.inner.action_space(None)

  def observation_space(self, params=None):
    return self.inner.observation_space(None)

  def reset_env(self, key, params: FamilyParams):
    k_c, k_r = jax.random.split(key)
    c = jax.random.randint(k_c, (), 0, params.scale.shape[0])
    obs, st = self.inner.reset_env(k_r, cluster_params(params, c))
    return obs, FamilyState(st, c, st.time)

  def step_env(self, key, state: FamilyState, action, params: FamilyParams):
    obs, st, r, done, info = self.inner.step_env(key, state.inner, action,
                                                 cluster_params(params, state.cluster))
    return obs, FamilyState(st, state.cluster, st.time), r, done, info

  def action_mask(self, state: FamilyState, params: FamilyParams) -> jax.Array:
    return self.inner.action_mask(state.inner, cluster_params(params, state.cluster))

  def is_truncated(self, state: FamilyState, params: FamilyParams) -> jax.Array:
    return state.time >= params.base.max_steps_in_episode
