"""Results hygiene (every results/*.json is a current-schema record) and the SUMMARY generator,
including reproduce.py's failure reporting with fake tiny experiments."""

import glob
import json
import os
import re
import subprocess
import textwrap
import time

import pytest

from experiments import reproduce
from jaxrl_suite.core import results as results_lib

_RESULTS = sorted(glob.glob(os.path.join(reproduce.RESULTS_DIR, "*.json")))


# ------------------------------------------------------------------------------------------------
# The records in results/ were written by the current code's schema
# ------------------------------------------------------------------------------------------------
# Records of measurements, not claims: deterministic replays whose numbers and targets are the
# record (experiments/validate_vidur.py: one replay per load is not a sample to judge).
MEASUREMENT_RECORDS = frozenset({"serving_validation"})


@pytest.mark.parametrize("path", _RESULTS, ids=[os.path.basename(p) for p in _RESULTS])
def test_results_record_is_current_schema(path):
  with open(path) as f:
    rec = json.load(f)
  results_lib.validate_record(rec)   # schema_version == SCHEMA_VERSION, fields, verdicts
  name = os.path.splitext(os.path.basename(path))[0]
  assert rec["name"] == name, f"{path} holds record {rec['name']!r}"
  assert rec["mode"] == "full", f"{path}: only full-mode runs may write results/"
  assert not rec.get("adhoc_inputs"), f"{path}: a run on ad-hoc inputs does not belong here"
  assert rec["claims"] or name in MEASUREMENT_RECORDS, f"{path} has no claims"
  for c in rec["claims"]:
    assert c["verdict"] in results_lib.ROW_VERDICTS
    ci = c.get("ci95")
    assert ci is None or (len(ci) == 2 and ci[0] <= ci[1]), f"bad ci95 {ci} in {path}"
  prov = rec["provenance"]
  assert re.fullmatch(r"[0-9a-f]{40}|unknown", prov["commit"]), prov["commit"]
  assert prov["wall_time_s"] >= 0 and prov["versions"].get("jax")
  assert isinstance(rec["seeds"], list) and isinstance(rec["config"], dict)
  assert os.path.exists(os.path.join(reproduce.RESULTS_DIR, f"{name}.md")), "no .md report"


def test_every_results_report_has_its_record():
  """A results/<name>.md without <name>.json is a leftover that no code regenerates."""
  for md in glob.glob(os.path.join(reproduce.RESULTS_DIR, "*.md")):
    if os.path.basename(md) != "SUMMARY.md":
      assert os.path.exists(md[:-3] + ".json"), f"{md} has no .json record beside it"


@pytest.mark.skipif(not os.path.exists(os.path.join(reproduce.RESULTS_DIR, "SUMMARY.md")),
                    reason="no results/SUMMARY.md yet")
def test_summary_md_is_generated_from_the_records():
  """results/SUMMARY.md holds exactly the table the generator makes from results/*.json."""
  table = reproduce.summary_table(reproduce.load_records(), reproduce.RESULTS_DIR)
  with open(os.path.join(reproduce.RESULTS_DIR, "SUMMARY.md")) as f:
    assert table in f.read(), "SUMMARY.md is stale: python -m experiments.reproduce --summary_only"


# ------------------------------------------------------------------------------------------------
# SUMMARY generation from fixture records
# ------------------------------------------------------------------------------------------------
def _fixture_records(d):
  c = results_lib.claim
  results_lib.write_results(
      "fore", mode="full", config={"n": 1}, seeds=[0, 1], wall_time_s=1.0, results_dir=d,
      claims=[c("FORE converges at 1/sqrt(n)", "slope -0.5", "slope -0.49", "reproduced",
                ci95=(-0.52, -0.47)),
              c("needs only | realizability", "yes", "no", "contradicted")])
  results_lib.write_results(
      "ppo_gymnax", mode="quick", config={}, seeds=[0], wall_time_s=2.0, results_dir=d,
      claims=[c("CartPole solved", "500", "480", "partly reproduced", ci95=(450.0, 510.0))])
  open(os.path.join(d, "ppo_gymnax.png"), "wb").close()
  with open(os.path.join(d, "not_a_record.json"), "w") as f:
    json.dump([1, 2], f)


def test_summary_has_one_row_per_claim(tmp_path):
  d = str(tmp_path)
  _fixture_records(d)
  path = reproduce.write_summary(d)
  text = open(path).read()
  # The cross-domain answer comes first, then every claim.
  top, every = text.split("## Every claim")
  assert "## When does RL beat a tuned hand-written heuristic?" in top
  rows = [l for l in every.splitlines() if l.startswith("| ") and not l.startswith("| reprod")]
  assert len(rows) == 3
  # Registry order: ppo_gymnax before fore.
  assert rows[0].startswith("| ppo_gymnax | CartPole solved | 500 | 480 [450, 510] | "
                            "**partly reproduced** | [report](ppo_gymnax.md) [plot](ppo_gymnax.png)"
                            " | quick |")
  assert "| fore | FORE converges at 1/sqrt(n) | slope -0.5 | slope -0.49 [-0.52, -0.47] | " \
         "**reproduced** | [report](fore.md) |" in rows[1]
  assert "needs only \\| realizability" in rows[2] and "**contradicted**" in rows[2]
  assert "[plot](fore.png)" not in text   # no PNG, no link
  commit = results_lib.git_commit()[0][:8]
  assert f"`{commit}" in rows[0]
  assert "Verdicts: contradicted 1, partly reproduced 1, reproduced 1" in text
  missing = [s.name for s in reproduce.REGISTRY if s.name not in ("ppo_gymnax", "fore")]
  assert missing[:2] == ["serving_batching", "serving_routing"]
  assert f"No results yet for: {', '.join(missing)}." in text
  assert "Modes present: full, quick" in text


def test_readme_block_is_rewritten(tmp_path, monkeypatch):
  d = str(tmp_path / "results")
  os.makedirs(d)
  _fixture_records(d)
  readme = tmp_path / "README.md"
  readme.write_text(f"# x\n\nintro\n{reproduce.README_BEGIN}\nold table\n"
                    f"{reproduce.README_END}\n\nafter\n")
  assert reproduce.update_readme(str(readme), d)
  text = readme.read_text()
  assert "old table" not in text and text.startswith("# x\n\nintro\n") and text.endswith(
      f"{reproduce.README_END}\n\nafter\n")
  # Only full-mode records by default: fore's two claims, not ppo_gymnax's quick one.
  assert "[report](results/fore.md)" in text and "CartPole solved" not in text
  assert "No full-mode results yet for: ppo_gymnax, serving_batching" in text
  assert not reproduce.update_readme(str(readme), d)   # idempotent
  assert reproduce.update_readme(str(readme), d, modes=("quick", "full"))
  assert "[plot](results/ppo_gymnax.png)" in readme.read_text()
  readme.write_text("no markers")
  with pytest.raises(ValueError, match="RESULTS:BEGIN"):
    reproduce.update_readme(str(readme), d)


# ------------------------------------------------------------------------------------------------
# reproduce.py with fake tiny experiments: failures are reported, the rest still run
# ------------------------------------------------------------------------------------------------
_FAKE_OK = '''
import os, sys
from jaxrl_suite.core import results
quick = "--quick" in sys.argv
results.write_results("ok", mode="quick" if quick else "full", config={"quick": quick},
                      seeds=[0], wall_time_s=0.1, results_dir=os.environ["FAKE_RESULTS_DIR"],
                      claims=[results.claim("fake claim", "1.0", "1.1", "reproduced", (1.0, 1.2))])
'''
_FAKE_BAD = 'raise RuntimeError("boom: the fake experiment crashed")\n'
_FAKE_SILENT = 'print("exits 0 without writing results")\n'


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
  # A package name of its own per test: find_spec caches packages in sys.modules.
  name = "fake_repro_" + re.sub(r"\W", "_", tmp_path.name)
  pkg = tmp_path / name
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "ok.py").write_text(textwrap.dedent(_FAKE_OK))
  (pkg / "bad.py").write_text(_FAKE_BAD)
  (pkg / "silent.py").write_text(_FAKE_SILENT)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setenv("PYTHONPATH", str(tmp_path))
  results_dir = tmp_path / "results"
  monkeypatch.setenv("FAKE_RESULTS_DIR", str(results_dir))
  S = reproduce.Stage
  monkeypatch.setattr(reproduce, "REGISTRY", [
      S("ok", f"{name}.ok"), S("bad", f"{name}.bad"),
      S("absent", f"{name}.absent"), S("silent", f"{name}.silent")])
  return str(results_dir), str(tmp_path / "logs"), pkg


def test_reproduce_reports_failures_and_keeps_going(fake_registry, capsys):
  results_dir, log_dir, _ = fake_registry
  rc = reproduce.main(["--quick", "--only=bad,ok,absent,silent", f"--results_dir={results_dir}",
                       f"--log_dir={log_dir}", "--no_progress"])
  assert rc == 1
  out, err = capsys.readouterr()
  assert "[failed] bad" in out and "boom: the fake experiment crashed" in out   # log tail shown
  assert "[ok] ok" in out and "[skipped] absent" in out and "does not exist yet" in out
  assert "[failed] silent" in out and "did not write" in out
  assert "FAILED: bad" in err and "silent" in err and "absent" not in err
  assert "boom" in open(os.path.join(log_dir, "bad.log")).read()
  summary = open(os.path.join(results_dir, "SUMMARY.md")).read()
  assert "| ok | fake claim | 1.0 | 1.1 [1, 1.2] | **reproduced** |" in summary
  assert "| quick |" in summary
  assert "| bad | failed |" in summary and "| absent | skipped |" in summary
  with open(os.path.join(results_dir, "ok.json")) as f:
    assert json.load(f)["config"] == {"quick": True}    # --quick was passed through


def test_reproduce_only_runs_the_named_stages(fake_registry, capsys):
  results_dir, log_dir, _ = fake_registry
  assert reproduce.main(["--only=ok", f"--results_dir={results_dir}", f"--log_dir={log_dir}",
                         "--no_progress"]) == 0
  out = capsys.readouterr().out
  assert "[ok] ok" in out and "bad" not in out
  with open(os.path.join(results_dir, "ok.json")) as f:
    assert json.load(f)["mode"] == "full"
  with pytest.raises(ValueError, match="unknown reproduction"):
    reproduce.main(["--only=nope", f"--results_dir={results_dir}"])


def test_registry_lists_every_reproduction_in_order():
  assert [s.name for s in reproduce.REGISTRY] == [
      "ppo_gymnax", "fore", "serving_batching", "serving_routing",
      "serving_routing_azure_code", "serving_routing_mooncake_conv", "ballast", "ballast_hydro",
      "direct_opd", "compaction", "stapo", "cure", "rail_pricing"]
  for s in reproduce.REGISTRY:
    if s.name.startswith("serving_routing_"):   # one record per trace, from one script
      assert s.module == "experiments.serving_routing"
      trace = s.name[len("serving_routing_"):]
      assert s.args[0] == f"--config.trace={trace}"
      # only Mooncake's RL budget differs, by RL-only fields (docs/serving.md)
      assert s.args[1:] == (reproduce.MOONCAKE_RL_BUDGET if trace == "mooncake_conv" else ())
    else:
      assert s.module == f"experiments.{s.name}" and not s.args


def test_stage_args_reach_the_command(fake_registry):
  results_dir, log_dir, pkg = fake_registry
  stage = reproduce.Stage("ok", f"{pkg.name}.ok", args=("--flag_from_stage",))
  res = reproduce.run_stage(stage, quick=False, results_dir=results_dir, log_dir=log_dir)
  assert res.status == "ok", res.note
  with open(os.path.join(log_dir, "ok.log")) as f:
    assert f.readline().rstrip().endswith(f"{pkg.name}.ok --flag_from_stage")


def test_reproduce_stream_and_timeout(fake_registry, capsys):
  results_dir, log_dir, pkg = fake_registry
  (pkg / "slow.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
  stage = reproduce.Stage("slow", f"{pkg.name}.slow")
  t0 = time.time()
  res = reproduce.run_stage(stage, quick=True, results_dir=results_dir, log_dir=log_dir,
                            timeout_s=2, stream=True)
  assert res.status == "failed" and "timeout after 2 s" in res.note
  assert time.time() - t0 < 30
  assert "started" in capsys.readouterr().err          # streamed live
  assert "started" in open(os.path.join(log_dir, "slow.log")).read()


# ------------------------------------------------------------------------------------------------
# Where records go: quick and ad-hoc runs never write results/
# ------------------------------------------------------------------------------------------------
def _one(mode, **kw):
  return results_lib.write_results(
      "thing", mode=mode, config={}, seeds=[0], wall_time_s=0.0,
      claims=[results_lib.claim("c", "1", "1", "reproduced")], **kw)


@pytest.fixture
def result_dirs(tmp_path, monkeypatch):
  d = {k: str(tmp_path / k) for k in ("results", "quick", "adhoc")}
  monkeypatch.setattr(results_lib, "RESULTS_DIR", d["results"])
  monkeypatch.setattr(results_lib, "QUICK_DIR", d["quick"])
  monkeypatch.setattr(results_lib, "ADHOC_DIR", d["adhoc"])
  monkeypatch.delenv(results_lib.ENV_VAR, raising=False)
  monkeypatch.setattr("sys.argv", ["script.py"])
  return d


def test_quick_records_go_to_the_ignored_quick_dir(result_dirs, repo_root, monkeypatch):
  assert os.path.dirname(_one("quick")) == result_dirs["quick"]
  assert os.path.dirname(_one("full")) == result_dirs["results"]
  assert results_lib.figure_path("thing", "quick") == os.path.join(result_dirs["quick"],
                                                                    "thing.png")
  monkeypatch.setenv(results_lib.ENV_VAR, str(result_dirs["adhoc"]) + "_env")
  assert os.path.dirname(_one("quick")) == result_dirs["adhoc"] + "_env"
  # The real quick directory is ignored by git, so a quick run cannot dirty the tree.
  rel = os.path.relpath(reproduce.QUICK_DIR, repo_root)
  out = subprocess.run(["git", "check-ignore", "-q", os.path.join(rel, "x.json")],
                       cwd=repo_root)
  assert out.returncode == 0, f"{rel} is not ignored by git"
  assert reproduce.default_results_dir(True) == reproduce.QUICK_DIR
  assert reproduce.default_results_dir(False) == reproduce.RESULTS_DIR


def test_adhoc_inputs_get_their_own_dir_and_never_reach_the_summary(result_dirs, monkeypatch):
  monkeypatch.setattr("sys.argv", ["serving_batching.py", "--eval_trace", "mine.csv"])
  path = _one("full")
  assert os.path.dirname(path) == result_dirs["adhoc"]
  with open(path) as f:
    assert json.load(f)["adhoc_inputs"] == ["--eval_trace=mine.csv"]
  assert reproduce.load_records(result_dirs["adhoc"]) == []
  assert results_lib.adhoc_inputs(["--layout=x.json", "--reuse_policies=false", "--quick"]) == [
      "--layout=x.json"]


_FAKE_CLOBBER = '''
import os, sys
from jaxrl_suite.core import results
prot = os.environ["FAKE_PROTECTED"]
with open(os.path.join(prot, "clobber.png"), "w") as f:   # a plot saved by a fixed path
  f.write("quick plot")
with open(os.path.join(prot, "new.txt"), "w") as f:
  f.write("new")
results.write_results("clobber", mode="quick" if "--quick" in sys.argv else "full", config={},
                      seeds=[0], wall_time_s=0.1,
                      claims=[results.claim("c", "1", "1", "reproduced")])
'''


def test_reproduce_quick_leaves_the_committed_results_as_they_were(fake_registry, tmp_path,
                                                                    monkeypatch, capsys):
  results_dir, log_dir, pkg = fake_registry
  (pkg / "clobber.py").write_text(_FAKE_CLOBBER)
  protected = tmp_path / "committed"
  protected.mkdir()
  (protected / "clobber.png").write_text("full-mode plot")
  (protected / "SUMMARY.md").write_text("full summary")
  monkeypatch.setenv("FAKE_PROTECTED", str(protected))
  monkeypatch.setattr(reproduce, "PROTECTED_DIR", str(protected))
  monkeypatch.setattr(reproduce, "REGISTRY", [reproduce.Stage("clobber", f"{pkg.name}.clobber")])
  quick_dir = tmp_path / "quick"
  assert reproduce.main(["--quick", f"--results_dir={quick_dir}", f"--log_dir={log_dir}",
                         "--no_progress"]) == 0
  assert sorted(os.listdir(protected)) == ["SUMMARY.md", "clobber.png"]
  assert (protected / "clobber.png").read_text() == "full-mode plot"
  assert (protected / "SUMMARY.md").read_text() == "full summary"
  assert (quick_dir / "clobber.png").read_text() == "quick plot"
  assert (quick_dir / "new.txt").exists() and (quick_dir / "clobber.json").exists()
  assert "| clobber | c |" in (quick_dir / "SUMMARY.md").read_text()


def test_claim_ci_is_printed_once():
  """The verdict tables append a claim's CI unless its `ours` text already prints that interval."""
  c = results_lib.claim
  inline = c("x", "p", "recall change -0.452 [-0.628, -0.277]", "reproduced", ci95=(-0.6278, -0.277))
  other = c("y", "p", "40.8% (raw 37.2% [27.4%, 46.9%])", "inconclusive", ci95=(37.8, 43.86))
  assert results_lib.ours_with_ci(inline) == inline["ours"]
  assert results_lib.ours_with_ci(other).endswith("[37.8, 43.86]")
  # a number that merely contains the CI's digits is not the interval: a zero-width CI is shown
  point = c("z", "p", "1.010x", "partly reproduced", ci95=(1.0102774, 1.0102774))
  assert results_lib.ours_with_ci(point) == "1.010x [1.01, 1.01]"
  # an interval printed with fewer digits is still the same interval; an infinite one is not shown
  rounded = c("w", "p", "-0.16 [-0.28, -0.04]", "contradicted", ci95=(-0.2794, -0.04459))
  assert results_lib.ours_with_ci(rounded) == rounded["ours"]
  wide = c("v", "p", "1.152", "descriptive", ci95=(-float("inf"), float("inf")))
  assert results_lib.ours_with_ci(wide) == "1.152"
  table = results_lib.verdict_table([inline, other])
  assert table.count("-0.628") == 1 and "[37.8, 43.86]" in table
