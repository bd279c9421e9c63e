"""The script entry helper: --quick/--workdir/--config, where a run writes, and user errors that
stop before the run starts (one or two lines, exit status 2, no traceback).

The command-line cases run a tiny script in a subprocess (absl parses the real argv there); the
script's run body writes a marker file, so "stopped before the run" is checked, not assumed.
"""

import json
import os
import subprocess
import sys

import ml_collections
import pytest

from jaxrl_suite.core import results
from jaxrl_suite.repro import entry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = '''
import ml_collections

def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.seeds = 8
  c.lr = 3e-4
  c.net = ml_collections.ConfigDict({"hidden": 64, "act": "tanh"})
  if arg == "quick":
    c.seeds = 2
    c.net.hidden = 16
  return c
'''

SCRIPT = '''
import json, os, sys
from jaxrl_suite.repro import entry

FLAGS = entry.define_flags("toy", sys.argv.pop(1))

def validate(c):
  if not isinstance(c.seeds, int) or c.seeds <= 0:
    raise ValueError(f"config.seeds must be a positive integer, got {c.seeds!r}")

def run(e):
  with open(os.environ["MARKER"], "w") as f:
    json.dump({"config": e.config.to_dict(), "quick": e.quick, "mode": e.mode,
               "workdir": e.workdir, "results_dir": e.results_dir,
               "figure": e.figure_path()}, f)

entry.main(FLAGS, run, validate=validate)
'''


@pytest.fixture()
def toy(tmp_path):
  cfg = tmp_path / "toy_config.py"
  cfg.write_text(CONFIG)
  script = tmp_path / "toy.py"
  script.write_text(SCRIPT)
  marker = tmp_path / "ran.json"

  def call(*args, results_dir=None):
    env = dict(os.environ, PYTHONPATH=REPO, MARKER=str(marker))
    env.pop("JAXRL_RESULTS_DIR", None)
    if results_dir:
      env["JAXRL_RESULTS_DIR"] = results_dir
    p = subprocess.run([sys.executable, str(script), str(cfg), *args], cwd=str(tmp_path),
                       env=env, capture_output=True, text=True, timeout=120)
    ran = json.loads(marker.read_text()) if marker.exists() else None
    if marker.exists():
      marker.unlink()
    return p, ran
  return call, str(cfg), tmp_path


def test_quick_run_writes_results_quick_and_says_where(toy):
  call, cfg, tmp = toy
  p, ran = call("--quick", f"--workdir={tmp / 'wd'}")
  assert p.returncode == 0, p.stderr[-2000:]
  assert ran["quick"] and ran["mode"] == "quick"
  assert ran["results_dir"] == results.QUICK_DIR
  assert ran["figure"] == os.path.join(results.QUICK_DIR, "toy.png")
  assert ran["workdir"] == str(tmp / "wd") and os.path.isdir(tmp / "wd")
  assert ran["config"] == {"seeds": 2, "lr": 3e-4, "net": {"hidden": 16, "act": "tanh"}}
  assert f"results -> {results.QUICK_DIR}" in p.stdout and f"workdir (stage cache) -> " \
      f"{tmp / 'wd'}" in p.stdout


def test_full_run_writes_results_unless_told_otherwise(toy, tmp_path):
  call, cfg, tmp = toy
  p, ran = call(f"--workdir={tmp / 'wd'}")
  assert p.returncode == 0, p.stderr[-2000:]
  assert ran["mode"] == "full" and ran["results_dir"] == results.RESULTS_DIR
  assert ran["config"]["seeds"] == 8
  p, ran = call(f"--workdir={tmp / 'wd'}", f"--results_dir={tmp / 'out'}")
  assert ran["results_dir"] == str(tmp / "out")
  p, ran = call("--quick", f"--workdir={tmp / 'wd'}", results_dir=str(tmp / "env_out"))
  assert ran["results_dir"] == str(tmp / "env_out")   # JAXRL_RESULTS_DIR (reproduce.py)


def test_command_line_fields_win_over_the_quick_preset(toy):
  call, cfg, tmp = toy
  # seeds=8 equals the full default: still the user's choice over the quick preset's 2
  p, ran = call("--quick", "--config.seeds=8", "--config.net.act=relu", "--config.lr=1e-3",
                f"--workdir={tmp / 'wd'}")
  assert p.returncode == 0, p.stderr[-2000:]
  assert ran["config"] == {"seeds": 8, "lr": 1e-3, "net": {"hidden": 16, "act": "relu"}}
  p, ran = call("--config.seeds=2e1", f"--workdir={tmp / 'wd'}")   # integral float literal
  assert ran["config"]["seeds"] == 20


@pytest.mark.parametrize("args,names", [
    (("--config.sedes=3",), ("--config.sedes", "did you mean seeds")),
    (("--config.net.hiden=3",), ("--config.net.hiden", "net.hidden")),
    (("--config.seeds=-1",), ("config.seeds", "positive integer")),
    (("--config.seeds=abc",), ("seeds",)),
    (("--quick", "--config.seeds=0"), ("config.seeds",)),
    (("--config={cfg}:quik",), ("unknown config variant 'quik'", "quick")),
    (("--config=missing.py",), ("missing.py",)),
])
def test_a_bad_config_stops_before_the_run_naming_the_field(toy, args, names):
  call, cfg, tmp = toy
  p, ran = call(*[a.format(cfg=cfg) for a in args], f"--workdir={tmp / 'wd'}")
  assert p.returncode == 2, (p.stdout[-1000:], p.stderr[-2000:])
  assert ran is None                                   # the run body never started
  assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 2, p.stderr
  for n in names:
    assert n in p.stderr, p.stderr


def test_debug_keeps_the_traceback(toy):
  call, cfg, tmp = toy
  p, ran = call("--config.seeds=-1", "--debug", f"--workdir={tmp / 'wd'}")
  assert p.returncode != 0 and ran is None and "Traceback" in p.stderr


# ------------------------------------------------------------------------------ in process

def test_quick_config_merges_in_process(tmp_path):
  cfg = tmp_path / "c.py"
  cfg.write_text(CONFIG)
  parsed = ml_collections.ConfigDict({"seeds": 8, "lr": 0.1, "net": {"hidden": 64, "act": "tanh"}})
  q = entry.quick_config(str(cfg), parsed, ["prog", "--config.lr=0.1"])
  assert q.to_dict() == {"seeds": 2, "lr": 0.1, "net": {"hidden": 16, "act": "tanh"}}
  assert entry.override_paths(["--config.a.b=1", "--quick", "--config.c", "3"]) == ["a.b", "c"]


def test_a_config_file_without_a_quick_variant_is_a_user_error(tmp_path):
  from jaxrl_suite.core import cli as core_cli
  cfg = tmp_path / "c.py"
  cfg.write_text(CONFIG.replace('if arg == "quick"', 'if arg == "small"'))
  with pytest.raises(core_cli.UserError, match="unknown config variant 'quick'"):
    entry.quick_config(str(cfg), ml_collections.ConfigDict({"seeds": 1}), ["prog"])
