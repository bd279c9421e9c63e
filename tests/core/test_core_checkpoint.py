"""Checkpoints: interrupted-and-resumed training equals uninterrupted training bit for bit;
bad checkpoints give clear errors and never replace good data."""

import csv
import glob
import json
import os
import struct

import chex
import jax
import numpy as np
import pytest

from jaxrl_suite import train as train_cli
from jaxrl_suite.algos import ppo
from jaxrl_suite.core import checkpoint, logging as mlog
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
    with pytest.raises(checkpoint.CheckpointError, match=str(tmp_path / "2")) as e:
      ckpt.restore(2, like=state)
    # One or two short lines (orbax's own error is a TensorStore dump of ~200 lines).
    assert len(str(e.value).splitlines()) <= 2 and len(str(e.value)) < 700
    assert "resume from step 1" in str(e.value)
    assert trees_equal(ckpt.restore(1, like=state), state)   # the good step is intact


def test_abandoned_tensorstore_futures_are_not_logged_other_asyncio_errors_are(caplog):
  # After a failed read, orbax's sibling reads are garbage-collected at any later time (CI saw
  # 70+ lines of "Future exception was never retrieved" after the two-line CheckpointError).
  import asyncio
  import gc
  loop = asyncio.new_event_loop()
  try:
    with caplog.at_level("ERROR", logger="asyncio"):
      for text in ["DATA_LOSS: Error reading [tensorstore_spec='{}']", "an unrelated failure"]:
        fut = loop.create_future()
        fut.set_exception(ValueError(text))
        del fut
        gc.collect()
  finally:
    loop.close()
  logged = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
  assert len(logged) == 1 and "an unrelated failure" in logged[0], logged


def test_missing_directory_is_a_clear_error(tmp_path):
  with pytest.raises(checkpoint.CheckpointError, match="does not exist"):
    checkpoint.restore_latest(str(tmp_path / "nope"), like={})


# ------------------------------------------------------------------ config-checked resume

def _cfg(**kw):
  c = _config()
  c.num_seeds = 1
  c.updates_per_chunk, c.checkpoint_every = 1, 2
  for k, v in kw.items():
    c[k] = v
  return c


def _snapshot(workdir):
  return {n: open(os.path.join(workdir, n), "rb").read()
          for n in ("config.json", "metrics.jsonl", "metrics.csv")}


def test_resume_with_another_value_stops_and_rewrites_nothing(tmp_path):
  wd = str(tmp_path / "run")
  train_cli.run_training(_cfg(), wd, progress=False, stop_after=2)
  before = _snapshot(wd)
  with pytest.raises(train_cli.ConfigMismatchError) as e:
    train_cli.run_training(_cfg(lr=1e-3), wd, progress=False)
  msg = str(e.value)
  assert "lr: 0.00025 -> 0.001" in msg and "new --workdir" in msg and "--resume=force" not in msg
  assert len(msg.splitlines()) <= 2
  assert _snapshot(wd) == before               # config.json (and metrics) untouched
  # A finished run with a new value: refused too, nothing rewritten, no updates done.
  train_cli.run_training(_cfg(), wd, progress=False)
  before = _snapshot(wd)
  with pytest.raises(train_cli.ConfigMismatchError, match="lr: 0.00025 -> 0.001"):
    train_cli.run_training(_cfg(lr=1e-3), wd, progress=False)
  assert _snapshot(wd) == before


def test_shape_change_is_a_config_difference_not_corruption(tmp_path):
  wd = str(tmp_path / "run")
  train_cli.run_training(_cfg(), wd, progress=False, stop_after=2)
  with pytest.raises(train_cli.ConfigMismatchError, match=r"num_envs: 4 -> 8") as e:
    train_cli.run_training(_cfg(num_envs=8, total_timesteps=8 * 16 * 6), wd, progress=False,
                           resume="force")
  assert "cannot change on resume" in str(e.value) and "corrupt" not in str(e.value)


@pytest.mark.slow
def test_resume_force_continues_with_a_longer_run(tmp_path):
  wd = str(tmp_path / "run")
  _, n = train_cli.run_training(_cfg(), wd, progress=False)
  assert n == 6
  longer = _cfg(total_timesteps=4 * 16 * 8)
  with pytest.raises(train_cli.ConfigMismatchError, match="--resume=force"):
    train_cli.run_training(longer, wd, progress=False)
  _, n = train_cli.run_training(longer, wd, progress=False, resume="force")
  assert n == 8
  with open(os.path.join(wd, "config.json")) as f:
    assert json.load(f)["total_timesteps"] == 4 * 16 * 8
  assert [r["step"] for r in mlog.read_jsonl(os.path.join(wd, "metrics.jsonl"))] == list(range(8))


# ------------------------------------------------------------------ exact number of updates

def test_runs_exactly_num_updates_with_a_shorter_last_chunk(tmp_path):
  # 7 updates in chunks of 3: 3 + 3 + 1 (the old loop ran 6 and never finished the lr anneal).
  c = _cfg(total_timesteps=4 * 16 * 7, updates_per_chunk=3, checkpoint_every=3)
  state, n = train_cli.run_training(c, str(tmp_path), progress=False)
  assert n == 7
  assert [r["step"] for r in mlog.read_jsonl(str(tmp_path / "metrics.jsonl"))] == list(range(7))
  with checkpoint.Checkpointer(str(tmp_path / "checkpoints")) as ckpt:
    assert ckpt.all_steps()[-1] == 7
    assert ckpt.metadata(7)["num_updates"] == 7


@pytest.mark.slow
def test_chunked_run_equals_one_uninterrupted_train(tmp_path):
  c = _cfg(total_timesteps=4 * 16 * 7, updates_per_chunk=3, checkpoint_every=3)
  state, _ = train_cli.run_training(c, str(tmp_path), progress=False)
  # Same parameters as one uninterrupted `train` of num_updates updates (lr anneal finished).
  env, params = registry.make("CartPole-v1")
  learner = ppo.make_learner(c, env, params)
  assert learner.num_updates == 7
  keys = jax.random.split(jax.random.key(int(c.seed)), 1)
  ref, _ = jax.jit(jax.vmap(learner.train))(keys)
  chex.assert_trees_all_close(state.train_state.params, ref.train_state.params, rtol=1e-5,
                              atol=1e-6)


def test_fewer_updates_than_a_chunk_still_run(tmp_path):
  # 5 updates with updates_per_chunk=10: the old loop did 0 updates and wrote DONE.
  c = _cfg(total_timesteps=4 * 16 * 5, updates_per_chunk=10, checkpoint_every=10)
  _, n = train_cli.run_training(c, str(tmp_path), progress=False)
  assert n == 5 and os.path.exists(tmp_path / "DONE")
  assert len(mlog.read_jsonl(str(tmp_path / "metrics.jsonl"))) == 5


def test_integral_float_total_timesteps_is_accepted():
  c = _cfg()
  c.unlock()
  del c["total_timesteps"]
  c.total_timesteps = 3.84e2
  train_cli.validate_run_config(c)
  assert c.total_timesteps == 384 and isinstance(c.total_timesteps, int)


# ------------------------------------------------------------------ metrics on resume

def _tb_steps(workdir, tag="returned_episode_returns"):
  """(steps of `tag` scalars per event file in write order, purge steps of the files)."""
  from tensorboardX.proto import event_pb2
  files = sorted(glob.glob(os.path.join(workdir, "events.out.tfevents.*")))
  steps, purges = [], []
  for path in files:
    data, i, mine = open(path, "rb").read(), 0, []
    while i < len(data):
      (n,) = struct.unpack("<Q", data[i:i + 8])
      ev = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
      i += 12 + n + 4
      if ev.HasField("session_log") and ev.session_log.status == ev.session_log.START:
        purges.append(ev.step)
      for v in ev.summary.value:
        if v.tag == tag:
          mine.append(ev.step)
    steps.append(mine)
  return steps, purges


def test_resume_after_a_kill_between_checkpoints_keeps_each_step_once(tmp_path):
  wd = str(tmp_path)
  # Killed after update 3 with the last checkpoint at 2: rows 0, 1, 2 are on disk.
  train_cli.run_training(_cfg(), wd, progress=False, stop_after=3)
  assert [r["step"] for r in mlog.read_jsonl(os.path.join(wd, "metrics.jsonl"))] == [0, 1, 2]
  train_cli.run_training(_cfg(), wd, progress=False)
  rows = mlog.read_jsonl(os.path.join(wd, "metrics.jsonl"))
  assert [r["step"] for r in rows] == list(range(6))   # step 2 once, not twice
  with open(os.path.join(wd, "metrics.csv")) as f:
    assert [int(r["step"]) for r in csv.DictReader(f)] == list(range(6))
  # TensorBoard: the resumed event file purges steps >= 2 of the first one.
  steps, purges = _tb_steps(wd)
  assert steps == [[0, 1, 2], [2, 3, 4, 5]] and purges == [2]


def test_truncate_metrics_drops_rows_cut_by_a_kill(tmp_path):
  w = mlog.MetricWriter(str(tmp_path))
  w.write_chunk(0, {"a": np.arange(4.0)})
  with open(w.jsonl_path, "a") as f:
    f.write('{"step": 4, "a"')            # a row cut mid-write
  assert mlog.truncate_metrics(str(tmp_path), 2) == 2
  assert [r["step"] for r in mlog.read_jsonl(w.jsonl_path)] == [0, 1]
