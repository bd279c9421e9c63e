"""Configs and the training CLI: bad values fail before compilation, naming the field;
`--config.x=...` overrides work; the CLI writes metrics, a curve and checkpoints."""

import json
import os
import subprocess
import sys

import pytest

from jaxrl_suite import train as train_cli
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


def test_cli_rejects_bad_value_before_compiling(repo_root, tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "jaxrl_suite.train", "--config=configs/ppo_cartpole.py:quick",
       "--config.num_minibatches=7", f"--workdir={tmp_path}"],
      capture_output=True, text=True, cwd=repo_root, timeout=300)
  assert out.returncode != 0
  assert "config.num_minibatches=7 does not divide" in out.stderr
  assert not os.path.exists(tmp_path / "checkpoints")  # failed before doing anything


def test_cli_trains_with_overrides(repo_root, tmp_path):
  out = subprocess.run(
      [sys.executable, "-m", "jaxrl_suite.train", "--config=configs/ppo_cartpole.py:quick",
       "--config.total_timesteps=10240", "--config.num_seeds=2", f"--workdir={tmp_path}"],
      capture_output=True, text=True, cwd=repo_root, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  with open(tmp_path / "config.json") as f:
    assert json.load(f)["total_timesteps"] == 10240
  rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
  # 10240 / 512 = 20 updates, logged with stride 4 (plus the first update).
  assert [r["step"] for r in rows] == [0, 3, 7, 11, 15, 19]
  assert all("returned_episode_returns" in r for r in rows)
  assert os.path.getsize(tmp_path / "learning_curve.png") > 1000
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["20"]
