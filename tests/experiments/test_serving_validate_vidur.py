"""experiments/validate_vidur.py: config checks and a --quick run end to end (record + tables)."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from experiments import validate_vidur as vv  # noqa: E402


def test_config_errors_name_the_flag():
  for kw, match in (({"trace": "nope"}, "--trace 'nope'"), ({"requests": 2}, "--requests"),
                    ({"rate_scale": 0.0}, "--rate_scale")):
    with pytest.raises(ValueError, match=match):
      vv.validate(vv.get_config(False, **kw))


@pytest.mark.slow
def test_quick_run_writes_the_tables(tmp_path, monkeypatch):
  from jaxrl_suite.core import results
  monkeypatch.setenv(results.ENV_VAR, str(tmp_path))
  c = vv.get_config(True)
  path = vv.run(c, True)
  rec = json.load(open(path))
  results.validate_record(rec)
  assert rec["mode"] == "quick" and rec["claims"] == []
  bt = rec["batch_times"]
  # the engine's profiled batch times hold the target; the closed forms do not
  for kind in ("prefill", "decode"):
    s = bt[f"{kind} attention (profiled)"]
    assert 0.95 <= s["p10"] and s["p90"] <= 1.05, (kind, s)
    cf = bt[f"{kind} attention (closed form)"]
    assert cf["p10"] < 0.95 or cf["p90"] > 1.05, (kind, cf)
  s = bt["composed batch (profiled)"]
  assert 0.95 <= s["p10"] and s["p90"] <= 1.05 and s["n"] == c.n_composed
  sv = rec["serving"]
  assert set(sv) == {"analytic", "profiled"}
  for m in sv.values():
    assert m["finished"] == c.requests
    assert 0 < m["ttft_p50"] <= m["ttft_p90"] <= m["ttft_p99"] <= m["e2e_p99"]
    assert 0 < m["tpot_p50"] <= m["tpot_p99"] and m["throughput_tok_s"] > 0
  md = open(os.path.join(tmp_path, "serving_validation.md")).read()
  assert "fitted / profiled" in md and "| ttft_p90 |" in md
