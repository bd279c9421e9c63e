"""The benchmark scripts' timing harness: warm-up, timed repeats, interleaving, ratio tables.

  time_call(fn) -> (wall s, CPU s, output)             one call of fn(), its arrays ready
  interleaved({name: fn}, reps) -> {name: Timing}      each fn warmed, then `reps` rounds
  best_of(fn, reps) -> Timing                          the same with one contender
  md_table(header, rows), ratio_table(...)             markdown lines
  pin_and_reexec(module)                               rerun on one core, XLA threads off

Why interleave: on a shared machine the load changes during a run; timing the contenders
round-robin (a, b, a, b, ...) puts a change on all of them alike, so their ratio holds where the
absolute times do not. Why the minimum (`Timing.best`): on a shared CPU the fastest call is the
one least contaminated by other processes (the median, `Timing.median_wall`, where the spread
matters more than the floor). Why CPU seconds (`time.process_time`, all threads of the process):
wall time grows with other people's load, CPU time is what a quiet machine would take, summed
over its cores. The clock is an argument so that tests drive the harness with a fake one.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, Callable, Iterable, Mapping, NamedTuple, NoReturn, Sequence

import jax
import numpy as np


class Clock(NamedTuple):
  """Where the harness reads time: wall seconds and process-CPU seconds."""
  wall: Callable[[], float] = time.perf_counter
  cpu: Callable[[], float] = time.process_time


SYSTEM_CLOCK = Clock()


@dataclasses.dataclass
class Timing:
  """The timed calls of one contender: wall and CPU seconds per call (in call order) and the
  output of the last call."""
  wall: list[float] = dataclasses.field(default_factory=list)
  cpu: list[float] = dataclasses.field(default_factory=list)
  output: Any = None

  @property
  def best_wall(self) -> float:
    return min(self.wall)

  def best(self) -> tuple[float, float]:
    """(least wall s, least CPU s), each the minimum over the calls on its own."""
    return min(self.wall), min(self.cpu)

  def fastest(self) -> tuple[float, float]:
    """(wall s, CPU s) of the call with the least wall time (ties: the least CPU)."""
    return min(zip(self.wall, self.cpu))

  def median_wall(self) -> float:
    return float(np.median(self.wall))


def time_call(fn: Callable[[], Any], clock: Clock = SYSTEM_CLOCK) -> tuple[float, float, Any]:
  """(wall s, CPU s, output) of one call of fn(), blocked until its arrays are computed (JAX
  dispatches asynchronously: without the block the clock would stop before the work)."""
  t, c = clock.wall(), clock.cpu()
  out = jax.block_until_ready(fn())
  return clock.wall() - t, clock.cpu() - c, out


def interleaved(fns: Mapping[str, Callable[[], Any]], reps: int, warmup: bool = True,
                clock: Clock = SYSTEM_CLOCK,
                after_round: Callable[[int], None] | None = None) -> dict[str, Timing]:
  """Times every fn() `reps` times, round-robin in the mapping's order (each round calls every
  fn once), after one untimed call of each (`warmup`: compiles a jitted fn; pass False for
  functions compiled ahead). `after_round(r)` runs after round r (0-based), e.g. to print
  progress. Returns {name: Timing}."""
  if warmup:
    for fn in fns.values():
      jax.block_until_ready(fn())
  out = {k: Timing() for k in fns}
  for r in range(reps):
    for k, fn in fns.items():
      wall, cpu, out[k].output = time_call(fn, clock)
      out[k].wall.append(wall)
      out[k].cpu.append(cpu)
    if after_round is not None:
      after_round(r)
  return out


def best_of(fn: Callable[[], Any], reps: int, warmup: bool = True,
            clock: Clock = SYSTEM_CLOCK) -> Timing:
  """`reps` timed calls of fn() after one untimed warm-up call (see `interleaved`)."""
  return interleaved({"fn": fn}, reps, warmup, clock)["fn"]


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
  """A markdown table as lines: the header row, the `|---|` rule, then one line per row (cells
  formatted with str)."""
  line = lambda cells: "| " + " | ".join(str(c) for c in cells) + " |"
  return [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows]


def ratio_table(header: Sequence[str], rows: Iterable[tuple[str, float]], base: float,
                fmt: Callable[[float], str] = lambda s: f"{s * 1e3:.1f} ms") -> list[str]:
  """Markdown lines of (label, seconds) rows with a third column seconds / `base` (two
  decimals): `header` names the three columns, e.g. ("what", "median wall", "/ floor")."""
  return md_table(header, [(label, fmt(s), f"{s / base:.2f}") for label, s in rows])


# ---- one core, one thread -----------------------------------------------------------------------

PINNED_ENV = "JAXRL_BENCH_PINNED"    # set (to the core) in the re-executed, pinned process
ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def pinned_core() -> int | None:
  """The core this process was pinned to by `pin_and_reexec`, or None."""
  return int(os.environ[PINNED_ENV]) if PINNED_ENV in os.environ else None


def pin_and_reexec(module: str) -> NoReturn:
  """Re-executes `python -m module <this argv>` pinned to one core (the affinity is inherited by
  every thread XLA starts later) with XLA's intra-op thread pool off. Why: a single-threaded
  reference and a JAX side then share one core, and on a small machine XLA's pool threads add
  spin time that process_time counts."""
  cpu = min(os.sched_getaffinity(0))
  os.sched_setaffinity(0, {cpu})
  env = dict(os.environ, **{PINNED_ENV: str(cpu)})
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + ONE_THREAD_XLA).strip()
  os.execve(sys.executable, [sys.executable, "-m", module] + sys.argv[1:], env)
