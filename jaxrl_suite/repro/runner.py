"""Runs reproduction scripts as subprocesses and checks what they wrote (`experiments/reproduce.py`).

A stage is `python -m <module> [--quick] <args>`: its output goes to `<log_dir>/<name>.log` (and
to stderr with `stream`), it is told where to write through JAXRL_RESULTS_DIR, and it passes when
it exits 0 having (re)written a valid `<name>.json` of the requested mode there. In quick mode
the committed results folder (`protected_dir`) is snapshotted and any file a stage wrote there
moved to the quick folder, the committed bytes put back. `run_all` runs stages `jobs` at a time
(longest of the last run first), with one line per start / result, a heartbeat of each running
stage's last log line, an ETA from the last run's timings (`<log_dir>/timings_<mode>.json`) or
shipped estimates, and Ctrl-C stopping the running stages while keeping the finished results.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

from jaxrl_suite.core import results as _results
from jaxrl_suite.repro import workers

REPO_ROOT = _results.REPO_ROOT


@dataclasses.dataclass(frozen=True)
class Stage:
  """One reproduction: `python -m <module> [--quick] <args>` writes `results/<name>.json`."""
  name: str
  module: str
  title: str = ""
  args: tuple[str, ...] = ()      # e.g. one trace of a per-trace study


@dataclasses.dataclass
class StageResult:
  name: str
  status: str           # "ok", "failed", "skipped"
  wall_s: float = 0.0
  note: str = ""
  log: str = ""
  cpu_s: float = 0.0    # user + system CPU of the stage's process tree (0 if not measured)

def module_exists(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except ModuleNotFoundError:
    return False


def tail(path: str, n: int = 25) -> str:
  try:
    with open(path, errors="replace") as f:
      return "".join(f.readlines()[-n:])
  except OSError:
    return ""

def snapshot(d: str) -> dict[str, bytes]:
  """The bytes of every file directly in `d` (results/ is small: ~1 MB)."""
  if not os.path.isdir(d):
    return {}
  out = {}
  for name in os.listdir(d):
    path = os.path.join(d, name)
    if os.path.isfile(path):
      with open(path, "rb") as f:
        out[name] = f.read()
  return out


def give_back(before: Mapping[str, bytes], protected: str, dest: str) -> list[str]:
  """Moves files that a quick stage wrote into `protected` to `dest` and puts the originals
  back (or removes files that were not there). Returns the names moved."""
  moved = []
  for name, data in sorted(snapshot(protected).items()):
    if before.get(name) == data:
      continue
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, name), "wb") as f:
      f.write(data)
    path = os.path.join(protected, name)
    if name in before:
      with open(path, "wb") as f:
        f.write(before[name])
    else:
      os.remove(path)
    moved.append(name)
  return moved


def rel(path: str) -> str:
  """`path` relative to the repository root when it is inside it (what a user types)."""
  rel = os.path.relpath(os.path.abspath(path), REPO_ROOT)
  return path if rel.startswith("..") else rel


def timings_path(log_dir: str, quick: bool) -> str:
  """Where the wall time of each stage of the last run of a mode is kept (for the ETA)."""
  return os.path.join(log_dir, f"timings_{'quick' if quick else 'full'}.json")


def load_timings(log_dir: str, quick: bool) -> dict[str, float]:
  """{stage: wall s} of the last run of this mode ({} if none or unreadable: no ETA then)."""
  try:
    with open(timings_path(log_dir, quick)) as f:
      data = json.load(f)
    return {str(k): float(v) for k, v in data.items()}
  except (OSError, ValueError, TypeError, AttributeError):
    return {}


def save_timings(log_dir: str, quick: bool, results: Sequence["StageResult"]) -> None:
  """Merges the wall times of the stages that finished (ok or failed after running)."""
  times = load_timings(log_dir, quick)
  times.update({r.name: round(r.wall_s, 1) for r in results
                if r.status == "ok" or (r.status == "failed" and r.wall_s > 0)})
  os.makedirs(log_dir, exist_ok=True)
  with open(timings_path(log_dir, quick), "w") as f:
    json.dump(times, f, indent=1, sort_keys=True)


def fmt_s(s: float) -> str:
  s = int(round(s))
  return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def last_line(path: str, width: int = 100) -> str:
  """The last non-empty line of a log, a progress bar's last redraw included (split on \\r)."""
  try:
    with open(path, "rb") as f:
      f.seek(0, os.SEEK_END)
      f.seek(max(0, f.tell() - 4096))
      text = f.read().decode(errors="replace")
  except OSError:
    return ""
  parts = [p.strip() for p in text.replace("\r", "\n").split("\n") if p.strip()]
  return (parts[-1][:width] + ("..." if len(parts[-1]) > width else "")) if parts else ""


def default_results_dir(quick: bool) -> str:
  """Where a run of this mode writes by default (`core.results`: quick folder or results/)."""
  return _results.QUICK_DIR if quick else _results.RESULTS_DIR


def run_stage(stage: Stage, quick: bool, results_dir: str | None, log_dir: str,
              extra_args: Sequence[str] = (), timeout_s: float | None = None,
              stream: bool = False, protect: bool | None = None, stop=None,
              protected_dir: str | None = None) -> StageResult:
  """Runs one reproduction in a subprocess; checks that it (re)wrote its results record.

  Its output goes to `<log_dir>/<name>.log` and, with `stream`, also to stderr (so the stage's
  own progress bar shows live). `results_dir` (default: results/ for full mode, the quick
  directory for quick mode) reaches the stage as JAXRL_RESULTS_DIR; in quick mode the committed
  results/ are protected (see the module docstring) unless `protect=False` (run_all protects
  them once around stages that run at the same time). `stop` (a threading.Event) ends the
  stage early when set (Ctrl-C in run_all). `protected_dir`: the committed results (default
  `core.results.RESULTS_DIR`).
  """
  protected = protected_dir or _results.RESULTS_DIR
  if not module_exists(stage.module):
    return StageResult(stage.name, "skipped", note=f"{stage.module} does not exist yet")
  results_dir = results_dir or default_results_dir(quick)
  if protect is None:
    protect = quick and os.path.abspath(results_dir) != os.path.abspath(protected)
  before = snapshot(protected) if protect else {}
  os.makedirs(log_dir, exist_ok=True)
  log_path = os.path.join(log_dir, f"{stage.name}.log")
  cmd = ([sys.executable, "-m", stage.module] + (["--quick"] if quick else []) + list(stage.args)
         + list(extra_args))
  env = dict(os.environ)
  env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(REPO_ROOT, ".jax_cache"))
  env[_results.ENV_VAR] = results_dir
  # Line by line into the log: a block-buffered stage shows nothing in its log (nor in the
  # heartbeat) for minutes, and loses its last lines if it is killed.
  env["PYTHONUNBUFFERED"] = "1"
  record = os.path.join(results_dir, f"{stage.name}.json")
  usage: dict[str, float] = {}
  t0 = time.time()
  try:
    with open(log_path, "wb") as log:
      log.write(("$ " + " ".join(cmd) + "\n").encode())
      log.flush()
      rc = _run_tee(cmd, env, log, sys.stderr if stream else None, timeout_s, stop, usage)
  finally:
    moved = give_back(before, protected, results_dir) if protect else []
  if moved:
    with open(log_path, "a") as log:
      log.write(f"[reproduce] quick mode: moved {moved} from {protected} to {results_dir} "
                "and restored the committed files\n")
  wall = time.time() - t0
  result = lambda *a: StageResult(*a, cpu_s=usage.get("cpu_s", 0.0))
  if rc != 0:
    return result(stage.name, "failed", wall,
                  rc if isinstance(rc, str) else f"exit status {rc}", log_path)
  if not os.path.exists(record) or os.path.getmtime(record) < t0 - 1:
    return result(stage.name, "failed", wall, f"exited 0 but did not write {record}",
                  log_path)
  try:
    with open(record) as f:
      rec = json.load(f)
    from jaxrl_suite.core.results import validate_record
    validate_record(rec)
  except (ValueError, OSError) as e:
    return result(stage.name, "failed", wall, f"invalid results record: {e}", log_path)
  want = "quick" if quick else "full"
  if rec.get("mode") != want:
    return result(stage.name, "failed", wall,
                  f"record says mode={rec.get('mode')!r}, expected {want!r}", log_path)
  return result(stage.name, "ok", wall, f"{len(rec['claims'])} claim(s) in {rel(record)}",
                log_path)


def _run_tee(cmd: Sequence[str], env: Mapping[str, str], log, echo,
             timeout_s: float | None, stop=None, usage: dict | None = None) -> int | str:
  """Runs `cmd`, copying its output to the binary file `log` (and the text stream `echo`).

  Returns the exit status, or a string saying why it was stopped (timeout, `stop` set). On a
  normal exit, `usage["cpu_s"]` gets the process's user + system CPU seconds (its waited-for
  children included): on a shared machine the stage's cost, where wall time is the queue's.
  """
  import select
  proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=dict(env))
  t0 = time.time()
  fd = proc.stdout.fileno()
  try:
    while True:
      if timeout_s is not None and time.time() - t0 > timeout_s:
        proc.kill()
        proc.wait()
        return f"timeout after {timeout_s:.0f} s"
      if stop is not None and stop.is_set():
        workers.terminate(proc, grace_s=10)
        return "interrupted"
      ready, _, _ = select.select([fd], [], [], 1.0)
      if not ready:
        continue
      chunk = os.read(fd, 65536)
      if not chunk:
        break
      log.write(chunk)
      log.flush()
      if echo is not None:
        echo.write(chunk.decode(errors="replace"))
        echo.flush()
    try:
      _, status, ru = os.wait4(proc.pid, 0)
      proc.returncode = os.waitstatus_to_exitcode(status)
      if usage is not None:
        usage["cpu_s"] = ru.ru_utime + ru.ru_stime
    except ChildProcessError:     # already reaped
      pass
    return proc.wait()
  except KeyboardInterrupt:
    proc.terminate()
    proc.wait()
    raise
  finally:
    proc.stdout.close()


def schedule(stages: Sequence[Stage], last: Mapping[str, float], jobs: int) -> list[Stage]:
  """The order stages start in: registry order for one job; with several, the longest of the
  last run first (longest-processing-time scheduling: the slow stage does not start last and
  run alone at the end), stages without a timing first of all (they may be the slow ones)."""
  if jobs <= 1 or not last:
    return list(stages)
  unknown = [s for s in stages if s.name not in last]
  known = sorted((s for s in stages if s.name in last), key=lambda s: -last[s.name])
  return unknown + known


class _Runner:
  """The state of one `run_all`: the queue, the running stages (threads), their results, the
  progress lines. Each method is one step of the loop in `run_all`."""

  def __init__(self, stages, quick, results_dir, log_dir, progress, timeout_s, stream, jobs,
               heartbeat_s, out, protected_dir, estimates):
    import threading
    self.stages, self.quick, self.results_dir, self.log_dir = stages, quick, results_dir, log_dir
    self.progress, self.timeout_s, self.stream, self.jobs = progress, timeout_s, stream, jobs
    self.heartbeat_s, self.out, self.protected_dir = heartbeat_s, out, protected_dir
    self.last, self.source = load_timings(log_dir, quick), "last run's timings"
    if not self.last and quick and estimates and all(st.name in estimates for st in stages):
      # a fresh clone: the shipped estimates order the stages and give the first ETA
      self.last, self.source = dict(estimates), "shipped estimates"
    self.queue = schedule(stages, self.last, jobs)
    self.order, self.n = list(self.queue), len(stages)
    self.stop, self.lock = threading.Event(), threading.Lock()
    self.done: dict[str, StageResult] = {}
    self.running: dict[str, tuple[Any, float]] = {}
    self.reported: set[str] = set()
    self.t_start = time.time()
    self.next_beat = self.t_start + heartbeat_s

  def say(self, msg: str) -> None:
    print(msg, file=self.out, flush=True)

  def work(self, stage: Stage) -> None:
    try:
      res = run_stage(stage, self.quick, self.results_dir, self.log_dir,
                      timeout_s=self.timeout_s, stream=self.stream, protect=False,
                      stop=self.stop, protected_dir=self.protected_dir)
    except Exception as e:  # noqa: BLE001  (a bug here must not lose the other stages' results)
      res = StageResult(stage.name, "failed", note=f"reproduce.py error: {e!r}")
    with self.lock:
      self.done[stage.name] = res

  def eta(self) -> str:
    if not self.last:
      return "no ETA (first run of this mode)"
    now = time.time()
    left = sum(max(self.last.get(s, 0.0) - (now - t0), 0.0)
               for s, (_, t0) in self.running.items())
    left += sum(self.last.get(s.name, 0.0) for s in self.order if s.name not in self.done
                and s.name not in self.running)
    return f"ETA {fmt_s(left / self.jobs)} ({self.source})"

  def _was(self, name: str, words: tuple[str, str]) -> str:
    """The word for the time shown for `name`: the shipped estimate's or the last run's."""
    return words[0 if self.source == "shipped estimates" else 1]

  def report(self, res: StageResult) -> None:
    self.reported.add(res.name)
    cpu = f", {res.cpu_s:.0f} CPU-s" if res.cpu_s else ""
    self.say(f"[{res.status}] {res.name} ({res.wall_s:.0f} s{cpu}) {res.note}"
             + (f"  [{len(self.reported)}/{self.n} done, "
                f"{fmt_s(time.time() - self.t_start)} elapsed]" if self.progress else ""))
    if res.status == "failed" and res.log:
      self.say(f"  --- last lines of {res.log} ---\n" + tail(res.log))

  def start_more(self) -> None:
    """Starts queued stages while there are free slots (a missing script takes none)."""
    import threading
    while self.queue and len(self.running) < self.jobs and not self.stop.is_set():
      stage = self.queue.pop(0)
      if not module_exists(stage.module):    # reported at once, takes no slot
        self.done[stage.name] = StageResult(stage.name, "skipped",
                                            note=f"{stage.module} does not exist yet")
        continue
      i = self.n - len(self.queue)
      if self.progress:
        was = (f", {self._was(stage.name, ('estimate', 'last run'))} "
               f"{fmt_s(self.last[stage.name])}" if stage.name in self.last else "")
        self.say(f"[{i}/{self.n}] {stage.name} started ({stage.title}{was}); "
                 f"{fmt_s(time.time() - self.t_start)} elapsed, {self.eta()}")
      if self.stream:
        print(f"=== [{i}/{self.n}] {stage.name}: {stage.title}", file=sys.stderr)
      th = threading.Thread(target=self.work, args=(stage,), daemon=True)
      self.running[stage.name] = (th, time.time())
      th.start()

  def collect(self) -> list[str]:
    """Reports the stages that finished since the last call; returns their names."""
    with self.lock:
      finished = [s for s in self.done if s not in self.reported]
    for name in finished:
      self.running.pop(name, None)
      self.report(self.done[name])
    return finished

  def heartbeat(self) -> None:
    """Every heartbeat_s, the last log line of each stage running for a while."""
    if not (self.progress and not self.stream and self.running
            and time.time() >= self.next_beat):
      return
    self.next_beat = time.time() + self.heartbeat_s
    for name, (_, t0) in self.running.items():
      if time.time() - t0 < self.heartbeat_s / 2:    # just started: its log says nothing yet
        continue
      was = (f"/{fmt_s(self.last[name])} {self._was(name, ('estimated', 'last run'))}"
             if name in self.last else "")
      log = os.path.join(self.log_dir, f"{name}.log")
      self.say(f"  ... {name}: {fmt_s(time.time() - t0)}{was}: {last_line(log)}")

  def interrupt(self) -> None:
    """Ctrl-C: stops the running stages, reports them, marks the queued ones not run."""
    self.stop.set()
    for th, _ in list(self.running.values()):
      th.join()
    self.collect()
    for s in self.queue:
      self.done[s.name] = StageResult(s.name, "skipped", note="not run (interrupted)")
    self.say("[interrupted] the running stages were stopped; the remaining ones were not run")

  def results(self) -> list[StageResult]:
    """One result per stage in `stages` order; the skipped ones reported now."""
    out = [self.done[s.name] for s in self.stages if s.name in self.done]
    for r in out:
      if r.name not in self.reported:
        self.report(r)
    return out


def run_all(stages: Sequence[Stage], quick: bool, results_dir: str | None, log_dir: str,
            progress: bool = True, timeout_s: float | None = None, stream: bool = False,
            jobs: int = 1, heartbeat_s: float = 60.0, out=None, protected_dir: str | None = None,
            estimates: Mapping[str, float] | None = None) -> list[StageResult]:
  """Runs the stages, `jobs` at a time; a failure is reported and the other stages still run.

  Progress goes to `out` (default stdout), one line per event: a stage starting (i/N, elapsed,
  ETA from the last run's timings of this mode when there are any), every `heartbeat_s` the
  last line of each running stage's log (its own progress inside a long stage), and each
  stage's result. With `progress=False` only the results are printed. `stream` shows each
  stage's whole output live and runs one stage at a time (interleaved output is unreadable).
  Ctrl-C stops the running stages and skips the rest (the summary is still written).
  `estimates` ({stage: seconds}, e.g. shipped quick-mode timings) stand in for the last run's
  timings when there are none. Returns one StageResult per stage, in the order of `stages`.
  """
  jobs = 1 if stream else max(1, int(jobs))
  results_dir = results_dir or default_results_dir(quick)
  protected = protected_dir or _results.RESULTS_DIR
  protect = quick and os.path.abspath(results_dir) != os.path.abspath(protected)
  # One snapshot around the whole run: with stages running at the same time, a per-stage
  # snapshot could take another stage's half-written file for a committed one.
  before = snapshot(protected) if protect else {}
  r = _Runner(stages, quick, results_dir, log_dir, progress, timeout_s, stream, jobs,
              heartbeat_s, out or sys.stdout, protected, estimates)
  try:
    while r.queue or r.running:
      r.start_more()
      finished = r.collect()
      r.heartbeat()
      if r.running and not finished:
        time.sleep(0.5)
  except KeyboardInterrupt:
    r.interrupt()
  finally:
    moved = give_back(before, protected, results_dir) if protect else []
    if moved:
      r.say(f"[reproduce] quick mode: moved {moved} from {rel(protected)} to "
            f"{rel(results_dir)} and restored the committed files")
  results = r.results()
  save_timings(log_dir, quick, results)
  return results
