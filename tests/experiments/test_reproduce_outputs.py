"""Every reproduction's quick output lands where `experiments/reproduce.py` reads it.

The bug this guards against (issue #41): three scripts wrote their quick records to
`<workdir>/results/`, so `make reproduce` ran all 13 stages and still reported them FAILED. The
rule: a script never names its output folder; the library does (`results.output_dir(mode)`,
which honours JAXRL_RESULTS_DIR, the variable reproduce.py sets for each stage). Checked here
without running any stage: statically on the scripts' source, and by a stand-in for each
stage's process that resolves the folder through the library as the scripts do.
"""

from __future__ import annotations

import ast
import importlib.util
import os

import pytest

from experiments import reproduce
from jaxrl_suite.core import results as results_lib
from jaxrl_suite.repro import runner

EXPERIMENTS = os.path.join(reproduce.REPO_ROOT, "experiments")
# Calls whose arguments are filesystem paths: a "results" component there is a fixed folder.
_PATH_CALLS = {"join", "open", "savefig", "save_figure", "Path", "makedirs", "write_results"}


def _module_file(module: str) -> str:
  spec = importlib.util.find_spec(module)
  assert spec is not None and spec.origin, f"{module} (a REGISTRY stage) does not exist"
  return spec.origin


def _tree(path: str) -> ast.AST:
  with open(path) as f:
    return ast.parse(f.read(), filename=path)


def _call_name(node: ast.Call) -> str:
  f = node.func
  return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _fixed_results_paths(tree: ast.AST) -> list[int]:
  """Line numbers where a path call gets "results" (or "results/...") as an argument, or a
  path is built as `<x> / "results"`."""
  def is_results(n):
    return (isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.strip("/").split("/")[0] == "results")
  lines = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and _call_name(node) in _PATH_CALLS:
      if any(is_results(a) for a in list(node.args) + [k.value for k in node.keywords]):
        lines.append(node.lineno)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and is_results(node.right):
      lines.append(node.lineno)
  return lines


def _scripts() -> list[str]:
  return sorted(os.path.join(EXPERIMENTS, f) for f in os.listdir(EXPERIMENTS)
                if f.endswith(".py") and f != "reproduce.py")


def test_the_detector_finds_a_workdir_joined_with_results():
  bad = ast.parse('rdir = os.path.join(workdir, "results")\np = pathlib.Path(w) / "results"\n'
                  'open("results/x.json", "w")\n')
  good = ast.parse('d = results.output_dir("quick")\nlog("wrote results/x")\n')
  assert _fixed_results_paths(bad) == [1, 2, 3]
  assert _fixed_results_paths(good) == []


@pytest.mark.parametrize("path", _scripts(), ids=os.path.basename)
def test_no_script_names_a_results_folder_itself(path):
  lines = _fixed_results_paths(_tree(path))
  assert not lines, (f"{os.path.relpath(path, reproduce.REPO_ROOT)} lines {lines} build a "
                     "'results' path itself; take the folder from "
                     "jaxrl_suite.core.results.output_dir(mode) (or figure_path) instead")


@pytest.mark.parametrize("stage", reproduce.REGISTRY, ids=lambda s: s.name)
def test_each_stage_writes_its_record_through_the_library(stage):
  """The stage's script calls results.write_results, and every call that passes a folder gets
  it from the caller or from results.output_dir / figure_path (never builds one)."""
  path = _module_file(stage.module)
  tree = _tree(path)
  calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
  writes = [n for n in calls if _call_name(n) == "write_results"]
  assert writes, f"{stage.module} never calls results.write_results"
  resolves = {_call_name(n) for n in calls} & {"output_dir", "figure_path"}
  for w in writes:
    kw = {k.arg: k.value for k in w.keywords}
    if "results_dir" in kw and not (isinstance(kw["results_dir"], ast.Constant)
                                    and kw["results_dir"].value is None):
      assert resolves, (f"{stage.module} line {w.lineno} passes results_dir= but never asks "
                        "results.output_dir for it")
  assert not _fixed_results_paths(tree)


def test_quick_folder_is_the_one_reproduce_reads(monkeypatch):
  monkeypatch.delenv(results_lib.ENV_VAR, raising=False)
  monkeypatch.setattr("sys.argv", ["x.py", "--quick"])
  assert results_lib.output_dir("quick") == reproduce.default_results_dir(True)
  assert results_lib.output_dir("full") == reproduce.default_results_dir(False)
  assert reproduce.default_results_dir(True) != reproduce.RESULTS_DIR   # never the committed one


@pytest.mark.parametrize("stage", reproduce.REGISTRY, ids=lambda s: s.name)
def test_reproduce_finds_the_record_where_the_library_puts_it(stage, tmp_path, monkeypatch):
  """run_stage with a stand-in for the stage's process: it writes the record as the scripts do
  (write_results with the library's folder, under the environment reproduce.py gives the
  stage), and run_stage must find it in the folder it reads."""
  seen = {}

  def fake_run(cmd, env, log, echo, timeout_s, stop=None, usage=None):
    seen["cmd"], seen["env"] = list(cmd), dict(env)
    with monkeypatch.context() as m:
      m.setenv(results_lib.ENV_VAR, env[results_lib.ENV_VAR])
      m.setattr("sys.argv", [stage.module] + list(cmd[3:]))
      results_lib.write_results(
          stage.name, mode="quick", config={}, seeds=[0], wall_time_s=0.0,
          results_dir=results_lib.output_dir("quick"),
          claims=[results_lib.claim("smoke", "-", "-", "inconclusive")])
    return 0

  monkeypatch.setattr(runner, "_run_tee", fake_run)   # the library runs the stage's process
  quick_dir = str(tmp_path / "quick")
  res = reproduce.run_stage(stage, quick=True, results_dir=quick_dir,
                            log_dir=str(tmp_path / "logs"), protect=False)
  assert res.status == "ok", res.note
  assert seen["cmd"][2:4] == [stage.module, "--quick"] and tuple(seen["cmd"][4:]) == stage.args
  assert seen["env"][results_lib.ENV_VAR] == quick_dir
  assert os.path.exists(os.path.join(quick_dir, f"{stage.name}.json"))


def test_reanalyse_exits_non_zero_on_a_mismatch(tmp_path, monkeypatch, capsys):
  """--reanalyse prints the library's report and its exit status follows report.ok."""
  from jaxrl_suite.repro import records

  class Rep:
    def __init__(self, ok):
      self.ok = ok

    def text(self):
      return "MISMATCH x.json: c" if not self.ok else "all agree"

  for ok, rc in ((True, 0), (False, 1)):
    monkeypatch.setattr(records, "reanalyse", lambda d, ok=ok: Rep(ok))
    assert reproduce.main(["--reanalyse", f"--results_dir={tmp_path}"]) == rc
    assert ("MISMATCH" in capsys.readouterr().out) == (not ok)
  assert reproduce.main(["--reanalyse", f"--results_dir={tmp_path / 'absent'}"]) == 2
  assert "is not a directory" in capsys.readouterr().err


def test_every_stage_has_a_shipped_quick_estimate():
  """A fresh clone has no timings of an earlier run: QUICK_SECONDS orders its stages and gives
  its first ETA, so it must name every stage (and nothing else)."""
  assert set(reproduce.QUICK_SECONDS) == {s.name for s in reproduce.REGISTRY}
  assert all(v > 0 for v in reproduce.QUICK_SECONDS.values())
  order = reproduce._schedule(reproduce.REGISTRY, reproduce.QUICK_SECONDS, jobs=2)
  assert [reproduce.QUICK_SECONDS[s.name] for s in order] == sorted(
      reproduce.QUICK_SECONDS.values(), reverse=True)
