"""Config validation, and the end-to-end --quick run of experiments/compaction.py (slow)."""

import json
import os
import sys

import numpy as np
import pytest

from jaxrl_suite.core import results as results_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def test_config_validate_names_the_field():
  from configs import compaction as cfg_mod
  cfg_mod.validate(cfg_mod.get_config())
  cfg_mod.validate(cfg_mod.get_config("quick"))
  for field, value, match in (("variants", ("nope",), "variants"),
                              ("num_envs", 30, "num_envs"),
                              ("window", 200, "window"),
                              ("iterations", 21, "iterations"),
                              ("train_events", (24,), "train_events"),
                              ("train_events", (16, 128), "unseen")):
    c = cfg_mod.get_config()
    c[field] = value
    with pytest.raises(ValueError, match=match):
      cfg_mod.validate(c)
  c = cfg_mod.get_config()
  c.chunk, c.iterations = 5, 25           # 25 iterations do not split evenly over 2 horizons
  with pytest.raises(ValueError, match="len\\(train_events\\)"):
    cfg_mod.validate(c)


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path):
  from configs import compaction as cfg_mod
  from experiments import compaction as exp
  c = cfg_mod.get_config("quick")
  rec = exp.run(c, str(tmp_path / "wd"), results_dir=str(tmp_path / "res"), progress=False)
  for name in ("truncation", "no_rl_summariser", "oracle_summary", "token_cross", "agent_token"):
    assert name in rec["rows"]
    for h in c.eval_events:
      m = rec["rows"][name][h]["final_acc"]
      assert m.shape == (c.num_seeds,) and ((m >= 0) & (m <= 1)).all()
  # The oracle writes true totals: every summary it leaves decodes correctly.
  fid = rec["rows"]["oracle_summary"][16]["fidelity"]
  assert np.allclose(fid[np.isfinite(fid)], 1.0)
  assert rec["exact_resegmentation"]["token"]["loss"] < 1e-5
  assert rec["curves"]["token_cross"]["return"].shape == (c.num_seeds, c.iterations)
  # Horizons are mixed within every batch: one training curve per horizon.
  for h in c.train_events:
    assert rec["curves"]["token_cross"][f"return_H{h}"].shape == (c.num_seeds, c.iterations)
  assert len(rec["claims"]) == 3
  with open(tmp_path / "res" / "compaction.json") as f:
    results_lib.validate_record(json.load(f))        # raises on a malformed record
  assert (tmp_path / "res" / "compaction.png").exists()


def test_analyse_reads_the_full_grid_and_each_training_horizon():
  """`analyse` on synthetic records of every variant (no training): the 2x3 grid table, one
  training-curve row per variant and training horizon, the agent drift per horizon and the
  three verdicts; the late slope of a curve that rises only at one horizon is found there."""
  from configs import compaction as cfg_mod
  from experiments import compaction as exp
  c = cfg_mod.get_config()
  rng = np.random.default_rng(0)
  s, t = c.num_seeds, c.iterations
  metrics = ("final_acc", "mid_acc", "fidelity", "compactions", "invalid")
  names = (*cfg_mod.BASELINES, "no_rl_agent", *c.variants)
  rows = {n: {h: {m: rng.uniform(0, 1, s) for m in metrics} for h in c.eval_events}
          for n in names}
  horizon = np.tile(np.resize(np.asarray(c.train_events, float), t), (s, 1))
  curves = {}
  for v in c.variants:
    ret = np.where(horizon == 32, np.arange(t) / 10.0, 1.0) * np.ones((s, 1))
    curves[v] = {"return": ret, "windows": 2 + horizon / 16, "horizon": horizon,
                 # horizons are mixed within each batch: one curve per horizon, every iteration
                 **{f"return_H{h}": (np.arange(t) / 10.0 if h == 32 else np.ones(t))
                    * np.ones((s, 1)) for h in c.train_events},
                 **{f"windows_H{h}": 2 + horizon / 16 for h in c.train_events}}
  exact = {"token": {"loss": 1e-8, "grad": 0.0}, "segment": {"loss": 0.3, "grad": 0.4}}
  claims, md = exp.analyse(c, rows, curves, {}, exact)
  assert len(claims) == 3 and "The 2x3 grid" in md
  for v in c.variants:
    for h in c.train_events:
      assert f"| {v} | {h} |" in md
  assert "H=16: token" in claims[0]["ours"] and "H=32: token" in claims[0]["ours"]
  assert "independent" not in claims[0]["ours"] and "indep" in claims[0]["ours"]
  # token_cross return rises by 1/10 per iteration at H=32 only: slope 1.0 per 10 iterations.
  assert "H=16 0.000 [0.000, 0.000], H=32 1.000 [1.000, 1.000]" in claims[1]["ours"]
