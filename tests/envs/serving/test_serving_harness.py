"""The flat event-driven rollout, the one-compile evaluator and report labels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.core import stats
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
  tr = traces.Trace(np.arange(4.0), np.array([100, 5000, 4000, 10]), np.array([10, 10, 200, 3000]))
  s = traces.clip_stats(tr, 4096, 2048)   # the routing study's Llama-2-7B context
  assert s["clipped_share"] == pytest.approx(0.75)        # rows 1, 2 (context), 3 (output)
  conv = traces.clip_stats(traces.load_shipped("azure_conv"), 4096, 2048)
  assert 0.02 < conv["clipped_share"] < 0.3


def test_cis_count_windows_and_seeds():
  """Two-way (seeds x windows) bootstrap: a deterministic policy (every seed equal) that varies
  across windows gets a CI of positive width around the float64 mean; identical cells give a
  zero-width CI; a paired ratio of exactly 2x is [2, 2]; the percentile CI matches a direct
  numpy resampling with the same draws."""
  w = np.array([1.0, 2.0, 4.0, 3.0])
  x = np.tile(w, (5, 1))                                    # 5 seeds, 4 windows
  m, lo, hi = stats.crossed_ci(x)
  assert m == pytest.approx(2.5) and lo < m < hi and hi - lo > 0.5
  assert stats.crossed_ci(np.full((3, 4), 7.0)) == (7.0, 7.0, 7.0)
  r = stats.crossed_ratio_ci(2 * x + 0 * np.arange(5)[:, None], x)
  np.testing.assert_allclose(r, (2.0, 2.0, 2.0), rtol=1e-12)
  rng = np.random.default_rng(0)
  y = rng.normal(size=(4, 3))
  si, wi = stats._crossed_draws(4, 3, 500, 1)
  ref = np.array([y[s][:, v].mean() for s, v in zip(si, wi)])
  got = stats.crossed_ci(y, n_boot=500, seed=1)
  np.testing.assert_allclose(got[1:], np.percentile(ref, [2.5, 97.5]), rtol=1e-12)
  # Cells: per-seed means for old callers, the grid for the CI
  cells = harness.Cells([[{"goodput": v} for v in w] for _ in range(5)])
  assert [c["goodput"] for c in cells] == [2.5] * 5
  s = harness.summarize(cells)["goodput"]
  assert s[0] == pytest.approx(2.5) and s[2] - s[1] > 0.5
  assert harness.summarize(list(cells))["goodput"][1:] == [2.5, 2.5]   # seeds only: zero width


def test_capacity_is_set_by_the_best_tuned_heuristic():
  """The capacity probe takes every grid point of every family: the best one at each rate sets
  it. Stub evaluator: attainment 1 below a per-candidate rate scale limit, else 0."""
  from jaxrl_suite.envs.serving import protocol

  limits = [2 ** (2 / 4), 2 ** (5 / 4), 2 ** (3 / 4)]      # jsq, sita(th=512), sita(th=1024)

  class Stub:
    def grid(self, pps, params, starts, rates, key, slo, type_id=None):
      out = np.empty((len(pps), 1), object)
      for i, pp in enumerate(pps):
        out[i, 0] = {"slo_attainment": float(rates[0] <= pp["lim"] + 1e-9)}
      return out

  mk = lambda lim, th=None: {"lim": lim, **({} if th is None else {"w": 1.0, "threshold": th})}
  grids = {"jsq": [mk(limits[0])], "sita": [mk(limits[1], 512.0), mk(limits[2], 1024.0)]}
  cap, scale, who = protocol.best_heuristic_capacity(Stub(), grids, None, [0], None,
                                                     (2.0, 0.2), 10.0)
  assert scale == pytest.approx(2 ** (5 / 4)) and cap == pytest.approx(10 * 2 ** (5 / 4))
  assert who.startswith("sita") and "threshold=512" in who
  assert "lower bound" not in who
  # A candidate meeting the SLO at every probed rate: the capacity is flagged as a lower bound.
  grids["jsq"] = [mk(1e9)]
  cap, scale, who = protocol.best_heuristic_capacity(Stub(), grids, None, [0], None,
                                                     (2.0, 0.2), 10.0)
  assert scale == pytest.approx(2.0 ** (harness.CAPACITY_HI / 4))
  assert who.startswith("jsq") and "lower bound" in who


def test_pruned_capacity_equals_probing_every_candidate():
  """With attainment falling with load per candidate, the pruned bisection returns what probing
  every candidate at every probe returns, and probes fewer candidates."""
  rng = np.random.default_rng(0)
  for trial in range(20):
    n = int(rng.integers(1, 12))
    lims = 2.0 ** (rng.uniform(-10, 26, n) / 4)          # some below lo, some above hi
    slopes = rng.uniform(0.5, 4.0, n)

    class Stub:
      calls = 0

      def grid(self, pps, params, starts, rates, key, slo, type_id=None):
        Stub.calls += len(pps)
        out = np.empty((len(pps), 1), object)
        for i, pp in enumerate(pps):   # falls smoothly with rate through 0.9 at the limit
          out[i, 0] = {"slo_attainment": float(np.clip(
              0.9 - pp["s"] * np.log(rates[0] / pp["lim"]), 0, 1))}
        return out

    cands = [{"lim": lim, "s": s} for lim, s in zip(lims, slopes)]
    got = harness.slo_capacity_best(Stub(), cands, None, [0], None, None, 3.0)

    # brute force: every candidate at every grid rate, best attainment per rate
    def att(c, i):
      return float(np.clip(0.9 - c["s"] * np.log(2.0 ** (i / 4) / c["lim"]), 0, 1))
    grid = range(-8, harness.CAPACITY_HI + 1)
    passing = [i for i in grid if max(att(c, i) for c in cands) >= 0.9]
    if not passing or passing[0] != -8:
      assert got[2] == -1 and got[1] == pytest.approx(2.0 ** (-8 / 4))
      continue
    a = max(passing)
    who = int(np.argmax([att(c, a) for c in cands]))
    assert got[1] == pytest.approx(2.0 ** (a / 4)) and got[0] == pytest.approx(3.0 * got[1])
    assert got[2] == who, trial
    assert Stub.calls <= n * 7
