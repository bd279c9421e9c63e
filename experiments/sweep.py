r"""Hyperparameter sweeps: a base config plus a grid or list of overrides, run as local processes.

A sweep is a Python file in `configs/sweeps/` (see `configs/sweeps/ppo_cartpole_lr.py`)::

    def get_config(arg=None) -> ml_collections.ConfigDict:
      # name, base_config ("configs/ppo_cartpole.py" or "...py:quick"), fixed overrides
    def get_sweep(arg=None) -> list[dict]:   # one dict of config.x overrides per trial
      return [{"lr": lr, "seed": s} for lr, s in itertools.product([1e-3, 3e-4], [0, 1])]

A sweep file is a config: it imports no experiment code (`product`, `zipped`, `chain` and
`cross`, re-exported here from `jaxrl_suite.train.sweep`, are for scripts and tests that build
trial lists in Python).

Each trial is `python -m jaxrl_suite.train --config=<base> --config.lr=0.001 --config.seed=0
--workdir=workdirs/sweeps/<sweep>/<trial-id>`. Trials run as `--parallel` processes; a trial is
finished when its workdir holds a `DONE` marker (written here after the process exits cleanly).
Re-running the same command skips finished trials and restarts unfinished ones, which resume from
their last checkpoint because `jaxrl_suite.train` does. At the end a table of final metrics per
trial (and per setting, averaged over seeds with a 95% CI) goes to `<sweep dir>/results.{csv,md}`.

  python -m experiments.sweep --sweep=configs/sweeps/ppo_cartpole_lr.py --parallel=2
  python -m experiments.sweep --sweep=configs/sweeps/ppo_cartpole_lr.py:quick   # seconds/trial
  python -m experiments.sweep --sweep=... --dry_run      # print the trial commands only

The machinery (trial lists, the process pool, the table) is `jaxrl_suite.train.sweep`; the trial
list comes from its `build_trials`, which `experiments/launch_xm.py` (XManager) also uses, so a
local sweep and a cluster sweep run exactly the same trials.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The names this script has always offered (sweep files and tests use them).
from jaxrl_suite.train.sweep import (  # noqa: E402,F401
    DEFAULT_METRIC, DEFAULT_ROOT, DONE_MARKER, LOG_NAME, REPO_ROOT, Trial, build_trials, chain,
    cross, format_value, is_done, product, read_metrics, run_trials, trial_config, trial_id,
    validate_trials, write_table, zipped)


def main(argv: Sequence[str] | None = None) -> int:
  import argparse
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--sweep", required=True,
                 help="sweep file (configs/sweeps/x.py[:arg]) or name in configs/sweeps/")
  p.add_argument("--parallel", type=int, default=2, help="trials run at once (default 2)")
  p.add_argument("--root", default=DEFAULT_ROOT, help="workdir root (default workdirs/sweeps)")
  p.add_argument("--metric", default=DEFAULT_METRIC,
                 help="the column of each trial's metrics.jsonl (written by jaxrl_suite.train) "
                      "that the table reports: its last logged value and the mean of the last "
                      "10%% of rows per trial, and per setting the mean over seeds with a 95%% "
                      f"CI (default {DEFAULT_METRIC}: the mean episode return)")
  p.add_argument("--dry_run", action="store_true", help="print the trial commands and exit")
  p.add_argument("--no_progress", action="store_true")
  args = p.parse_args(argv)
  try:
    cfg, trials = build_trials(args.sweep, args.root)
    validate_trials(trials)
  except ValueError as e:    # a user's input error: one line that says what to do, no traceback
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.dry_run:
    for t in trials:
      print(("[done] " if is_done(t) else "") + " ".join(t.command()))
    return 0
  n_done = sum(is_done(t) for t in trials)
  print(f"sweep {cfg.name}: {len(trials)} trials, {n_done} already done, "
        f"running {len(trials) - n_done} with --parallel={args.parallel}")
  try:
    status = run_trials(trials, args.parallel, progress=not args.no_progress)
  except KeyboardInterrupt:
    print("interrupted: unfinished trials resume from their checkpoints when you re-run")
    return 130
  finally:
    csv_path, md_path = write_table(cfg.name, trials, os.path.join(args.root, cfg.name),
                                    args.metric)
  for tid, s in status.items():
    print(f"  {tid}: {s}")
  print(f"table: {md_path} and {csv_path}")
  failed = [tid for tid, s in status.items() if s.startswith("failed")]
  if failed:
    print(f"{len(failed)} trial(s) failed: {', '.join(failed)}; re-run to retry", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
