"""One evaluation harness for heuristics and learned policies, plus serving metrics.

`rollout(env, params, policy, pparams, key, max_steps)` runs one episode (no auto-reset) with a
bounded `lax.while_loop` and returns the final env state; it vmaps over windows/seeds/params.
`metrics(...)` turns a final state into throughput, goodput at the SLO, TTFT/E2E percentiles and
the segregation index (numpy, per episode). Ratios are of throughputs/goodputs, never of returns.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import cost_model, engine, env_base

LONG_OUTPUT = 256  # "long" request for the segregation index: true output > 256 tokens


def rollout(env, params, policy: Callable, pparams: Any, key, max_steps: int):
  """Runs one episode of `policy(pparams, obs, key)`; returns (final_state, steps, return).

  Event-driven envs (`env_base.EventEnv`: ServingRoute-v0 and continuous ServingBatch-v0)
  go through `rollout_events`, which gives the same final state as stepping `step_env`.
  """
  if isinstance(env, env_base.EventEnv):
    return rollout_events(env, params, policy, pparams, key, max_steps)
  k_reset, k_loop = jax.random.split(key)
  obs, state = env.reset_env(k_reset, params)

  def cond(c):
    _, state, i, _, done, _ = c
    return (i < max_steps) & ~done

  def body(c):
    obs, state, i, ret, _, key = c
    key, k_a, k_s = jax.random.split(key, 3)
    a = policy(pparams, obs, k_a)
    if hasattr(env, "action_mask"):
      # Heuristics may pick a masked action in drain steps; the env ignores it there anyway.
      a = jnp.where(env.action_mask(state, params)[a], a, 0)
    obs, state, r, done, _ = env.step_env(k_s, state, a, params)
    return obs, state, i + 1, ret + r, done, key

  init = (obs, state, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32),
          jnp.zeros((), bool), k_loop)
  _, state, steps, ret, _, _ = jax.lax.while_loop(cond, body, init)
  return state, steps, ret


def rollout_events(env, params, policy: Callable, pparams: Any, key, max_steps: int):
  """`rollout` for event-driven envs with ONE flat loop: an iteration processes one GPU event
  (if one is pending before the horizon) and then, when the current decision step has no event
  left, the end of that step plus the next decision.

  Why: `step_env` runs its events in an inner `lax.while_loop`; under `vmap` every inner loop
  runs as long as the busiest lane's, so a batch of episodes costs sum_steps max_lanes(events).
  Here it costs about max_lanes(events + decisions without an event), which is close to the mean
  lane for episodes of equal size. Events, decisions and PRNG keys come in the same order as in
  `step_env`, so the final state is identical (tests/envs/serving/test_serving_reference.py).

  Windowed envs (`env.windowed`: the engine table holds fewer slots than the episode has
  requests) run that loop in rounds: a round stops before a decision whose entries would not
  fit in the table; between rounds the table is compacted and the finished requests' records
  go to the per-request results [K] (engine.py). The [K] arrays (workload and results) are not
  carried by the event loop, so an event costs O(slots) whatever the episode length; a round
  costs O(K) once, and there are about K / W rounds.
  """
  k_reset, k_loop = jax.random.split(key)
  obs, state = env.reset_env(k_reset, params)
  z = jnp.zeros((), jnp.int32)
  f_false = jnp.zeros((), bool)

  def decide(obs, state, key):
    key, k_a, _ = jax.random.split(key, 3)
    a = policy(pparams, obs, k_a)
    a = jnp.where(env.action_mask(state, params)[a], a, 0)
    state, horizon = env.act(state, a, params)
    return state, horizon, key

  def keep_if(c, old, new):
    return jax.tree.map(lambda x, y: jnp.where(c, x, y), old, new)

  # carry: (state, obs, horizon, n_ev, step_good, steps, ret, done, pending, key)
  def on_event(c):
    state, obs, horizon, n_ev, step_good, steps, ret, done, pending, key, g, te = c
    state, good = env.process_event(state, g, te, horizon, params)
    return state, obs, horizon, n_ev + 1, step_good + good, steps, ret, done, pending, key

  def on_step_end(c):
    state, obs, horizon, n_ev, step_good, steps, ret, done, pending, key, g, te = c
    hit = (n_ev >= env.max_events) & (te <= horizon)     # as in engine.run_until
    state = state.replace(eng=state.eng.replace(
        cap_hits=state.eng.cap_hits + hit.astype(jnp.int32)))
    obs, state, r, done, _ = env.finish(state, horizon, step_good, params)
    steps = steps + 1
    done = done | (steps >= max_steps)
    # a decision whose entries do not fit waits for the next round (after compaction)
    pending = ~done & ~env.room(state, params) if env.windowed else f_false
    nstate, nhorizon, nkey = decide(obs, state, key)
    state, horizon, key = keep_if(done | pending, (state, horizon, key),
                                  (nstate, nhorizon, nkey))
    return state, obs, horizon, z, z, steps, ret + r, done, pending, key

  def pending_event(c):
    horizon, n_ev, te = c[2], c[3], c[-1]
    return (n_ev < env.max_events) & (te <= horizon)

  def with_next(out):
    return (*out, *engine.next_event(out[0].eng))

  def event_loop(c, big):
    """Events and decisions until the episode ends or a decision is pending; `big` holds the
    [K] state fields (workload, results), constant in this loop and so not carried by it."""
    def full(st):
      return st.replace(req=big[0], eng=st.eng.replace(res=big[1]))

    def light(st):
      return st.replace(req=None, eng=st.eng.replace(res=None))

    def body(c):
      c = (full(c[0]),) + c[1:]
      # An event if one is pending, then the step's end and next decision if none is left: a
      # step with one event costs one iteration, not two (under vmap both branches run anyway).
      c = with_next(jax.lax.cond(pending_event(c), on_event, lambda c: c[:10], c))
      c = with_next(jax.lax.cond(pending_event(c), lambda c: c[:10], on_step_end, c))
      return (light(c[0]),) + c[1:]

    c = (light(c[0]),) + c[1:]
    c = jax.lax.while_loop(lambda c: ~c[7] & ~c[8], body, c)
    return (full(c[0]),) + c[1:]

  state, horizon, key = decide(obs, state, k_loop)
  init = with_next((state, obs, horizon, z, z, z, jnp.zeros((), jnp.float32), f_false, f_false,
                    key))
  if not env.windowed:
    out = event_loop(init, (state.req, state.eng.res))
    return out[0], out[5], out[6]

  def round_body(c):
    state, obs, horizon, n_ev, step_good, steps, ret, done, pending, key, _, _ = c
    eng, (rid, rec) = engine.compact(state.eng)
    state = state.replace(eng=engine.apply_records(eng, rid, rec))
    nstate, nhorizon, nkey = decide(obs, state, key)
    state, horizon, key = keep_if(pending, (nstate, nhorizon, nkey), (state, horizon, key))
    c = with_next((state, obs, horizon, n_ev, step_good, steps, ret, done, f_false, key))
    return event_loop(c, (state.req, state.eng.res))

  out = jax.lax.while_loop(lambda c: ~c[7], round_body, event_loop(init, (state.req,
                                                                          state.eng.res)))
  return out[0], out[5], out[6]


def episode_arrays(state, as_numpy: bool = True) -> dict[str, Any]:
  """Per-request arrays of a final state (static or engine-based), leading batch dims kept
  (numpy arrays, or jax arrays inside a jitted function with as_numpy=False)."""
  req = state.req
  if hasattr(state, "eng"):
    e = engine.results(state.eng)
    d = {"status": e.status, "ttft": e.ttft, "finish": e.finish, "gpu": e.gpu, "npre": e.npre}
    if e.cached is not None:
      d["cached"] = e.cached
  else:
    d = {"status": state.status, "ttft": state.ttft, "finish": state.finish,
         "gpu": jnp.zeros_like(state.status), "npre": jnp.zeros_like(state.status)}
  d.update(arrival=req.arrival, prompt=req.prompt, output=req.output)
  return {k: np.asarray(v) for k, v in d.items()} if as_numpy else d


def metrics(arr: dict[str, np.ndarray], slo_ttft: float, slo_tpot: float,
            type_id: np.ndarray | None = None, warmup: int = 0) -> dict[str, float]:
  """Serving metrics of ONE episode (arrays [K]); the first `warmup` requests are excluded
  (steady-state replays: they met a cluster that was still filling up).

  All rates are per second of the offered window [t0, t1], t0 = arrival of the first request
  measured (after the warm-up), t1 = the last arrival, W = t1 - t0:
    goodput    = measured requests finished with TTFT <= slo_ttft and TPOT <= slo_tpot / W
                 (DistServe; = arrival rate x SLO attainment),
    throughput = completions (of any request of the episode) at times in [t0, t1] / W,
    token_throughput = the output tokens of those completions / W:
  the departure rate while requests are offered, which is the arrival rate when the GPU keeps
  up and its service rate when it does not. (Counting every measured request that eventually
  finishes over W would give the arrival rate whatever the GPU does, since episodes drain.)
  completion_rate = finished measured requests / makespan (t0 -> their last finish) is kept as
  a diagnostic of the drain. TTFT = first
  token - arrival; TPOT = (finish - first token) / (output - 1), the mean time per output token
  after the first, from the stream (batching.py: static batches stream per token too).
  Unfinished requests count as SLO misses and are excluded from latency percentiles (their number
  is reported).
  segregation = P(fast GPU | long) - P(fast GPU | short), fast = H100/A100 types (0 = no
  segregation, 1 = perfect), "long" = true output > LONG_OUTPUT tokens. `rejected`: requests
  turned away by a full engine window (engine.py), counted as SLO misses.
  cache_hit_rate (prefix cache on): prompt tokens served by the cache at admission / prompt
  tokens, over the requests that were admitted (engine.py).
  """
  if not 0 <= warmup < len(arr["status"]):
    raise ValueError(f"warmup={warmup} must be in [0, {len(arr['status'])})")
  t0, t1 = float(arr["arrival"][warmup]), float(arr["arrival"].max())
  dep = (arr["status"] == engine.DONE) & (arr["finish"] >= t0) & (arr["finish"] <= t1)
  n_dep, tok_dep = float(dep.sum()), float(arr["output"][dep].sum())
  arr = {k: v[warmup:] for k, v in arr.items()}
  done = arr["status"] == engine.DONE
  span = max(t1 - t0, 1e-9)
  makespan = (arr["finish"][done].max() - arr["arrival"].min()) if done.any() else np.nan
  ttft = arr["ttft"] - arr["arrival"]
  e2e = arr["finish"] - arr["arrival"]
  tpot = (arr["finish"] - arr["ttft"]) / np.maximum(arr["output"] - 1, 1)
  good = done & (ttft <= slo_ttft) & (tpot <= slo_tpot)
  pct = lambda x, q: float(np.percentile(x[done], q)) if done.any() else float("nan")
  out = {"throughput": n_dep / span, "goodput": good.sum() / span,
         "token_throughput": tok_dep / span,
         "completion_rate": done.sum() / makespan,
         "slo_attainment": good.mean(), "unfinished": float((~done).sum()),
         "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99),
         "e2e_p50": pct(e2e, 50), "e2e_p99": pct(e2e, 99),
         "preemptions": float(arr["npre"].sum()),
         "rejected": float((arr["status"] == engine.REJECTED).sum())}
  if "cached" in arr:
    adm = (arr["status"] == engine.DONE) | (arr["status"] == engine.RUNNING)
    out["cache_hit_rate"] = (arr["cached"][adm].sum() / max(arr["prompt"][adm].sum(), 1)
                             if adm.any() else float("nan"))
  if type_id is not None:
    names = list(cost_model.GPU_TYPES)
    fast_types = [names.index("H100-7B"), names.index("A100-7B"), names.index("A100x4-70B")]
    fast = np.isin(np.asarray(type_id)[np.clip(arr["gpu"], 0, None)], fast_types)
    long = arr["output"] > LONG_OUTPUT
    pl = fast[long].mean() if long.any() else np.nan
    ps = fast[~long].mean() if (~long).any() else np.nan
    out["segregation"] = float(pl - ps)
    out["long_share_fast"] = float(long[fast].mean()) if fast.any() else float("nan")
    out["long_share_slow"] = float(long[~fast].mean()) if (~fast).any() else float("nan")
  return {k: float(v) for k, v in out.items()}


def batch_metrics(state, slo_ttft, slo_tpot, type_id=None, warmup: int = 0
                  ) -> list[dict[str, float]]:
  """metrics() for every episode of a state batched over its leading axis."""
  arr = episode_arrays(state)
  n = arr["status"].shape[0]
  return [metrics({k: v[i] for k, v in arr.items()}, slo_ttft, slo_tpot, type_id, warmup)
          for i in range(n)]
