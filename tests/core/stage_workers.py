"""A list of stages for the tests of processes sharing a workdir (imported by their subprocesses).

Stage i's fn appends "s<i> <pid>" to `log` and returns {"i": i, "by": pid}. With `hold_first`,
stage 0's fn first writes `<log>.holding`, then waits (up to 120 s) until another process has logged a stage, so whoever
takes stage 0 holds it while the other process computes the next one: a split that does not
depend on timing."""

import os
import time

from jaxrl_suite.core import stage_cache


def _others_logged(log: str) -> bool:
  if not os.path.exists(log):
    return False
  with open(log) as fh:
    return any(int(line.split()[1]) != os.getpid() for line in fh if line.strip())


def logging_stages(n: int, log: str, prefix: str, hold_first: bool) -> list:
  def fn(i):
    def f():
      if i == 0 and hold_first:
        open(log + ".holding", "w").close()
        deadline = time.time() + 120
        while time.time() < deadline and not _others_logged(log):
          time.sleep(0.05)
      with open(log, "a") as fh:
        fh.write(f"s{i} {os.getpid()}\n")
      return {"i": i, "by": os.getpid()}
    return f
  return [stage_cache.Stage(f"{prefix}/s{i}", {"i": i}, fn(i)) for i in range(n)]
