r"""Launch a sweep with XManager (local executor: plain subprocesses, no Docker, no cloud).

  pip install -e '.[xm]'       # optional extra; see README "Sweeps on a cluster"
  xmanager launch experiments/launch_xm.py -- --sweep=configs/sweeps/ppo_cartpole_lr.py
  python -m experiments.launch_xm --sweep=configs/sweeps/ppo_cartpole_lr.py --dry_run  # no xmanager

The trial list comes from `jaxrl_suite.train.sweep.build_trials`, the function the local launcher
(`python -m experiments.sweep`) uses, so both run exactly the same trials with the same workdirs;
each XManager job is `python -m jaxrl_suite.train --config=<base> --config.x=v ... --workdir=...`.
For another backend swap `xm_local.Local()` for `xm_local.Vertex(...)`/`Kubernetes(...)` (those
need containers instead of `xm.binary`). xmanager is imported inside `main` only, so this module
(and its tests) import without it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from jaxrl_suite.train import sweep  # noqa: E402

_SWEEP = flags.DEFINE_string("sweep", None, "Sweep file (configs/sweeps/x.py[:arg]) or name.")
_ROOT = flags.DEFINE_string("root", sweep.DEFAULT_ROOT, "Workdir root of the trials.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the jobs instead of launching them.")
_SKIP_DONE = flags.DEFINE_bool("skip_done", True, "Do not launch trials whose workdir is DONE.")


def binary_args(trial: sweep.Trial) -> list[str]:
  """The arguments packaged with the executable (shared by every job of the sweep)."""
  return ["-m", "jaxrl_suite.train", f"--config={trial.config_arg}"]


def job_args(trial: sweep.Trial) -> dict[str, str]:
  """Per-job keyword args; XManager passes {"config.lr": "0.001"} as `--config.lr=0.001`.

  Values are pre-formatted strings (so XManager's bool rendering `--flag/--noflag` never applies;
  config_flags wants `--config.anneal_lr=false`).
  """
  return {**trial.flag_args(), "workdir": trial.workdir}


def render_args(args: list[str], kwargs: dict[str, Any]) -> list[str]:
  """What XManager's SequentialArgs.to_list makes of (positional list, keyword dict)."""
  return list(args) + [f"--{k}={v}" for k, v in kwargs.items() if v is not None]


def jobs(spec: str, root: str = sweep.DEFAULT_ROOT, skip_done: bool = True):
  """(sweep config, [(trial, job kwargs)]) for the trials to launch."""
  cfg, trials = sweep.build_trials(spec, root)
  return cfg, [(t, job_args(t)) for t in trials if not (skip_done and sweep.is_done(t))]


def launch(spec: str, root: str = sweep.DEFAULT_ROOT, dry_run: bool = False,
           skip_done: bool = True) -> int:
  """Adds one XManager job per (unfinished) trial to a local experiment. Returns #jobs."""
  cfg, todo = jobs(spec, root, skip_done)
  if dry_run:
    for t, kw in todo:
      print(" ".join([sys.executable] + render_args(binary_args(t), kw)))
    return len(todo)
  if not todo:
    print(f"sweep {cfg.name}: every trial is DONE")
    return 0
  try:
    from xmanager import xm, xm_local  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise SystemExit("XManager is not installed: pip install -e '.[xm]' (or use the local "
                     "launcher: python -m experiments.sweep --sweep=...)") from e
  env_vars = {"PYTHONPATH": sweep.REPO_ROOT}
  if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    env_vars["JAX_COMPILATION_CACHE_DIR"] = os.environ["JAX_COMPILATION_CACHE_DIR"]
  with xm_local.create_experiment(experiment_title=f"jaxrl_suite sweep {cfg.name}") as experiment:
    [executable] = experiment.package([
        xm.binary(path=sys.executable, args=binary_args(todo[0][0]),
                  executor_spec=xm_local.Local.Spec())])
    for t, kw in todo:
      os.makedirs(t.workdir, exist_ok=True)
      experiment.add(xm.Job(executable=executable, executor=xm_local.Local(), args=kw,
                            env_vars=env_vars))
    # XManager jobs run train.py directly, so nothing writes the DONE markers; the local launcher
    # (below) marks them: a finished trial restores its last checkpoint, has no update left, exits.
    print(f"launched {len(todo)} trials of {cfg.name} (XManager experiment "
          f"{getattr(experiment, 'experiment_id', '?')}); when they finish, the table: "
          f"python -m experiments.sweep --sweep={spec}")
  return len(todo)


def main(argv):
  del argv
  if not _SWEEP.value:
    raise app.UsageError("--sweep is required, e.g. --sweep=configs/sweeps/ppo_cartpole_lr.py")
  launch(_SWEEP.value, _ROOT.value, _DRY_RUN.value, _SKIP_DONE.value)


if __name__ == "__main__":
  app.run(main)
