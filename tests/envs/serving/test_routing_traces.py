"""serving_routing on every shipped trace: per-trace setup (model, context, SLO, replay length,
prefix cache), per-replay rate normalisation in the routing env, the cache-aware router among
the tuned families on Mooncake, and one record name per trace. Fast: no training, no rollout."""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
import configs.serving_routing as cfg_r  # noqa: E402
from experiments import serving_routing as exp  # noqa: E402
from jaxrl_suite.train.serving import routing_setup  # noqa: E402
from jaxrl_suite.envs.serving import (cost_model, heuristics, routing, traces,  # noqa: E402
                                      workload)

TRACES = ("azure_conv", "azure_code", "mooncake_conv")


def _setup(trace, quick):
  c = cfg_r.get_config("quick" if quick else None)
  c.trace = trace
  cfg_r.validate(c)
  train, test = traces.load_shipped(trace).split(c.train_frac)
  return (*routing_setup.trace_setup(c, train, test), train, test)


def test_record_names_per_trace():
  """azure_conv keeps the record the earlier runs wrote; other traces never overwrite it."""
  assert exp.record_name("azure_conv") == "serving_routing"
  names = {exp.record_name(t) for t in TRACES}
  assert names == {"serving_routing", "serving_routing_azure_code",
                   "serving_routing_mooncake_conv"}


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("trace", TRACES)
def test_config_validates_and_fits_each_trace(trace, quick):
  """Every trace's (quick and full) config validates; the setup serves the trace's model with a
  context that fits the smallest GPU's KV, the trace's TTFT SLO, the prefix cache exactly where
  the trace has hash_ids, and replays that fit n_eval_windows disjoint evaluation windows."""
  ct, su, train, test = _setup(trace, quick)
  assert su.model == cost_model.TRACE_MODELS[trace]
  assert ct.slo_ttft == (15.0 if trace == "mooncake_conv" else 2.0)
  assert su.cache == (trace == "mooncake_conv")
  assert su.rate_ref == pytest.approx(train.rate)
  specs = [s for cl in routing_setup.clusters(ct) for s in su.specs(cl)]
  kv = min(cost_model.GPU_TYPES[s].kv_blocks * cost_model.BLOCK_TOKENS for s in specs)
  assert su.max_model_len <= kv
  # a request of the full context is admissible on every GPU: its KV fits above the admission
  # watermark (engine.make_hardware keeps 1% of the blocks free); one that does not is never
  # admitted and its GPU spins max_events idle events per step (Mooncake quick run, 12ce4f2)
  for s in specs:
    kvb = cost_model.GPU_TYPES[s].kv_blocks
    assert -(-su.max_model_len // cost_model.BLOCK_TOKENS) <= kvb - int(0.01 * kvb)
  if trace == "mooncake_conv":
    assert set(specs) == {"H100-8B", "A100-8B", "L4-8B", "L40S-8B"}
    assert su.max_model_len > 32_768              # long prompts are not clipped to 4k
  else:
    assert set(specs) <= set(cfg_r.GPU_TYPES) and su.max_model_len == 4096
  # disjoint evenly spaced evaluation windows (harness.window_starts) in the evaluation part
  assert int(ct.n_eval_windows) * int(ct.eval_table) <= len(test)
  assert int(ct.train_table) <= int(ct.eval_table)
  if not quick:
    # >= 8 disjoint windows of the evaluation part (4,600 / 2,203 / 897 requests), in 64s
    want = {"azure_conv": 512, "azure_code": 256, "mooncake_conv": 64}[trace]
    assert int(ct.eval_table) == int(ct.train_table) == want
    assert ct.rate_per_window


def test_routing_replays_offer_the_same_mean_rate_per_window():
  """Routing env with rate_per_window: every K-request replay offers scale x rate_ref (Azure
  code's raw windows differ by > 5x), the burst shape inside kept."""
  tr = traces.load_shipped("azure_code").split(0.6)[0]
  k, ref, scale = 512, float(tr.rate), 0.7
  starts = np.array([0, 1219, 1519, 2029, len(tr) - k])
  raw = np.array([(k - 1) / (tr.arrival[s + k - 1] - tr.arrival[s]) for s in starts])
  assert raw.max() / raw.min() > 5
  kw = dict(table_size=k, trace=tr, train_frac=None, entity_obs=True, max_gpus=6)
  _, p = routing.make_routing(rate_per_window=True, rate_ref=ref, **kw)
  _, p_raw = routing.make_routing(**kw)
  assert p_raw.trace.norm is None and p.trace.norm is not None
  for s, lam in zip(starts, raw):
    key = jax.random.PRNGKey(1)
    req = workload.sample_requests(key, p.trace, k, scale, int(s), 1.0)
    np.testing.assert_allclose(float(workload.window_rate(req)), scale * ref, rtol=1e-5)
    r0 = workload.sample_requests(key, p_raw.trace, k, scale, int(s), 1.0)
    np.testing.assert_allclose(np.asarray(req.arrival) * ref, np.asarray(r0.arrival) * lam,
                               rtol=1e-4, atol=1e-6)


def test_experiment_envs_normalise_with_the_training_rate():
  """Every cluster's evaluation params (train and evaluation part) and the RL env are built
  with the training part's rate as reference: a replay of either part offers scale x it."""
  ct, su, train, test = _setup("azure_code", False)
  cl = routing_setup.Cluster(ct, ct.cluster, train, test, su)
  k = int(ct.eval_table)
  for p, n in ((cl.p_train, len(train)), (cl.p_test, len(test))):
    for s in (0, n - k):
      req = workload.sample_requests(jax.random.PRNGKey(0), p.trace, k, 1.0, s, 1.0)
      np.testing.assert_allclose(float(workload.window_rate(req)), train.rate, rtol=1e-5)


def test_mooncake_env_has_the_cache_and_the_cache_aware_family():
  """Mooncake routing: the shared entity env has the prefix cache (one more token feature),
  each cluster's params its own per-slot cache capacity (<= the env's row), and the tuned
  families include the cache-aware router, reachable through the one-compile switch."""
  ct, su, train, test = _setup("mooncake_conv", True)
  assert su.cache and su.cache_blocks is not None and len(su.cache_blocks) == ct.max_gpus
  clusters = [routing_setup.Cluster(ct, cl, train, test, su) for cl in routing_setup.clusters(ct)]
  env = clusters[0].env
  assert env.cache_blocks == su.cache_blocks
  assert env.ent_feats == routing.ENT_FEATS + 1
  for cl in clusters:
    caps = np.asarray(cl.p_train.cache_caps)
    assert caps.shape == (ct.max_gpus,) and np.all(caps <= np.asarray(su.cache_blocks))
    want = routing.default_cache_blocks(cl.specs)
    np.testing.assert_array_equal(caps[:len(cl.cluster)], want)
    assert cl.p_train.trace.hashes is not None and cl.p_test.trace.hashes is not None
  # per-cluster capacity reaches the engine: entries beyond a slot's capacity are never used
  p = clusters[0].p_train.replace(window_start=0)
  obs, st = env.reset(jax.random.PRNGKey(0), p)
  usable = np.sum(np.asarray(st.env_state.eng.c_time) < np.inf, -1) if hasattr(
      st, "env_state") else np.sum(np.asarray(st.eng.c_time) < np.inf, -1)
  np.testing.assert_array_equal(usable, np.asarray(p.cache_caps))
  assert obs.shape == (ct.max_gpus, env.ent_feats)
  # the cache-aware family is tuned, and the switch runs it
  grids = heuristics.router_grids(su.cache)
  assert "cache_aware" in grids and len(grids["cache_aware"]) == len(
      heuristics.cache_grid()["cache_aware"])
  assert "cache_aware" not in heuristics.router_grids(False)
  sw = heuristics.router_switch(env.n_gpus, entity=True, cache=True)
  ca = heuristics.make_router("cache_aware", env.n_gpus, entity=True)
  x = np.asarray(obs).copy()
  rng = np.random.default_rng(0)
  for _ in range(4):
    x[:, -1] = rng.uniform(size=x.shape[0]) * x[:, 0]     # prefix match of present GPUs
    for knobs in grids["cache_aware"][::5]:
      a = sw(heuristics.router_params("cache_aware", knobs, cache=True), jnp.asarray(x),
             jax.random.PRNGKey(0))
      b = ca({k: jnp.float32(v) for k, v in knobs.items()}, jnp.asarray(x), jax.random.PRNGKey(0))
      assert int(a) == int(b)
  # every router's switch params share one structure (grids stack)
  keys = {tuple(sorted(heuristics.router_params(n, g[0], cache=True))) for n, g in grids.items()}
  assert len(keys) == 1


def test_family_params_carry_each_clusters_cache_capacity():
  ct, su, train, test = _setup("mooncake_conv", True)
  cls = [routing_setup.Cluster(ct, cl, train, test, su) for cl in routing_setup.clusters(ct)[:2]]
  fp = routing.stack_family([c.p_train for c in cls], [1.0, 1.0])
  for i, c in enumerate(cls):
    np.testing.assert_array_equal(np.asarray(routing.cluster_params(fp, i).cache_caps),
                                  np.asarray(c.p_train.cache_caps))
