"""Every learner's `default_config()` trains as is: each field the training driver reads (the
learner's and the host loop's: chunks, checkpoints, logging) has a value, so a user who only
names an environment and a budget gets a run, not one missing field per attempt."""

import json
import os

import numpy as np
import pytest

from jaxrl_suite import algos, train
from jaxrl_suite.core import run_config


@pytest.mark.parametrize("name", sorted(algos.ALGOS))
def test_default_config_trains_with_only_env_and_budget_set(name, tmp_path):
  config = algos.get(name).default_config()
  for field in run_config.HOST_DEFAULTS:
    assert isinstance(config[field], int) and config[field] > 0, field
  config.env_name = "CartPole-v1"
  config.total_timesteps = 2 * config.num_envs * config.num_steps   # two updates
  _, done = train.run_training(config, str(tmp_path), progress=False)
  assert done == 2
  rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [0, 1]        # log_every = 1
  per_update = config.num_envs * config.num_steps
  assert [r["env_steps"] for r in rows] == [per_update, 2 * per_update]
  assert np.isfinite(rows[-1]["loss"])
  assert os.listdir(tmp_path / "checkpoints") == ["2"]
  assert os.path.getsize(tmp_path / "learning_curve.png") > 1000


def test_host_defaults_fill_a_config_that_lacks_them():
  config = algos.get("ppo").default_config()
  with config.unlocked():
    del config["log_every"]
    config.max_to_keep = None
  train.validate_run_config(config)
  assert config.log_every == run_config.HOST_DEFAULTS["log_every"]
  assert config.max_to_keep == run_config.HOST_DEFAULTS["max_to_keep"]
