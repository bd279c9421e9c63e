"""The BallastNet-v0 study's report text (envs/ballast/report.py) on hand-made rows."""

import types

import numpy as np
import pytest

from jaxrl_suite.envs.ballast import report


def test_number_formats():
  assert report.fmt(1.2345) == "1.23" and report.fmt(1.2345, 3) == "1.234"
  assert report.fmt(None) == "nan" and report.fmt(np.nan) == "nan"
  assert report.pct_ci({"saving": 0.123, "ci": [0.11, 0.136]}) == "12.3% [11.0, 13.6]"


def test_v2_bank_lines_report_rejections_and_the_regime_shift():
  assert "unchecked" in report.v2_bank_lines({})[0]
  st = [{"n_blocked": b, "checked": 10, "rejected": b, "rejection_rate": b / 10}
        for b in range(4)]
  mix = {"none": 0.2, "1 blocked": 0.4, ">=2 blocked": 0.3, "partial only": 0.1}
  r = {"n": 8, "max_steps": 96, "strata": st, "rejection_rate": 0.15,
       "regimes_unchecked": mix, "regimes_bank": mix}
  text = "\n".join(report.v2_bank_lines({"train": r, "eval": r, "wall_s": 3.0}))
  assert "3: 3/10 (30.0%)" in text and "all 15.0%" in text and "none 0.200 -> 0.200" in text


def _sweep():
  row = {"oracle_vs_replan_blocked": {"saving": 0.2, "ci": [0.1, 0.3]},
         "oracle_vs_tabu_blocked": {"saving": 0.1, "ci": [0.0, 0.2]},
         "mean_steps": {"oracle": 8.0, "replan": 10.0, "tabu": 9.0},
         "success": {"oracle": 1.0, "replan": 0.9, "tabu": 0.95}}
  return {"15.0": row, "5.0": row}


def test_sweep_markdown_sorted_by_step_length():
  lines = report.sweep_markdown(_sweep()).splitlines()
  assert lines[2].startswith("| 5 | 20.0% [10.0, 30.0] | 10.0% [0.0, 20.0] | 8.00 / 10.00 / 9.00")
  assert lines[3].startswith("| 15 |") and lines[3].endswith("1.00 / 0.90 / 0.95 |")


def _row(steps):
  return {"n": 4, "steps": steps, "ci": [steps - 1, steps + 1], "hours": steps / 12,
          "success": 1.0}


@pytest.mark.parametrize("with_check", [False, True])
def test_markdown_sections(with_check):
  table = {"all": {"oracle": dict(_row(8.0), saving_vs_replan={"saving": 0.2, "ci": [0, 0]}),
                   "replan": _row(10.0),
                   "rl": dict(_row(9.0), gap_share={"share": 0.5, "ci": [0.25, 0.75]})}}
  seed_rows = [{"seed": 0, "mode": "greedy", "selection_steps": 9.5, "steps": 9.0,
                "success": 1.0, "off_top": 0.2, "believed_worse": 0.1,
                "saving_vs_replan_blocked": {"saving": 0.1, "ci": [0.05, 0.15]}}]
  check = {"max_abs_param_diff_vs_seed0": [0.0, 0.5], "w_resid": {"pi0": [1.0, 2.0]},
           "curve": {"episode_length": {0: [1.0, 2.0], 9: [3.0, 4.0]}}}
  rows = report.Rows(table, {}, _sweep(), None, None, 12.0, seed_rows,
                     {"rl": {"none": {"success": 1.0, "capsized": 0.0, "step_limit": 0.0}}},
                     "sampled", check if with_check else None)
  # the config fields the v1 sections read
  c = types.SimpleNamespace(layout="ring14", dt_minutes=5.0, n_episodes=4, rl_seeds=2,
                            rl=types.SimpleNamespace(total_timesteps=1024))
  md = report.markdown(c, rows, tol=0.05)
  assert "trained in 12 s; RL rows use the sampled action mode" in md
  assert "| all | 4 | 8.00 [7.00, 9.00] (0.67 h, succ 1.00, +20.0%) |" in md
  assert md.count("0.50 [0.25, 0.75]") == 1                     # RL gap share closed
  assert "| 0 | greedy | 9.50 | 9.00 | 1.000 | +10.0% [+5.0, +15.0] | 0.200 | 0.100 |" in md
  assert "by > 0.05 (a real departure" in md
  assert "| rl | 1.000 / 0.000 / 0.000 | - | - | - |" in md
  assert ("Training curve" in md) == with_check and "## Task v2" not in md
