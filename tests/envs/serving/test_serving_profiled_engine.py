"""The engine with the Vidur-profiled iteration cost (iteration_cost="profiled") against the
independent numpy reference, which evaluates profiled_cost.batch_time on every iteration (no
decode spans, no linearisation)."""

import jax
import numpy as np
import pytest

from jaxrl_suite.envs.serving import (batching, cost_model, engine, evaluate, heuristics,
                                      profiled_cost, reference_sim, routing, traces)

CONV = traces.load_shipped("azure_conv")
A100 = ("A100-7B", "A100-7B")


def _route(iteration_cost, k=96, rate=3.0, ff=True):
  env, p = routing.make_routing(table_size=k, trace=CONV, train_frac=None, cluster=A100,
                                max_events=100_000, iteration_cost=iteration_cost,
                                fast_forward=ff)
  p = p.replace(window_start=17, rate_scale=rate, pred_acc=1.0, cap=128)
  pol = heuristics.make_router("jsq", 2)
  st, _, _ = jax.jit(lambda key: evaluate.rollout(env, p, pol, {}, key, 10_000))(
      jax.random.PRNGKey(0))
  return st


@pytest.mark.slow
def test_profiled_routing_matches_reference():
  """Two A100s, join-shortest-queue, chunked prefill and decode spans: per-request times equal
  the reference's iteration-by-iteration profiled times (float64)."""
  with jax.enable_x64(True):
    st = _route("profiled")
    req, res = st.req, engine.results(st.eng)
    ref = reference_sim.RefCluster([cost_model.A100_7B] * 2, np.asarray(req.arrival),
                                   np.asarray(req.prompt), np.asarray(req.output), cap=128,
                                   iteration_cost="profiled")
    out = ref.run_routing(lambda sim, i: int(np.argmin(sim.outstanding())))
  assert int(st.eng.cap_hits) == 0
  np.testing.assert_array_equal(out["status"], engine.DONE)
  np.testing.assert_array_equal(out["gpu"], np.asarray(res.gpu))
  np.testing.assert_allclose(np.asarray(res.finish), out["finish"], rtol=1e-9, atol=1e-9)
  np.testing.assert_allclose(np.asarray(res.ttft), out["ttft"], rtol=1e-9, atol=1e-9)
  # decode spans really happen under the profiled cost (bounded by the context segments)
  assert int(np.asarray(st.eng.n_iter).sum()) > 3 * int(st.eng.n_events)


def test_profiled_and_analytic_agree_roughly():
  """Same trace and router, both costs (float32, the training dtype): latencies differ (the
  analytic closed form misses the profiles by 10-20% per row) but stay the same order of
  magnitude, and the profiled engine is not the analytic one in disguise. The float32 profiled
  engine stays within 1e-4 of the float64 reference."""
  out = {}
  for ic in ("analytic", "profiled"):
    st = _route(ic, k=64)
    res = engine.results(st.eng)
    assert res.finish.dtype == np.float32
    e2e = np.asarray(res.finish) - np.asarray(st.req.arrival)
    assert (np.asarray(res.status) == engine.DONE).all()
    out[ic] = float(np.mean(e2e))
  req = st.req
  ref = reference_sim.RefCluster([cost_model.A100_7B] * 2, np.asarray(req.arrival, np.float64),
                                 np.asarray(req.prompt), np.asarray(req.output), cap=128,
                                 iteration_cost="profiled")
  want = ref.run_routing(lambda sim, i: int(np.argmin(sim.outstanding())))
  np.testing.assert_array_equal(want["gpu"], np.asarray(res.gpu))
  np.testing.assert_allclose(np.asarray(res.finish), want["finish"], rtol=1e-4)
  ratio = out["profiled"] / out["analytic"]
  assert 0.5 < ratio < 2.0 and abs(ratio - 1) > 1e-3, out


def test_profiled_hardware_for_every_gpu_spec():
  """Every GPU spec runs the profiled cost (derived from the A100 tables: one shared table set,
  per-GPU ratios), at any token budget (the tables extend past 4,096 tokens); an unknown cost
  name is refused."""
  specs = list(cost_model.GPU_TYPES.values())
  hw = engine.make_hardware(specs, 8192, iteration_cost="profiled")
  assert hw.prof is not None and hw.prof.dec_ms.shape == profiled_cost.DECODE_NODES[0].shape + (
      profiled_cost.DECODE_NODES[1].shape[0],)
  np.testing.assert_allclose(np.asarray(hw.prof_ratio.beta),
                             [s.beta / cost_model.A100_7B.beta for s in specs], rtol=1e-6)
  assert engine.PROFILED_SPECS == ("A100-7B",)
  with pytest.raises(ValueError, match="iteration_cost must be one of"):
    engine.make_hardware([cost_model.A100_7B], iteration_cost="vidur")
  ref = reference_sim.RefCluster([cost_model.L4_7B], [0.0], [10], [5], iteration_cost="profiled")
  assert ref.run_routing(lambda sim, i: 0)["status"][0] == engine.DONE
  off = engine.make_hardware([cost_model.A100_7B])
  assert off.prof is None and off.prof_ratio is None


def _obs_trace(env, p, policy, n_steps):
  """Observations and rewards of `n_steps` decisions through `step_env` (no auto-reset)."""
  def step(c, key):
    obs, state = c
    obs, state, r, _, _ = env.step_env(key, state, policy(obs), p)
    return (obs, state), (obs, r)

  obs, state = env.reset_env(jax.random.PRNGKey(1), p)
  (_, state), (obs_seq, rew) = jax.lax.scan(step, (obs, state),
                                            jax.random.split(jax.random.PRNGKey(2), n_steps))
  return state, obs_seq, rew


@pytest.mark.slow
def test_profiled_decode_spans_are_invisible():
  """Continuous batching on one A100 with the profiled cost: every observation (read inside
  spans through engine.at_time, whose c0/beta come from the same context segment), reward and
  per-request time equals one-event-per-iteration simulation, with fewer events."""
  out = {}
  with jax.enable_x64(True):
    for ff in (False, True):
      env, p = batching.make_batching("continuous", table_size=48, trace=CONV, train_frac=None,
                                      max_events=100_000, fast_forward=ff,
                                      iteration_cost="profiled")
      p = p.replace(window_start=300, rate_scale=2.0, pred_acc=1.0)
      pol = lambda obs: jax.numpy.int32(obs[4] * 7 + obs[0] * 3) % env.num_actions
      state, obs, rew = jax.jit(lambda: _obs_trace(env, p, pol, 120))()
      out[ff] = (state.replace(eng=engine.at_time(state.eng, p.hw, state.t)), obs, rew)
  (s0, o0, r0), (s1, o1, r1) = out[False], out[True]
  assert int(s1.eng.n_events) * 2 < int(s0.eng.n_events)
  np.testing.assert_allclose(np.asarray(o1), np.asarray(o0), rtol=1e-9, atol=1e-9)
  np.testing.assert_array_equal(np.asarray(r1), np.asarray(r0))
  np.testing.assert_allclose(np.asarray(s1.eng.finish), np.asarray(s0.eng.finish), rtol=1e-9,
                             atol=1e-9)
  np.testing.assert_array_equal(np.asarray(s1.eng.n_iter), np.asarray(s0.eng.n_iter))
  np.testing.assert_array_equal(np.asarray(s1.eng.gen), np.asarray(s0.eng.gen))
