"""Trace loading/validation, synthetic workloads and the cost model (numpy, float64)."""

import numpy as np
import pytest

from jaxrl_suite.envs.serving import cost_model, traces


def test_shipped_traces_match_documented_statistics():
  conv = traces.load_shipped("azure_conv")
  code = traces.load_shipped("azure_code")
  assert len(conv) == 9754 and len(code) == 5100            # shared/data/traces/README.md
  assert np.all(np.diff(conv.arrival) >= 0) and conv.arrival[0] == 0
  s_conv, s_code = traces.summary(conv), traces.summary(code)
  # Design doc §3.1/§4 (sample): conv is near-Poisson, code is on/off bursty at ~3.1 req/s.
  assert 0.9 < s_conv["gap_cv"] < 1.3
  assert s_code["gap_cv"] > 5
  assert 2.9 < s_code["rate"] < 3.3
  assert s_conv["prompt"]["p90"] == pytest.approx(4075, abs=5)
  # Input and output lengths are nearly uncorrelated (log-corr |r| < 0.15).
  r = np.corrcoef(np.log1p(conv.prompt), np.log1p(conv.output))[0, 1]
  assert abs(r) < 0.15


def test_split_scale_clip():
  tr = traces.load_shipped("azure_conv")
  early, late = tr.split(0.6)
  assert len(early) + len(late) == len(tr)
  assert early.duration == pytest.approx(0.6 * tr.duration, rel=0.01)
  assert tr.scaled(2.0).rate == pytest.approx(2 * tr.rate)
  c = tr.clipped(4096, 2048)
  assert np.all(c.prompt + c.output <= 4096) and np.all(c.output >= 1) and np.all(c.prompt >= 1)


def _write(tmp_path, text, name="t.csv"):
  p = tmp_path / name
  p.write_text(text)
  return str(p)


@pytest.mark.parametrize("body,line,words", [
    ("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,1\n", 1, "missing column"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,5\n"
     "2023-11-16 18:15:47.00,-3,5\n", 3, "negative"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,abc\n", 2,
     "not an integer"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,5\n"
     "2023-11-16 18:15:40.00,10,5\n", 3, "not sorted"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", 2, "no data rows"),
    ("", 1, "empty"),
    ("timestamp,input_length,output_length,hash_ids\n0,10,5,\"[0]\"\nx,10,5,\"[1]\"\n", 3,
     "bad timestamp"),
    # hash_ids: one id per 512-token block, non-negative integers, a JSON array
    ("timestamp,input_length,output_length,hash_ids\n0,600,5,\"[0,1]\"\n0,600,5,\"[2]\"\n", 3,
     "needs ceil(600/512) = 2"),
    ("timestamp,input_length,output_length,hash_ids\n0,10,5,\"[-1]\"\n", 2, "non-negative"),
    ("timestamp,input_length,output_length,hash_ids\n0,10,5,\"[1.5]\"\n", 2, "non-negative"),
    ("timestamp,input_length,output_length,hash_ids\n0,10,5,\"[0,\"\n", 2, "not a JSON array"),
])
def test_malformed_trace_names_file_and_line(tmp_path, body, line, words):
  path = _write(tmp_path, body)
  with pytest.raises(traces.TraceError) as e:
    traces.load_trace(path)
  msg = str(e.value)
  assert f"{path}:{line}:" in msg and words in msg


def test_mooncake_format(tmp_path):
  path = _write(tmp_path, "timestamp,input_length,output_length,hash_ids\n"
                "0,100,5,\"[0]\"\n3000,1200,7,\"[0,4,5]\"\n")
  tr = traces.load_trace(path)
  np.testing.assert_allclose(tr.arrival, [0.0, 3.0])
  np.testing.assert_array_equal(tr.prompt, [100, 1200])
  np.testing.assert_array_equal(tr.output, [5, 7])
  np.testing.assert_array_equal(tr.hash_ids, [[0, -1, -1], [0, 4, 5]])
  # clipping to a 600-token context keeps the first ceil(p / 512) ids of the clipped prompt
  c = tr.clipped(600, 100)
  np.testing.assert_array_equal(c.prompt, [100, 593])
  np.testing.assert_array_equal(c.hash_ids, [[0, -1], [0, 4]])


def test_shipped_mooncake_sample():
  """The Mooncake conversation sample (first 12 minutes, data/ATTRIBUTION.md): the design doc's
  features (3-s arrival grid, a shared first block, long prompts) and a real reusable prefix."""
  mc = traces.load_shipped("mooncake_conv")
  assert len(mc) == 2154 and mc.hash_ids.shape == (2154, 241)
  off = (np.round(mc.arrival * 1000) + 1500) % 3000 - 1500
  assert np.all(np.abs(off) <= 2)                                      # 3-s buckets
  assert np.all(mc.hash_ids[:, 0] == mc.hash_ids[0, 0])                # common system prompt
  nb = (mc.hash_ids >= 0).sum(1)
  np.testing.assert_array_equal(nb, -(-mc.prompt // 512))
  assert 0.4 < (mc.prompt > 8192).mean() < 0.5                         # doc: 45% over 8k
  # share of prompt blocks seen before in the trace (an infinite cache's reuse): 0.287 in this
  # 12-minute sample (more over the whole hour, as the cache fills)
  seen, reused = set(), 0
  for row in mc.hash_ids:
    ids = row[row >= 0].tolist()
    reused += sum(h in seen for h in ids)
    seen.update(ids)
  assert reused / nb.sum() == pytest.approx(0.287, abs=0.001)


def test_synthetic_generators():
  p = traces.synthetic("poisson", 20000, 5.0, seed=1)
  g = traces.synthetic("gamma", 20000, 5.0, seed=1, cv=4.0)
  assert p.rate == pytest.approx(5.0, rel=0.05)
  assert g.rate == pytest.approx(5.0, rel=0.2)
  assert traces.summary(p)["gap_cv"] == pytest.approx(1.0, abs=0.05)
  assert traces.summary(g)["gap_cv"] > 3.0
  # Bimodal outputs: two clear modes (~30 and ~400 tokens), few in between.
  o = p.output
  assert np.mean((o > 80) & (o < 200)) < 0.15
  assert np.mean(o < 80) > 0.5 and np.mean(o > 200) > 0.2
  with pytest.raises(ValueError, match="rate"):
    traces.synthetic("poisson", 10, -1.0)


def test_cost_model_hand_computed():
  a = cost_model.A100_7B
  # decode step, 64 sequences of 1.2k context: t_ovh + max(t_w, 64 alpha) + 64 * 1200 * beta
  t = cost_model.iteration_time(np, a.t_ovh, a.t_w, a.alpha, a.beta, a.gamma, 64.0, 64 * 1200.0,
                                0.0)
  assert t == pytest.approx(0.5e-3 + 9.3e-3 + 64 * 1200 * 0.26e-6, rel=1e-12)
  assert 0.025 < t < 0.035                     # design doc §2.2 worked example: ~30 ms
  # compute-bound prefill of 2048 tokens: alpha * 2048 + gamma * 2048^2 (~130 ms + attention)
  t = cost_model.iteration_time(np, a.t_ovh, a.t_w, a.alpha, a.beta, a.gamma, 2048.0, 0.0,
                                2048.0**2)
  assert t == pytest.approx(0.5e-3 + 62e-6 * 2048 + 3.4e-9 * 2048**2, rel=1e-12)
  # KV capacity in 16-token blocks; L4 ~6x less than A100; L4 ~5x slower decode floor.
  assert a.kv_blocks == 115_000 // 16
  assert cost_model.L4_7B.kv_blocks * 6 < a.kv_blocks * 1.1
  assert cost_model.L4_7B.t_w / a.t_w == pytest.approx(4.8, abs=0.3)


def test_static_closed_form_equals_iteration_sum():
  a = cost_model.H100_7B
  ps = [100, 900, 2500]
  os_ = [3, 40, 17]
  n, m = len(ps), max(os_)
  pairs = sum(p * (p + 1) // 2 for p in ps)     # causal prefill of each prompt
  pref, tot = cost_model.static_batch_time(np, a.t_ovh, a.t_w, a.alpha, a.beta, a.gamma, n,
                                           sum(ps), pairs, m)
  it = cost_model.iteration_time(np, a.t_ovh, a.t_w, a.alpha, 0.0, a.gamma, sum(ps), 0.0, pairs)
  assert pref == pytest.approx(it, rel=1e-12)
  for k in range(1, m):
    it += cost_model.iteration_time(np, a.t_ovh, a.t_w, a.alpha, a.beta, 0.0, n,
                                    sum(ps) + n * k, 0.0)
  assert tot == pytest.approx(it, rel=1e-12)
