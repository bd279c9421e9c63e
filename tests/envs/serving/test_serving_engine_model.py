"""The engine's cost model and metrics against hand computations and float64 numpy references:
the causal prefill term, the long-context model profiles, goodput / throughput as DistServe
defines them, and per-token streaming of static batches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.serving import (batching, cost_model, engine, evaluate, heuristics,
                                      reference_sim, traces)


def _pairs_by_token(p, c):
  """float64 numpy: token j = 1..c of a chunk after p cached tokens attends to p + j keys."""
  return float(np.sum(p + np.arange(1, c + 1, dtype=np.float64)))


@pytest.mark.parametrize("p,c", [(0, 1), (0, 2048), (300, 1), (1000, 768), (120_000, 2048)])
def test_causal_prefill_pairs_equal_sum_over_tokens(p, c):
  assert cost_model.prefill_pairs(p, c) == _pairs_by_token(p, c)
  # average keys per query: p + (c + 1) / 2, not p + c
  assert cost_model.prefill_pairs(p, c) / c == pytest.approx(p + (c + 1) / 2, rel=1e-15)


def test_engine_chunked_prefill_costs_causal_pairs():
  """One request of 5,000 prompt tokens on one A100 with a 2,048-token budget: three chunks
  (2048, 2048, 904) after 0, 2048, 4096 tokens; TTFT = the three iterations' times with the
  per-token attention sums, in both simulators."""
  spec, p, mbt = cost_model.A100_7B, 5000, 2048
  want, pf = 0.0, 0
  while pf < p:
    c = min(mbt, p - pf)
    want += spec.t_ovh + max(spec.t_w, spec.alpha * c) + spec.gamma * _pairs_by_token(pf, c)
    pf += c
  tr = traces.Trace(np.zeros(1), np.array([p]), np.array([1]))
  with jax.enable_x64(True):
    req = engine.Requests(arrival=jnp.zeros(1), prompt=jnp.array([p], jnp.int32),
                          output=jnp.array([1], jnp.int32), pred=jnp.zeros(1, jnp.int32))
    hw = engine.make_hardware([spec], mbt)
    eng = engine.insert(engine.init_engine(req, 1, 16), req, 0, 0)
    eng = engine.schedule(eng, hw, 0, 0.0)
    eng, _, _ = engine.run_until(eng, hw, jnp.inf, 100, 2.0, 0.2)
    ttft = float(engine.results(eng).ttft[0])
  ref = reference_sim.RefCluster([spec], tr.arrival, tr.prompt, tr.output, cap=16,
                                 max_batched_tokens=mbt).run_routing(lambda sim, i: 0)
  assert ttft == pytest.approx(want, rel=1e-12)
  assert ref["ttft"][0] == pytest.approx(want, rel=1e-12)


def test_long_context_profile_from_published_architecture():
  m = cost_model.LLAMA31_8B
  assert m.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072
  assert cost_model.LLAMA2_7B.kv_bytes_per_token == 4 * m.kv_bytes_per_token
  a7, a8 = cost_model.A100_7B, cost_model.LONG_CONTEXT["A100-7B"]
  # KV memory = the 7B's KV memory minus the extra weights, at 128 KiB per token
  kv_mem = a7.kv_tokens * 524_288 - 2 * (8.03e9 - 6.74e9)
  assert a8.kv_tokens == int(kv_mem // 131_072)
  assert a8.beta == pytest.approx(a7.beta / 4, rel=1e-12)
  assert a8.gamma == pytest.approx(a7.gamma, rel=1e-12)
  assert a8.t_w == pytest.approx(a7.t_w * 8.03 / 6.74, rel=1e-12)
  # the same GPU type (observation code, vLLM defaults), a 128k context where the KV holds it
  assert cost_model.spec_table([a8])["type_id"][0] == cost_model.TYPE_INDEX["A100-7B"]
  assert cost_model.engine_settings(a8, 0.2).max_num_seqs == 256
  assert cost_model.max_model_len_of(a8) == 131_072
  l4 = cost_model.LONG_CONTEXT["L4-7B"]
  assert cost_model.max_model_len_of(l4) == l4.kv_blocks * 16 < 131_072
  assert cost_model.spec_for("A100-7B", "Llama-3.1-8B") is a8
  assert cost_model.spec_for("A100-7B") is a7
  with pytest.raises(ValueError, match="unknown model"):
    cost_model.spec_for("A100-7B", "gpt-5")


def test_batching_token_budget_is_the_tpot_fitted_one():
  """serving_batching runs one GPU with a uniform token budget; on its GPU type that budget is
  the one routing's per-GPU rule picks (the largest whose worst iteration fits the TPOT SLO) for
  every trace's model, so batching and routing share an engine setting, not just a default."""
  import configs.serving_batching as cfg_b
  c = cfg_b.get_config()
  for trace, model in cost_model.TRACE_MODELS.items():
    spec = cost_model.spec_for(c.gpu, model)
    fitted = cost_model.engine_settings(spec, c.slo_tpot).max_num_batched_tokens
    assert fitted == c.max_batched_tokens, (trace, model, fitted)
    assert cost_model.worst_iteration_time(spec, fitted) <= c.slo_tpot


def test_mooncake_fits_the_long_context_model():
  mc = traces.load_shipped("mooncake_conv")
  spec = cost_model.spec_for("A100-7B", cost_model.TRACE_MODELS["mooncake_conv"])
  long = traces.clip_stats(mc, cost_model.max_model_len_of(spec))
  short = traces.clip_stats(mc, 4096)
  assert long["prompt_tokens_removed_share"] == 0.0 and long["clipped_share"] == 0.0
  assert short["prompt_tokens_removed_share"] > 0.7      # the 4k model dropped most of it


def test_goodput_and_throughput_hand_computed():
  """Six requests, the first one a warm-up: offered window [t0, t1] = [2, 6], W = 4 s.
  Measured: r1 meets both SLOs (TTFT 0.5, TPOT (3.5 - 2.5) / 2 = 0.5); r2 misses TTFT (2.5 > 2);
  r3 misses TPOT ((10 - 4.5) / 10 = 0.55 > 0.5); r4 meets both; r5 is unfinished.
  goodput = 2 SLO-met measured requests / 4 s. throughput = completions at times in [2, 6]:
  r0 (a warm-up request, at 2.5), r1 (3.5), r4 (6.0) -> 3 / 4 s; r2 (6.5) and r3 (10) finish
  after the window. completion rate = 4 finished measured / (10 - 2) s; attainment 2 / 5."""
  arr = {"arrival": np.array([0.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
         "ttft": np.array([0.5, 2.5, 5.5, 4.5, 5.5, -1.0]),
         "finish": np.array([2.5, 3.5, 6.5, 10.0, 6.0, -1.0]),
         "status": np.array([3, 3, 3, 3, 3, 2]), "prompt": np.full(6, 100),
         "output": np.array([7, 3, 3, 11, 2, 5]), "gpu": np.zeros(6, int), "npre": np.zeros(6)}
  m = evaluate.metrics(arr, slo_ttft=2.0, slo_tpot=0.5, warmup=1)
  assert m["goodput"] == pytest.approx(2 / 4)
  assert m["throughput"] == pytest.approx(3 / 4)
  assert m["token_throughput"] == pytest.approx((7 + 3 + 2) / 4)
  assert m["completion_rate"] == pytest.approx(4 / 8)
  assert m["slo_attainment"] == pytest.approx(2 / 5)
  assert m["unfinished"] == 1
  # without a warm-up the window is [0, 6]: completions r0, r1, r4 -> 3 / 6; goodput: r0 too
  m0 = evaluate.metrics(arr, slo_ttft=2.0, slo_tpot=0.5)
  assert m0["throughput"] == pytest.approx(3 / 6) and m0["goodput"] == pytest.approx(3 / 6)


def test_static_batch_streams_per_token():
  """Two requests (prompts 100, 300; outputs 3, 10) arrive together on one idle A100 and go in
  one static batch: each streams one token per padded decode step, so the short one is complete
  after the prefill + 2 decode steps, not at the batch end (prefill + 9 steps)."""
  spec = cost_model.A100_7B
  ps, os_ = [100, 300], [3, 10]
  it = lambda n_tok, ctx, pairs: float(cost_model.iteration_time(
      np, spec.t_ovh, spec.t_w, spec.alpha, spec.beta, spec.gamma, n_tok, ctx, pairs))
  pref = it(400, 0, 100 * 101 / 2 + 300 * 301 / 2)
  steps = np.cumsum([it(2, 400 + 2 * k, 0) - spec.gamma * 0 for k in range(1, 10)])
  want_finish = [pref + steps[1], pref + steps[8]]
  tr = traces.Trace(np.array([0.0, 0.0]), np.array(ps), np.array(os_))
  with jax.enable_x64(True):
    env, p = batching.make_batching("static", table_size=2, trace=tr, train_frac=None)
    p = p.replace(window_start=0, rate_scale=1.0, pred_acc=1.0)
    st, _, _ = evaluate.rollout(env, p, heuristics.static_b, {"b_idx": 2, "b": 2},
                                jax.random.PRNGKey(0), 10)
  ref = reference_sim.simulate_static(spec, tr.arrival, tr.prompt, tr.output, lambda v: 2)
  for got in (np.asarray(st.finish), ref["finish"]):
    np.testing.assert_allclose(got, want_finish, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(st.ttft), [pref, pref], rtol=1e-12)
  # TPOT of the short member = its own 2 decode steps / 2, far below the batch-end's 9 steps / 2
  m = evaluate.metrics(evaluate.episode_arrays(st), 2.0, 0.2)
  assert m["unfinished"] == 0


def test_prefix_cache_lookups_equal_all_pairs_comparison():
  """The cache lookups (engine._lookup: binary search in the sorted row; _holders: entries
  searched among the sorted selected ids; _leading: the prefix length; prefix_match: the
  router's view) give what the all-pairs comparison of every block with every cache entry
  gives: found blocks, the prefix length m, and the entries hit (every entry holding a selected
  block id, duplicates included), on rows with empty entries (-1) and repeated ids."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  from jaxrl_suite.envs.serving import engine
  rng = np.random.default_rng(0)
  n, c, s, b = 64, 24, 8, 6          # trials, entries, slots, blocks (one compile for all)
  row = rng.integers(-1, 20, (n, c)).astype(np.int32)
  h = rng.integers(-1, 20, (n, s, b)).astype(np.int32)
  sel = rng.random((n, s, b)) < 0.5

  def one(row, h, sel):
    found = engine._lookup(jnp.sort(row), h)
    return engine._leading(found), found, engine._holders(row, h, found & sel)

  m, found, hit = jax.jit(jax.vmap(one))(jnp.asarray(row), jnp.asarray(h), jnp.asarray(sel))
  eq = (h[..., None] == row[:, None, None, :]) & (h >= 0)[..., None]      # [n, S, B, C]
  np.testing.assert_array_equal(np.asarray(found), eq.any(-1))
  np.testing.assert_array_equal(np.asarray(m), np.cumprod(eq.any(-1), axis=2).sum(2))
  np.testing.assert_array_equal(np.asarray(hit), (eq & sel[..., None]).any((1, 2)))
  assert (eq.sum(-1) > 1).any() and (~eq.any(-1)).any()     # duplicates and misses occur
  # the router's view (engine.prefix_match): one prompt against every GPU's row
  eng = engine.Engine.__new__(engine.Engine)
  object.__setattr__(eng, "c_hash", jnp.asarray(row[:4]))
  prompt = 3 * engine.CACHE_BLOCK
  got = engine.prefix_match(eng, jnp.asarray(h[0, 0]), prompt)
  lead = np.cumprod((h[0, 0][None, :, None] == row[:4, None, :]).any(-1) & (h[0, 0] >= 0),
                    axis=1).sum(1)
  np.testing.assert_allclose(np.asarray(got), np.minimum(engine.CACHE_BLOCK * lead, prompt)
                             / prompt, rtol=1e-6)
