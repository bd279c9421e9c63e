"""Checkpoints: interrupted-and-resumed training equals uninterrupted training bit for bit;
bad checkpoints give clear errors and never replace good data."""

import os

import jax
import pytest

from jaxrl_suite import train as train_cli
from jaxrl_suite.algos import ppo
from jaxrl_suite.core import checkpoint
from jaxrl_suite.core.pytree import trees_equal
from jaxrl_suite.envs import registry


def _config():
  c = ppo.default_config()
  c.num_envs, c.num_steps, c.total_timesteps, c.hidden_sizes = 4, 16, 4 * 16 * 6, (16,)
  c.num_seeds = 2
  c.updates_per_chunk, c.checkpoint_every, c.log_every, c.max_to_keep = 2, 2, 1, 2
  return c


def test_resume_after_interruption_gives_identical_parameters(tmp_path):
  c = _config()
  full, n_full = train_cli.run_training(c, str(tmp_path / "full"), progress=False)
  # Interrupt after update 4 (the process "dies"), then start again with the same workdir.
  part, n_part = train_cli.run_training(c, str(tmp_path / "resumed"), progress=False,
                                        stop_after=4)
  assert n_part == 4
  ckpt = checkpoint.Checkpointer(str(tmp_path / "resumed" / "checkpoints"))
  assert ckpt.all_steps() == [2, 4]  # every 2 updates, keep the last 2
  ckpt.close()
  resumed, n_resumed = train_cli.run_training(c, str(tmp_path / "resumed"), progress=False)
  assert n_full == n_resumed == 6
  assert trees_equal(full, resumed)          # params, optimiser, env state, PRNG keys
  assert not trees_equal(part, resumed)
  with open(tmp_path / "resumed" / "metrics.jsonl") as f:
    assert len(f.readlines()) == 6           # one row per update, none repeated


def test_restore_roundtrip_and_refuses_overwrite(tmp_path):
  env, params = registry.make("CartPole-v1")
  learner = ppo.make_learner(_config(), env, params)
  state = learner.init(jax.random.key(0))
  with checkpoint.Checkpointer(str(tmp_path)) as ckpt:
    ckpt.save(3, state, metadata={"note": "x"})
    assert trees_equal(ckpt.restore(3, like=state), state)
    assert ckpt.metadata(3) == {"note": "x"}
    with pytest.raises(checkpoint.CheckpointError, match="already exists"):
      ckpt.save(3, state)
    with pytest.raises(checkpoint.CheckpointError, match=r"no checkpoint for step 7 at .*7"):
      ckpt.restore(7, like=state)


def test_corrupted_checkpoint_names_the_path_and_good_data_survives(tmp_path):
  env, params = registry.make("CartPole-v1")
  learner = ppo.make_learner(_config(), env, params)
  state = learner.init(jax.random.key(0))
  with checkpoint.Checkpointer(str(tmp_path), max_to_keep=5) as ckpt:
    ckpt.save(1, state)
    ckpt.save(2, state)
  # Corrupt step 2 (truncate every data file).
  for root, _, files in os.walk(tmp_path / "2"):
    for name in files:
      with open(os.path.join(root, name), "r+b") as f:
        f.truncate(3)
  with checkpoint.Checkpointer(str(tmp_path), max_to_keep=5) as ckpt:
    with pytest.raises(checkpoint.CheckpointError, match=str(tmp_path / "2")):
      ckpt.restore(2, like=state)
    assert trees_equal(ckpt.restore(1, like=state), state)   # the good step is intact


def test_missing_directory_is_a_clear_error(tmp_path):
  with pytest.raises(checkpoint.CheckpointError, match="does not exist"):
    checkpoint.restore_latest(str(tmp_path / "nope"), like={})
