"""envs/serving/vidur_compare.py and vidur_report.py: known answers on hand-made arrays (the
engine replays and Vidur's side run in tests/experiments/test_serving_validate_vidur.py)."""

import ml_collections
import numpy as np
import pytest

from jaxrl_suite.envs.serving import engine, profiled_cost, vidur_compare as vc, vidur_report


def test_ratio_stats_known_answer():
  s = vc.ratio_stats(np.linspace(0.5, 1.5, 101))
  assert s["n"] == 101
  np.testing.assert_allclose([s["p10"], s["p50"], s["p90"]], [0.6, 1.0, 1.4])
  assert s["max_abs_err"] == pytest.approx(0.5)


def test_latencies_nan_where_unfinished_and_tpot_needs_two_tokens():
  arrival, first = np.array([0.0, 1.0, 2.0]), np.array([0.5, 1.5, 9.0])
  finish, output = np.array([2.5, 1.5, 9.0]), np.array([5, 1, 3])
  lat = vc.latencies(arrival, first, finish, output, np.array([True, True, False]))
  np.testing.assert_allclose(lat["ttft"], [0.5, 0.5, np.nan])
  np.testing.assert_allclose(lat["tpot"], [0.5, np.nan, np.nan])   # (2.5 - 0.5) / 4
  np.testing.assert_allclose(lat["e2e"], [2.5, 0.5, np.nan])
  # 2 finished over the makespan 0 .. 2.5
  assert vc.throughput(arrival, finish, np.array([True, True, False])) == pytest.approx(0.8)


def test_serving_metrics_known_answer():
  r = {"arrival": np.array([0.0, 1.0]), "ttft": np.array([1.0, 2.0]),
       "finish": np.array([3.0, 4.0]), "output": np.array([3, 5]),
       "status": np.array([engine.DONE, engine.DONE]), "npre": np.array([1, 0])}
  m = vc.serving_metrics(r)
  assert m["finished"] == m["requests"] == 2 and m["preemptions"] == 1
  assert m["ttft_p50"] == pytest.approx(1.0) and m["e2e_p50"] == pytest.approx(3.0)
  assert m["tpot_p50"] == pytest.approx(0.75)      # mean of 2 / 2 and 2 / 4
  assert m["throughput_req_s"] == pytest.approx(0.5)
  assert m["throughput_tok_s"] == pytest.approx(2.0)


def test_compare_requests_scaled_copy():
  """Vidur = engine / 2 on every request: r = 1 and every percentile ratio is 2."""
  rng = np.random.default_rng(0)
  ours = {m: rng.uniform(0.1, 5.0, 50) for m in ("ttft", "tpot", "e2e")}
  ours["tpot"][3] = np.nan                               # left out of that metric only
  out = vc.compare_requests(ours, {m: v / 2 for m, v in ours.items()})
  assert out["tpot"]["n"] == 49 and out["ttft"]["n"] == 50
  for row in out.values():
    assert row["pearson"] == pytest.approx(1.0) and row["spearman"] == pytest.approx(1.0)
    for q in (50, 90, 99):
      assert row[f"ratio_p{q}"] == pytest.approx(2.0)


def test_round_up():
  np.testing.assert_array_equal(vc.round_up([0, 1, 8, 9], 8), [0, 8, 8, 16])


def test_price_batches_known_answer():
  """Batch [q total, n decode, decode kv sum, [[q, kv]], t]: the closed formula of the tables;
  at points already on Vidur's lookup grid both pricings agree."""
  tab = profiled_cost.a100_llama2_7b()
  batches = [[64 + 4, 4, 4 * 512, [[64, 256 + 64]], 0.02], [8, 8, 8 * 1024, [], 0.01]]
  want0 = profiled_cost.iteration_time(np, tab, 68.0, profiled_cost.prefill_ms(np, tab, 64.0,
                                                                               256.0), 4.0, 512.0)
  want1 = profiled_cost.iteration_time(np, tab, 8.0, 0.0, 8.0, 1024.0)
  got = vc.price_batches(batches)
  np.testing.assert_allclose(got, [want0, want1], rtol=1e-12)
  aligned = [[64, 4, 4 * 512, [[64, 256]], 0.02], [8, 8, 8 * 1024, [], 0.01]]
  np.testing.assert_allclose(vc.price_batches(aligned, True)[1], vc.price_batches(aligned)[1])
  np.testing.assert_allclose(vc.batch_ratios(batches), got / np.array([0.02, 0.01]))
  s = vc.batch_ratio_stats(batches)
  assert s["as formed"]["n"] == 2 and s["at Vidur's lookup keys"]["n"] == 2
  # batch 0's decode key (4, 512) is not profiled (the 512-token rows start at 6 sequences),
  # batch 1's (8, 1024) is: one batch on each side of the split
  assert s["at its keys, decode key a profiled row"]["n"] == 1
  assert s["at its keys, decode key between rows"]["n"] == 1


def test_vidur_keys_and_profiled_decode_keys():
  """Vidur's rounding (q total up to 8, chunk up to 32, cached + chunk up to 256, floored mean
  context up to 256) and which decode keys are profiled rows, by hand."""
  batches = [[70, 2, 2 * 1100 + 1, [[65, 300]], 0.0],    # mean 1100.5 -> 1280: between rows
             [3, 3, 3 * 1000, [], 0.0],                  # mean 1000 -> 1024, 3 decoders: a row
             [2048, 0, 0, [[1000, 1000], [1048, 2000]], 0.0]]   # no decoders
  k = vc.vidur_keys(batches)
  np.testing.assert_array_equal(k["n_tok"], [72, 8, 2048])
  np.testing.assert_array_equal(k["mean_kv"], [1280, 1024, 0])
  np.testing.assert_array_equal(k["idx"], [0, 2, 2])
  np.testing.assert_array_equal(k["q"], [96, 1024, 1056])
  np.testing.assert_array_equal(k["kv"], [512, 1024, 2048])
  np.testing.assert_array_equal(vc.decode_key_profiled(batches), [False, True, True])


def test_composed_batches_hit_profiled_gemm_counts():
  prof = profiled_cost.load_profiles()
  cb = vc.composed_batches(prof, 20, 0)
  assert cb.shape == (20, 5)
  assert set(cb[:, 0] + cb[:, 2]) <= set(prof["gemm"][:, 0])
  np.testing.assert_array_equal(cb, vc.composed_batches(prof, 20, 0))   # seeded


def _side(p10=1.0, p90=1.02, cap_ratio=1.01, lat=1.1):
  row = {"ratio_p50": lat, "ratio_p90": lat}
  load = {"batch_ratio": {"as formed": {"p10": p10, "p90": p90}},
          "requests": {"ttft": row, "tpot": row, "e2e": row}}
  return {"vidur_skipped": "", "capacity": {"ratio": cap_ratio},
          "loads": {"0.5": load, "0.9": load}}


def _config():
  c = ml_collections.ConfigDict()
  c.target_batch, c.target_capacity, c.target_latency = 0.05, 0.05, 0.15
  c.target_loads = (0.5, 0.9)
  return c


def test_targets_met_and_missed():
  c = _config()
  rows = vc.targets(c, _side())
  assert len(rows) == 2 + 1 + 2 * 3 and all(r["met"] for r in rows)
  rows = vc.targets(c, _side(p10=0.9, cap_ratio=1.2, lat=1.2))
  assert not any(r["met"] for r in rows)
  assert rows[2] == {"target": "capacity within 5%", "value": "1.200", "met": False}
  assert vc.targets(c, {"vidur_skipped": "no vidur"}) == []


def test_vidur_capacity_and_one_load_without_vidur():
  cap = vc.vidur_capacity({"engine_req_s": 2.0, "engine_finished": 3},
                          {"arrival": np.array([0.0, 0.0]), "finish": np.array([1.0, 4.0]),
                           "completed": np.array([True, True]),
                           "batches": [[8, 8, 8 * 1024, [], 0.01]]})
  assert cap["vidur_req_s"] == pytest.approx(0.5) and cap["ratio"] == pytest.approx(4.0)
  assert cap["vidur_finished"] == 2 and cap["batch_ratio"]["as formed"]["n"] == 1
  r = {"arrival": np.array([0.0, 1.0, 2.0]), "ttft": np.array([0.5, 1.5, 2.5]),
       "finish": np.array([1.0, 2.0, 4.0]), "output": np.array([2, 2, 2]),
       "status": np.array([engine.DONE] * 3), "npre": np.array([0, 2, 0])}
  arrays = {}
  out = vc.one_load(r, None, arrays)
  assert out == {"offered_req_s": 1.0, "engine": {"finished": 3, "preemptions": 2,
                                                   "throughput_req_s": 0.75}}
  assert arrays == {}


def test_report_tables():
  c = ml_collections.ConfigDict(dict(requests=96, trace="azure_conv", rate_scale=1.0,
                                     gpu="A100-7B", cap=128, max_batched_tokens=2048,
                                     block_size=16, kv_blocks=100))
  s = {"n": 3, "p10": 0.9, "p50": 1.0, "p90": 1.1, "max_abs_err": 0.2}
  md = vidur_report.markdown(c, {"G": s}, {"analytic": {"finished": 96, "ttft_p50": 0.12345},
                                           "profiled": {"finished": 95, "ttft_p50": 1.5}})
  assert "| G | 3 | 0.900 | 1.000 | 1.100 | 0.200 |" in md
  assert "| finished | 96 | 95 |" in md and "| ttft_p50 | 0.1235 | 1.5 |" in md
  side = {"vidur_skipped": "no vidur", "capacity": {"engine_req_s": 3.25}}
  md = vidur_report.side_markdown(c, side, [])
  assert "Vidur side skipped: no vidur." in md and "Engine capacity 3.250 req/s." in md


def test_side_report_has_the_own_capacity_table():
  c = ml_collections.ConfigDict(dict(requests=96, trace="azure_conv", cap=128,
                                     max_batched_tokens=2048, block_size=16, kv_blocks=100))
  s = {"n": 3, "p10": 0.9, "p50": 1.0, "p90": 1.1, "max_abs_err": 0.2}
  row = {"pearson": 0.9, "spearman": 0.8, "engine_p50": 1.0, "vidur_p50": 2.0, "ratio_p50": 0.5,
         "ratio_p90": 0.6, "ratio_p99": 0.7}
  ld = {"offered_req_s": 2.0, "engine": {"throughput_req_s": 1.9},
        "vidur": {"throughput_req_s": 1.8}, "requests": {"ttft": row},
        "batch_ratio": {"as formed": s}}
  side = {"capacity": {"engine_req_s": 4.0, "vidur_req_s": 3.8, "ratio": 4.0 / 3.8,
                       "batch_ratio": {"as formed": s}},
          "loads": {"0.5": ld}, "own_loads": {"0.9": {**ld, "vidur_offered_req_s": 1.5}},
          "cached_prefill_loads": {"0.5": ld}}
  md = vidur_report.side_markdown(c, side, [])
  for want in ("| 0.5 | 2.000 | 1.900 / 1.800 | TTFT | 0.900 | 0.800 | 1 / 2 | 0.500 |",
               "| load (of own capacity) |", "| 0.9 | 2.000 / 1.500 | 1.900 / 1.800 | TTFT |",
               "| 0.5 | 3 | as formed | 0.900 | 1.000 | 1.100 | 0.200 |",
               "looked up at the chunk's cached tokens",
               "Per batch as formed (load 0.5): p10 / p50 / p90 = 0.900 / 1.000 / 1.100."):
    assert want in md, want


def test_vidur_rebuild_known_answer():
  """32 layers x (mlp at the rounded token count + each prefill at (kv, chunk) keys + decode at
  (n, rounded mean context)), in ms -> s; a batch without decoders has no decode term."""
  forests = {"mlp_up_proj": [[72.0, 1.0], [8.0, 0.5], [2048.0, 3.0]],
             "attn_decode": [[2.0, 1280.0, 0.25], [3.0, 1024.0, 0.125]],
             "attn_prefill": [[512.0, 96.0, 0.5], [1024.0, 1024.0, 2.0], [2048.0, 1056.0, 4.0]]}
  batches = [[70, 2, 2 * 1100 + 1, [[65, 300]], 0.0],
             [3, 3, 3 * 1000, [], 0.0],
             [2048, 0, 0, [[1000, 1000], [1048, 2000]], 0.0]]
  want = 1e-3 * 32 * np.array([1.0 + 0.5 + 0.25, 0.5 + 0.125, 3.0 + 2.0 + 4.0])
  np.testing.assert_allclose(vc.vidur_rebuild(batches, forests), want, rtol=1e-12)
  t = [b[:4] + [w] for b, w in zip(batches, want)]
  s = vc.batch_ratio_stats(t, forests)["Vidur rebuilt from its forests at its keys / its time"]
  assert s["n"] == 3 and s["max_abs_err"] < 1e-12


def test_batch_arrays_and_offered_rate():
  a = vc.batch_arrays([[70, 2, 2201, [[65, 300]], 0.0], [3, 0, 0, [], 0.0]])
  np.testing.assert_array_equal(a["n_tok"], [70, 3])
  np.testing.assert_array_equal(a["mean_kv"], [1100.5, 0.0])
  np.testing.assert_array_equal(a["q"], [65])
  np.testing.assert_array_equal(a["kv"], [300])
  assert vc.offered_req_s(np.array([0.0, 0.5, 2.0])) == 1.0
