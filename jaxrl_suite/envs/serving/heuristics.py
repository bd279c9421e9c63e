"""Baseline policies with the learned policy's signature `policy(params, obs, key) -> action`.

`params` is a dict of tunable knobs (arrays), so one harness tunes, vmaps and evaluates them all.
Each family comes with a tuning grid (`*_GRID`); the experiments pick the best grid point on the
training trace with the same evaluation windows for every family.

Batching (ServingBatch-v0, static observation layout in batching.py):
  * static_b:  classic static batching: dispatch B once B requests wait (or when no more arrive).
  * timeout:   dispatch B when B wait or the oldest has waited `timeout` seconds.
  * idle_only: whenever the GPU is idle, dispatch up to B queued requests (never waits).
  * fixed_cap: continuous batching with a constant max_num_seqs (tuned).
Routing (ServingRoute-v0, `routing.split_obs` layout):
  random, round_robin, jsq (fewest outstanding requests), lot (least outstanding tokens,
  prefill + w * predicted decode), power_of_two (JSQ between two random GPUs), sita (size-interval
  task assignment: predicted size above a tuned threshold goes to the fast pool H100/A100, below to
  the L4s, least-outstanding-tokens within a pool), idle_first (fastest idle GPU, else LOT),
  least_work (heterogeneity-aware: expected drain time from each GPU's cost constants).
  cache_aware (needs the prefix-cache observation, `make_routing(cache_blocks=...)`): SGLang's
  router: the GPU whose cache holds the longest prefix of the prompt (ties: the least loaded)
  if that share is at least `thr`, else the least loaded (fewest outstanding); pure load balancing whenever the load is
  imbalanced (busiest - idlest > `bal_abs` and busiest > `bal_rel` x idlest). SGLang's defaults
  are thr 0.3, bal_abs 64, bal_rel 1.5; `cache_grid` tunes thr and bal_abs (64 requests is
  more than this engine window ever holds).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.serving import batching, routing, workload

# ------------------------------------------------------------------------------ batching


def static_b(params, obs, key):
  """params: b_idx (action index of B), b (batch size)."""
  q = jnp.round(obs[..., 0] * 32)
  go = (q >= params["b"]) | (obs[..., 4] > 0.5)
  return jnp.where(go, params["b_idx"], 0).astype(jnp.int32)


def timeout(params, obs, key):
  """params: b_idx, b, timeout (s)."""
  q = jnp.round(obs[..., 0] * 32)
  go = (q >= params["b"]) | (obs[..., 2] >= params["timeout"]) | (obs[..., 4] > 0.5)
  return jnp.where(go, params["b_idx"], 0).astype(jnp.int32)


def idle_only(params, obs, key):
  """params: b_idx (dispatch up to levels[b_idx] whenever idle)."""
  return jnp.broadcast_to(params["b_idx"], obs.shape[:-1]).astype(jnp.int32)


def fixed_cap(params, obs, key):
  """Continuous batching with a constant cap: params: a (cap level index)."""
  return jnp.broadcast_to(params["a"], obs.shape[:-1]).astype(jnp.int32)


def batching_grids(levels=batching.STATIC_LEVELS):
  """Tuning grids {family: list of params} for static mode (levels index 1.. are batch sizes)."""
  idx = list(range(1, len(levels)))
  return {
      "static_b": [{"b_idx": i, "b": levels[i]} for i in idx],
      "timeout": [{"b_idx": i, "b": levels[i], "timeout": to} for i in idx[2::2]
                  for to in (0.25, 1.0)],
      "idle_only": [{"b_idx": i} for i in idx],
  }


def cap_grid(levels=batching.CAP_LEVELS, min_cap: int = 4):
  """Constant max_num_seqs >= min_cap (caps 1 and 2 serialise the GPU: never competitive, and
  their episodes are the longest to simulate)."""
  return {"fixed_cap": [{"a": i} for i in range(len(levels)) if levels[i] >= min_cap]}


# ------------------------------------------------------------------------------ routing



def _views(obs, n_gpus, entity: bool):
  return routing.split_entity_obs(obs) if entity else routing.split_obs(obs, n_gpus)


def make_router(name: str, n_gpus: int, entity: bool = False):
  """Returns policy(params, obs, key) -> GPU index for routing baseline `name`. entity: the
  observation is the entity set (`routing.split_entity_obs`); absent GPU slots are never
  chosen (random and power-of-two draw among the present GPUs)."""

  def lot_score(v, w):
    return v["prefill_tokens"] + w * v["decode_tokens"]

  def req_size(v, w):
    prompt = jnp.expm1(v["log_prompt"])
    pred_tok = v["pred"] @ jnp.asarray(workload.BUCKET_TOKENS, jnp.float32)
    return prompt + w * pred_tok

  def policy(params, obs, key):
    v = _views(obs, n_gpus, entity)
    present = v.get("present")
    lead = v["has_request"].shape

    def _argmin(x):
      if present is not None:
        x = jnp.where(present, x, jnp.inf)
      return jnp.argmin(x, axis=-1).astype(jnp.int32)

    def _draw(k, allowed):
      # uniform over the allowed slots (the flat layout keeps randint: same streams as before)
      return jax.random.categorical(k, jnp.where(allowed, 0.0, -jnp.inf)).astype(jnp.int32)

    if name == "random":
      if present is not None:
        return _draw(key, present)
      return jax.random.randint(key, lead, 0, n_gpus)
    if name == "round_robin":
      return jnp.argmax(v["rr"], -1).astype(jnp.int32)
    if name == "jsq":
      return _argmin(v["outstanding"])
    if name == "lot":
      return _argmin(lot_score(v, params["w"]))
    if name == "power_of_two":
      k1, k2 = jax.random.split(key)
      if present is not None:
        a = _draw(k1, present)
        b = _draw(k2, present & (jnp.arange(n_gpus) != a[..., None]))
        b = jnp.where(jnp.sum(present, -1) > 1, b, a)
      else:
        a = jax.random.randint(k1, lead, 0, n_gpus)
        b = (a + jax.random.randint(k2, lead, 1, n_gpus)) % n_gpus
      qa = jnp.take_along_axis(v["outstanding"], a[..., None], -1)[..., 0]
      qb = jnp.take_along_axis(v["outstanding"], b[..., None], -1)[..., 0]
      return jnp.where(qb < qa, b, a).astype(jnp.int32)
    if name == "sita":
      fast = v["type"][..., 2] < 0.5                       # H100 / A100 pool
      long = req_size(v, params["w"]) > params["threshold"]
      in_pool = jnp.where(long[..., None], fast, ~fast)
      if present is not None:
        # a cluster without one of the pools: the other pool serves everything
        in_pool = in_pool & present
        in_pool = jnp.where(jnp.any(in_pool, -1, keepdims=True), in_pool, present)
      score = lot_score(v, params["w"]) * v["alpha"]
      return _argmin(jnp.where(in_pool, score, jnp.inf))
    if name == "idle_first":
      idle = (v["idle"] > 0.5) if present is None else (v["idle"] > 0.5) & present
      speed_rank = v["t_w"]                                 # lower = faster decode
      any_idle = jnp.any(idle, -1)
      pick_idle = _argmin(jnp.where(idle, speed_rank, jnp.inf))
      return jnp.where(any_idle, pick_idle, _argmin(lot_score(v, params["w"])))
    if name == "least_work":
      # Expected time to drain: prefill tokens at alpha, decode tokens at t_w / (decode batch
      # width); the new request's own work is added on each candidate GPU.
      p_new = jnp.expm1(v["log_prompt"])[..., None]
      d_new = (v["pred"] @ jnp.asarray(workload.BUCKET_TOKENS, jnp.float32))[..., None]
      width = jnp.maximum(v["running"], 1.0) * params["c"] + 1.0
      t = ((v["prefill_tokens"] + p_new) * v["alpha"]
           + (v["decode_tokens"] + d_new) * v["t_w"] / width)
      return _argmin(t)
    if name == "cache_aware":
      if "prefix_match" not in v:
        raise ValueError("cache_aware needs the prefix-cache observation (cache_blocks)")
      q, match = v["outstanding"], v["prefix_match"]
      if present is None:
        hi, lo = jnp.max(q, -1), jnp.min(q, -1)
      else:
        hi, lo = jnp.max(jnp.where(present, q, -jnp.inf), -1), jnp.min(jnp.where(present, q, jnp.inf), -1)
      imbalanced = (hi - lo > params["bal_abs"]) & (hi > params["bal_rel"] * lo)
      # longest match; among equal matches the least loaded (so a prefix every GPU holds, such
      # as a shared system prompt, does not pull traffic to GPU 0)
      best = _argmin(jnp.where(match >= jnp.max(match, -1, keepdims=True), q, jnp.inf))
      hit = jnp.max(match, -1) >= params["thr"]
      return jnp.where(~imbalanced & hit, best, _argmin(q)).astype(jnp.int32)
    raise ValueError(f"unknown router {name!r}")

  return policy


def cache_grid():
  """Tuning grid of the cache-aware router (bal_rel at SGLang's 1.5)."""
  return {"cache_aware": [{"thr": t, "bal_abs": b, "bal_rel": 1.5}
                          for t in (0.1, 0.3, 0.5, 0.8) for b in (4.0, 8.0, 16.0, 64.0)]}


ROUTERS = ("random", "round_robin", "jsq", "lot", "power_of_two", "sita", "idle_first",
           "least_work")


def routing_grids():
  """Tuning grids {router: list of params}; untunable routers get one (empty) point."""
  return {
      "random": [{}],
      "round_robin": [{}],
      "jsq": [{}],
      "power_of_two": [{}],
      "lot": [{"w": w} for w in (0.5, 1.0, 2.0, 4.0)],
      "sita": [{"w": 1.0, "threshold": th} for th in (256., 512., 1024., 1536., 2048., 3072.)],
      "idle_first": [{"w": w} for w in (1.0, 4.0)],
      "least_work": [{"c": c} for c in (0.25, 0.5, 1.0)],
  }


# ------------------------------------------------------------------------------ one-compile switches

ROUTER_KNOBS = {"w": 1.0, "threshold": 1024.0, "c": 0.5}
STATIC_FAMILIES = ("static_b", "timeout", "idle_only")
STATIC_KNOBS = {"b_idx": 1, "b": 1, "timeout": 1.0}


CACHE_ROUTERS = ROUTERS + ("cache_aware",)
CACHE_KNOBS = {"thr": 0.3, "bal_abs": 64.0, "bal_rel": 1.5}   # SGLang's defaults


def routers(cache: bool = False) -> tuple[str, ...]:
  """The routers of `router_switch`: ROUTERS, plus cache_aware (last) with the prefix cache."""
  return CACHE_ROUTERS if cache else ROUTERS


def router_grids(cache: bool = False):
  """`routing_grids`, plus the cache-aware router's `cache_grid` with the prefix cache."""
  return routing_grids() | (cache_grid() if cache else {})


def router_switch(n_gpus: int, entity: bool = False, cache: bool = False):
  """One policy for all routers: params {"which": index into `routers(cache)`, **ROUTER_KNOBS
  (and CACHE_KNOBS with the cache)}, so the whole baseline suite compiles once (entity: on the
  entity-set observation; cache: the observation has the prefix-match feature)."""
  fns = [make_router(r, n_gpus, entity) for r in routers(cache)]

  def policy(params, obs, key):
    branches = [lambda o, k, f=f: f(params, o, k).astype(jnp.int32) for f in fns]
    return jax.lax.switch(params["which"], branches, obs, key)

  return policy


def router_params(name: str, knobs: dict, cache: bool = False) -> dict:
  """Switch params of router `name` (`router_switch(..., cache)`: same keys for every router, so
  grids of all families stack)."""
  d = dict(ROUTER_KNOBS) | (CACHE_KNOBS if cache else {})
  d.update(knobs)
  d["which"] = routers(cache).index(name)
  return {k: jnp.asarray(v, jnp.int32 if k == "which" else jnp.float32) for k, v in d.items()}


def static_switch(params, obs, key):
  """One policy for the static-batching families: params {"which", b_idx, b, timeout}."""
  fns = [static_b, timeout, idle_only]
  branches = [lambda o, k, f=f: f(params, o, k).astype(jnp.int32) for f in fns]
  return jax.lax.switch(params["which"], branches, obs, key)


def static_params(name: str, knobs: dict, levels=batching.STATIC_LEVELS) -> dict:
  """Switch params of a static family; "b" defaults to the real batch size levels[b_idx] (the
  dispatch size of every family, idle-only included)."""
  d = dict(STATIC_KNOBS)
  d.update(knobs)
  if "b" not in knobs:
    d["b"] = levels[int(d["b_idx"])]
  d["which"] = STATIC_FAMILIES.index(name)
  return {k: jnp.asarray(v, jnp.float32 if k == "timeout" else jnp.int32) for k, v in d.items()}


def cap_params(knobs: dict) -> dict:
  """Params of `fixed_cap` with a "which" field (one family) for the universal policy."""
  return {"which": jnp.asarray(0, jnp.int32), "a": jnp.asarray(knobs["a"], jnp.int32)}


# Knobs that a family actually uses (what reports print).
FAMILY_KNOBS = {"static_b": ("b",), "timeout": ("b", "timeout"), "idle_only": ("b",),
                "fixed_cap": ("a",), "lot": ("w",), "sita": ("w", "threshold"),
                "idle_first": ("w",), "least_work": ("c",),
                "cache_aware": ("thr", "bal_abs", "bal_rel")}


def describe(name: str, params: dict) -> str:
  """"B=8, timeout=0.25"-style label of a tuned baseline (only the knobs the family uses)."""
  if name == "fixed_cap":
    return f"max_num_seqs={batching.CAP_LEVELS[int(params['a'])]}"
  label = {"b": "B"}
  return ", ".join(f"{label.get(k, k)}={float(params[k]):g}" for k in FAMILY_KNOBS.get(name, ()))
