"""Sweeps: trial lists (local and XManager agree), a real 2-trial sweep, resume after an
interruption."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types

import pytest

from experiments import launch_xm, sweep

# A tiny sweep on the quick CartPole config: 20 updates in chunks of 10, a checkpoint every 10.
_TINY = '''
import ml_collections
from experiments import sweep

def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.name = "tiny"
  c.base_config = "configs/ppo_cartpole.py:quick"
  c.overrides = ml_collections.ConfigDict(dict(
      total_timesteps=4 * 128 * 20, updates_per_chunk=10, checkpoint_every=10, log_every=1,
      max_to_keep=3))
  return c

def get_sweep(arg=None):
  return sweep.product(lr=[1e-3, 3e-4])
'''


@pytest.fixture
def tiny_sweep(tmp_path):
  path = tmp_path / "tiny.py"
  path.write_text(_TINY)
  return str(path), str(tmp_path / "runs")


# ------------------------------------------------------------------------------------------------
# Trial lists (no training)
# ------------------------------------------------------------------------------------------------
def test_product_and_zipped():
  assert sweep.product(a=[1, 2], b=["x", "y"]) == [
      {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
  assert sweep.zipped(a=[1, 2], b=[3, 4]) == [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
  assert sweep.cross(sweep.zipped(a=[1, 2], b=[3, 4]), sweep.product(seed=[0, 1]))[1] == {
      "a": 1, "b": 3, "seed": 1}
  with pytest.raises(ValueError, match="equal lengths"):
    sweep.zipped(a=[1], b=[1, 2])
  with pytest.raises(ValueError, match="list of values"):
    sweep.product(a="abc")


def test_format_value_is_config_flags_syntax():
  assert sweep.format_value(True) == "true"
  assert sweep.format_value(1e-3) == "0.001"
  assert sweep.format_value(2.5e-4) == "0.00025"
  assert sweep.format_value((32, 32)) == "(32,32)"
  assert sweep.format_value((8,)) == "(8,)"
  assert sweep.format_value("Acrobot-v1") == "Acrobot-v1"


def test_trial_ids_depend_only_on_overrides():
  assert sweep.trial_id({"lr": 0.001, "seed": 0}) == "lr=0.001,seed=0"
  assert sweep.trial_id({}) == "default"
  long_id = sweep.trial_id({f"field_{i}": i for i in range(20)})
  assert len(long_id) <= 80 and long_id != sweep.trial_id({f"field_{i}": i + 1 for i in range(20)})


def test_build_trials(tiny_sweep):
  spec, root = tiny_sweep
  cfg, trials = sweep.build_trials(spec, root)
  assert cfg.name == "tiny"
  assert [t.trial_id for t in trials] == ["lr=0.001", "lr=0.0003"]
  assert trials[0].overrides["lr"] == 1e-3 and trials[0].overrides["checkpoint_every"] == 10
  assert trials[1].workdir == os.path.join(os.path.abspath(root), "tiny", "lr=0.0003")
  cmd = trials[0].command("python")
  assert cmd[:3] == ["python", "-m", "jaxrl_suite.train"]
  assert cmd[3].endswith("configs/ppo_cartpole.py:quick") and os.path.isabs(cmd[3][9:])
  assert "--config.lr=0.001" in cmd and cmd[-1] == f"--workdir={trials[0].workdir}"
  # Deterministic: building twice gives the same list.
  assert sweep.build_trials(spec, root)[1] == trials


def test_build_trials_rejects_bad_sweeps(tmp_path):
  dup = tmp_path / "dup.py"
  dup.write_text(_TINY.replace("sweep.product(lr=[1e-3, 3e-4])", "[{'lr': 1.0}, {'lr': 1.0}]"))
  with pytest.raises(ValueError, match="duplicate trial"):
    sweep.build_trials(str(dup))
  prefixed = tmp_path / "prefixed.py"
  prefixed.write_text(_TINY.replace("sweep.product(lr=[1e-3, 3e-4])", "[{'config.lr': 1.0}]"))
  with pytest.raises(ValueError, match="without 'config.'"):
    sweep.build_trials(str(prefixed))
  with pytest.raises(ValueError, match="does not exist"):
    sweep.build_trials(str(tmp_path / "nope.py"))


@pytest.mark.parametrize("spec", ["configs/sweeps/ppo_cartpole_lr.py",
                                  "configs/sweeps/ppo_cartpole_lr.py:quick", "ppo_cartpole_lr"])
def test_shipped_sweeps_build(spec, tmp_path):
  cfg, trials = sweep.build_trials(spec, str(tmp_path))
  assert len(trials) == (4 if spec.endswith(":quick") else 9)
  assert len({t.workdir for t in trials}) == len(trials)
  assert os.path.exists(trials[0].config_arg.partition(":")[0])


def test_xm_launcher_builds_the_same_trials(tiny_sweep):
  """XManager jobs = binary args + rendered job args == the local launcher's commands."""
  spec, root = tiny_sweep
  _, local = sweep.build_trials(spec, root)
  _, jobs = launch_xm.jobs(spec, root, skip_done=False)
  assert [t for t, _ in jobs] == local
  for t, kw in jobs:
    assert [sys.executable] + launch_xm.render_args(launch_xm.binary_args(t), kw) == t.command()


def test_xm_launcher_main_with_fake_xmanager(tiny_sweep, monkeypatch):
  """Runs launch_xm.main against a stand-in `xmanager` that records what would be launched."""
  spec, root = tiny_sweep
  launched = {}

  class Experiment:
    def __enter__(self):
      return self

    def __exit__(self, *a):
      return False

    def package(self, packageables):
      launched["binaries"] = packageables
      return ["executable"]

    def add(self, job):
      launched.setdefault("jobs", []).append(job)

  xm = types.SimpleNamespace(
      binary=lambda path, args, executor_spec: {"path": path, "args": list(args)},
      Job=lambda executable, executor, args, env_vars: {"args": args, "env": env_vars})
  xm_local = types.SimpleNamespace(create_experiment=lambda experiment_title: Experiment(),
                                   Local=types.SimpleNamespace(Spec=lambda: "spec"))
  xm_local.Local = type("Local", (), {"Spec": staticmethod(lambda: "spec")})
  monkeypatch.setitem(sys.modules, "xmanager", types.SimpleNamespace(xm=xm, xm_local=xm_local))
  assert launch_xm.launch(spec, root) == 2
  _, local = sweep.build_trials(spec, root)
  [binary] = launched["binaries"]
  assert binary["path"] == sys.executable
  for t, job in zip(local, launched["jobs"]):
    assert [binary["path"]] + launch_xm.render_args(binary["args"], job["args"]) == t.command()
    assert job["env"]["PYTHONPATH"] == sweep.REPO_ROOT
  assert len(launched["jobs"]) == len(local)


def test_xm_launcher_without_xmanager_says_how_to_install(tiny_sweep, monkeypatch):
  spec, root = tiny_sweep
  monkeypatch.setitem(sys.modules, "xmanager", None)  # import fails
  with pytest.raises(SystemExit, match=r"\[xm\]"):
    launch_xm.launch(spec, root)
  assert launch_xm.launch(spec, root, dry_run=True) == 2   # a dry run needs no xmanager


def test_read_metrics_keeps_the_latest_row_per_step(tmp_path):
  rows = [{"step": 0, "r": 1.0}, {"step": 1, "r": 2.0}, {"step": 1, "r": 3.0}]
  with open(tmp_path / "metrics.jsonl", "w") as f:
    f.write("\n".join(json.dumps(r) for r in rows) + "\n{\"step\": 2, \"r\"")  # cut last line
  assert sweep.read_metrics(str(tmp_path)) == [{"step": 0, "r": 1.0}, {"step": 1, "r": 3.0}]


# ------------------------------------------------------------------------------------------------
# A real sweep: 2 trials in parallel, then an interrupted trial resumes, the finished one is kept
# ------------------------------------------------------------------------------------------------
def _steps(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line)["step"] for line in f if line.strip()]


def test_sweep_runs_writes_table_and_resumes(tiny_sweep, capsys):
  spec, root = tiny_sweep
  args = [f"--sweep={spec}", f"--root={root}", "--parallel=2", "--no_progress"]
  assert sweep.main(args) == 0
  _, (t0, t1) = sweep.build_trials(spec, root)
  for t in (t0, t1):
    assert sweep.is_done(t), open(os.path.join(t.workdir, sweep.LOG_NAME)).read()[-2000:]
    assert _steps(t.workdir) == list(range(20))
    with open(os.path.join(t.workdir, "config.json")) as f:   # the override reached the config
      assert json.load(f)["lr"] == t.overrides["lr"]
  with open(os.path.join(root, "tiny", "results.csv")) as f:
    lines = f.read().splitlines()
  assert lines[0].split(",")[:3] == ["trial", "lr", "status"] and len(lines) == 3
  assert all(",done,19," in line for line in lines[1:])
  md = open(os.path.join(root, "tiny", "results.md")).read()
  assert "| lr=0.001 | 0.001 | done | 19 |" in md and "Per setting" in md

  # Interrupt trial 1 after its step-10 checkpoint: what a kill leaves is the checkpoints up to
  # the last save, the metrics of every finished chunk, and no DONE marker.
  shutil.rmtree(os.path.join(t1.workdir, "checkpoints", "20"))
  os.remove(os.path.join(t1.workdir, sweep.DONE_MARKER))
  done0 = os.path.getmtime(os.path.join(t0.workdir, sweep.DONE_MARKER))
  metrics0 = open(os.path.join(t0.workdir, "metrics.jsonl")).read()
  capsys.readouterr()
  assert sweep.main(args) == 0
  out = capsys.readouterr().out
  assert "1 already done" in out and "lr=0.001: done" in out and "lr=0.0003: ran" in out
  # The finished trial was not re-run.
  assert os.path.getmtime(os.path.join(t0.workdir, sweep.DONE_MARKER)) == done0
  assert open(os.path.join(t0.workdir, "metrics.jsonl")).read() == metrics0
  assert open(os.path.join(t0.workdir, sweep.LOG_NAME)).read().count("=== ") == 1
  # The interrupted one resumed from update 10 (not restarted): the rows of updates 10-19 written
  # before the interruption were dropped on resume, so every step appears once.
  assert sweep.is_done(t1)
  assert _steps(t1.workdir) == list(range(20))
  assert sorted(os.listdir(os.path.join(t1.workdir, "checkpoints"))) == ["10", "20"]
  assert sweep.read_metrics(t1.workdir)[-1]["step"] == 19


@pytest.mark.slow
def test_sweep_interrupted_by_signal_resumes(tiny_sweep):
  """A real interruption: SIGINT the launcher once a trial has checkpointed, then re-run."""
  spec, root = tiny_sweep
  one = spec.replace("tiny.py", "one.py")
  with open(spec) as f, open(one, "w") as g:
    g.write(f.read().replace("lr=[1e-3, 3e-4]", "lr=[1e-3]").replace(
        "4 * 128 * 20", "4 * 128 * 200").replace('"tiny"', '"one"'))
  _, [t] = sweep.build_trials(one, root)
  cmd = [sys.executable, "-m", "experiments.sweep", f"--sweep={one}", f"--root={root}",
         "--no_progress"]
  proc = subprocess.Popen(cmd, cwd=sweep.REPO_ROOT)
  ckpts = os.path.join(t.workdir, "checkpoints")
  deadline = time.time() + 240
  while time.time() < deadline and not (os.path.isdir(ckpts) and any(
      os.path.exists(os.path.join(ckpts, d, "commit_success.txt")) for d in os.listdir(ckpts))):
    time.sleep(0.2)
  proc.send_signal(signal.SIGINT)
  assert proc.wait(60) == 130
  assert not sweep.is_done(t)
  first = _steps(t.workdir)
  assert 10 <= len(first) < 200
  assert subprocess.run(cmd, cwd=sweep.REPO_ROOT).returncode == 0
  steps = _steps(t.workdir)
  assert sweep.is_done(t) and sorted(set(steps)) == list(range(200))
  assert steps.count(0) == 1   # resumed, not restarted


def test_trial_configs_are_validated_before_launch(tiny_sweep, tmp_path, capsys):
  spec, root = tiny_sweep
  _, trials = sweep.build_trials(spec, root)
  config = sweep.trial_config(trials[1])
  assert config.lr == 3e-4 and config.total_timesteps == 4 * 128 * 20 and config.log_every == 1
  sweep.validate_trials(trials)
  bad = tmp_path / "bad.py"
  bad.write_text(_TINY.replace("lr=[1e-3, 3e-4]", "lr=[1e-3, -1.0]"))
  # The CLI reports a user's input error as one line and exit status 2 (no traceback);
  # validate_trials itself raises.
  with pytest.raises(ValueError, match=r"trial lr=-1.0: config.lr must be > 0"):
    sweep.validate_trials(sweep.build_trials(str(bad), root)[1])
  capsys.readouterr()
  assert sweep.main([f"--sweep={bad}", f"--root={root}"]) == 2
  assert "error: trial lr=-1.0: config.lr must be > 0" in capsys.readouterr().err
  unknown = tmp_path / "unknown.py"
  unknown.write_text(_TINY.replace("lr=[1e-3, 3e-4]", "learning_rate=[1e-3]"))
  assert sweep.main([f"--sweep={unknown}", f"--root={root}", "--dry_run"]) == 2
  assert "no field 'learning_rate'" in capsys.readouterr().err
  assert not os.path.exists(os.path.join(root, "tiny"))   # nothing was launched
