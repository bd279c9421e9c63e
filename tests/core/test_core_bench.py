"""core/bench.py, the benchmark scripts' timing harness, on a deterministic fake clock: every
contender advances the clock by a known amount, so the timings and ratios are known answers."""

import os

import jax.numpy as jnp
import pytest

from jaxrl_suite.core import bench


class FakeClock:
  """Wall and CPU seconds that move only when a contender says so."""

  def __init__(self):
    self.wall_s, self.cpu_s, self.calls = 0.0, 0.0, []

  def clock(self) -> bench.Clock:
    return bench.Clock(wall=lambda: self.wall_s, cpu=lambda: self.cpu_s)

  def contender(self, name: str, walls: list[float], cpu_share: float = 1.0):
    """fn() that takes walls[i] wall seconds (cpu_share of it CPU) on its i-th call and returns
    i as an array; the first call is the warm-up when there is one."""
    it = iter(range(len(walls)))

    def fn():
      i = next(it)
      self.calls.append(name)
      self.wall_s += walls[i]
      self.cpu_s += cpu_share * walls[i]
      return jnp.asarray(i)
    return fn


def test_time_call_returns_wall_cpu_and_the_output():
  fc = FakeClock()
  wall, cpu, out = bench.time_call(fc.contender("a", [2.0], cpu_share=0.5), fc.clock())
  assert (wall, cpu, int(out)) == (2.0, 1.0, 0)


def test_interleaved_warms_then_times_round_robin():
  fc = FakeClock()
  fns = {"floor": fc.contender("floor", [9.0, 1.0, 3.0, 2.0]),
         "closed": fc.contender("closed", [9.0, 4.0, 2.0, 6.0], cpu_share=2.0)}
  rounds = []
  t = bench.interleaved(fns, reps=3, clock=fc.clock(), after_round=rounds.append)
  # one warm-up call of each (not timed), then rounds of floor, closed
  assert fc.calls == ["floor", "closed"] + ["floor", "closed"] * 3
  assert rounds == [0, 1, 2]
  assert t["floor"].wall == [1.0, 3.0, 2.0] and t["closed"].cpu == [8.0, 4.0, 12.0]
  assert t["floor"].best_wall == 1.0 and t["floor"].median_wall() == 2.0
  assert t["closed"].best() == (2.0, 4.0)
  assert int(t["closed"].output) == 3           # the last call's output
  ratio = t["closed"].median_wall() / t["floor"].median_wall()
  assert ratio == pytest.approx(2.0)


def test_best_and_fastest_differ_when_cpu_and_wall_disagree():
  timing = bench.Timing(wall=[1.0, 2.0, 1.0], cpu=[3.0, 0.5, 2.0])
  assert timing.best() == (1.0, 0.5)             # each minimum on its own
  assert timing.fastest() == (1.0, 2.0)          # the fastest call by wall, ties by CPU


def test_best_of_without_warmup_times_every_call():
  fc = FakeClock()
  t = bench.best_of(fc.contender("f", [5.0, 4.0]), reps=2, warmup=False, clock=fc.clock())
  assert t.wall == [5.0, 4.0] and t.best_wall == 4.0


def test_ratio_table_known_answer():
  lines = bench.ratio_table(("what", "median wall", "/ floor"),
                            [("floor", 0.002), ("closed form", 0.005), ("FQE", 0.0301)],
                            base=0.002)
  assert lines == ["| what | median wall | / floor |", "|---|---|---|",
                   "| floor | 2.0 ms | 1.00 |", "| closed form | 5.0 ms | 2.50 |",
                   "| FQE | 30.1 ms | 15.05 |"]


def test_md_table_formats_cells_with_str():
  assert bench.md_table(("a", "b"), [(1, "x"), (2.5, None)]) == [
      "| a | b |", "|---|---|", "| 1 | x |", "| 2.5 | None |"]


def test_pinned_core_reads_the_marker(monkeypatch):
  monkeypatch.delenv(bench.PINNED_ENV, raising=False)
  assert bench.pinned_core() is None
  monkeypatch.setenv(bench.PINNED_ENV, "1")
  assert bench.pinned_core() == 1


def test_pin_and_reexec_pins_one_core_and_turns_xla_threads_off(monkeypatch):
  seen = {}
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5})
  monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: seen.update(cpus=cpus))
  monkeypatch.setattr(os, "execve", lambda exe, argv, env: seen.update(argv=argv, env=env))
  monkeypatch.setenv("XLA_FLAGS", "--foo")
  monkeypatch.setattr("sys.argv", ["bench_x.py", "--reps=2"])
  bench.pin_and_reexec("experiments.bench_x")
  assert seen["cpus"] == {3}
  assert seen["argv"][1:] == ["-m", "experiments.bench_x", "--reps=2"]
  assert seen["env"][bench.PINNED_ENV] == "3"
  assert seen["env"]["XLA_FLAGS"] == "--foo " + bench.ONE_THREAD_XLA
