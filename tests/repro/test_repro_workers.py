"""`--workers=N`: helper processes that share a run's stage cache (`repro.workers`).

A toy script, run as a module as users run the reproductions, computes a list of independent
stages; whichever process takes the first stage holds it until another process has computed one,
so the split is checked without depending on timing (a lone process would hold it 120 s)."""

import json
import os
import subprocess
import sys

import pytest

from jaxrl_suite.repro import workers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = '''
import ml_collections

def get_config(arg=None):
  return ml_collections.ConfigDict({"n": 4})
'''

SCRIPT = '''
import json, os, sys
from jaxrl_suite.core import stage_cache
from jaxrl_suite.repro import entry
from tests.core.stage_workers import logging_stages

FLAGS = entry.define_flags("toyw", os.environ["TOY_CONFIG"],
                           splits_stages=os.environ.get("TOY_SPLITS") == "1")

def run(e):
  out = stage_cache.run_stages(
      logging_stages(e.config.n, os.path.join(e.workdir, "computed.log"), "toy",
                     bool(os.environ.get("TOY_HOLD"))), e.workdir, fingerprint="toy")
  os.makedirs(e.results_dir, exist_ok=True)
  with open(os.path.join(e.results_dir, "toyw.json"), "w") as fh:
    json.dump({"pid": os.getpid(), "values": [r.value for r in out]}, fh)

entry.main(FLAGS, run)
'''


@pytest.fixture()
def toy(tmp_path):
  (tmp_path / "toyw_config.py").write_text(CONFIG)
  (tmp_path / "toyw.py").write_text(SCRIPT)

  def call(*args, splits=True, hold=False):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + str(tmp_path),
               TOY_CONFIG=str(tmp_path / "toyw_config.py"), TOY_SPLITS="1" if splits else "0",
               TOY_HOLD="1" if hold else "")
    env.pop("JAXRL_RESULTS_DIR", None)
    return subprocess.run([sys.executable, "-m", "toyw", f"--workdir={tmp_path / 'wd'}",
                           f"--results_dir={tmp_path / 'out'}", *args], cwd=str(tmp_path),
                          env=env, capture_output=True, text=True, timeout=300)
  return call, tmp_path


def test_two_workers_split_the_stages_and_the_main_run_writes_the_record(toy):
  call, tmp = toy
  p = call("--workers=2", hold=True)
  assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
  with open(tmp / "wd" / "computed.log") as f:
    computed = [line.split() for line in f if line.strip()]
  assert sorted(n for n, _ in computed) == ["s0", "s1", "s2", "s3"]   # each stage once
  pids = {int(pid) for _, pid in computed}
  assert len(pids) == 2                                               # by two processes
  with open(tmp / "out" / "toyw.json") as f:
    rec = json.load(f)
  assert [v["i"] for v in rec["values"]] == [0, 1, 2, 3]
  assert {v["by"] for v in rec["values"]} == pids and rec["pid"] in pids
  helper = (pids - {rec["pid"]}).pop()
  assert (tmp / "wd" / "helpers" / "1.log").exists()
  with open(f"/proc/{helper}/stat") if os.path.exists(f"/proc/{helper}") else open(os.devnull) as f:
    state = f.read()
  assert state == "" or state.rsplit(")", 1)[1].split()[0] in "ZX"   # stopped with the run
  assert "1 helper process(es) share the stage cache" in p.stdout


def test_one_worker_computes_everything_itself(toy):
  call, tmp = toy
  p = call("--config.n=2")
  assert p.returncode == 0, p.stderr[-2000:]
  with open(tmp / "wd" / "computed.log") as f:
    assert len({line.split()[1] for line in f if line.strip()}) == 1
  assert not (tmp / "wd" / "helpers").exists()


@pytest.mark.parametrize("args,splits,needle", [
    (("--workers=0",), True, "--workers must be >= 1"),
    (("--workers=2",), False, "no independent stages to share out"),
])
def test_bad_workers_stop_before_the_run(toy, args, splits, needle):
  call, tmp = toy
  p = call(*args, splits=splits)
  assert p.returncode == 2 and needle in p.stderr, (p.stdout[-1000:], p.stderr[-2000:])
  assert "Traceback" not in p.stderr and not (tmp / "wd" / "computed.log").exists()


def test_helper_argv_drops_workers_and_results_dir_in_both_forms():
  argv = ["x.py", "--quick", "--workers", "3", "--results_dir=/r", "--config.n=2",
          "--results_dir", "/s", "--workers=2", "--workdir=w"]
  assert workers.helper_argv(argv) == ["--quick", "--config.n=2", "--workdir=w"]
