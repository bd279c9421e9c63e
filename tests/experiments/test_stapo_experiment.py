"""experiments/stapo.py --quick end to end, the config validation, the warm-start windows."""

import json
import os

import numpy as np
import pytest

from configs import stapo as stapo_config
from jaxrl_suite.core import results as results_lib
from jaxrl_suite.lm import stapo


def test_config_validation_names_the_field():
  c = stapo_config.get_config()
  stapo_config.validate(c)
  for field, bad in (("train_envs", 12), ("methods", ["grpo", "ppo"]), ("group_size", 1),
                     ("keep_frac", 0.0), ("ws_lr", 0.0), ("methods", ["grpo", "grpo"]),
                     ("ema_decay", 1.5), ("outlier_rule", "max"), ("sweep_steps", 0),
                     ("kl_coef", -0.1), ("lr_grid", [3e-4, 0.0]),
                     ("max_budget", 90), ("false_flag_rate", 0.5), ("epo_lower", 1.2),
                     ("flat_methods", ["grpo", "ppo"]), ("val_envs", 12)):
    c = stapo_config.get_config()
    c[field] = bad
    with pytest.raises(ValueError, match=field):
      stapo_config.validate(c)


def test_truncate_oldest_segments_on_a_hand_made_episode():
  # turns of (obs, action) lengths (3, 2), (2, 2), (4, 2); window 9, max action 2
  obs = np.array([[[10, 11, 12, 0], [20, 21, 0, 0], [30, 31, 32, 33]]])
  act = np.array([[[1, 2], [3, 4], [5, 6]]])
  rows, mask = stapo.truncate_oldest_segments(obs, np.array([[3, 2, 4]]), act,
                                              np.array([[2, 2, 2]]), np.ones((1, 3), bool), 9, 2)
  # turn 2 does not fit (4 + 4 + 2 > 9... 8 + 4 + 2 > 9): keep the most recent whole turns
  # within 9 - 2 - 4 = 3 tokens -> none (turn 1 has 4), so the second window starts empty
  np.testing.assert_array_equal(rows[0], [10, 11, 12, 1, 2, 20, 21, 3, 4])
  np.testing.assert_array_equal(mask[0], [0, 0, 0, 1, 1, 0, 0, 1, 1])
  np.testing.assert_array_equal(rows[1], [30, 31, 32, 33, 5, 6, 0, 0, 0])
  np.testing.assert_array_equal(mask[1], [0, 0, 0, 0, 1, 1, 0, 0, 0])
  rows, mask = stapo.truncate_oldest_segments(obs, np.array([[3, 2, 4]]), act,
                                              np.array([[2, 2, 2]]), np.ones((1, 3), bool), 12, 2)
  # window 12: turn 2 needs 9 + 4 + 2 > 12 -> keep turns within 12 - 2 - 4 = 6: turn 1 (4)
  np.testing.assert_array_equal(rows[1][:10], [20, 21, 3, 4, 30, 31, 32, 33, 5, 6])
  np.testing.assert_array_equal(mask[1][:10], [0, 0, 0, 0, 0, 0, 0, 0, 1, 1])


def test_registered_claims_cover_every_pair_and_are_valid():
  from jaxrl_suite.repro import Claim
  c = stapo_config.get_config()
  ids = [Claim.from_dict(d).id for d in stapo_config.claims(c.methods)]
  assert len(ids) == len(set(ids)) == 2 + 2 * 2 * len(stapo_config.REFERENCES)
  quick = [Claim.from_dict(d) for d in stapo_config.claims(["grpo", "stapo"])]
  assert {q.id for q in quick} == {"stapo.detect_precision.v2", "stapo.detect_auroc_vs_raw.v2",
                                   "stapo.stapo_vs_grpo.success.v2",
                                   "stapo.stapo_vs_grpo.neglect.v2"}
  for q in quick:
    assert q.why and q.selection and q.unit == "seed"


def test_no_verdict_string_literal_in_the_script():
  import ast
  from jaxrl_suite.repro import verdicts
  words = frozenset(verdicts.WORDS) | {verdicts.EXCEEDS}
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
      __file__)))), "experiments", "stapo.py")
  tree = ast.parse(open(path).read())
  typed = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
           and isinstance(n.value, str) and n.value.strip() in words]
  assert not typed, f"experiments/stapo.py lines {typed} type a verdict"


@pytest.mark.slow
def test_quick_run_writes_a_valid_record(tmp_path):
  from experiments import stapo as exp
  from jaxrl_suite.repro import records
  c = stapo_config.get_config("quick")
  out = exp.run(c, True, str(tmp_path / "wd"), str(tmp_path / "res"))
  rec = json.load(open(tmp_path / "res" / "stapo.json"))
  results_lib.validate_record(rec)
  assert rec["mode"] == "quick" and os.path.exists(tmp_path / "res" / "stapo.png")
  det = out["detection"]
  assert 0.0 <= det["auroc_z"][0] <= 1.0 and 0.0 <= det["share_recurring"][0] <= 1.0
  assert set(out["final"]) >= set(c.methods)
  # every registered claim is on the layer and re-judges to the stored verdict
  want = {d["id"] for d in stapo_config.claims(c.methods)}
  assert {r["repro"]["rule"]["id"] for r in rec["claims"]} == want
  for row in rec["claims"]:
    assert records.rejudge(row).word == row["verdict"]
  train_rows = [r for r in rec["claims"] if r["repro"]["fair_chance"] is not None]
  assert train_rows and all(len(r["repro"]["selection"]) == 2 for r in train_rows)
  assert all(np.asarray(r["repro"]["samples"]["a"]).shape == (c.num_seeds,) for r in train_rows)
  # one lr chosen per method on the sweep's training seeds, from the grid
  sels = out["selections"]
  assert set(sels) == set(c.methods)
  assert all(s.split == "training" and float(s.choice) in c.lr_grid for s in sels.values())
  assert out["budgets"] == [c.first_budget, 2 * c.first_budget]
  # the warm start is cached: a second run reuses it
  out2 = exp.run(c, True, str(tmp_path / "wd"), str(tmp_path / "res2"))
  assert out2["warm_start"]["cached"] and not out["warm_start"]["cached"]
