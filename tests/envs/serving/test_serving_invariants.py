"""Hypothesis property tests: no request lost or duplicated, KV within capacity, time monotone."""

import functools

import hypothesis
import hypothesis.strategies as hst
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import batching, engine, routing, traces, workload

K = 32
WINDOW = 10       # < K: requests leave the engine's table (compaction) and full windows reject
N_STEPS = 80


CACHE = (6, 3, 2)  # prefix-cache entries per GPU: small, so that LRU eviction happens


@functools.lru_cache(maxsize=None)
def _route_runner(cache: bool = False):
  tr = traces.synthetic("poisson", 400, 20.0, seed=0)
  if cache:
    tr = traces.with_prefixes(tr, n_prefixes=4, prefix_blocks=2, seed=0)
  env, p = routing.make_routing(table_size=K, trace=tr, train_frac=None,
                                cluster=("A100-7B", "L4-7B", "L4-7B"), max_events=32,
                                window=WINDOW, cache_blocks=CACHE if cache else None)
  assert env.windowed

  def run(key, actions, rate, cap):
    pp = p.replace(rate_scale=rate, cap=cap, window_start=-1)
    _, s = env.reset_env(key, pp)

    def step(s, a):
      _, s2, r, done, _ = env.step_env(key, s, a, pp)
      e = s2.eng
      res = engine.results(e)
      rec = {"status": res.status, "t": s2.t, "last_event": e.last_event, "kv_used": e.kv_used,
             "kv_peak": e.kv_peak, "ttft": res.ttft, "finish": res.finish, "gpu": res.gpu,
             "rid": e.rid, "slot_status": e.status, "in_flight": engine.in_flight(e),
             "n_rejected": e.n_rejected, "r": r, "done": done}
      if cache:
        rec.update(cached=res.cached, c_hash=e.c_hash, prompt=s2.req.prompt)
      return s2, rec

    s, recs = jax.lax.scan(step, s, actions)
    return s, recs

  return jax.jit(run), p


@hypothesis.settings(max_examples=8, deadline=None)
@hypothesis.given(seed=hst.integers(0, 2**30), rate=hst.floats(0.3, 6.0),
                  cap=hst.sampled_from([1, 4, 64]), cache=hst.booleans())
def test_routing_invariants(seed, rate, cap, cache):
  run, p = _route_runner(cache)
  key = jax.random.PRNGKey(seed)
  actions = jax.random.randint(jax.random.fold_in(key, 1), (N_STEPS,), 0, 3)
  _, rec = run(key, actions, jnp.float32(rate), jnp.int32(cap))
  rec = jax.tree.map(np.asarray, rec)
  status, kv_blocks = rec["status"], np.asarray(p.hw.kv_blocks)
  # Every request is in exactly one state; the routed ones never go back to "unrouted".
  assert np.all((status >= 0) & (status <= engine.REJECTED))
  routed = np.minimum(np.arange(1, N_STEPS + 1), K)
  np.testing.assert_array_equal((status != engine.UNROUTED).sum(1), routed)
  # None lost: routed = in flight + finished + rejected, at every step.
  n_done, n_rej = (status == engine.DONE).sum(1), (status == engine.REJECTED).sum(1)
  np.testing.assert_array_equal(rec["in_flight"] + n_done + n_rej, routed)
  np.testing.assert_array_equal(n_rej, rec["n_rejected"])
  # None duplicated: a request holds at most one slot; at most WINDOW are in flight.
  for rid, st in zip(rec["rid"], rec["slot_status"]):
    held = rid[rid >= 0]
    assert len(np.unique(held)) == len(held)
    assert ((st == engine.WAITING) | (st == engine.RUNNING)).sum() <= WINDOW
  # Finished and rejected requests stay so, finished ones with ordered times.
  for code in (engine.DONE, engine.REJECTED):
    fin = status == code
    assert np.all(fin[1:] >= fin[:-1])
  last = status[-1] == engine.DONE
  assert np.all(rec["ttft"][-1][last] <= rec["finish"][-1][last] + 1e-6)
  # Rewards count distinct requests: total reward <= number finished.
  assert rec["r"].sum() <= last.sum() + 1e-6
  # KV never exceeds capacity; time never goes backwards.
  assert np.all(rec["kv_used"] <= kv_blocks[None]) and np.all(rec["kv_peak"] <= kv_blocks[None])
  assert np.all(np.diff(rec["t"]) >= 0) and np.all(np.diff(rec["last_event"]) >= 0)
  assert np.all(rec["last_event"] <= rec["t"] + 1e-6)
  # Routed requests sit on the GPU they were sent to (rejected ones on none).
  g, n = rec["gpu"][-1], routed[-1]
  ok = status[-1][:n] != engine.REJECTED
  np.testing.assert_array_equal(g[:n][ok], np.asarray(actions)[:n][ok])
  assert np.all(g[:n][~ok] == -1)
  if cache:
    # Cached prefix tokens: whole 512-token blocks, or the whole prompt but its last token;
    # none before admission. Each GPU's cache holds at most its capacity, ids from prompts.
    c, pr = rec["cached"][-1], rec["prompt"][-1]
    assert np.all((c % engine.CACHE_BLOCK == 0) | (c == pr - 1)) and np.all(c <= pr - 1)
    assert np.all(c[(status[-1] == engine.UNROUTED) | (status[-1] == engine.REJECTED)] == 0)
    ids = set(np.asarray(p.trace.hashes).ravel().tolist()) | {-1}
    for gi, cb in enumerate(CACHE):
      held = rec["c_hash"][:, gi]
      assert np.all(held[:, cb:] == -1)
      assert set(held.ravel().tolist()) <= ids


@functools.lru_cache(maxsize=None)
def _static_runner():
  tr = traces.synthetic("gamma", 300, 2.0, seed=1, cv=3.0)
  env, p = batching.make_batching("static", table_size=K, trace=tr, train_frac=None)

  def run(key, actions, rate):
    pp = p.replace(rate_scale=rate)
    _, s = env.reset_env(key, pp)

    def step(s, a):
      _, s2, r, done, _ = env.step_env(key, s, a, pp)
      return s2, {"status": s2.status, "t": s2.t, "finish": s2.finish, "ttft": s2.ttft, "r": r}

    return jax.lax.scan(step, s, actions)

  return jax.jit(run), p, env


@hypothesis.settings(max_examples=8, deadline=None)
@hypothesis.given(seed=hst.integers(0, 2**30), rate=hst.floats(0.05, 3.0))
def test_static_invariants(seed, rate):
  run, p, env = _static_runner()
  key = jax.random.PRNGKey(seed)
  actions = jax.random.randint(jax.random.fold_in(key, 2), (60,), 0, env.num_actions)
  s, rec = run(key, actions, jnp.float32(rate))
  rec = jax.tree.map(np.asarray, rec)
  assert np.all(np.diff(rec["t"]) >= 0)
  fin = rec["status"] == engine.DONE
  assert np.all(fin[1:] >= fin[:-1])
  arr = np.asarray(s.req.arrival)
  last = fin[-1]
  # finished requests: arrival <= first token <= finish; never dispatched before arriving.
  assert np.all(arr[last] <= rec["ttft"][-1][last] + 1e-6)
  assert np.all(rec["ttft"][-1][last] <= rec["finish"][-1][last])
  # A batch never exceeds the KV slots (max-length reservation): per finish time, count members.
  _, counts = np.unique(rec["finish"][-1][last], return_counts=True)
  assert counts.max(initial=0) <= int(env.max_slots(p))
  assert rec["r"].sum() <= last.sum()


def test_predictor_accuracy_controls_noise():
  tr = workload.trace_arrays(traces.load_shipped("azure_conv"))
  for acc, lo, hi in ((1.0, 1.0, 1.0), (0.0, 0.15, 0.35), (0.8, 0.8, 0.9)):
    req = workload.sample_requests(jax.random.PRNGKey(0), tr, 2048, 1.0, 0, acc)
    agree = float(jnp.mean(req.pred == workload.bucket_of(req.output)))
    assert lo <= agree <= hi, (acc, agree)
