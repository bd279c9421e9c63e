"""The flat event-driven rollout, the one-compile evaluator and report labels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.serving import (batching, evaluate, harness, heuristics, make_batching,
                                      make_routing, traces)


def _rollout_nested(env, params, policy, pp, key, max_steps):
  """Reference driver: one `step_env` (with its inner event loop) per decision."""
  k_reset, k_loop = jax.random.split(key)
  obs, state = env.reset_env(k_reset, params)

  def body(c):
    obs, state, i, ret, _, key = c
    key, k_a, k_s = jax.random.split(key, 3)
    a = policy(pp, obs, k_a)
    a = jnp.where(env.action_mask(state, params)[a], a, 0)
    obs, state, r, done, _ = env.step_env(k_s, state, a, params)
    return obs, state, i + 1, ret + r, done, key

  init = (obs, state, jnp.int32(0), jnp.float32(0), jnp.bool_(False), k_loop)
  _, state, steps, ret, _, _ = jax.lax.while_loop(
      lambda c: (c[2] < max_steps) & ~c[4], body, init)
  return state, steps, ret


def test_flat_rollout_equals_step_env_loop():
  """Same final state, steps and return as stepping `step_env`, also when the per-step event cap
  is hit (max_events=3 forces cap hits) and with a randomised router (same PRNG keys)."""
  max_events = 3
  env, p = make_routing(table_size=32, max_events=max_events, window_start=40, rate_scale=3.0)
  pol = heuristics.make_router("power_of_two", 4)
  pp = {}
  key = jax.random.PRNGKey(3)
  f = jax.jit(lambda k: evaluate.rollout_events(env, p, pol, pp, k, 500))
  g = jax.jit(lambda k: _rollout_nested(env, p, pol, pp, k, 500))
  (s1, n1, r1), (s2, n2, r2) = f(key), g(key)
  assert int(n1) == int(n2) and float(r1) == float(r2)
  for a, b in zip(jax.tree.leaves(s1), jax.tree.leaves(s2)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert int(s1.eng.cap_hits) > 0 and int(jnp.sum(s1.eng.status == 3)) > 0


def test_flat_rollout_continuous_truncated():
  """Continuous ServingBatch-v0, stopped by max_steps mid-episode: same state as step_env.
  (Complete continuous episodes are checked against the numpy reference.)"""
  env, p = make_batching("continuous", table_size=16, max_events=64, window_start=7)
  pol = lambda pp, obs, k: jnp.int32(5)
  s1, n1, r1 = jax.jit(lambda k: evaluate.rollout_events(env, p, pol, {}, k, 6))(
      jax.random.PRNGKey(0))
  s2, n2, r2 = jax.jit(lambda k: _rollout_nested(env, p, pol, {}, k, 6))(jax.random.PRNGKey(0))
  assert int(n1) == int(n2) == 6 and float(r1) == float(r2)
  for a, b in zip(jax.tree.leaves(s1), jax.tree.leaves(s2)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert bool(jnp.any(s1.eng.status == 3)) and not bool(jnp.all(s1.eng.status == 3))


def test_evaluator_universal_policy_matches_direct_rollouts():
  """One compiled evaluator: heuristic lanes equal their direct rollouts; the network lane
  (which = number of heuristics) follows the network, not the heuristic."""
  env, p = make_routing(table_size=16, max_events=64)
  n_h = len(heuristics.ROUTERS)
  net = {"bias": jnp.array([0.0, 0.0, 5.0, 0.0])}           # a "network" that always says 2
  net_fn = lambda w, obs, k: jnp.argmax(w["bias"] + 0 * obs[..., :1], -1)
  pol = harness.universal_policy(heuristics.router_switch(4), n_h, net_fn)
  ev = harness.Evaluator(env, pol, 2000, lanes=4)
  pps = [harness.with_net(heuristics.router_params("jsq", {}), net),
         harness.with_net(heuristics.router_params("round_robin", {}), net),
         harness.with_net(heuristics.router_params("jsq", {}), net, net, which=n_h)]
  keys = list(jax.random.split(jax.random.PRNGKey(0), 3))
  arr = ev.episodes(pps, p, [10, 10, 10], [2.0, 2.0, 2.0], keys)   # 3 jobs, padded to 4 lanes
  assert arr["gpu"].shape == (3, 16)
  np.testing.assert_array_equal(arr["gpu"][1], np.arange(16) % 4)
  np.testing.assert_array_equal(arr["gpu"][2], 2)
  direct = jax.jit(lambda k: evaluate.rollout(
      env, p.replace(window_start=10, rate_scale=2.0), heuristics.make_router("jsq", 4), {}, k,
      2000))(keys[0])[0]
  np.testing.assert_array_equal(arr["finish"][0], np.asarray(direct.eng.finish))
  g = ev.grid(pps[:2], p, [0, 10], [1.0, 4.0], jax.random.PRNGKey(1), (2.0, 0.2))
  assert g.shape == (2, 2) and all(0 <= m["slo_attainment"] <= 1 for m in g.ravel())


def test_static_labels_use_the_real_batch_size():
  for i, b in enumerate(batching.STATIC_LEVELS):
    pp = heuristics.static_params("idle_only", {"b_idx": i})
    assert int(pp["b"]) == b
    assert heuristics.describe("idle_only", pp) == f"B={b}"
  assert heuristics.describe("timeout", heuristics.static_params(
      "timeout", {"b_idx": 6, "timeout": 0.25})) == "B=8, timeout=0.25"
  assert heuristics.describe("fixed_cap", heuristics.cap_params({"a": 3})) == (
      f"max_num_seqs={batching.CAP_LEVELS[3]}")


def test_clip_stats_count_clipped_requests():
  from experiments import serving_common
  tr = traces.Trace(np.arange(4.0), np.array([100, 5000, 4000, 10]), np.array([10, 10, 200, 3000]))
  s = serving_common.clip_stats(tr)
  assert s["clipped_share"] == pytest.approx(0.75)        # rows 1, 2 (context), 3 (output)
  conv = serving_common.clip_stats(traces.load_shipped("azure_conv"))
  assert 0.02 < conv["clipped_share"] < 0.3
