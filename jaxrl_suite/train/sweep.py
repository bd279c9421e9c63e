r"""Hyperparameter sweeps: a base config plus a list of overrides, run as local processes.

`experiments/sweep.py` is the command line (`python -m experiments.sweep --sweep=...`) and
`experiments/launch_xm.py` the XManager launcher; both take the trial list from `build_trials`,
so a local sweep and a cluster sweep run exactly the same trials.

A sweep is a Python file in `configs/sweeps/` (see `configs/sweeps/ppo_cartpole_lr.py`) with
`get_config(arg=None)` (name, base_config "configs/x.py[:arg]", fixed overrides) and
`get_sweep(arg=None)` (one dict of config-field overrides per trial). A sweep file is a config:
it imports no experiment code (`product`, `zipped`, `chain` and `cross` are for scripts and tests
that build trial lists in Python).

  defining   product, zipped, chain, cross; Trial, format_value, trial_id
  loading    load_sweep_module, build_trials, trial_config, validate_trials
  running    run_trials: each trial is `python -m jaxrl_suite.train --config=<base>
             --config.x=v ... --workdir=<root>/<sweep>/<trial id>`, `parallel` at a time; a trial
             is finished when its workdir holds a `DONE` marker (written after a clean exit), so
             a re-run skips finished trials and resumes the others from their checkpoints
  results    read_metrics, varying_keys, trial_row, group_rows, write_table: final metrics per
             trial and per setting (mean over seeds, Student-t 95% CI) in `results.{csv,md}`

Paths (configs/sweeps/, a base config given relative) are taken relative to the repository root,
`jaxrl_suite.core.results.REPO_ROOT`, where the trials run.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.util
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any, Iterable, Mapping, Sequence

from jaxrl_suite.core.results import REPO_ROOT

DONE_MARKER = "DONE"
LOG_NAME = "train.log"
DEFAULT_ROOT = os.path.join("workdirs", "sweeps")
# The metric the table leads with (mean episode return of the last logged update, over seeds).
DEFAULT_METRIC = "returned_episode_returns"


# ------------------------------------------------------------------------------------------------
# Defining sweeps
# ------------------------------------------------------------------------------------------------
def product(**axes: Sequence[Any]) -> list[dict[str, Any]]:
  """Cartesian product of override axes, last axis fastest.

    product(lr=[1e-3, 3e-4], seed=[0, 1])
    -> [{"lr": 1e-3, "seed": 0}, {"lr": 1e-3, "seed": 1}, {"lr": 3e-4, "seed": 0}, ...]
  """
  for k, v in axes.items():
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
      raise ValueError(f"sweep axis {k!r} must be a list of values, got {v!r}")
  keys = list(axes)
  return [dict(zip(keys, values)) for values in itertools.product(*(list(axes[k]) for k in keys))]


def zipped(**axes: Sequence[Any]) -> list[dict[str, Any]]:
  """Axes varied together (all the same length): zipped(lr=[1, 2], ent_coef=[0, .1])."""
  lengths = {k: len(v) for k, v in axes.items()}
  if len(set(lengths.values())) > 1:
    raise ValueError(f"zipped axes must have equal lengths, got {lengths}")
  keys = list(axes)
  return [dict(zip(keys, values)) for values in zip(*(axes[k] for k in keys))]


def chain(*lists: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Concatenation of trial lists (e.g. a grid plus a few hand-picked points)."""
  return [dict(d) for lst in lists for d in lst]


def cross(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Every trial of `a` combined with every trial of `b` (e.g. a zipped list x seeds)."""
  return [{**x, **y} for x in a for y in b]


@dataclasses.dataclass(frozen=True)
class Trial:
  """One run of the sweep: the overrides, the flags that express them, and where it runs."""
  trial_id: str
  overrides: dict[str, Any]      # {"lr": 0.001, "seed": 0}: config field -> value
  config_arg: str                # the --config value, e.g. "configs/ppo_cartpole.py:quick"
  workdir: str

  def flag_args(self) -> dict[str, str]:
    """{"config.lr": "0.001", ...}: XManager-style args (it adds the leading "--")."""
    return {f"config.{k}": format_value(v) for k, v in self.overrides.items()}

  def command(self, python: str = sys.executable) -> list[str]:
    return ([python, "-m", "jaxrl_suite.train", f"--config={self.config_arg}"]
            + [f"--{k}={v}" for k, v in self.flag_args().items()]
            + [f"--workdir={self.workdir}"])


def format_value(v: Any) -> str:
  """How a value is written on the command line so that ml_collections' config_flags parses it
  back to the same value (bools as true/false, tuples as (a, b), floats with repr precision)."""
  if isinstance(v, bool):
    return "true" if v else "false"
  if isinstance(v, float):
    return repr(v)
  if isinstance(v, (list, tuple)):
    return "(" + ",".join(format_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
  return str(v)


def trial_id(overrides: Mapping[str, Any]) -> str:
  """A readable, filesystem-safe id from the overrides, e.g. "lr=0.001,seed=0".

  It depends only on the overrides (not on the trial's position), so editing a sweep's grid keeps
  the ids, workdirs and DONE markers of the trials that remain. Long ids get a hash suffix.
  """
  if not overrides:
    return "default"
  parts = []
  for k, v in overrides.items():
    s = format_value(v)
    parts.append(f"{k.split('.')[-1]}={s}")
  tid = re.sub(r"[^A-Za-z0-9=.,_+-]", "", ",".join(parts))
  if len(tid) > 80:
    digest = hashlib.sha1(json.dumps(overrides, sort_keys=True, default=str).encode()).hexdigest()
    tid = tid[:70] + "-" + digest[:8]
  return tid


def load_sweep_module(spec: str):
  """Loads a sweep file. `spec` is a path ("configs/sweeps/x.py") or a bare name ("x") found in
  configs/sweeps/, optionally followed by ":arg" (passed to get_config/get_sweep).

  Returns (module, arg).
  """
  path, _, arg = spec.partition(":")
  if not path.endswith(".py") and os.sep not in path and "/" not in path:
    path = os.path.join(REPO_ROOT, "configs", "sweeps", f"{path}.py")
  if not os.path.isabs(path) and not os.path.exists(path):
    path = os.path.join(REPO_ROOT, path)
  if not os.path.exists(path):
    sweeps_dir = os.path.join(REPO_ROOT, "configs", "sweeps")
    known = sorted(os.path.splitext(f)[0] for f in os.listdir(sweeps_dir)
                   if f.endswith(".py") and not f.startswith("_")) if os.path.isdir(
                       sweeps_dir) else []
    raise ValueError(f"sweep file {path} does not exist; pass --sweep=configs/sweeps/<name>.py "
                     f"(or just <name>) for one of: {', '.join(known) or 'none'}")
  name = "_sweep_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
  mod_spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(mod_spec)
  mod_spec.loader.exec_module(module)
  for fn in ("get_config", "get_sweep"):
    if not hasattr(module, fn):
      raise ValueError(f"sweep file {path} must define {fn}(arg=None)")
  return module, (arg or None)


def build_trials(spec: str, root: str = DEFAULT_ROOT) -> tuple[Any, list[Trial]]:
  """The sweep's settings and its trial list. Shared by the local and the XManager launchers.

  Returns (sweep_config, trials); each trial's overrides are the sweep's fixed `overrides`
  updated with its own point, and its workdir is `<root>/<sweep name>/<trial id>`.
  """
  module, arg = load_sweep_module(spec)
  cfg = module.get_config(arg)
  for field in ("name", "base_config"):
    if not cfg.get(field):
      raise ValueError(f"sweep config lacks {field!r}")
  fixed = dict(cfg.get("overrides", None) or {})
  points = module.get_sweep(arg)
  if not points:
    raise ValueError(f"sweep {cfg.name!r} has no trials")
  root = os.path.abspath(root)
  base = cfg.base_config
  base_path = base.partition(":")[0]
  if not os.path.isabs(base_path):
    base = os.path.join(REPO_ROOT, base)
  trials, seen = [], {}
  for point in points:
    for k in point:
      if k.startswith("config."):
        raise ValueError(f"override keys are config fields without 'config.': got {k!r}")
    overrides = {**fixed, **point}
    tid = trial_id(point)
    if tid in seen:
      raise ValueError(f"sweep {cfg.name!r} has duplicate trial {tid!r} ({point})")
    seen[tid] = True
    trials.append(Trial(tid, overrides, base, os.path.join(root, cfg.name, tid)))
  return cfg, trials


def trial_config(trial: Trial):
  """The trial's full ConfigDict: the base config file's get_config(arg) plus the overrides, as
  `--config.x=v` would make it (unknown fields and wrong types raise)."""
  path, _, arg = trial.config_arg.partition(":")
  spec = importlib.util.spec_from_file_location("_sweep_base_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config(arg or None)
  for key, value in trial.overrides.items():
    *parents, leaf = key.split(".")
    node = config
    for p in parents:
      node = node[p]
    if leaf not in node:
      raise ValueError(f"trial {trial.trial_id}: config has no field {key!r}")
    if isinstance(value, list):
      value = tuple(value)
    setattr(node, leaf, value)   # ConfigDict raises TypeError on a type change
  return config


def validate_trials(trials: Sequence[Trial]) -> None:
  """Checks every trial's config before launching anything (one bad point would otherwise fail
  late, in its own process). Raises ValueError naming the trial and the field."""
  from jaxrl_suite.train.host import validate_run_config
  for t in trials:
    try:
      validate_run_config(trial_config(t))
    except (ValueError, TypeError, KeyError) as e:
      raise ValueError(f"trial {t.trial_id}: {e}") from e


# ------------------------------------------------------------------------------------------------
# Running trials
# ------------------------------------------------------------------------------------------------
def is_done(trial: Trial) -> bool:
  return os.path.exists(os.path.join(trial.workdir, DONE_MARKER))


@dataclasses.dataclass
class _Running:
  trial: Trial
  proc: subprocess.Popen
  log: Any
  t0: float


def _start(trial: Trial, python: str) -> _Running:
  os.makedirs(trial.workdir, exist_ok=True)
  log = open(os.path.join(trial.workdir, LOG_NAME), "a")
  log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(trial.command(python))}\n")
  log.flush()
  env = dict(os.environ)
  env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  # Its own session, so a Ctrl-C in the terminal reaches the trials only through the launcher,
  # which stops them cleanly (and a trial's children die with it).
  proc = subprocess.Popen(trial.command(python), cwd=REPO_ROOT, stdout=log,
                          stderr=subprocess.STDOUT, env=env, start_new_session=True)
  return _Running(trial, proc, log, time.time())


def _mark_done(r: _Running) -> None:
  with open(os.path.join(r.trial.workdir, DONE_MARKER), "w") as f:
    json.dump({"overrides": r.trial.overrides, "wall_time_s": round(time.time() - r.t0, 2),
               "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}, f, default=str)


def run_trials(trials: Sequence[Trial], parallel: int = 2, python: str = sys.executable,
               progress: bool = True) -> dict[str, str]:
  """Runs the unfinished trials, `parallel` at a time. Returns {trial_id: status}.

  status is "done" (finished earlier, skipped), "ran" (finished now) or "failed (rc=..)". A
  trial that fails keeps its workdir and no DONE marker, so the next call retries (and resumes) it.
  On KeyboardInterrupt the running trials are terminated and the interrupt is re-raised.
  """
  from tqdm.auto import tqdm
  if parallel < 1:
    raise ValueError(f"parallel must be >= 1, got {parallel}")
  status = {t.trial_id: "done" for t in trials if is_done(t)}
  todo = [t for t in trials if not is_done(t)]
  running: list[_Running] = []
  bar = tqdm(total=len(trials), initial=len(trials) - len(todo), unit="trial", desc="sweep",
             disable=not progress)
  try:
    while todo or running:
      while todo and len(running) < parallel:
        running.append(_start(todo.pop(0), python))
      time.sleep(0.2)
      for r in list(running):
        rc = r.proc.poll()
        if rc is None:
          continue
        r.log.close()
        running.remove(r)
        if rc == 0:
          _mark_done(r)
          status[r.trial.trial_id] = "ran"
        else:
          status[r.trial.trial_id] = (f"failed (rc={rc}, see "
                                      f"{os.path.join(r.trial.workdir, LOG_NAME)})")
        bar.update(1)
  except KeyboardInterrupt:
    for r in running:
      _terminate(r)
    raise
  finally:
    bar.close()
  return status


def _terminate(r: _Running, grace_s: float = 10.0) -> None:
  """Stops one trial (SIGTERM to its session, SIGKILL after `grace_s`) and closes its log."""
  try:
    os.killpg(r.proc.pid, signal.SIGTERM)
    r.proc.wait(grace_s)
  except ProcessLookupError:
    pass
  except subprocess.TimeoutExpired:
    os.killpg(r.proc.pid, signal.SIGKILL)
    r.proc.wait()
  r.log.close()


# ------------------------------------------------------------------------------------------------
# Results table
# ------------------------------------------------------------------------------------------------
def read_metrics(workdir: str) -> list[dict]:
  """Rows of `<workdir>/metrics.jsonl`, one per step (a resumed run rewrites the steps after its
  last checkpoint; the latest row of a step wins)."""
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  by_step = {}
  with open(path) as f:
    for line in f:
      if line.strip():
        try:
          row = json.loads(line)
        except json.JSONDecodeError:   # a line cut by a kill
          continue
        by_step[row.get("step")] = row
  return [by_step[s] for s in sorted(by_step, key=lambda s: (s is None, s))]


def varying_keys(trials: Sequence[Trial]) -> list[str]:
  """Override keys whose value differs between trials (the sweep's axes), in first-seen order."""
  keys = list(dict.fromkeys(k for t in trials for k in t.overrides))
  return [k for k in keys
          if len({format_value(t.overrides.get(k)) for t in trials}) > 1]


def trial_row(trial: Trial, metric: str = DEFAULT_METRIC, last_frac: float = 0.1,
              keys: Sequence[str] | None = None) -> dict:
  """Final metrics of one trial: the last logged value and the mean of the last 10% of rows.

  `keys` selects which overrides become columns (default: all of them).
  """
  rows = read_metrics(trial.workdir)
  vals = [r.get(metric) for r in rows]
  vals = [float(v) for v in vals if v is not None]
  k = max(1, int(math.ceil(len(vals) * last_frac)))
  keys = list(trial.overrides) if keys is None else keys
  row = {"trial": trial.trial_id,
         **{k_: format_value(trial.overrides.get(k_)) for k_ in keys},
         "status": "done" if is_done(trial) else ("incomplete" if rows else "not started"),
         "last_step": rows[-1].get("step") if rows else None,
         f"final_{metric}": vals[-1] if vals else None,
         f"last{int(last_frac * 100)}pct_{metric}": float(sum(vals[-k:]) / k) if vals else None,
         "wall_s": _done_info(trial).get("wall_time_s")}
  return row


def _done_info(trial: Trial) -> dict:
  try:
    with open(os.path.join(trial.workdir, DONE_MARKER)) as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError):
    return {}


def group_rows(trials: Sequence[Trial], rows: Sequence[dict], metric: str = DEFAULT_METRIC,
               group_out: Sequence[str] = ("seed",)) -> list[dict]:
  """Rows aggregated over `group_out` keys (seeds): mean and Student-t 95% CI of the final
  metric."""
  from jaxrl_suite.core.stats import mean_ci
  groups: dict[str, list[float]] = {}
  keys: dict[str, dict] = {}
  axes = varying_keys(trials) or list(trials[0].overrides if trials else [])
  for t, r in zip(trials, rows):
    setting = {k: format_value(t.overrides.get(k)) for k in axes if k not in group_out}
    gid = json.dumps(setting, sort_keys=True)
    keys[gid] = setting
    v = r.get(f"final_{metric}")
    groups.setdefault(gid, [])
    if v is not None:
      groups[gid].append(v)
  out = []
  for gid, vals in groups.items():
    m, lo, hi = mean_ci(vals) if vals else (None, None, None)
    out.append({**keys[gid], "n": len(vals), f"mean_final_{metric}": m, "ci95_lo": lo,
                "ci95_hi": hi})
  return out


def _md_table(rows: Sequence[dict]) -> str:
  if not rows:
    return "(no trials)"
  cols = list(dict.fromkeys(k for r in rows for k in r))
  fmt = lambda v: "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
  lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
  lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
  return "\n".join(lines)


def write_table(name: str, trials: Sequence[Trial], out_dir: str,
                metric: str = DEFAULT_METRIC) -> tuple[str, str]:
  """Writes `<out_dir>/results.csv` (one row per trial) and `results.md` (per trial and per
  setting over seeds). Returns (csv path, md path)."""
  axes = varying_keys(trials)
  rows = [trial_row(t, metric, keys=axes) for t in trials]
  os.makedirs(out_dir, exist_ok=True)
  csv_path, md_path = os.path.join(out_dir, "results.csv"), os.path.join(out_dir, "results.md")
  cols = list(dict.fromkeys(k for r in rows for k in r))
  with open(csv_path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
  grouped = group_rows(trials, rows, metric)
  fixed = {k: format_value(v) for k, v in (trials[0].overrides.items() if trials else [])
           if k not in axes}
  md = [f"# Sweep `{name}`", "", f"Base config `{os.path.relpath(trials[0].config_arg, REPO_ROOT)}`"
        + (f", fixed overrides {fixed}" if fixed else "") + "." if trials else "", "",
        f"Metric: `{metric}` at the last logged update "
        "(mean over the run's parallel envs and `num_seeds`); `wall_s` is the wall time of the run "
        "that finished the trial.", "",
        "## Per setting (over seeds, Student-t 95% CI)", "", _md_table(grouped), "",
        "## Per trial", "", _md_table(rows), ""]
  with open(md_path, "w") as f:
    f.write("\n".join(md))
  return csv_path, md_path
