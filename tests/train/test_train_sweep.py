"""train/sweep: the sweep machinery behind experiments/sweep.py and launch_xm.py. Known answers
for the results table on fabricated trial workdirs (no training); the trial lists, a real sweep
and its resume are tests/user_path/test_user_path_sweep.py."""

import csv
import json
import os

import pytest

from jaxrl_suite.core import results
from jaxrl_suite.train import sweep


def _trial(root, lr, seed, rets, done_s=None, fixed=(("log_every", 2),)):
  """A Trial with a metrics.jsonl of returns `rets` (one row per step) and, when `done_s` is
  given, a DONE marker with that wall time."""
  point = {"lr": lr, "seed": seed}
  t = sweep.Trial(sweep.trial_id(point), {**dict(fixed), **point},
                  os.path.join(sweep.REPO_ROOT, "configs", "ppo_cartpole.py:quick"),
                  os.path.join(root, sweep.trial_id(point)))
  os.makedirs(t.workdir)
  with open(os.path.join(t.workdir, "metrics.jsonl"), "w") as f:
    for step, r in enumerate(rets):
      f.write(json.dumps({"step": step, sweep.DEFAULT_METRIC: r}) + "\n")
  if done_s is not None:
    with open(os.path.join(t.workdir, sweep.DONE_MARKER), "w") as f:
      json.dump({"wall_time_s": done_s}, f)
  return t


@pytest.fixture
def trials(tmp_path):
  root = str(tmp_path)
  return [_trial(root, 1e-3, 0, [0.0] * 9 + [10.0], done_s=1.5),
          _trial(root, 1e-3, 1, [0.0] * 9 + [20.0], done_s=2.0),
          _trial(root, 2.5e-4, 0, [1.0, 3.0]),
          _trial(root, 2.5e-4, 1, [])]


def test_the_library_sits_at_the_repository_root():
  assert sweep.REPO_ROOT == results.REPO_ROOT
  from experiments import sweep as script   # the script re-exports the library's names
  assert script.build_trials is sweep.build_trials and script.Trial is sweep.Trial


def test_trial_rows_known_answers(trials):
  assert sweep.varying_keys(trials) == ["lr", "seed"]     # log_every is fixed
  m = sweep.DEFAULT_METRIC
  row = sweep.trial_row(trials[0], keys=["lr", "seed"])
  assert row == {"trial": "lr=0.001,seed=0", "lr": "0.001", "seed": "0", "status": "done",
                 "last_step": 9, f"final_{m}": 10.0, f"last10pct_{m}": 10.0, "wall_s": 1.5}
  row = sweep.trial_row(trials[2], keys=["lr"])
  assert row["status"] == "incomplete" and row[f"final_{m}"] == 3.0
  assert row[f"last10pct_{m}"] == 3.0 and row["wall_s"] is None   # ceil(0.2) = 1 row
  assert sweep.trial_row(trials[3])["status"] == "not started"


def test_group_rows_mean_and_t_interval_over_seeds(trials):
  rows = [sweep.trial_row(t) for t in trials]
  m = sweep.DEFAULT_METRIC
  g = sweep.group_rows(trials, rows)
  assert [r["lr"] for r in g] == ["0.001", "0.00025"] and [r["n"] for r in g] == [2, 1]
  assert g[0][f"mean_final_{m}"] == 15.0
  # Student-t, 1 degree of freedom: 15 +- 12.706 * 10 / sqrt(2) / sqrt(2) = 15 +- 63.53
  assert g[0]["ci95_lo"] == pytest.approx(15.0 - 63.5310, abs=1e-3)
  assert g[0]["ci95_hi"] == pytest.approx(15.0 + 63.5310, abs=1e-3)
  assert (g[1][f"mean_final_{m}"], g[1]["ci95_lo"], g[1]["ci95_hi"]) == (3.0, 3.0, 3.0)


def test_write_table_known_answer(trials, tmp_path):
  csv_path, md_path = sweep.write_table("tiny", trials, str(tmp_path / "out"))
  with open(csv_path) as f:
    rows = list(csv.DictReader(f))
  assert [r["trial"] for r in rows] == [t.trial_id for t in trials]
  assert rows[0]["status"] == "done" and rows[0]["wall_s"] == "1.5" and rows[3]["last_step"] == ""
  md = open(md_path).read().split("\n")
  assert md[0] == "# Sweep `tiny`"
  assert md[2] == "Base config `configs/ppo_cartpole.py:quick`, fixed overrides {'log_every': '2'}."
  assert "| lr | n | mean_final_returned_episode_returns | ci95_lo | ci95_hi |" in md
  assert "| 0.00025 | 1 | 3 | 3 | 3 |" in md          # one seed: a point, no spread
  assert "| lr=0.001,seed=1 | 0.001 | 1 | done | 9 | 20 | 20 | 2 |" in md
