"""repro.runner on fake tiny reproductions: records checked, failures named, committed results
protected in quick mode, timings kept for the next ETA, scheduling longest first."""

import io
import json
import os
import re

import pytest

from jaxrl_suite.repro import runner

_OK = '''
import os, sys
from jaxrl_suite.core import results
quick = "--quick" in sys.argv
with open(os.path.join(os.environ["FAKE_PROTECTED"], "ok.png"), "w") as f:
  f.write("quick plot" if quick else "full plot")   # a plot saved by a fixed path
results.write_results("ok", mode="quick" if quick else "full", config={}, seeds=[0],
                      wall_time_s=0.1, results_dir=results.output_dir("quick" if quick else "full"),
                      claims=[results.claim("c", "1", "1", "inconclusive")])
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
  name = "fake_runner_" + re.sub(r"\W", "_", tmp_path.name)
  pkg = tmp_path / name
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "ok.py").write_text(_OK)
  (pkg / "bad.py").write_text('raise RuntimeError("boom")\n')
  (pkg / "silent.py").write_text('print("no record")\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setenv("PYTHONPATH", str(tmp_path))
  protected = tmp_path / "committed"
  protected.mkdir()
  (protected / "ok.png").write_text("full plot")
  monkeypatch.setenv("FAKE_PROTECTED", str(protected))
  S = runner.Stage
  return ([S("ok", f"{name}.ok"), S("bad", f"{name}.bad"), S("silent", f"{name}.silent"),
           S("absent", f"{name}.absent")], tmp_path, protected)


def test_run_all_reports_each_stage_and_protects_the_committed_results(fake):
  stages, tmp, protected = fake
  out = io.StringIO()
  quick_dir, log_dir = str(tmp / "quick"), str(tmp / "logs")
  res = runner.run_all(stages, True, quick_dir, log_dir, jobs=2, out=out,
                       protected_dir=str(protected), estimates={s.name: 1.0 for s in stages})
  by = {r.name: r for r in res}
  assert [r.name for r in res] == ["ok", "bad", "silent", "absent"]
  assert by["ok"].status == "ok" and "1 claim(s)" in by["ok"].note
  assert by["bad"].status == "failed" and "exit status 1" in by["bad"].note
  assert "boom" in open(by["bad"].log).read()
  assert by["silent"].status == "failed" and "did not write" in by["silent"].note
  assert by["absent"].status == "skipped"
  # the quick plot went to the quick folder; the committed one is back
  assert (protected / "ok.png").read_text() == "full plot"
  assert open(os.path.join(quick_dir, "ok.png")).read() == "quick plot"
  text = out.getvalue()
  assert "shipped estimates" in text and "[failed] bad" in text and "--- last lines of" in text
  times = json.load(open(runner.timings_path(log_dir, True)))
  assert set(times) == {"ok", "bad", "silent"}   # every stage that ran, not the skipped one
  assert runner.load_timings(log_dir, True) == times


def test_a_record_of_the_wrong_mode_fails_the_stage(fake):
  stages, tmp, protected = fake
  pkg = stages[0].module.split(".")[0]
  (tmp / pkg / "wrong.py").write_text(_OK.replace('mode="quick" if quick else "full"',
                                                  'mode="full"').replace('"ok"', '"wrong"'))
  res = runner.run_stage(runner.Stage("wrong", f"{pkg}.wrong"), True, str(tmp / "q"),
                         str(tmp / "logs"), protected_dir=str(protected))
  assert res.status == "failed" and "mode='full', expected 'quick'" in res.note
  assert (protected / "ok.png").read_text() == "full plot"   # protected by run_stage alone too


def test_schedule_runs_the_longest_first_and_unknown_stages_before_them():
  S = runner.Stage
  stages = [S("a", "m.a"), S("b", "m.b"), S("c", "m.c"), S("new", "m.new")]
  last = {"a": 10.0, "b": 300.0, "c": 50.0}
  assert [s.name for s in runner.schedule(stages, last, jobs=2)] == ["new", "b", "c", "a"]
  assert runner.schedule(stages, last, jobs=1) == stages
  assert runner.fmt_s(59.6) == "1m00s" and runner.fmt_s(12) == "12s"
