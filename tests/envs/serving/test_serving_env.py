"""gymnax API, wrappers, vmap, determinism, masks, registry and heuristics of the serving envs."""

import gymnax.wrappers
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs import registry
from jaxrl_suite.envs.serving import (batching, evaluate, heuristics, make_batching,
                                      make_routing, routing)


@pytest.fixture(scope="module")
def route():
  return make_routing(table_size=32, max_events=32, rate_scale=3.0)


def test_registry_names_build():
  env, p = registry.make("ServingRoute-v0", table_size=16)
  assert env.name == "ServingRoute-v0" and env.num_actions == 4
  env, p = registry.make("ServingBatch-v0", table_size=16)
  assert env.name == "ServingBatch-v0" and env.num_actions == len(batching.STATIC_LEVELS)
  env, p = registry.make("ServingBatch-v0", mode="continuous", table_size=16)
  assert env.num_actions == len(batching.CAP_LEVELS)
  with pytest.raises(ValueError, match="mode"):
    make_batching(mode="dynamic")


def test_route_log_wrapper_vmap_and_determinism(route):
  env, p = route
  wenv = gymnax.wrappers.LogWrapper(env)
  keys = jax.random.split(jax.random.PRNGKey(0), 8)
  obs, st = jax.vmap(wenv.reset, in_axes=(0, None))(keys, p)
  assert obs.shape == (8, env.obs_dim) and obs.dtype == jnp.float32
  assert env.observation_space(p).shape == (env.obs_dim,)

  def roll(st, key):
    def f(st, k):
      a = jax.random.randint(k, (8,), 0, 4)
      o, st, r, te, tr, info = jax.vmap(wenv.step, in_axes=(0, 0, 0, None))(
          jax.random.split(k, 8), st, a, p)
      return st, (o, r, te)
    return jax.lax.scan(f, st, jax.random.split(key, 40))

  roll = jax.jit(roll)
  _, (o1, r1, t1) = roll(st, jax.random.PRNGKey(1))
  _, (o2, r2, t2) = roll(st, jax.random.PRNGKey(1))
  np.testing.assert_array_equal(o1, o2)
  np.testing.assert_array_equal(r1, r2)
  assert np.all(np.isfinite(o1)) and float(r1.sum()) > 0
  _, (o3, _, _) = roll(st, jax.random.PRNGKey(2))
  assert not np.array_equal(o1, o3)


def test_route_action_mask_and_obs_views(route):
  env, p = route
  obs, st = jax.jit(env.reset_env)(jax.random.PRNGKey(0), p)
  mask = jax.jit(env.action_mask)
  assert bool(jnp.all(mask(st, p)))
  v = routing.split_obs(obs, 4)
  assert float(v["has_request"]) == 1.0
  assert float(v["log_prompt"]) == pytest.approx(float(jnp.log1p(st.req.prompt[0])), rel=1e-5)
  np.testing.assert_allclose(np.asarray(v["t_w"]), np.asarray(p.hw.t_w), rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(v["type"]).argmax(-1), [0, 1, 2, 2])
  done_st = st.replace(nxt=jnp.int32(env.table_size))
  np.testing.assert_array_equal(mask(done_st, p), [True, False, False, False])


def test_routers_choose_sensibly():
  n = 4
  env, p = make_routing(table_size=16, rate_scale=3.0)
  obs, st = jax.jit(env.reset_env)(jax.random.PRNGKey(0), p)
  # Load GPU 0 and 1 with waiting requests; 2 and 3 idle.
  eng = st.eng.replace(gpu=st.eng.gpu.at[:6].set(jnp.array([0, 0, 0, 1, 1, 2])),
                       status=st.eng.status.at[:6].set(1))
  obs = jax.jit(env.get_obs)(st.replace(eng=eng, nxt=jnp.int32(6)), p)
  policy = jax.jit(heuristics.router_switch(n))
  pick = lambda name, kn={}, key=jax.random.PRNGKey(0): int(policy(
      heuristics.router_params(name, kn), obs, key))
  assert pick("jsq") == 3                      # only GPU 3 has nothing outstanding
  assert pick("idle_first") == 3
  assert pick("round_robin") == 6 % 4
  assert pick("lot") == 3
  # SITA: a huge threshold sends everything to the slow pool (L4 = GPUs 2, 3).
  assert pick("sita", {"threshold": 1e9}) in (2, 3)
  assert pick("sita", {"threshold": -1.0}) in (0, 1)
  picks = {pick("random", {}, jax.random.PRNGKey(i)) for i in range(30)}
  assert picks == {0, 1, 2, 3}


def test_static_heuristics_and_episode_completes():
  env, p = make_batching("static", table_size=32, rate_scale=0.5, window_start=5)
  run = jax.jit(lambda pp, k: evaluate.rollout(env, p, heuristics.static_switch, pp, k, 20000))
  for fam, kn in (("static_b", {"b_idx": 6, "b": 8}), ("idle_only", {"b_idx": 11}),
                  ("timeout", {"b_idx": 6, "b": 8, "timeout": 0.3})):
    pp = heuristics.static_params(fam, kn)
    st, steps, ret = run(pp, jax.random.PRNGKey(0))
    assert bool(jnp.all(st.status == 3)), fam
    m = evaluate.metrics(evaluate.episode_arrays(st), 2.0, 0.2)
    assert m["unfinished"] == 0 and 0 <= m["slo_attainment"] <= 1
    assert float(ret) == pytest.approx(m["slo_attainment"] * 32)


def test_continuous_episode_and_metrics():
  env, p = make_batching("continuous", table_size=32, rate_scale=1.0, window_start=0,
                         max_events=64)
  st, steps, ret = jax.jit(lambda k: evaluate.rollout(env, p, heuristics.fixed_cap, {"a": 6}, k,
                                                       2000))(jax.random.PRNGKey(0))
  arr = evaluate.episode_arrays(st)
  m = evaluate.metrics(arr, 2.0, 0.2)
  assert m["unfinished"] == 0 and m["ttft_p50"] <= m["ttft_p99"] <= m["e2e_p99"]
  assert float(ret) == pytest.approx(m["slo_attainment"] * 32)
  # throughput = completions inside the offered window [first, last arrival] per second of it
  # (evaluate.metrics, DistServe basis); completion_rate = all completions over the makespan;
  # goodput <= arrivals over the arrival window.
  makespan = arr["finish"].max() - arr["arrival"].min()
  t0, t1 = arr["arrival"].min(), arr["arrival"].max()
  inside = (arr["finish"] >= t0) & (arr["finish"] <= t1)
  assert m["throughput"] == pytest.approx(inside.sum() / (t1 - t0))
  assert m["completion_rate"] == pytest.approx(32 / makespan)
  assert m["goodput"] <= 32 / (t1 - t0) + 1e-9


def test_segregation_index():
  arr = {"status": np.full(4, 3), "ttft": np.ones(4), "finish": np.full(4, 2.0),
         "arrival": np.array([0.0, 0.0, 0.0, 1.0]), "prompt": np.ones(4, int),
         "output": np.array([1000, 1000, 10, 10]), "gpu": np.array([0, 0, 1, 1]),
         "npre": np.zeros(4)}
  type_id = np.array([0, 2])   # GPU 0 = A100 (fast), GPU 1 = L4 (slow)
  m = evaluate.metrics(arr, 5.0, 5.0, type_id)
  assert m["segregation"] == 1.0 and m["long_share_fast"] == 1.0 and m["long_share_slow"] == 0.0
