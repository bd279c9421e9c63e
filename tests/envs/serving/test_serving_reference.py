"""The JAX environments and the numpy event-driven reference give the same per-request times."""

import jax
import numpy as np
import pytest

from jaxrl_suite.envs.serving import (batching, cost_model, engine, evaluate, heuristics,
                                      reference_sim, routing, traces)

CONV = traces.load_shipped("azure_conv")


def _route_jax(k, cluster, trace, start, rate, router, cap=128, max_events=100_000, window=None,
               mbt=2048):
  env, p = routing.make_routing(table_size=k, trace=trace, train_frac=None, cluster=cluster,
                                max_events=max_events, window=window, max_batched_tokens=mbt)
  p = p.replace(window_start=start, rate_scale=rate, pred_acc=1.0, cap=cap)
  pol = heuristics.make_router(router, len(cluster))
  st, _, _ = jax.jit(lambda key: evaluate.rollout(env, p, pol, {}, key, 10_000))(
      jax.random.PRNGKey(0))
  return st


@pytest.mark.parametrize("router,cluster,trace,rate,cap,k,window", [
    # a long replay through the active-request window: requests leave the table (compaction),
    # the window fills (rejections), one recompute preemption
    ("jsq", routing.DEFAULT_CLUSTER, "conv", 2.0, 128, 600, 64),
    # KV-bound (preemptions), with the L4's own engine settings (max_num_seqs 256, a 768-token
    # budget that fits the TPOT SLO: prefills run in several chunks)
    ("round_robin", ("L4-7B", "L4-7B"), "synthetic", 1.0, "per_gpu", 64, None),
])
def test_routing_matches_reference(router, cluster, trace, rate, cap, k, window):
  tr = CONV if trace == "conv" else traces.synthetic("poisson", 200, 50.0, seed=3)
  mbt = 2048
  if cap == "per_gpu":
    s = routing.engine_settings(cluster, "per_gpu", 0, 0, 0.2)
    cap, mbt = s["cap"], s["max_batched_tokens"]
    assert mbt == (768, 768)
  with jax.enable_x64(True):
    st = _route_jax(k, cluster, tr, 17, rate, router, cap, window=window, mbt=mbt)
    req = st.req
    res = engine.results(st.eng)
    assert res.finish.dtype == np.float64
    ref = reference_sim.RefCluster([cost_model.GPU_TYPES[c] for c in cluster],
                                   np.asarray(req.arrival), np.asarray(req.prompt),
                                   np.asarray(req.output), cap=cap, window=window,
                                   max_batched_tokens=mbt)
    n = len(cluster)
    if router == "jsq":
      out = ref.run_routing(lambda sim, i: int(np.argmin(sim.outstanding())))
    else:
      out = ref.run_routing(lambda sim, i: i % n)
  assert int(st.eng.cap_hits) == 0
  np.testing.assert_array_equal(out["status"], np.asarray(res.status))
  np.testing.assert_array_equal(out["gpu"], np.asarray(res.gpu))
  np.testing.assert_allclose(np.asarray(res.finish), out["finish"], rtol=1e-9, atol=1e-9)
  np.testing.assert_allclose(np.asarray(res.ttft), out["ttft"], rtol=1e-9, atol=1e-9)
  np.testing.assert_array_equal(np.asarray(res.npre), out["npre"])
  np.testing.assert_array_equal(np.asarray(st.eng.kv_peak), out["kv_peak"])
  if trace == "synthetic":
    assert out["npre"].sum() > 0            # the case really exercises recompute preemption
    np.testing.assert_array_equal(out["status"], engine.DONE)
  else:
    assert env_windowed(k, window) and 0 < int(st.eng.n_rejected) < k // 10
    assert int((out["status"] == reference_sim.REJECTED).sum()) == int(st.eng.n_rejected)
    assert int((out["status"] == engine.DONE).sum()) + int(st.eng.n_rejected) == k


def env_windowed(k, window):
  return engine.physical_slots(k, window) < k


def test_continuous_single_gpu_matches_reference_with_changing_cap():
  levels = batching.CAP_LEVELS
  with jax.enable_x64(True):
    # window 24 < 64 requests: arrivals enter by decision interval, the table is compacted
    env, p = batching.make_batching("continuous", table_size=64, trace=CONV, train_frac=None,
                                    max_events=100_000, window=24)
    assert env.windowed
    p = p.replace(window_start=300, rate_scale=2.0, pred_acc=1.0)
    # policy: cap level cycles with the step count (via the obs "current cap" is not needed).
    seq = np.array([5, 2, 7, 3, 0, 6, 4, 8, 1], np.int32)
    pol = lambda pp, obs, key: jax.numpy.asarray(seq)[
        jax.numpy.int32(obs[7] * 256 * 7919) % len(seq)]
    st, steps, _ = jax.jit(lambda k: evaluate.rollout(env, p, pol, {}, k, 10_000))(
        jax.random.PRNGKey(0))
    req = st.req
    # Replay the exact cap sequence the JAX policy produced: recompute it from its rule.
    ref = reference_sim.RefCluster([cost_model.A100_7B], np.asarray(req.arrival),
                                   np.asarray(req.prompt), np.asarray(req.output), cap=256,
                                   window=24)
    cap = {"c": levels[-1]}

    def cap_at(t):
      a = seq[int(np.float32(cap["c"] / 256) * np.float32(256) * 7919) % len(seq)]
      cap["c"] = levels[a]
      return cap["c"]

    out = ref.run_single(cap_at, p.decision_dt)
    res = engine.results(st.eng)
  np.testing.assert_array_equal(np.asarray(res.status), out["status"])
  np.testing.assert_allclose(np.asarray(res.finish), out["finish"], rtol=1e-9, atol=1e-9)
  np.testing.assert_allclose(np.asarray(res.ttft), out["ttft"], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("iteration_cost,table_size", [
    ("analytic", 64),
    # static batching's closed-form decode series under the profiled cost
    # (profiled_cost.static_decode_time) equals summing batch_time over every padded step
    pytest.param("profiled", 48, marks=pytest.mark.slow)])
def test_static_matches_reference(iteration_cost, table_size):
  with jax.enable_x64(True):
    env, p = batching.make_batching("static", table_size=table_size, trace=CONV, train_frac=None,
                                    iteration_cost=iteration_cost)
    p = p.replace(window_start=300, rate_scale=0.3)
    pp = {"b_idx": 6, "b": 8, "timeout": 0.52}   # B = STATIC_LEVELS[6] = 8
    st, _, _ = jax.jit(lambda k: evaluate.rollout(env, p, heuristics.timeout, pp, k, 10_000))(
        jax.random.PRNGKey(0))
    r = st.req
    out = reference_sim.simulate_static(
        cost_model.A100_7B, np.asarray(r.arrival), np.asarray(r.prompt), np.asarray(r.output),
        lambda v: 8 if (v["queue"] >= 8 or v["oldest"] >= 0.52 or v["all_arrived"]) else 0,
        p.wait_dt, iteration_cost=iteration_cost)
    assert (out["status"] == 3).all()
    np.testing.assert_allclose(np.asarray(st.finish), out["finish"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(st.ttft), out["ttft"], rtol=1e-9, atol=1e-9)


def test_float32_close_to_reference():
  """float32 (the training dtype) against the float64 reference, with per-GPU engine settings
  (a different max_num_seqs and token budget on each GPU type)."""
  s = routing.engine_settings(routing.DEFAULT_CLUSTER, "per_gpu", 0, 0, 0.2)
  st = _route_jax(64, routing.DEFAULT_CLUSTER, CONV, 17, 3.0, "round_robin", s["cap"],
                  mbt=s["max_batched_tokens"])
  req = st.req
  ref = reference_sim.RefCluster([cost_model.GPU_TYPES[c] for c in routing.DEFAULT_CLUSTER],
                                 np.asarray(req.arrival, np.float64), np.asarray(req.prompt),
                                 np.asarray(req.output), cap=s["cap"],
                                 max_batched_tokens=s["max_batched_tokens"])
  out = ref.run_routing(lambda sim, i: i % 4)
  np.testing.assert_allclose(np.asarray(engine.results(st.eng).finish), out["finish"], rtol=1e-4,
                             atol=1e-3)


def _obs_trace(env, p, policy, n_steps):
  """Observations and rewards of `n_steps` decisions through `step_env` (no auto-reset)."""
  def step(c, key):
    obs, state = c
    a = policy(obs)
    obs, state, r, _, _ = env.step_env(key, state, a, p)
    return (obs, state), (obs, r)

  obs, state = env.reset_env(jax.random.PRNGKey(1), p)
  (_, state), (obs_seq, rew) = jax.lax.scan(step, (obs, state),
                                            jax.random.split(jax.random.PRNGKey(2), n_steps))
  return state, obs_seq, rew


@pytest.mark.parametrize("mode", ["routing", "continuous"])
def test_decode_fast_forward_is_invisible(mode):
  """Decode spans (engine.py) change nothing a policy or a metric can see: every observation,
  reward and per-request time equals one-event-per-iteration simulation, with far fewer events."""
  out = {}
  with jax.enable_x64(True):
    for ff in (False, True):
      if mode == "routing":
        env, p = routing.make_routing(table_size=48, trace=CONV, train_frac=None,
                                      max_events=100_000, fast_forward=ff)
        p = p.replace(window_start=40, rate_scale=3.0, pred_acc=1.0)
        # least expected work reads the decode-token and KV features that spans advance
        lw = heuristics.make_router("least_work", env.n_gpus)
        pol = lambda obs: lw({"c": 0.5}, obs, None)
      else:
        env, p = batching.make_batching("continuous", table_size=48, trace=CONV,
                                        train_frac=None, max_events=100_000, fast_forward=ff)
        p = p.replace(window_start=300, rate_scale=2.0, pred_acc=1.0)
        # cap level from the observed KV use and queue: the policy reacts to span-internal state
        pol = lambda obs: jax.numpy.int32(obs[4] * 7 + obs[0] * 3) % env.num_actions
      state, obs, rew = jax.jit(lambda: _obs_trace(env, p, pol, 120))()
      # mid-episode, a span may run past the last decision: the engine as seen at that time
      view = engine.at_time(state.eng, p.hw, state.t)
      out[ff] = (state.replace(eng=view), obs, rew)
  (s0, o0, r0), (s1, o1, r1) = out[False], out[True]
  assert int(s1.eng.n_events) * 3 < int(s0.eng.n_events)       # spans really happen
  np.testing.assert_allclose(np.asarray(o1), np.asarray(o0), rtol=1e-9, atol=1e-9)
  np.testing.assert_array_equal(np.asarray(r1), np.asarray(r0))
  np.testing.assert_allclose(np.asarray(s1.eng.finish), np.asarray(s0.eng.finish), rtol=1e-9,
                             atol=1e-9)
  np.testing.assert_array_equal(np.asarray(s1.eng.n_iter), np.asarray(s0.eng.n_iter))
  np.testing.assert_array_equal(np.asarray(s1.eng.kv_peak), np.asarray(s0.eng.kv_peak))
  np.testing.assert_array_equal(np.asarray(s1.eng.gen), np.asarray(s0.eng.gen))


def test_decode_spans_run_across_decisions():
  """A routing decision cuts only the receiving GPU's decode span (engine.cut): on a 256-request
  JSQ replay the engine needs < 3.5 events per request (cutting every GPU's span at every
  arrival, as before, took 5.4) for the same GPU iterations, and a span really outlives a
  decision (a GPU that did not receive the request is mid-span at the next arrival)."""
  env, p = routing.make_routing(table_size=256, trace=CONV, train_frac=None, max_events=100_000,
                                window=32)
  p = p.replace(window_start=40, rate_scale=1.0, pred_acc=1.0, cap=32)
  pol = heuristics.make_router("jsq", env.n_gpus)
  st, _, _ = jax.jit(lambda key: evaluate.rollout(env, p, pol, {}, key, 10_000))(
      jax.random.PRNGKey(0))
  assert int(st.eng.cap_hits) == 0
  assert int(st.eng.n_events) < 3.5 * 256 < int(st.eng.n_iter.sum())

  def crossed(c, key):
    obs, state = c
    a, t_prev = pol({}, obs, key), state.t
    obs, state, _, _, _ = env.step_env(key, state, a, p)
    e = state.eng
    # booked before this step's decision, still running at the next one, on another GPU
    live = e.busy & (e.reps > 1) & (e.t_start < t_prev) & (e.iter_end > state.t)
    return (obs, state), jax.numpy.any(live & (jax.numpy.arange(4) != a))

  obs, state = env.reset_env(jax.random.PRNGKey(0), p)
  _, flags = jax.jit(lambda: jax.lax.scan(crossed, (obs, state),
                                          jax.random.split(jax.random.PRNGKey(1), 100)))()
  assert int(np.sum(flags)) > 10


MOONCAKE = traces.load_shipped("mooncake_conv")
CACHE = (40, 24, 12, 12)   # prefix-cache entries per GPU, small enough that LRU evicts often


def _ref_cache_aware(knobs):
  """heuristics cache_aware on the reference simulator's own state."""
  def route(sim, i):
    q, m = sim.outstanding().astype(np.float32), sim.prefix_share(i)
    imbalanced = (q.max() - q.min() > knobs["bal_abs"]) & (q.max() > knobs["bal_rel"] * q.min())
    best = int(np.argmin(np.where(m >= m.max(), q, np.inf)))
    return best if (not imbalanced and m.max() >= knobs["thr"]) else int(np.argmin(q))
  return route


@pytest.mark.parametrize("router", ["jsq", "cache_aware"])
def test_prefix_cache_matches_reference(router):
  """Prefix caching (LRU per-GPU block caches keyed by Mooncake hash_ids, prefill only for
  uncached blocks): the engine equals the reference per request (times, GPU, cached tokens) on
  a 500-request windowed replay of the Mooncake conversation sample, with evictions; the
  cache-aware router reads the same cache state in both."""
  k, window = 500, 48
  knobs = {"thr": 0.3, "bal_abs": 8.0, "bal_rel": 1.5}
  with jax.enable_x64(True):
    env, p = routing.make_routing(table_size=k, trace=MOONCAKE, train_frac=None,
                                  max_events=100_000, window=window, cache_blocks=CACHE)
    p = p.replace(window_start=300, rate_scale=1.0, pred_acc=1.0, cap=32)
    pol = heuristics.make_router(router, env.n_gpus)
    pp = {k_: jax.numpy.asarray(v) for k_, v in knobs.items()}
    st, _, _ = jax.jit(lambda key: evaluate.rollout(env, p, pol, pp, key, 10_000))(
        jax.random.PRNGKey(0))
    res, req = engine.results(st.eng), st.req
    ref = reference_sim.RefCluster([cost_model.GPU_TYPES[c] for c in routing.DEFAULT_CLUSTER],
                                   np.asarray(req.arrival), np.asarray(req.prompt),
                                   np.asarray(req.output), cap=32, window=window,
                                   hashes=np.asarray(req.hashes), cache_blocks=CACHE)
    route = (_ref_cache_aware(knobs) if router == "cache_aware"
             else lambda sim, i: int(np.argmin(sim.outstanding())))
    out = ref.run_routing(route)
  assert int(st.eng.cap_hits) == 0
  np.testing.assert_array_equal(np.asarray(res.status), out["status"])
  np.testing.assert_array_equal(np.asarray(res.gpu), out["gpu"])
  np.testing.assert_array_equal(np.asarray(res.cached), out["cached"])
  np.testing.assert_allclose(np.asarray(res.finish), out["finish"], rtol=1e-9, atol=1e-9)
  np.testing.assert_allclose(np.asarray(res.ttft), out["ttft"], rtol=1e-9, atol=1e-9)
  np.testing.assert_array_equal(np.asarray(res.npre), out["npre"])
  np.testing.assert_array_equal(np.asarray(st.eng.kv_peak), out["kv_peak"])
  # the replay really exercises the cache: hits, and more distinct blocks than entries
  hit = np.asarray(res.cached).sum() / np.asarray(req.prompt).sum()
  assert 0.05 < hit < 0.9
  assert len(np.unique(np.asarray(req.hashes))) > 10 * sum(CACHE)
  assert (out["status"] == engine.DONE).sum() > 0.9 * k
  m = evaluate.metrics(evaluate.episode_arrays(st), p.slo_ttft, p.slo_tpot)
  assert m["cache_hit_rate"] == pytest.approx(hit, rel=0.05)
