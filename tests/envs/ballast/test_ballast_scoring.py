"""The BallastNet-v0 study's scoring (envs/ballast/scoring.py) on hand-made episode outputs with
known answers: regimes, paired savings, gap share, group means, failure shares, deviation
shares, the per-regime tables and the dt sweep."""

import chex
import numpy as np
import pytest

from jaxrl_suite.envs.ballast import scoring

# clog [N=5, E=3]: none, 1 blocked, 2 blocked, partial only, 1 blocked + 1 partial
CLOG = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 1], [1, 0.3, 1], [0, 0.2, 1]], np.float32)
REG = np.array([0, 1, 2, 3, 1])


def _out(steps, success=None, capsized=None, diag=None, flag_steps=None):
  """A fake evaluator output on the five CLOG episodes."""
  n = len(steps)
  return {"steps": np.asarray(steps, np.int32),
          "success": np.ones(n, bool) if success is None else np.asarray(success, bool),
          "capsized": np.zeros(n, bool) if capsized is None else np.asarray(capsized, bool),
          "clog": CLOG, "exercised": np.ones(CLOG.shape, bool),
          "diag": CLOG < 1 if diag is None else np.asarray(diag, bool),
          "flag_steps": np.zeros((n, 2), np.int32) if flag_steps is None else
          np.asarray(flag_steps, np.int32)}


def test_regimes_and_sets():
  np.testing.assert_array_equal(scoring.regime_of(CLOG), REG)
  np.testing.assert_array_equal(scoring.is_blocked(REG), [0, 1, 1, 0, 1])
  sets = scoring.regime_sets(REG)
  assert [n for n, _ in sets] == ["all", scoring.BLOCKED] + list(scoring.REGIMES)
  np.testing.assert_array_equal(sets[1][1], [0, 1, 1, 0, 1])
  assert [n for n, _ in scoring.regime_sets(REG, blocked=False)] == ["all"] + list(
      scoring.REGIMES)


def test_saving_and_steps_row_known_answers():
  # a = half of b on every episode: saving 0.5 and every bootstrap resample gives 0.5
  s = scoring.saving(np.array([1.0, 2, 3, 4]), np.array([2.0, 4, 6, 8]), n_boot=50, seed=0)
  chex.assert_trees_all_close(s, {"saving": 0.5, "ci": [0.5, 0.5]})
  assert np.isnan(scoring.saving(np.array([1.0]), np.array([2.0]), 50, 0)["saving"])
  r = scoring.steps_row(np.array([4.0, 4.0]), np.array([True, False]), dt_h=0.5, n_boot=20,
                        seed=0)
  chex.assert_trees_all_close(r, {"n": 2, "steps": 4.0, "ci": [4.0, 4.0], "hours": 2.0,
                                  "hours_ci": [2.0, 2.0], "success": 0.5})
  assert scoring.steps_row(np.array([]), np.array([]), 1.0, 20, 0)["n"] == 0


def test_gap_share_known_answers():
  rep, orc = np.full(6, 10.0), np.full(6, 6.0)
  # the policy closes half of the 4-step gap on every episode
  g = scoring.gap_share(np.full(6, 8.0), rep, orc, n_boot=30, seed=0)
  chex.assert_trees_all_close(g, {"share": 0.5, "ci": [0.5, 0.5]})
  # no gap (the oracle is no better than the replanner): undefined
  assert np.isnan(scoring.gap_share(np.full(6, 8.0), rep, rep, 30, 0)["share"])


def test_group_means_contiguous_groups():
  steps = np.arange(10.0)
  mask = np.array([1, 1, 0, 0, 1, 1, 1, 0, 0, 0], bool)
  np.testing.assert_allclose(scoring.group_means(steps, mask, 2), [np.mean([0, 1, 4]), 5.5])
  assert np.isnan(scoring.group_means(steps, np.zeros(10, bool), 2)[0])


def test_seed_mean_failure_and_deviation_shares():
  a = _out([2, 4, 6, 8, 10], success=[1, 1, 0, 1, 0], capsized=[0, 0, 1, 0, 0],
           flag_steps=[[1, 0], [2, 1], [0, 0], [1, 1], [0, 0]])
  b = _out([4, 4, 4, 4, 4], success=[1, 1, 1, 1, 1])
  m = scoring.seed_mean([a, b])
  np.testing.assert_allclose(m["steps"], [3, 4, 5, 6, 7])
  np.testing.assert_allclose(m["success"], [1, 1, 0.5, 1, 0.5])
  np.testing.assert_array_equal(m["clog"], CLOG)
  rows = scoring.failure_rows([a], REG)
  assert set(rows) == set(scoring.REGIMES)
  # regime ">=2 blocked" is episode 2: capsized; "1 blocked" is episodes 1 and 4: one ran out
  chex.assert_trees_all_close(rows[">=2 blocked"],
                              {"success": 0.0, "capsized": 1.0, "step_limit": 0.0})
  chex.assert_trees_all_close(rows["1 blocked"],
                              {"success": 0.5, "capsized": 0.0, "step_limit": 0.5})
  # over two seeds: the mean of their shares
  assert scoring.failure_rows([a, b], REG)["1 blocked"]["success"] == 0.75
  # 4 flagged of 30 decision steps off top, 2 believed worse
  chex.assert_trees_all_close(scoring.deviation_shares(a),
                              {"off_top": 4 / 30, "believed_worse": 2 / 30})


def test_diagnosis_rows_perfect_and_empty_regimes():
  perfect = scoring.diagnosis_rows(_out([1] * 5), np.ones(3, bool), REG)
  assert set(perfect) == {"all"} | set(scoring.REGIMES)
  assert perfect["all"]["all_edges"]["f1"] == 1.0 and perfect["all"]["exercised"]["exact"] == 1.0
  # a diagnoser that flags nothing: no true positive, and the clear "none" episode is exact
  none = scoring.diagnosis_rows(_out([1] * 5, diag=np.zeros(CLOG.shape)), np.ones(3, bool), REG)
  assert none["all"]["all_edges"]["f1"] == 0.0 and none["none"]["all_edges"]["exact"] == 1.0
  only_none = scoring.diagnosis_rows(_out([1] * 5), np.ones(3, bool), np.zeros(5, int))
  assert set(only_none) == {"all", "none"}


def test_regime_table_and_summaries():
  outs = {"oracle": _out([2, 2, 2, 2, 2]), "replan": _out([4, 4, 4, 4, 4]),
          "tabu": _out([4, 4, 4, 4, 4]), "rl": _out([3, 3, 3, 3, 3])}
  t = scoring.regime_table(outs, REG, dt_h=1.0, n_boot=20, seed=0)
  assert list(t) == ["all", scoring.BLOCKED] + list(scoring.REGIMES)
  assert "saving_vs_replan" not in t["all"]["replan"]
  assert "saving_vs_tabu" not in t["all"]["tabu"]
  assert t["all"]["oracle"]["saving_vs_replan"]["saving"] == pytest.approx(0.5)
  assert t["all"]["rl"]["saving_vs_tabu"]["saving"] == pytest.approx(0.25)
  assert t[scoring.BLOCKED]["rl"]["gap_share"]["share"] == pytest.approx(0.5)
  assert t[scoring.BLOCKED]["rl"]["n"] == 3
  by_mode = {"greedy": [outs["rl"]], "sampled": [outs["replan"]]}
  s = scoring.v1_summary(outs, by_mode, "greedy", {"greedy": [3.0], "sampled": [4.0]}, REG,
                         np.ones(3, bool), 1.0, 20, 0)
  assert list(s["failures"]) == ["oracle", "replan", "tabu", "rl"]
  assert list(s["diag"]) == ["rl head", "reference on B-replan"]
  assert [(r["mode"], r["selection_steps"]) for r in s["seed_rows"]] == [("greedy", 3.0),
                                                                          ("sampled", 4.0)]
  assert s["seed_rows"][0]["saving_vs_replan_blocked"]["saving"] == pytest.approx(0.25)
  o2 = {"oracle-v2": outs["oracle"], "replan-v2": outs["replan"], "rl-v2": outs["rl"]}
  v2 = scoring.v2_summary(o2, by_mode, "greedy", {"greedy": [3.0], "sampled": [4.0]}, 1.0,
                          20, 0)
  assert v2["blocked_steps"] == {"rl_per_seed": [[3, 3, 3]], "replan": [4, 4, 4]}
  assert v2["rows"]["all"]["rl_gap_share"]["share"] == pytest.approx(0.5)
  assert v2["rows"]["all"]["oracle_vs_replan"]["saving"] == pytest.approx(0.5)
  gen = scoring.generalisation_summary({"oracle": outs["oracle"], "replan": outs["replan"],
                                        "rl x": outs["rl"]}, "rl x", np.ones(3, bool), 1.0, 20, 0)
  assert list(gen["rows"]) == ["all", scoring.BLOCKED]
  assert gen["diag_rl_head"]["all_edges"]["f1"] == 1.0


def test_dt_sweep_scores_each_step_length_once():
  calls = []

  def score(dt_min, name):
    calls.append((dt_min, name))
    return _out([2 * dt_min if name == "oracle" else 4 * dt_min] * 5)

  known = {5: {n: _out([1] * 5) for n in scoring.SWEEP_POLICIES}}
  sw = scoring.dt_sweep(score, [5, 15], n_boot=20, seed=0, n_groups=1, known=known)
  assert calls == [(15, n) for n in scoring.SWEEP_POLICIES]   # dt = 5 reused
  assert list(sw) == ["5", "15"]
  chex.assert_trees_all_close(sw["15"]["oracle_vs_replan_blocked"], {"saving": 0.5,
                                                                     "ci": [0.5, 0.5]})
  assert sw["15"]["mean_steps"] == {"oracle": 30.0, "replan": 60.0, "tabu": 60.0}
  assert sw["15"]["groups_blocked"]["oracle"] == [30.0]
  assert sw["5"]["oracle_vs_replan_all"]["saving"] == 0.0
  assert "oracle_vs_replan_all" not in scoring.dt_sweep(score, [15], 20, 0, 1, with_all=False)[
      "15"]
