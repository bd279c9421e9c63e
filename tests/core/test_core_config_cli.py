"""Configs and the training CLI: bad values fail before compilation, naming the field;
`--config.x=...` overrides work; the CLI writes metrics, a curve and checkpoints."""

import glob
import json
import os
import subprocess
import sys

import pytest

from jaxrl_suite import train as train_cli
from jaxrl_suite.core import cli
from configs import ppo_cartpole, ppo_minatar_breakout, reinforce_cartpole


@pytest.mark.parametrize("module", [ppo_cartpole, reinforce_cartpole, ppo_minatar_breakout])
@pytest.mark.parametrize("arg", [None, "quick"])
def test_shipped_configs_validate(module, arg):
  train_cli.validate_run_config(module.get_config(arg))


@pytest.mark.parametrize("field,value,message", [
    ("num_envs", -4, "config.num_envs must be a positive integer"),
    ("num_steps", 0, "config.num_steps must be a positive integer"),
    ("num_minibatches", 3, "config.num_minibatches=3 does not divide"),
    ("env_name", "CartPole-v9", "config.env_name 'CartPole-v9' is not a registered environment"),
    ("gamma", 1.5, "config.gamma must be in"),
    ("lr", 0.0, "config.lr must be > 0"),
    ("activation", "sigmoid", "config.activation must be one of"),
    ("total_timesteps", 10, "config.total_timesteps=10 is smaller than one rollout"),
    ("checkpoint_every", 7, "config.checkpoint_every=7 must be a multiple"),
    ("algo", "dqn", "config.algo must be one of"),
])
def test_invalid_values_name_the_field(field, value, message):
  c = ppo_cartpole.get_config()
  c[field] = value
  with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
    train_cli.validate_run_config(c)


def _train(repo_root, *args, timeout=600):
  return subprocess.run([sys.executable, "-m", "jaxrl_suite.train", *args],
                        capture_output=True, text=True, cwd=repo_root, timeout=timeout)


def _short_error(out, *needles):
  """Exit status 2, at most two lines on stderr, no traceback, each needle present."""
  assert out.returncode == 2, (out.returncode, out.stderr[-3000:])
  err = out.stderr.strip()
  assert "Traceback" not in err and len(err.splitlines()) <= 2, err[-3000:]
  for n in needles:
    assert n in err, err


@pytest.mark.parametrize("args,needles", [
    (["--config.num_minibatches=7"], ["config.num_minibatches=7 does not divide"]),
    (["--config.learning_rate=0.1"],
     ["--config.learning_rate: unknown field; did you mean lr?", "fields: ", "num_envs"]),
    (["--config.lr=abc"], ["--config.lr=abc", "could not convert"]),
    (["--config=configs/no_such_config.py"], ["no_such_config.py"]),
])
def test_cli_user_errors_are_short_with_exit_status_2(repo_root, tmp_path, args, needles):
  if not any(a.startswith("--config=") for a in args):
    args = ["--config=configs/ppo_cartpole.py:quick"] + args
  out = _train(repo_root, *args, f"--workdir={tmp_path}", timeout=300)
  _short_error(out, *needles)
  assert not os.path.exists(tmp_path / "checkpoints")  # failed before doing anything


def test_cli_debug_keeps_the_traceback(repo_root, tmp_path):
  out = _train(repo_root, "--config=configs/ppo_cartpole.py:quick", "--config.num_minibatches=7",
               "--debug", f"--workdir={tmp_path}", timeout=300)
  assert out.returncode != 0 and "Traceback" in out.stderr
  assert "does not divide" in out.stderr


def test_cli_help_lists_the_config_fields(repo_root):
  out = _train(repo_root, "--help", timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  for field in ("lr = 0.00025", "num_envs = ", "total_timesteps = ", "clip_eps = ",
                "updates_per_chunk:", "updates_per_chunk = 16", "--resume", "--[no]debug",
                "--env:", "CartPole-v1", "--algo: <ppo|reinforce>"):
    assert field in out.stdout, field
  assert "(default: 'activation" not in out.stdout   # no YAML dump of the default config


def test_cli_trains_resumes_and_reports_bad_workdirs(repo_root, tmp_path):
  # 1.024e4 is integral: accepted for the integer field (was "invalid literal for int()").
  out = _train(repo_root, "--config=configs/ppo_cartpole.py:quick",
               "--config.total_timesteps=1.024e4", "--config.num_seeds=2", f"--workdir={tmp_path}")
  assert out.returncode == 0, out.stderr[-3000:]
  with open(tmp_path / "config.json") as f:
    assert json.load(f)["total_timesteps"] == 10240
  rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
  # 10240 / 512 = 20 updates, logged with stride 4 (plus the first update).
  assert [r["step"] for r in rows] == [0, 3, 7, 11, 15, 19]
  assert all("returned_episode_returns" in r for r in rows)
  assert os.path.getsize(tmp_path / "learning_curve.png") > 1000
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["20"]
  assert glob.glob(str(tmp_path / "events.out.tfevents.*"))     # TensorBoard beside the JSONL
  config_json = open(tmp_path / "config.json").read()
  # Another value on the same workdir: refused, listing the field and the ways on.
  out = _train(repo_root, "--config=configs/ppo_cartpole.py:quick", "--config.lr=1e-3",
               "--config.total_timesteps=10240", "--config.num_seeds=2", f"--workdir={tmp_path}")
  _short_error(out, "lr: 0.00025 -> 0.001", "new --workdir")
  assert open(tmp_path / "config.json").read() == config_json
  # A corrupted checkpoint: two lines naming it, not orbax's TensorStore dump.
  for root, _, files in os.walk(tmp_path / "checkpoints" / "20"):
    for name in files:
      with open(os.path.join(root, name), "r+b") as f:
        f.truncate(3)
  out = _train(repo_root, "--config=configs/ppo_cartpole.py:quick",
               "--config.total_timesteps=10240", "--config.num_seeds=2", f"--workdir={tmp_path}")
  assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
  assert str(tmp_path / "checkpoints") in out.stderr


def test_override_helpers():
  assert cli.normalize_number_overrides(["--config.total_timesteps=2e5", "--config.lr=1e-3",
                                         "--config.x=3.0", "--workdir=1e5"]) == [
      "--config.total_timesteps=200000", "--config.lr=1e-3", "--config.x=3", "--workdir=1e5"]
  msg = cli.unknown_field_message("learning_rate", ["lr", "gamma", "gru.hidden_size"])
  assert "did you mean lr?" in msg and "fields: gamma, lr (nested: gru.*)" in msg
  assert "did you mean num_envs?" in cli.unknown_field_message("num_env", ["num_envs", "lr"])
