r"""Train an on-policy agent from an ml_collections config, with checkpoints and resume.

  python -m jaxrl_suite.train --config=configs/ppo_cartpole.py \
      --config.total_timesteps=2e5 --workdir=workdirs/ppo_cartpole
  python -m jaxrl_suite.train --help     # the flags and every config field with its default

The run is jitted in chunks of `config.updates_per_chunk` updates (a host loop with a progress bar
between them; the last chunk is shorter if the chunk size does not divide the number of updates,
so exactly `num_updates = total_timesteps // (num_envs * num_steps)` updates run), vmapped over
`config.num_seeds` seeds. Every `config.checkpoint_every` updates (and at the end) the whole runner
state is saved with orbax, together with the config.

Resume: restarting with the same workdir compares the config with the one stored in the latest
checkpoint. Identical: the run resumes and ends with exactly the parameters an uninterrupted run
would have. Different: it stops, listing the differing fields; `--resume=force` continues anyway
when only fields in `RESUMABLE_FIELDS` differ (the total steps, chunking, logging), any other
change needs a new `--workdir`. Nothing in the workdir is rewritten by a run that did not run.

Metrics go to <workdir>/metrics.{jsonl,csv} and TensorBoard event files in <workdir> (every
`config.log_every` updates; on resume the rows after the restored step are dropped first), and a
learning curve to <workdir>/learning_curve.png.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import numpy as np
from absl import flags
from absl import logging as absl_logging
from ml_collections import config_flags
from tqdm.auto import tqdm

from jaxrl_suite import algos
from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import checkpoint, cli, logging as mlog
from jaxrl_suite.envs import registry

# Host-loop fields of a run config (besides the learner's): name -> what it means.
HOST_FIELDS = {
    "updates_per_chunk": "updates per jitted call (progress bar and metrics between calls)",
    "checkpoint_every": "updates between checkpoints (a multiple of updates_per_chunk)",
    "log_every": "metric rows every this many updates",
    "max_to_keep": "checkpoints kept",
}
# Fields that may differ from the checkpoint's config under --resume=force: they change how long
# the run goes on and how it is chunked and logged, not what the restored state means.
RESUMABLE_FIELDS = ("total_timesteps", "updates_per_chunk", "checkpoint_every", "log_every",
                    "max_to_keep")


class ConfigMismatchError(cli.UserError):
  """The workdir holds a run with another config."""


def config_help() -> str:
  """Every config field with its default, per algorithm, for `--help`."""
  lines = ["ml_collections config file (path[:arg]); override fields with --config.FIELD=VALUE.",
           "Config fields (defaults of the algorithms' default_config()):"]
  seen: dict[str, Any] = {}
  for name, mod in sorted(algos.ALGOS.items()):
    cfg = mod.default_config()
    for f in cli.field_names(cfg):
      v = cfg
      for part in f.split("."):
        v = v[part]
      if hasattr(v, "keys") and not isinstance(v, dict):
        continue   # a nested ConfigDict: its own fields are listed
      seen.setdefault(f, []).append((name, v))
  for f, vals in seen.items():
    defaults = {repr(v) for _, v in vals}
    if len(defaults) == 1:
      lines.append(f"  {f} = {next(iter(defaults))}" + ("" if len(vals) == len(algos.ALGOS) else
                                                         f"  ({', '.join(n for n, _ in vals)})"))
    else:
      lines.append(f"  {f} = " + ", ".join(f"{v!r} ({n})" for n, v in vals))
  if "algo" not in seen:
    lines.append("  algo = 'ppo'  (one of " + ", ".join(sorted(algos.ALGOS)) + ")")
  for f, what in HOST_FIELDS.items():
    lines.append(f"  {f}: {what}")
  return "\n".join(lines)


def _define_flags():
  """CLI flags, defined only when run as a program: importing this module (tests, sweeps,
  experiment scripts with their own --config flag) must not claim absl's global flag names."""
  global _CONFIG, _WORKDIR, _RESUME
  _CONFIG = config_flags.DEFINE_config_file("config", None, config_help())
  _WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints and metrics.")
  _RESUME = flags.DEFINE_enum(
      "resume", "auto", ["auto", "force"],
      "auto: resume a workdir only if its checkpoint has the same config; force: also resume "
      f"when only {', '.join(RESUMABLE_FIELDS)} differ")
  cli.define_debug_flag()
  flags.declare_key_flag("debug")   # listed by --help, not only --helpfull


def validate_run_config(config) -> None:
  """Validates the learner fields and the host-loop fields (chunking, checkpoints, logging).

  Integral floats in integer fields (`total_timesteps=2e5` in a config file) become ints.
  """
  algos.get(config.get("algo", "ppo"))
  _integral_floats_to_int(config, ("num_envs", "num_steps", "total_timesteps", "update_epochs",
                                   "num_minibatches", "num_seeds", "seed", *HOST_FIELDS))
  if not registry.is_registered(config.env_name):
    raise ValueError(f"config.env_name {config.env_name!r} is not a registered environment; "
                     f"valid names: {', '.join(registry.registered_names())}")
  on_policy.validate(config)
  for name in HOST_FIELDS:
    v = config.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
      raise ValueError(f"config.{name} must be a positive integer, got {v!r}")
  if config.checkpoint_every % config.updates_per_chunk:
    raise ValueError(f"config.checkpoint_every={config.checkpoint_every} must be a multiple of "
                     f"config.updates_per_chunk={config.updates_per_chunk}")


def _integral_floats_to_int(config, names) -> None:
  for name in names:
    v = config.get(name)
    if isinstance(v, float) and v.is_integer():
      with config.unlocked():
        # ConfigDict fields are typed: replace the float field by an int one.
        del config[name]
        config[name] = int(v)


def _as_json(d: Any) -> Any:
  return json.loads(json.dumps(d, default=str))


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(d, dict):
    out = {}
    for k, v in d.items():
      out.update(_flatten(v, f"{prefix}{k}."))
    return out or {prefix[:-1]: {}}
  return {prefix[:-1]: d}


def config_diff(old: dict, new: dict) -> list[tuple[str, Any, Any]]:
  """[(dotted field, old value, new value)] where two config dicts (JSON form) differ."""
  a, b = _flatten(_as_json(old)), _flatten(_as_json(new))
  missing = object()
  return [(k, a.get(k, missing), b.get(k, missing)) for k in sorted(set(a) | set(b))
          if a.get(k, missing) != b.get(k, missing)]


def check_resume(saved: dict, config, workdir: str, step: int, resume: str) -> list[str]:
  """Raises ConfigMismatchError unless `config` may resume a run saved with `saved`.

  Returns the fields that differ (all in RESUMABLE_FIELDS, under resume="force").
  """
  diff = config_diff(saved, config.to_dict())
  if not diff:
    return []

  def show(v):
    return "(absent)" if not isinstance(v, (str, int, float, bool, list, type(None))) else repr(v)

  listed = "; ".join(f"{k}: {show(o)} -> {show(n)}" for k, o, n in diff)
  fixed = [k for k, _, _ in diff if k not in RESUMABLE_FIELDS]
  where = f"{workdir} holds a run (checkpoint step {step}) with another config: {listed}."
  if fixed:
    raise ConfigMismatchError(
        f"{where}\n{', '.join(fixed)} cannot change on resume: use a new --workdir (or rerun "
        "with the stored values, see its config.json).")
  if resume != "force":
    raise ConfigMismatchError(
        f"{where}\nUse a new --workdir, or --resume=force to continue this run with the new "
        f"{', '.join(k for k, _, _ in diff)}.")
  return [k for k, _, _ in diff]


def _saved_config(ckpt: checkpoint.Checkpointer, step: int, workdir: str) -> dict | None:
  meta = ckpt.metadata(step)
  if isinstance(meta.get("config"), dict):
    return meta["config"]
  path = os.path.join(workdir, "config.json")   # checkpoints written before configs were stored
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  return None


def run_training(config, workdir: str, progress: bool = True, stop_after: int | None = None,
                 resume: str = "auto"):
  """Runs (or resumes) training. Returns (runner_state, number of updates done).

  `stop_after` ends the host loop after that many updates (used to test interruption);
  `resume` is "auto" or "force" (see the module docstring). Every check (config values, the
  workdir's stored config) runs before anything is compiled or written.
  """
  if resume not in ("auto", "force"):
    raise ValueError(f"resume must be 'auto' or 'force', got {resume!r}")
  validate_run_config(config)
  module = algos.get(config.get("algo", "ppo"))
  ckpt_dir = os.path.join(workdir, "checkpoints")
  latest, ckpt = None, None
  if os.path.isdir(ckpt_dir):
    ckpt = checkpoint.Checkpointer(ckpt_dir, int(config.max_to_keep))
    latest = ckpt.latest_step()
    if latest is not None:
      saved = _saved_config(ckpt, latest, workdir)
      if saved is not None:
        try:
          check_resume(saved, config, workdir, latest, resume)
        except ConfigMismatchError:
          ckpt.close()
          raise
  env, env_params = registry.make(config.env_name, **dict(config.get("env_kwargs", {})))
  learner = module.make_learner(config, env, env_params)
  total = int(learner.num_updates)
  if total <= 0:   # validate() refuses this; kept as a guard for learners with other rules
    raise ValueError(f"config.total_timesteps={config.total_timesteps} gives 0 updates")
  seeds = int(config.num_seeds)
  keys = jax.random.split(jax.random.key(int(config.seed)), seeds)
  init = jax.jit(jax.vmap(learner.init))
  runners: dict[int, Any] = {}

  def run_chunk(state, n):
    if n not in runners:   # at most two sizes: the chunk and the shorter last one
      runners[n] = jax.jit(jax.vmap(lambda rs: learner.run(rs, n)))
    return runners[n](state)

  state = init(keys)
  if ckpt is None:
    ckpt = checkpoint.Checkpointer(ckpt_dir, int(config.max_to_keep))
  done = 0
  if latest is not None:
    state = ckpt.restore(latest, like=state)
    done = latest
  if done >= total:   # finished (possibly with a larger total before --resume=force)
    ckpt.close()
    print(f"{workdir} is already finished ({done} of {total} updates); nothing to do")
    return state, done
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(config.to_dict(), f, indent=1, default=str)
  writer = mlog.MetricWriter(workdir, stride=int(config.log_every), start_step=done,
                             tensorboard=True)
  chunk = int(config.updates_per_chunk)
  bar = tqdm(total=total, initial=done, unit="upd", disable=not progress,
             desc=f"{config.get('algo', 'ppo')} {config.env_name}")
  t0, done0 = time.time(), done
  try:
    while done < total and (stop_after is None or done < stop_after):
      n = min(chunk, total - done)
      state, metrics = run_chunk(state, n)
      metrics = jax.tree.map(lambda x: np.swapaxes(np.asarray(x), 0, 1), metrics)  # [n, seeds]
      writer.write_chunk(done, metrics)
      done += n
      if done % config.checkpoint_every == 0 or done == total:
        writer.flush()
        ckpt.save(done, state, metadata={"config": config.to_dict(), "updates": done,
                                         "num_updates": total})
      ret = np.nanmean(metrics["returned_episode_returns"][-1])
      sps = ((done - done0) * learner.vec_env.num_envs * config.num_steps * seeds
             / max(time.time() - t0, 1e-9))
      bar.set_postfix(ret=f"{ret:.1f}", sps=f"{sps:.0f}")
      bar.update(n)
  finally:
    bar.close()
    writer.close()
    ckpt.close()
  if done >= total:
    # Marks a finished run for sweep launchers (local or XManager) so they do not re-run it.
    open(os.path.join(workdir, "DONE"), "w").close()
  if os.path.exists(writer.jsonl_path) and os.path.getsize(writer.jsonl_path):
    mlog.plot_learning_curve(writer.jsonl_path, os.path.join(workdir, "learning_curve.png"),
                             title=f"{config.get('algo', 'ppo')} on {config.env_name}")
  return state, done


def main(argv):
  if len(argv) > 1:
    raise cli.UserError(f"unexpected arguments {argv[1:]}; flags are --name=value")
  absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every file at INFO
  if _CONFIG.value is None:
    raise cli.UserError("--config is required, e.g. --config=configs/ppo_cartpole.py")
  workdir = _WORKDIR.value or os.path.join("workdirs", os.path.splitext(
      os.path.basename(flags.FLAGS["config"].config_filename))[0])
  _, done = run_training(_CONFIG.value, workdir, resume=_RESUME.value)
  print(f"finished {done} updates; metrics in {workdir}/metrics.jsonl, "
        f"curve in {workdir}/learning_curve.png")


if __name__ == "__main__":
  _define_flags()
  cli.run(main)
