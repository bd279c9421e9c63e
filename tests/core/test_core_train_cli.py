"""`python -m jaxrl_suite.train` as a user meets it: training any registered environment by name
from the library's default configs, Ctrl-C and resume, and the rough edges of issue #41 (an
unknown config variant, a corrupt checkpoint, orbax's log noise), each checked on a subprocess's
real output with tiny budgets."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from jaxrl_suite.core import cli

# A run that would take minutes (100k tiny updates) so that it is still going when interrupted;
# chunks of 5 updates keep the progress bar moving every few milliseconds.
_LONG_RUN = ["--env=CartPole-v1", "--config.num_envs=4", "--config.num_steps=16",
             "--config.hidden_sizes=(16,)", "--config.update_epochs=1",
             "--config.num_minibatches=1", "--config.total_timesteps=6.4e6",
             "--config.updates_per_chunk=5", "--config.checkpoint_every=1000"]
_PROGRESS = re.compile(r"step (\d+)/100000")


def _env():
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("PYTHONPATH", None)   # the package as installed in this venv (editable or not)
  return env


def _train(*args, cwd, timeout=300):
  return subprocess.run([sys.executable, "-m", "jaxrl_suite.train", *args], capture_output=True,
                        text=True, cwd=cwd, env=_env(), timeout=timeout)


def _interrupt_after_progress(args, cwd, timeout=300):
  """Starts the CLI, sends SIGINT once the progress bar shows a finished update; returns
  (exit status, stdout, stderr)."""
  proc = subprocess.Popen([sys.executable, "-m", "jaxrl_suite.train", *args], cwd=cwd,
                          env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  err, out = bytearray(), bytearray()

  def pump(stream, buf):
    for chunk in iter(lambda: stream.read1(4096), b""):   # tqdm ends its lines with "\r"
      buf.extend(chunk)

  threads = [threading.Thread(target=pump, args=(proc.stderr, err), daemon=True),
             threading.Thread(target=pump, args=(proc.stdout, out), daemon=True)]
  for t in threads:
    t.start()
  deadline = time.time() + timeout
  while not _PROGRESS.search(err.decode(errors="replace")):
    assert proc.poll() is None, f"ended before any progress: {err.decode()[-3000:]}"
    assert time.time() < deadline, f"no progress in {timeout} s: {err.decode()[-3000:]}"
    time.sleep(0.05)
  proc.send_signal(signal.SIGINT)
  code = proc.wait(timeout=120)
  for t in threads:
    t.join(timeout=10)
  return code, out.decode(), err.decode()


def test_ctrl_c_says_where_to_resume_and_a_rerun_resumes_there(tmp_path):
  work = tmp_path / "run"
  args = [*_LONG_RUN, f"--workdir={work}"]
  code, out, err = _interrupt_after_progress(args, cwd=tmp_path)
  assert code == cli.INTERRUPT_EXIT, (code, err[-3000:])
  assert "Traceback" not in err, err[-3000:]
  last = err.replace("\r", "\n").strip().splitlines()[-1]
  m = re.fullmatch(r"interrupted at step (\d+) of 100000 \(([\d,]+) env steps per seed, saved in "
                   r"(.+)\); rerun the same command to resume", last)
  assert m, err[-3000:]
  first = int(m.group(1))
  assert first >= 5 and int(m.group(2).replace(",", "")) == first * 64
  assert sorted(os.listdir(work / "checkpoints")) == [str(first)]   # saved at the interrupt
  assert not re.search(r"^I\d{4} .*orbax", err, re.M), "orbax INFO lines in the run's log"

  # The same command again: says so, continues from that step, and can be interrupted again.
  code, out, err = _interrupt_after_progress(args, cwd=tmp_path)
  assert code == cli.INTERRUPT_EXIT, (code, err[-3000:])
  assert f"resuming from step {first} of 100000" in out, out
  second = int(re.search(r"interrupted at step (\d+) of", err).group(1))
  assert second > first
  rows = [l for l in open(work / "metrics.jsonl") if l.strip()]
  assert len(rows) == second   # log_every=1: each update once, none lost or repeated

  # That checkpoint corrupted: a two-line message naming it, no traceback from orbax's threads.
  for root, _, files in os.walk(work / "checkpoints" / str(second) / "state"):
    for name in files:
      if name.startswith("manifest"):
        with open(os.path.join(root, name), "r+b") as f:
          f.truncate(3)
  res = _train(*args, cwd=tmp_path)
  assert res.returncode == 2, res.stderr[-3000:]
  err = res.stderr.strip()
  assert "Traceback" not in err and "Event loop is closed" not in err, err[-3000:]
  assert len(err.splitlines()) == 2, err
  assert f"checkpoint at {work / 'checkpoints' / str(second)} is unreadable" in err
  assert f"to resume from step {first}" in err


def _short_error(res, *needles):
  """Exit status 2, at most two lines on stderr, no traceback, each needle present."""
  assert res.returncode == 2, (res.returncode, res.stderr[-3000:])
  err = res.stderr.strip()
  assert "Traceback" not in err and len(err.splitlines()) <= 2, err[-3000:]
  for n in needles:
    assert n in err, err


@pytest.mark.parametrize("args,needles", [
    (["--config=configs/ppo_cartpole.py:quik"],
     ["--config=configs/ppo_cartpole.py:quik: unknown config variant 'quik'",
      "valid variants: quick"]),
    (["--env=CartPol"], ["--env=CartPol: not a registered environment; did you mean CartPole-v1?",
                         "valid names: "]),
    ([], ["--env is required"]),
    (["--env=CartPole-v1", "--config.learning_rate=1"],
     ["--config.learning_rate: unknown field; did you mean lr?"]),
    (["--env=CartPole-v1", "--algo=reinforce", "--config.clip_eps=0.1"],
     ["--config.clip_eps: unknown field"]),   # reinforce's default config has no clip_eps
    (["--env=CartPole-v1", "--config.log_every=0"],
     ["config.log_every must be a positive integer, got 0"]),
    (["--env=CartPole-v1", "--algo=dqn"], ["--algo=dqn: unknown algorithm; one of ppo, reinforce"]),
    (["--env=CartPole-v1", "--config.algo=reinforce"], ["--algo=reinforce"]),
    (["--env=Pendulum-v1", "--config.agent=gru"],
     ["config.env_name 'Pendulum-v1' has a continuous (Box) action space",
      "use --config.agent=gaussian"]),
    (["--env=KVLookup-v0", "--algo=reinforce"], ["--algo=reinforce: KVLookup-v0 is a text environment", "drop --algo"]),
])
def test_bad_values_stop_before_compiling_in_two_lines(repo_root, tmp_path, args, needles):
  res = _train(*args, f"--workdir={tmp_path / 'w'}", cwd=repo_root, timeout=120)
  _short_error(res, *needles)
  assert not os.path.exists(tmp_path / "w")   # nothing was written


def test_config_variants_are_read_from_get_config(tmp_path):
  def variants(src):
    path = tmp_path / "c.py"
    path.write_text(src)
    return cli.config_variants(str(path))

  assert variants("def get_config(arg=None):\n  if arg == 'quick':\n    pass\n"
                  "  full = 'full' == arg\n  x = arg in ('a', 'b')\n") == ["a", "b", "full", "quick"]
  assert variants("def get_config():\n  return 1\n") == []
  assert variants("def get_config(arg=None):\n  if arg is None:\n    arg = 'x'\n"
                  "  return arg == 'quick'\n") is None      # reassigned: cannot tell
  assert variants("def get_config(arg=None):\n  return int(arg)\n") is None   # parsed
  assert variants("x = 1\n") is None
  (tmp_path / "c.py").write_text("def get_config(arg=None):\n  return arg == 'quick'\n")
  cli.check_config_variant(f"{tmp_path / 'c.py'}:quick")
  cli.check_config_variant(str(tmp_path / "c.py"))
  with pytest.raises(cli.UserError, match=r"unknown config variant 'quik'; valid variants: quick"):
    cli.check_config_variant(f"{tmp_path / 'c.py'}:quik")


def test_experiment_scripts_refuse_an_unknown_variant(capsys):
  from experiments import cli as exp_cli
  with pytest.raises(SystemExit) as e:
    with exp_cli.user_errors(argv=["prog", "--config=configs/ppo_gymnax.py:quik"]):
      raise AssertionError("the run must not start")
  assert e.value.code == 2
  assert "unknown config variant 'quik'" in capsys.readouterr().err
  with exp_cli.user_errors(argv=["prog", "--config=configs/ppo_gymnax.py:quick"]):
    pass


_ORBAX_SAVE = r"""
import jax.numpy as jnp
from absl import logging
from jaxrl_suite.core import checkpoint
logging.set_verbosity(logging.INFO)   # as a script that logs its own progress at INFO
logging.info("script line")
with checkpoint.Checkpointer(__import__("sys").argv[1]) as ck:
  ck.save(1, {"w": jnp.ones(3)})
  assert ck.restore(1, like={"w": jnp.ones(3)})["w"].sum() == 3
"""


def test_orbax_info_lines_are_silenced_and_the_scripts_own_are_not(tmp_path):
  res = subprocess.run([sys.executable, "-c", _ORBAX_SAVE, str(tmp_path / "ck")],
                       capture_output=True, text=True, env=_env(), timeout=120)
  assert res.returncode == 0, res.stderr[-3000:]
  assert "script line" in res.stderr
  noisy = [l for l in res.stderr.splitlines() if "orbax" in l or re.match(r"I\d{4} .*checkpoint", l)]
  assert not noisy, noisy
