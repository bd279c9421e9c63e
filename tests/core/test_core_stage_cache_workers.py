"""Processes sharing one workdir: each stage computed once, a dead holder's stage recomputed.

The other processes are real ones (`python -c`), since a stage's lock is a kernel file lock;
every hand-over waits on a file the other side writes, so no test depends on timing."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from jaxrl_suite.core import stage_cache as sc

FP = "fingerprint-w"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A worker: the stage list of tests/core/stage_workers.py; the first worker holds stage s0 until
# the other has computed a stage.
WORKER = r"""
import json, sys
from jaxrl_suite.core import stage_cache as sc
from tests.core.stage_workers import logging_stages
workdir, log, first = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
out = sc.run_stages(logging_stages(6, log, "grid", first), workdir, fingerprint=sys.argv[4])
print(json.dumps([[r.value["i"], r.value["by"], r.hit] for r in out]))
"""

HOLDER = r"""
import os, sys, time
from jaxrl_suite.core import stage_cache as sc
workdir, mode = sys.argv[1], sys.argv[2]
def f():
  open(os.path.join(workdir, "started"), "w").close()
  if mode == "hang":
    time.sleep(600)
  while not os.path.exists(os.path.join(workdir, "release")):
    time.sleep(0.05)
  return {"by": "holder"}
sc.run_stage("tuning", {"lr": 1.0}, f, workdir, fingerprint=sys.argv[3])
"""


def _spawn(code, *args):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path, proc, timeout=120):
  deadline = time.time() + timeout
  while not os.path.exists(path):
    if proc.poll() is not None:
      raise AssertionError(f"helper exited early: {proc.communicate()[1][-2000:]}")
    assert time.time() < deadline, f"{path} never appeared"
    time.sleep(0.05)


def test_two_processes_on_one_stage_list_compute_each_stage_once_and_agree(tmp_path):
  workdir, log = str(tmp_path), str(tmp_path / "log")
  open(log, "w").close()
  a = _spawn(WORKER, workdir, log, 1, FP)
  _wait_for(log + ".holding", a)   # a holds s0 before b starts
  b = _spawn(WORKER, workdir, log, 0, FP)
  outs = []
  for p in (a, b):
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 0, stderr[-2000:]
    outs.append(json.loads(stdout.strip().splitlines()[-1]))
  with open(log) as f:
    computed = [line.split() for line in f if line.strip()]
  names = [n for n, _ in computed]
  assert sorted(names) == [f"s{i}" for i in range(6)]   # each stage exactly once
  by = {n: int(pid) for n, pid in computed}
  assert len(set(by.values())) == 2                     # and the list was shared out
  assert by["s0"] == a.pid and by["s1"] == b.pid        # b skipped a's held stage
  for out in outs:                                      # both read every value, same values
    assert [i for i, _, _ in out] == list(range(6))
    assert [pid for _, pid, _ in out] == [by[f"s{i}"] for i in range(6)]
  for out, p in zip(outs, (a, b)):                      # hit = stored by the other process
    assert [hit for _, _, hit in out] == [by[f"s{i}"] != p.pid for i in range(6)]


def test_a_stage_held_by_a_live_process_is_waited_for_and_read(tmp_path):
  workdir = str(tmp_path)
  holder = _spawn(HOLDER, workdir, "store", FP)
  _wait_for(os.path.join(workdir, "started"), holder)
  seen = []
  def release(stage):
    seen.append(stage.name)
    open(os.path.join(workdir, "release"), "w").close()
  def must_not_run():
    raise AssertionError("computed a stage another process was computing")
  [r] = sc.run_stages([sc.Stage("tuning", {"lr": 1.0}, must_not_run)], workdir,
                      fingerprint=FP, on_wait=release)
  assert holder.wait(timeout=120) == 0
  assert seen == ["tuning"] and r.hit and r.value == {"by": "holder"}


def test_a_stage_whose_holder_was_killed_is_computed_by_the_next_process(tmp_path):
  workdir = str(tmp_path)
  holder = _spawn(HOLDER, workdir, "hang", FP)
  _wait_for(os.path.join(workdir, "started"), holder)
  os.kill(holder.pid, signal.SIGKILL)
  holder.wait(timeout=60)
  calls = []
  r = sc.run_stage("tuning", {"lr": 1.0}, lambda: calls.append(1) or {"by": "me"}, workdir,
                   fingerprint=FP)
  assert calls == [1] and not r.hit and r.value == {"by": "me"}
  again = sc.run_stage("tuning", {"lr": 1.0}, lambda: pytest.fail("recomputed"), workdir,
                       fingerprint=FP)
  assert again.hit and again.value == {"by": "me"}


def test_a_stage_that_raises_releases_its_lock_and_stores_nothing(tmp_path):
  def boom():
    raise RuntimeError("diverged")
  with pytest.raises(RuntimeError, match="diverged"):
    sc.run_stage("rl/a", {"x": 1}, boom, str(tmp_path), fingerprint=FP)
  r = sc.run_stage("rl/a", {"x": 1}, lambda: {"ok": 1}, str(tmp_path), fingerprint=FP)
  assert not r.hit and r.value == {"ok": 1}


def test_optional_stages_without_a_workdir_call_each_fn_in_order():
  order = []
  stages = [sc.Stage(f"s{i}", {"i": i}, lambda i=i: order.append(i) or i) for i in range(3)]
  assert sc.optional_stages(stages, None) == [0, 1, 2] and order == [0, 1, 2]
