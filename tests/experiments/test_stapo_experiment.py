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
                     ("keep_frac", 0.0), ("lr", 0.0), ("methods", ["grpo", "grpo"]),
                     ("ema_decay", 1.5), ("outlier_rule", "max"), ("train_steps", 0),
                     ("kl_coef", -0.1), ("methods_per_program", -1)):
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


@pytest.mark.slow
def test_quick_run_writes_a_valid_record(tmp_path):
  from experiments import stapo as exp
  c = stapo_config.get_config("quick")
  out = exp.run(c, True, str(tmp_path / "wd"), str(tmp_path / "res"))
  rec = json.load(open(tmp_path / "res" / "stapo.json"))
  results_lib.validate_record(rec)
  assert rec["mode"] == "quick" and os.path.exists(tmp_path / "res" / "stapo.png")
  det = out["detection"]
  assert 0.0 <= det["auroc_z"][0] <= 1.0 and 0.0 <= det["share_recurring"][0] <= 1.0
  assert set(out["final"]) >= set(c.methods)
  assert len(rec["claims"]) >= 4
  # the warm start is cached: a second run reuses it
  out2 = exp.run(c, True, str(tmp_path / "wd"), str(tmp_path / "res2"))
  assert out2["warm_start"]["cached"] and not out["warm_start"]["cached"]
