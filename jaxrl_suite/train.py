r"""Train an on-policy agent from an ml_collections config, with checkpoints and resume.

  python -m jaxrl_suite.train --config=configs/ppo_cartpole.py \
      --config.total_timesteps=200000 --workdir=workdirs/ppo_cartpole

The run is jitted in chunks of `config.updates_per_chunk` updates (a host loop with a progress bar
between them), vmapped over `config.num_seeds` seeds. Every `config.checkpoint_every` updates the
whole runner state is saved with orbax; restarting with the same workdir resumes from the latest
checkpoint and ends with exactly the parameters an uninterrupted run would have. Metrics go to
<workdir>/metrics.{jsonl,csv} (every `config.log_every` updates) and a learning curve to
<workdir>/learning_curve.png.
"""

from __future__ import annotations

import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags
from tqdm.auto import tqdm

from jaxrl_suite import algos
from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import checkpoint, logging as mlog
from jaxrl_suite.envs import registry


def _define_flags():
  """CLI flags, defined only when run as a program: importing this module (tests, sweeps,
  experiment scripts with their own --config flag) must not claim absl's global flag names."""
  global _CONFIG, _WORKDIR
  _CONFIG = config_flags.DEFINE_config_file("config", None, "Path to an ml_collections config.")
  _WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints and metrics.")


def validate_run_config(config) -> None:
  """Validates the learner fields and the host-loop fields (chunking, checkpoints, logging)."""
  algos.get(config.get("algo", "ppo"))
  on_policy.validate(config)
  for name in ("updates_per_chunk", "checkpoint_every", "log_every", "max_to_keep"):
    v = config.get(name)
    if not isinstance(v, int) or v <= 0:
      raise ValueError(f"config.{name} must be a positive integer, got {v!r}")
  if config.checkpoint_every % config.updates_per_chunk:
    raise ValueError(f"config.checkpoint_every={config.checkpoint_every} must be a multiple of "
                     f"config.updates_per_chunk={config.updates_per_chunk}")


def run_training(config, workdir: str, progress: bool = True, stop_after: int | None = None):
  """Runs (or resumes) training. Returns (runner_state, number of updates done).

  `stop_after` ends the host loop after that many updates (used to test interruption).
  """
  validate_run_config(config)
  module = algos.get(config.get("algo", "ppo"))
  env, env_params = registry.make(config.env_name, **dict(config.get("env_kwargs", {})))
  learner = module.make_learner(config, env, env_params)
  seeds = int(config.num_seeds)
  keys = jax.random.split(jax.random.key(int(config.seed)), seeds)
  init = jax.jit(jax.vmap(learner.init))
  chunk = int(config.updates_per_chunk)
  run_chunk = jax.jit(jax.vmap(lambda rs: learner.run(rs, chunk)))

  state = init(keys)
  os.makedirs(workdir, exist_ok=True)
  ckpt = checkpoint.Checkpointer(os.path.join(workdir, "checkpoints"), int(config.max_to_keep))
  done = 0
  latest = ckpt.latest_step()
  if latest is not None:
    state = ckpt.restore(latest, like=state)
    done = latest
  writer = mlog.MetricWriter(workdir, stride=int(config.log_every))
  total = learner.num_updates - learner.num_updates % chunk
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(config.to_dict(), f, indent=1, default=str)
  bar = tqdm(total=total, initial=done, unit="upd", disable=not progress,
             desc=f"{config.get('algo', 'ppo')} {config.env_name}")
  t0 = time.time()
  while done < total and (stop_after is None or done < stop_after):
    state, metrics = run_chunk(state)
    metrics = jax.tree.map(lambda x: np.swapaxes(np.asarray(x), 0, 1), metrics)  # [chunk, seeds]
    writer.write_chunk(done, metrics)
    done += chunk
    if done % config.checkpoint_every == 0 or done == total:
      ckpt.save(done, state, metadata={"config": config.to_dict(), "updates": done})
    ret = np.nanmean(metrics["returned_episode_returns"][-1])
    bar.set_postfix(ret=f"{ret:.1f}", sps=f"{done * learner.vec_env.num_envs * config.num_steps * seeds / max(time.time() - t0, 1e-9):.0f}")
    bar.update(chunk)
  bar.close()
  ckpt.close()
  if done >= total:
    # Marks a finished run for sweep launchers (local or XManager) so they do not re-run it.
    open(os.path.join(workdir, "DONE"), "w").close()
  if os.path.exists(writer.jsonl_path):
    mlog.plot_learning_curve(writer.jsonl_path, os.path.join(workdir, "learning_curve.png"),
                             title=f"{config.get('algo', 'ppo')} on {config.env_name}")
  return state, done


def main(argv):
  del argv
  absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every file at INFO
  if _CONFIG.value is None:
    raise app.UsageError("--config is required, e.g. --config=configs/ppo_cartpole.py")
  workdir = _WORKDIR.value or os.path.join("workdirs", os.path.splitext(
      os.path.basename(flags.FLAGS["config"].config_filename))[0])
  state, done = run_training(_CONFIG.value, workdir)
  print(f"finished {done} updates; metrics in {workdir}/metrics.jsonl, "
        f"curve in {workdir}/learning_curve.png")


if __name__ == "__main__":
  _define_flags()
  app.run(main)
