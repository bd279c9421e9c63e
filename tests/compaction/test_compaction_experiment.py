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
                              ("train_events", 24, "train_events")):
    c = cfg_mod.get_config()
    c[field] = value
    with pytest.raises(ValueError, match=match):
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
  assert len(rec["claims"]) == 3
  with open(tmp_path / "res" / "compaction.json") as f:
    results_lib.validate_record(json.load(f))        # raises on a malformed record
  assert (tmp_path / "res" / "compaction.png").exists()
