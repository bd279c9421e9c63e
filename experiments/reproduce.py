r"""Run every reproduction and write `results/SUMMARY.md` (one row per claim, with its verdict).

  python -m experiments.reproduce --quick              # smoke check of every stage (`make
                                                       # reproduce`), writes workdirs/results_quick/
  python -m experiments.reproduce                      # full mode (`make reproduce-full`)
  python -m experiments.reproduce --only=fore,ballast  # a subset
  python -m experiments.reproduce --quick --stream     # show each stage's own progress bar
  python -m experiments.reproduce --summary_only --readme   # rebuild SUMMARY.md + README block
  python -m experiments.reproduce --reanalyse          # re-judge the committed records

Each stage runs as its own process, `python -m experiments.<name> [--quick]`, so a crash in one
does not stop the others; its output goes to `workdirs/reproduce/<name>.log` (and to the terminal
with `--stream`) and the tail of that log is printed if it fails. A stage whose script does not
exist yet is skipped with a note. The exit status is non-zero if any stage failed (crashed, timed
out, or exited cleanly without writing a valid `<name>.json` of the requested mode where this
script reads it).

Quick mode is a smoke check of every stage's whole pipeline (train a little, evaluate, judge,
write the record and plot), not a small reproduction: its verdicts say nothing about the claims,
and its SUMMARY.md says so. Two stages run at once in quick mode (`--jobs`; a quick stage is
mostly single-threaded XLA compilation, so two share 2 cores well), the longest of the last run
first; full mode runs one at a time. Progress: a line per stage start (i/N, elapsed, ETA from
the last run's timings of that mode, kept in `workdirs/reproduce/timings_<mode>.json`), a line
per result, and every `--heartbeat_s` the last log line of each running stage.

Where results go: a stage never names its folder; the library does
(`jaxrl_suite.core.results.output_dir`), and this script hands each stage the folder it reads
through JAXRL_RESULTS_DIR: full mode `results/` (committed), quick mode
`workdirs/results_quick/` (with its own SUMMARY.md). A quick stage that writes into `results/`
anyway (a plot saved by a fixed path) has those files moved to the quick directory and the
committed ones put back, so `make reproduce` never changes a tracked file. Records of runs on
ad-hoc inputs (`adhoc_inputs`, e.g. `--eval_trace`) are never summarised.

The summary is generated from the records (never typed): reproduction, claim, paper's figure,
ours with 95% CI, verdict, links to `<name>.md`/`<name>.png`, and the mode (quick/full) and
commit of each record, so a stale or quick-mode number is visible as such. `--readme` rewrites
the block between `<!-- RESULTS:BEGIN -->` and `<!-- RESULTS:END -->` in README.md with a short
table (verdict counts per reproduction) and a link to `results/SUMMARY.md`.
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

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

from jaxrl_suite.core import results as _results  # noqa: E402  (needs REPO_ROOT on sys.path)
from jaxrl_suite.repro import summary as _summary  # noqa: E402

RESULTS_DIR = _results.RESULTS_DIR
QUICK_DIR = _results.QUICK_DIR
# The committed results: a quick stage must leave every file here as it found it.
PROTECTED_DIR = RESULTS_DIR
LOG_DIR = os.path.join(REPO_ROOT, "workdirs", "reproduce")
README_BEGIN = "<!-- RESULTS:BEGIN -->"
README_END = "<!-- RESULTS:END -->"
CROSSDOMAIN_PNG = "crossdomain.png"     # the cross-domain figure, next to SUMMARY.md


@dataclasses.dataclass(frozen=True)
class Stage:
  """One reproduction: `python -m <module> [--quick] <args>` writes `results/<name>.json`."""
  name: str
  module: str
  title: str = ""
  args: tuple[str, ...] = ()      # e.g. one trace of a per-trace study


# Mooncake routing's RL budget (RL-only config fields: the tuned baselines are unchanged).
MOONCAKE_RL_BUDGET = ("--config.num_seeds=2", "--config.budget_scale.scratch=1")

# The reproductions, in the order they run (cheap and foundational first).
REGISTRY: list[Stage] = [
    Stage("ppo_gymnax", "experiments.ppo_gymnax", "PPO on gymnax vs purejaxrl"),
    Stage("fore", "experiments.fore", "FORE off-policy evaluation"),
    Stage("serving_batching", "experiments.serving_batching", "LLM serving: batching, 1 GPU"),
    Stage("serving_routing", "experiments.serving_routing", "LLM serving: routing, N GPUs"),
    Stage("serving_routing_azure_code", "experiments.serving_routing",
          "LLM serving: routing, N GPUs, Azure code", ("--config.trace=azure_code",)),
    # quick ~400 s on 2 shared cores since the prefix-cache lookups touch only the slots an
    # event admits or finishes (it was ~1,950 s: docs/serving.md, "Prefix caching"). 2 seeds and
    # scratch PPO at 1x budget (quick mode's scratch too): at ~0.45 ms per cached event, 4 seeds
    # and the 4x scratch budget would train ~5 h on 2 cores (docs/serving.md, "Mooncake conv").
    Stage("serving_routing_mooncake_conv", "experiments.serving_routing",
          "LLM serving: routing, N GPUs, Mooncake (prefix cache)",
          ("--config.trace=mooncake_conv",) + MOONCAKE_RL_BUDGET),
    Stage("ballast", "experiments.ballast", "Ballast-water routing vs Dijkstra"),
    Stage("ballast_hydro", "experiments.ballast_hydro",
          "Ballast hydraulics: recurrent RL across layouts vs heel-aware Dijkstra"),
    Stage("direct_opd", "experiments.direct_opd", "Direct-OPD delta transfer"),
    Stage("compaction", "experiments.compaction", "CompactionRL: self-summarising agents"),
    Stage("stapo", "experiments.stapo", "STAPO: normalised entropy vs trajectory neglect"),
    Stage("cure", "experiments.cure", "Claim-level vs holistic caption rewards"),
    Stage("rail_pricing", "experiments.rail_pricing", "Rail pricing: relational MARL vs RM practice"),
]


# Quick-mode wall seconds of each stage run alone on 2 cores (measured; see the ETA note in
# run_all). Used only where workdirs/reproduce/ has no timings of an earlier quick run (a fresh
# clone): they order the stages (longest first, with two at a time) and give the first ETA.
QUICK_SECONDS: dict[str, float] = {   # 56d0582, fresh clone, two stages at a time
    "ppo_gymnax": 41, "fore": 50, "serving_batching": 73, "serving_routing": 179,
    "serving_routing_azure_code": 147, "serving_routing_mooncake_conv": 328, "ballast": 57,
    "ballast_hydro": 124, "direct_opd": 95, "compaction": 120, "stapo": 106, "cure": 156,
    "rail_pricing": 156,
}


@dataclasses.dataclass
class StageResult:
  name: str
  status: str           # "ok", "failed", "skipped"
  wall_s: float = 0.0
  note: str = ""
  log: str = ""
  cpu_s: float = 0.0    # user + system CPU of the stage's process tree (0 if not measured)


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------
def select(only: str | None, registry: Sequence[Stage] | None = None) -> list[Stage]:
  """The stages named in `only` (comma list, registry order kept); all of them if empty."""
  registry = REGISTRY if registry is None else registry
  if not only:
    return list(registry)
  wanted = [n.strip() for n in only.split(",") if n.strip()]
  names = {s.name for s in registry}
  unknown = [n for n in wanted if n not in names]
  if unknown:
    raise ValueError(f"unknown reproduction(s) {unknown}; known: {sorted(names)}")
  return [s for s in registry if s.name in wanted]


def module_exists(module: str) -> bool:
  try:
    return importlib.util.find_spec(module) is not None
  except ModuleNotFoundError:
    return False


def _tail(path: str, n: int = 25) -> str:
  try:
    with open(path, errors="replace") as f:
      return "".join(f.readlines()[-n:])
  except OSError:
    return ""


def default_results_dir(quick: bool) -> str:
  return QUICK_DIR if quick else RESULTS_DIR


def _snapshot(d: str) -> dict[str, bytes]:
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


def _give_back(before: Mapping[str, bytes], protected: str, dest: str) -> list[str]:
  """Moves files that a quick stage wrote into `protected` to `dest` and puts the originals
  back (or removes files that were not there). Returns the names moved."""
  moved = []
  for name, data in sorted(_snapshot(protected).items()):
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


def _rel(path: str) -> str:
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


def _fmt_s(s: float) -> str:
  s = int(round(s))
  return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _last_line(path: str, width: int = 100) -> str:
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


def run_stage(stage: Stage, quick: bool, results_dir: str | None = None,
              log_dir: str = LOG_DIR, extra_args: Sequence[str] = (),
              timeout_s: float | None = None, stream: bool = False,
              protect: bool | None = None, stop=None) -> StageResult:
  """Runs one reproduction in a subprocess; checks that it (re)wrote its results record.

  Its output goes to `<log_dir>/<name>.log` and, with `stream`, also to stderr (so the stage's
  own progress bar shows live). `results_dir` (default: results/ for full mode, the quick
  directory for quick mode) reaches the stage as JAXRL_RESULTS_DIR; in quick mode the committed
  results/ are protected (see the module docstring) unless `protect=False` (run_all protects
  them once around stages that run at the same time). `stop` (a threading.Event) ends the
  stage early when set (Ctrl-C in run_all).
  """
  if not module_exists(stage.module):
    return StageResult(stage.name, "skipped", note=f"{stage.module} does not exist yet")
  results_dir = results_dir or default_results_dir(quick)
  if protect is None:
    protect = quick and os.path.abspath(results_dir) != os.path.abspath(PROTECTED_DIR)
  before = _snapshot(PROTECTED_DIR) if protect else {}
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
    moved = _give_back(before, PROTECTED_DIR, results_dir) if protect else []
  if moved:
    with open(log_path, "a") as log:
      log.write(f"[reproduce] quick mode: moved {moved} from {PROTECTED_DIR} to {results_dir} "
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
  return result(stage.name, "ok", wall, f"{len(rec['claims'])} claim(s) in {_rel(record)}",
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
        proc.terminate()
        try:
          proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
          proc.kill()
          proc.wait()
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


def _schedule(stages: Sequence[Stage], last: Mapping[str, float], jobs: int) -> list[Stage]:
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
               heartbeat_s, out):
    import threading
    self.stages, self.quick, self.results_dir, self.log_dir = stages, quick, results_dir, log_dir
    self.progress, self.timeout_s, self.stream, self.jobs = progress, timeout_s, stream, jobs
    self.heartbeat_s, self.out = heartbeat_s, out
    self.last, self.source = load_timings(log_dir, quick), "last run's timings"
    if not self.last and quick and all(st.name in QUICK_SECONDS for st in stages):
      # a fresh clone: the shipped estimates order the stages and give the first ETA
      self.last, self.source = dict(QUICK_SECONDS), "shipped estimates"
    self.queue = _schedule(stages, self.last, jobs)
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
                      stop=self.stop)
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
    return f"ETA {_fmt_s(left / self.jobs)} ({self.source})"

  def _was(self, name: str, words: tuple[str, str]) -> str:
    """The word for the time shown for `name`: the shipped estimate's or the last run's."""
    return words[0 if self.source == "shipped estimates" else 1]

  def report(self, res: StageResult) -> None:
    self.reported.add(res.name)
    cpu = f", {res.cpu_s:.0f} CPU-s" if res.cpu_s else ""
    self.say(f"[{res.status}] {res.name} ({res.wall_s:.0f} s{cpu}) {res.note}"
             + (f"  [{len(self.reported)}/{self.n} done, "
                f"{_fmt_s(time.time() - self.t_start)} elapsed]" if self.progress else ""))
    if res.status == "failed" and res.log:
      self.say(f"  --- last lines of {res.log} ---\n" + _tail(res.log))

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
               f"{_fmt_s(self.last[stage.name])}" if stage.name in self.last else "")
        self.say(f"[{i}/{self.n}] {stage.name} started ({stage.title}{was}); "
                 f"{_fmt_s(time.time() - self.t_start)} elapsed, {self.eta()}")
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
      was = (f"/{_fmt_s(self.last[name])} {self._was(name, ('estimated', 'last run'))}"
             if name in self.last else "")
      log = os.path.join(self.log_dir, f"{name}.log")
      self.say(f"  ... {name}: {_fmt_s(time.time() - t0)}{was}: {_last_line(log)}")

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


def run_all(stages: Sequence[Stage], quick: bool, results_dir: str | None = None,
            log_dir: str = LOG_DIR, progress: bool = True,
            timeout_s: float | None = None, stream: bool = False, jobs: int = 1,
            heartbeat_s: float = 60.0, out=None) -> list[StageResult]:
  """Runs the stages, `jobs` at a time; a failure is reported and the other stages still run.

  Progress goes to `out` (default stdout), one line per event: a stage starting (i/N, elapsed,
  ETA from the last run's timings of this mode when there are any), every `heartbeat_s` the
  last line of each running stage's log (its own progress inside a long stage), and each
  stage's result. With `progress=False` only the results are printed. `stream` shows each
  stage's whole output live and runs one stage at a time (interleaved output is unreadable).
  Ctrl-C stops the running stages and skips the rest (the summary is still written).
  Returns one StageResult per stage, in the order of `stages`.
  """
  jobs = 1 if stream else max(1, int(jobs))
  results_dir = results_dir or default_results_dir(quick)
  protect = quick and os.path.abspath(results_dir) != os.path.abspath(PROTECTED_DIR)
  # One snapshot around the whole run: with stages running at the same time, a per-stage
  # snapshot could take another stage's half-written file for a committed one.
  before = _snapshot(PROTECTED_DIR) if protect else {}
  r = _Runner(stages, quick, results_dir, log_dir, progress, timeout_s, stream, jobs,
              heartbeat_s, out or sys.stdout)
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
    moved = _give_back(before, PROTECTED_DIR, results_dir) if protect else []
    if moved:
      r.say(f"[reproduce] quick mode: moved {moved} from {_rel(PROTECTED_DIR)} to "
            f"{_rel(results_dir)} and restored the committed files")
  results = r.results()
  save_timings(log_dir, quick, results)
  return results


# ------------------------------------------------------------------------------------------------
# Summary
# ------------------------------------------------------------------------------------------------
def load_records(results_dir: str = RESULTS_DIR,
                 order: Sequence[str] | None = None) -> list[dict]:
  """Every `results/*.json` record with claims, in registry order then alphabetical; records
  of runs on ad-hoc inputs (`adhoc_inputs`, e.g. --eval_trace) are left out."""
  return _summary.load_records(results_dir, [s.name for s in REGISTRY] if order is None
                               else list(order))


_cell = _summary.cell
verdict_counts = _summary.verdict_counts


def summary_table(records: Sequence[Mapping[str, Any]], results_dir: str = RESULTS_DIR,
                  link_prefix: str = "") -> str:
  """One row per claim of every record (jaxrl_suite.repro.summary.summary_table)."""
  return _summary.summary_table(records, results_dir, link_prefix)


def readme_table(records: Sequence[Mapping[str, Any]], results_dir: str = RESULTS_DIR,
                 link_prefix: str = "results/") -> str:
  """One row per reproduction with its verdict counts (jaxrl_suite.repro.summary)."""
  return _summary.readme_table(records, results_dir, link_prefix)


def write_summary(results_dir: str = RESULTS_DIR, run: Sequence[StageResult] = (),
                  registry: Sequence[Stage] | None = None) -> str:
  """Writes `<results_dir>/SUMMARY.md` from the records there; returns its path.

  The header names the folder the records were read from and, when any record is a quick one,
  says that its verdicts are smoke checks (the pipeline ran on a tiny budget), not results.
  """
  registry = REGISTRY if registry is None else registry
  records = load_records(results_dir, [s.name for s in registry])
  modes = sorted({r.get("mode", "?") for r in records})
  counts = verdict_counts(records)
  where = _rel(results_dir)
  lines = ["# Reproduction summary", "",
           f"Generated by `python -m experiments.reproduce` from the records in `{where}/` "
           "(`<name>.json`, one per reproduction); do not edit. "
           f"Modes present: {', '.join(modes) or 'none'} (quick mode is a CI smoke run; only "
           "full-mode rows are the reproductions' numbers).", ""]
  if "quick" in modes:
    lines += [f"**Quick mode: the verdicts below are smoke checks.** Each stage ran its whole "
              "pipeline (train a little, evaluate, judge, write the record and plot) on a tiny "
              "budget; they say nothing about the claims. The reproductions' numbers are the "
              f"full-mode records in `{_rel(RESULTS_DIR)}/` (`{_rel(RESULTS_DIR)}/SUMMARY.md`).",
              ""]
  lines += [_crossdomain(records, results_dir), "## Every claim", "",
            "Verdicts: " + _summary.counts_text(counts),
            "", summary_table(records, results_dir, link_prefix=""), ""]
  have = {r["name"] for r in records}
  missing = [s.name for s in registry if s.name not in have]
  if missing:
    lines += [f"No results yet for: {', '.join(missing)}.", ""]
  if run:
    lines += ["## Last run", "", "| reproduction | status | wall time | CPU time | note |",
              "|---|---|---|---|---|"]
    lines += [f"| {r.name} | {r.status} | {r.wall_s:.0f} s | {r.cpu_s:.0f} s | {_cell(r.note)} |"
              for r in run]
    lines.append("")
  os.makedirs(results_dir, exist_ok=True)
  path = os.path.join(results_dir, "SUMMARY.md")
  with open(path, "w") as f:
    f.write("\n".join(lines))
  return path


def _crossdomain(records: Sequence[Mapping[str, Any]], results_dir: str) -> str:
  """The cross-domain section (jaxrl_suite.repro.crossdomain) with its figure, drawn next to
  SUMMARY.md as crossdomain.png (removed when no row has an interval, so no stale plot stays)."""
  from jaxrl_suite.repro import crossdomain
  os.makedirs(results_dir, exist_ok=True)
  png = os.path.join(results_dir, CROSSDOMAIN_PNG)
  drawn = crossdomain.figure(records, png)
  if drawn is None and os.path.exists(png):
    os.remove(png)
  return crossdomain.section(records, CROSSDOMAIN_PNG if drawn else None)


def readme_table(records: Sequence[Mapping[str, Any]], results_dir: str = RESULTS_DIR,
                 link_prefix: str = "results/") -> str:
  """One row per reproduction: its number of claims and how many got each verdict (columns in
  `results.VERDICTS` order, a verdict no claim got left out), with links to its report/plot."""
  per: dict[str, list[Mapping[str, Any]]] = {}
  for rec in records:
    per.setdefault(rec.get("_file", rec["name"]), []).append(rec)
  used = [v for v in _results.ROW_VERDICTS if any(c.get("verdict") == v for rec in records
                                              for c in rec["claims"])]
  rows = ["| reproduction | claims | " + " | ".join(used) + " | details |",
          "|---|---:|" + "---:|" * len(used) + "---|"]
  for f, recs in per.items():
    claims = [c for rec in recs for c in rec["claims"]]
    links = [f"[report]({link_prefix}{f}.md)"]
    if os.path.exists(os.path.join(results_dir, f"{f}.png")):
      links.append(f"[plot]({link_prefix}{f}.png)")
    n = [sum(c.get("verdict") == v for c in claims) for v in used]
    rows.append(f"| {_cell(f)} | {len(claims)} | " + " | ".join(str(k) for k in n)
                + f" | {' '.join(links)} |")
  return "\n".join(rows)


def update_readme(readme_path: str, results_dir: str = RESULTS_DIR,
                  modes: Sequence[str] = ("full",)) -> bool:
  """Replaces the text between the RESULTS markers of README.md with a short block: the verdict
  counts per reproduction of the records whose mode is in `modes` (by default only full-mode
  numbers reach the README) and a link to `results/SUMMARY.md`, which has every claim.

  Returns True if the file changed. Raises ValueError if the markers are missing.
  """
  with open(readme_path) as f:
    text = f.read()
  records = [r for r in load_records(results_dir) if r.get("mode") in modes]
  have = {r["name"] for r in records}
  missing = [s.name for s in REGISTRY if s.name not in have]
  counts = verdict_counts(records)
  n_claims = sum(counts.values())
  block = (f"{README_BEGIN}\n<!-- generated by `python -m experiments.reproduce --summary_only "
           f"--readme` from results/*.json; do not edit by hand -->\n\n"
           f"Mode: {'/'.join(modes)}. {n_claims} claims; verdicts: "
           + _summary.counts_text(counts) + ". "
           "Every claim with the paper's figure, ours with its 95% CI and the verdict: "
           "[results/SUMMARY.md](results/SUMMARY.md).\n\n"
           + readme_table(records, results_dir, link_prefix="results/") + "\n\n"
           + (f"No {'/'.join(modes)}-mode results yet for: {', '.join(missing)}.\n\n"
              if missing else ""))
  new = _summary.replace_block(text, README_BEGIN, README_END, block, readme_path)
  if new != text:
    with open(readme_path, "w") as f:
      f.write(new)
  return new != text


def reanalyse(results_dir: str = RESULTS_DIR) -> int:
  """Re-judges every record in `results_dir` from its stored samples
  (`jaxrl_suite.repro.records.reanalyse`), prints its report; returns 0 when every verdict is
  the one recomputed, 1 on a mismatch, 2 when the folder or the library function is missing."""
  if not os.path.isdir(results_dir):
    print(f"--reanalyse: {results_dir} is not a directory; give --results_dir=<the folder "
          "holding <name>.json records> (default results/)", file=sys.stderr)
    return 2
  try:   # imported here: the summary and the runs do not need the reproduction layer
    from jaxrl_suite.repro.records import reanalyse as _reanalyse
  except ImportError as e:
    print(f"--reanalyse needs jaxrl_suite.repro.records.reanalyse, which this checkout lacks "
          f"({e}); update the checkout (it ships with the jaxrl_suite.repro package)",
          file=sys.stderr)
    return 2
  rep = _reanalyse(results_dir)
  print(rep.text())
  return 0 if rep.ok else 1


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
  import argparse
  p = argparse.ArgumentParser(description="Run the reproductions and write results/SUMMARY.md.")
  p.add_argument("--quick", action="store_true",
                 help="quick mode of every reproduction: a smoke check of each pipeline, "
                      "written to workdirs/results_quick/ (never results/)")
  p.add_argument("--only", default="", help="comma list of reproductions, e.g. fore,ballast")
  p.add_argument("--summary_only", action="store_true",
                 help="run nothing; rebuild SUMMARY.md from the existing results")
  p.add_argument("--readme", action="store_true",
                 help="also rewrite the RESULTS block of README.md (verdict counts per "
                      "reproduction and a link to results/SUMMARY.md)")
  p.add_argument("--readme_modes", default="full",
                 help="record modes counted in the README block (comma list; default full)")
  p.add_argument("--reanalyse", action="store_true",
                 help="run nothing; re-judge every record from its stored samples and exit "
                      "non-zero on a verdict that differs")
  p.add_argument("--results_dir", default=None,
                 help="where records are written and summarised (default: results/ in full "
                      "mode, workdirs/results_quick/ in quick mode)")
  p.add_argument("--log_dir", default=LOG_DIR)
  p.add_argument("--timeout_s", type=float, default=None, help="per-stage time limit")
  p.add_argument("--jobs", type=int, default=None,
                 help="stages run at once (default: 2 in quick mode, where each stage is mostly "
                      "single-threaded XLA compilation; 1 in full mode, whose stages use every "
                      "core)")
  p.add_argument("--heartbeat_s", type=float, default=60.0,
                 help="seconds between the lines that show each running stage's last log line")
  p.add_argument("--list", action="store_true", help="list the reproductions and exit")
  p.add_argument("--stream", action="store_true",
                 help="show each stage's own output (and progress bar) live, not only in its "
                      "log (runs one stage at a time)")
  p.add_argument("--no_progress", action="store_true")
  args = p.parse_args(argv)
  if args.list:
    for s in REGISTRY:
      print(f"{s.name:18s} {s.module:32s} {'' if module_exists(s.module) else '(missing) '}"
            f"{s.title}")
    return 0
  if args.reanalyse:
    return reanalyse(args.results_dir or RESULTS_DIR)
  stages = select(args.only)
  readme_dir = args.results_dir or RESULTS_DIR     # the README shows the committed results
  args.results_dir = args.results_dir or default_results_dir(args.quick)
  jobs = args.jobs if args.jobs is not None else (2 if args.quick else 1)
  results: list[StageResult] = []
  t0 = time.time()
  if not args.summary_only:
    print(f"{'quick' if args.quick else 'full'} mode: {len(stages)} stage(s), {jobs} at a time; "
          f"records go to {_rel(args.results_dir)}/, logs to {_rel(args.log_dir)}/", flush=True)
    results = run_all(stages, args.quick, args.results_dir, args.log_dir,
                      progress=not args.no_progress, timeout_s=args.timeout_s,
                      stream=args.stream, jobs=jobs, heartbeat_s=args.heartbeat_s)
  path = write_summary(args.results_dir, results)
  print(f"wrote {_rel(path)}" + (f" ({_fmt_s(time.time() - t0)} in all)" if results else ""))
  if args.quick:
    print(f"quick mode: records, reports and plots are in {_rel(args.results_dir)}/; their "
          f"verdicts are smoke checks of each pipeline, not reproductions (those are the "
          f"full-mode records in {_rel(RESULTS_DIR)}/)")
  if args.readme:
    changed = update_readme(os.path.join(REPO_ROOT, "README.md"), readme_dir,
                            tuple(m.strip() for m in args.readme_modes.split(",")))
    print("README.md results block " + ("updated" if changed else "unchanged"))
  failed = [r for r in results if r.status == "failed"]
  skipped = [r for r in results if r.status == "skipped"]
  if skipped:
    print(f"skipped (not written yet): {', '.join(r.name for r in skipped)}")
  if failed:
    print(f"FAILED: {', '.join(f'{r.name} ({r.note}; log {r.log})' for r in failed)}",
          file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
