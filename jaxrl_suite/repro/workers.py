"""Helper processes that share a run's stage cache: `--workers=N` of the reproduction scripts.

A script whose stages come in lists of independent ones (`core.stage_cache.run_stages`: seeds'
warm starts, sweep cells, the variants of a study; or its own files under
`core.stage_cache.each_under_lock`, as serving routing's policies) can spread them over processes:
the run the user started (the main one) starts N-1 helpers, each the same command with
`--workers=1`, at the main run's priority, writing its throwaway record to
`<workdir>/helpers/<i>/results` (JAXRL_RESULTS_DIR, and --results_dir where the script has it).
Every process walks the same stage lists; the locks give each stage to one of them and the
others read it back, so the record the main process writes is the one a single process would
write (every value is read from the stored file either way). Helpers' output goes to
`<workdir>/helpers/<i>.log`; they are stopped when the main run ends, whether it ends well or
not. A helper that dies leaves its stage to the next process that reaches it.

On a machine with C cores and a script that computes one stage on about one core, N = C
divides the stage time by up to C. The helpers' own copies of the code outside stages (setup,
the final evaluation and report) are the price.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Sequence

from jaxrl_suite.core import cli as core_cli
from jaxrl_suite.core import results

_DROPPED = ("--workers", "--results_dir")


def helper_argv(argv: Sequence[str]) -> list[str]:
  """argv[1:] without --workers and --results_dir (in `--f=v` or `--f v` form)."""
  out, skip = [], False
  for a in argv[1:]:
    if skip:
      skip = False
      continue
    name = a.split("=", 1)[0]
    if name in _DROPPED:
      skip = "=" not in a
      continue
    out.append(a)
  return out


def main_module() -> str:
  """The module the running script was started as (`python -m <module>`)."""
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  if spec is None or not spec.name or spec.name == "__main__":
    raise core_cli.UserError("--workers > 1 starts copies of the script with `python -m`: run it "
                             "as `python -m experiments.<name> ...`")
  return spec.name


def start(workers: int, argv: Sequence[str], workdir: str, module: str | None = None,
          splits_stages: bool = True, results_flag: bool = True) -> list[subprocess.Popen]:
  """Starts workers - 1 helpers of `python -m <module> <argv[1:]>` sharing `workdir`. Their
  results folder is given as JAXRL_RESULTS_DIR (`core.results.output_dir`) and, where the
  script has the flag (`results_flag`), as --results_dir."""
  if workers < 1:
    raise core_cli.UserError(f"--workers must be >= 1, got {workers}")
  if workers == 1:
    return []
  if not splits_stages:
    raise core_cli.UserError("--workers: this script has no independent stages to share out; "
                             "run it with --workers=1")
  module = module or main_module()
  d = os.path.join(workdir, "helpers")
  os.makedirs(d, exist_ok=True)
  procs = []
  for i in range(1, workers):
    out = os.path.join(d, str(i), "results")
    cmd = [sys.executable, "-m", module, *helper_argv(argv), "--workers=1",
           *([f"--results_dir={out}"] if results_flag else [])]
    with open(os.path.join(d, f"{i}.log"), "w") as log:
      # Same priority as the main run (a niced helper starves whenever the main process's
      # XLA threads take every core), and no preexec_fn: JAX's threads make fork unsafe.
      procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL,
                                    env=dict(os.environ, **{results.ENV_VAR: out})))
  print(f"{len(procs)} helper process(es) share the stage cache; logs: {d}/<i>.log", flush=True)
  return procs


def terminate(proc: subprocess.Popen, grace_s: float) -> None:
  """SIGTERM, then SIGKILL after `grace_s` seconds if it is still running; reaps it."""
  proc.terminate()
  try:
    proc.wait(timeout=grace_s)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()


def stop(procs: Sequence[subprocess.Popen], workdir: str) -> None:
  """Stops the helpers still running; says which ones had failed before."""
  for i, p in enumerate(procs, 1):
    rc = p.poll()
    if rc is None:
      terminate(p, grace_s=30)
    elif rc != 0:
      print(f"helper {i} had exited with status {rc} (its stages were computed here); see "
            f"{os.path.join(workdir, 'helpers', f'{i}.log')}", file=sys.stderr, flush=True)
