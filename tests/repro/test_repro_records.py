"""Claim records: JSON round trip, rejudge, tamper detection, the reanalysis CLI."""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxrl_suite.core import results
from jaxrl_suite.repro import records, selection
from jaxrl_suite.repro import verdicts as vd
from jaxrl_suite.repro.claims import Claim
from jaxrl_suite.repro.reanalyse import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rows():
  rng = np.random.default_rng(0)
  crossed = Claim(id="routing.rl_vs_sq", text="RL +48% vs shortest queue", paper="Fig. 5",
                  statistic="goodput ratio RL / SQ per window", unit="seed x window",
                  kind="superiority", size=1.48, scale="log_ratio",
                  why="the paper's headline", selection="load on training windows")
  rl = 100 * np.exp(rng.normal(0.15, 0.03, (4, 8)))
  sq = 100 * np.exp(rng.normal(0.0, 0.03, (4, 8)))
  load = selection.pick_load([0.9, 1.1], [[0.1, 0.12], [0.15, 0.16]], data="training windows")
  on_par = Claim(id="rail.on_par", text="RL on par with the tuned heuristic", paper="Tab. 2",
                 statistic="revenue difference per seed", unit="seed", kind="non_inferiority",
                 margin=0.5, why="half a unit is the noise floor", fair_chance=True,
                 flat_delta=0.25)
  sweep = {"scores": [[9.0, 9.5, 9.2, 9.4], [9.8, 10.1, 10.0, 9.9], [9.9, 10.0, 10.1, 10.0]],
           "budgets": [1e5, 2e5, 4e5]}
  rising = {"scores": [[8.0, 8.2, 8.1, 8.3], [9.0, 9.1, 9.3, 9.2]], "budgets": [1e5, 2e5]}
  episodes = Claim(id="fore.error", text="FORE error below baseline", paper="Fig. 2",
                   statistic="abs error per episode", unit="seed x episode",
                   kind="superiority", better="lower", min_effect=0.05,
                   why="errors under 0.05 do not change a decision")
  target = Claim(id="routing.rl_vs_rr", text="RL 3.5x vs round-robin", paper="Fig. 5",
                 statistic="goodput ratio", unit="seed", kind="target", size=3.5,
                 tolerance=0.2, scale="log_ratio", why="read off the bar chart, +-20%")
  desc = Claim(id="serving.throughput", text="throughput ratio", paper="-", statistic="ratio",
               unit="seed", kind="descriptive", scale="log_ratio")
  return [
      records.claim_record(crossed, rl, sq, selection=load),
      records.claim_record(on_par, [10.0, 10.2, 10.1, 10.15], [10.1, 10.1, 10.0, 10.1],
                           sweep=sweep),
      records.claim_record(on_par, [8.0, 8.2, 8.1, 8.3], [10.1, 10.1, 10.0, 10.1],
                           sweep=rising),
      records.claim_record(episodes, [[0.1, 0.2, 0.15], [0.3, 0.1], [0.2, 0.2, 0.1, 0.3]],
                           [[0.3, 0.2], [0.1, 0.1, 0.1], [0.25, 0.3]]),
      records.claim_record(target, [5.1, 5.6, 5.3, 5.2], [1.0, 1.0, 1.0, 1.0]),
      records.claim_record(target, [5.1, 5.6, 5.3, 5.2], [1.0, 1.05, 0.98, 1.0],
                           method="fieller", params={"paired": True}),
      records.claim_record(desc, [1.1, 1.2], [1.0, 1.0]),
  ]


def _write(d, rows, name="demo"):
  rec = {"schema_version": 1, "name": name, "mode": "quick", "config": {}, "seeds": [0],
         "provenance": {}, "claims": rows}
  path = os.path.join(d, f"{name}.json")
  with open(path, "w") as f:
    json.dump(rec, f)
  return path


def test_records_round_trip_through_json_and_rejudge_agrees():
  rows = _rows()
  back = json.loads(json.dumps(rows, allow_nan=False))   # strict JSON: no NaN / Infinity
  for row in back:
    assert records.check_row(row) is None, row["repro"]["rule"]["id"]
    assert records.rejudge(row).word == row["verdict"]
    assert row["repro"]["verdict"]["reason"] == row["detail"]
  words = [r["repro"]["verdict"]["label"] for r in rows]
  assert words == [vd.PARTLY_REPRODUCED, vd.REPRODUCED, vd.INCONCLUSIVE, vd.INCONCLUSIVE,
                   vd.EXCEEDS, vd.EXCEEDS, vd.DESCRIPTIVE]
  assert rows[2]["detail"].startswith(vd.FAIR_CHANCE_NOT_SHOWN)   # RL lost while still rising
  assert rows[0]["repro"]["interval"]["method"] == "crossed"
  assert rows[0]["repro"]["selection"][0]["choice"] == "1.1"
  assert rows[1]["repro"]["fair_chance"]["result"]["state"] in ("flat", "unknown")
  assert rows[3]["repro"]["interval"]["params"]["average_episodes"]
  assert rows[3]["detail"].startswith(vd.UNDERPOWERED)


def test_legacy_fields_stay_readable_by_core_results():
  rows = [r for r in _rows() if r["verdict"] != vd.DESCRIPTIVE]
  table = results.verdict_table(rows)
  assert "RL +48% vs shortest queue" in table and "partly reproduced" in table


def test_a_tampered_verdict_is_a_mismatch(tmp_path):
  rows = _rows()
  bad = copy.deepcopy(rows)
  bad[0]["verdict"] = vd.REPRODUCED
  bad[0]["repro"]["verdict"]["word"] = vd.REPRODUCED
  assert "verdict" in records.check_row(bad[0])
  _write(tmp_path, bad)
  rep = records.reanalyse(str(tmp_path))
  assert not rep.ok and len(rep.mismatches) == 1
  assert rep.mismatches[0][1] == "routing.rl_vs_sq" and "MISMATCH" in rep.text()


def test_tampered_samples_label_and_selection_are_mismatches():
  rows = _rows()
  samples = copy.deepcopy(rows[4])
  samples["repro"]["samples"]["a"] = [1.0, 1.1, 0.9, 1.0]
  assert records.check_row(samples) is not None
  label = copy.deepcopy(rows[4])
  label["repro"]["verdict"]["label"] = vd.REPRODUCED
  assert "label" in records.check_row(label)
  sel = copy.deepcopy(rows[0])
  sel["repro"]["selection"][0]["choice"] = "0.9"
  assert records.rejudge(sel).reason.startswith(vd.SELECTION_FAILED)
  assert records.check_row(sel) is not None
  interval = copy.deepcopy(rows[1])
  interval["repro"]["interval"]["result"]["lo"] += 0.01
  assert "interval lo" in records.check_row(interval)


def test_cli_exits_1_on_a_mismatch_and_0_on_a_clean_dir(tmp_path, capsys):
  clean, dirty = tmp_path / "clean", tmp_path / "dirty"
  clean.mkdir()
  dirty.mkdir()
  rows = _rows()
  _write(clean, rows)
  legacy = results.claim("old claim", "1.5x", "1.2x", "partly reproduced", (1.1, 1.3))
  _write(clean, [legacy], name="old")
  (clean / "notes.json").write_text('{"no": "claims"}')
  assert main([str(clean)]) == 0
  out = capsys.readouterr().out
  assert "7 claim(s) on the layer re-judged, 7 agree, 0 mismatch" in out
  assert "1 legacy claim(s) not on the layer yet" in out and "old claim" in out
  bad = copy.deepcopy(rows)
  bad[1]["verdict"] = vd.CONTRADICTED
  _write(dirty, bad)
  assert main([str(dirty)]) == 1
  # The module runs as a command too (the same code path, in a fresh interpreter).
  env = dict(os.environ, PYTHONPATH=REPO)
  proc = subprocess.run([sys.executable, "-m", "jaxrl_suite.repro.reanalyse", str(dirty)],
                        capture_output=True, text=True, env=env, timeout=120)
  assert proc.returncode == 1 and "MISMATCH" in proc.stdout
  assert main([str(tmp_path / "missing")]) == 2


def test_committed_results_have_no_mismatch():
  """The committed legacy rows are counted, never mismatched."""
  rep = records.reanalyse(os.path.join(REPO, "results"))
  assert rep.ok, rep.text()
  assert rep.checked + len(rep.legacy) > 0


def test_claim_record_needs_flat_delta_for_a_sweep():
  c = Claim(id="x", text="t", paper="p", statistic="s", unit="seed", kind="superiority")
  with pytest.raises(ValueError, match="flat_delta"):
    records.claim_record(c, [1.0, 2.0], [0.5, 0.5], sweep={"scores": [[1.0], [1.0]],
                                                             "budgets": [1, 2]})


def test_an_unbounded_interval_stores_a_null_ci95_and_still_rejudges():
  c = Claim(id="x", text="t", paper="p", statistic="s", unit="seed", kind="superiority",
            size=1.5, scale="log_ratio", why="w")
  row = records.claim_record(c, [2.0, 3.0, 1.0], [1.0, 0.1, -0.2], method="fieller")
  assert row["ci95"] is None and row["verdict"] == vd.INCONCLUSIVE
  back = json.loads(json.dumps(row, allow_nan=False))
  assert records.check_row(back) is None
  assert "inf" in results.verdict_table([back])


def test_the_method_must_match_the_unit():
  c = Claim(id="x", text="t", paper="p", statistic="s", unit="seed x window",
            kind="superiority")
  cells = np.arange(32.0).reshape(4, 8)
  with pytest.raises(ValueError, match="crossed"):
    records.claim_record(c, cells.ravel(), method="t_mean")   # 32 cells as if independent
  row = records.claim_record(c, cells - 10.0)
  forged = copy.deepcopy(row)
  forged["repro"]["interval"]["method"] = "t_mean"
  forged["repro"]["samples"] = {"x": list(np.ravel(row["repro"]["samples"]["x"]))}
  assert "needs an interval method" in records.check_row(forged)


def test_rows_written_by_core_write_results_reanalyse_clean(tmp_path):
  rows = [r for r in _rows() if r["verdict"] != vd.DESCRIPTIVE]
  path = results.write_results("demo", mode="quick", config={}, seeds=[0, 1, 2, 3],
                               claims=rows, wall_time_s=1.0, results_dir=str(tmp_path))
  with open(path) as f:
    results.validate_record(json.load(f))
  rep = records.reanalyse(str(tmp_path))
  assert rep.ok and rep.checked == len(rows) == rep.agree
