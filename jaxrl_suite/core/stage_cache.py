"""One cache for the finished stages of a run (tuning, a training run, pretrained params, an
evaluation), used by every reproduction: the scripts (through `repro.stage_cache`, which
re-exports this module) and the library's own studies (lm/: pretrained and warm-started params,
CuRe's scorers; train/rail: the rail pricing study's phases).

`cached_stage(name, config, fn, workdir)` returns `fn()`'s value, computing it only when no stored
value with the same key exists in `workdir`:

  key = sha256(canonical JSON of the stage's config  +  library fingerprint)[:16]

* the stage's config: a ConfigDict, dict, list or scalar, as JSON with sorted keys (ConfigDicts
  through `to_dict`, arrays as lists, tuples as lists, non-finite floats as "inf"/"nan"), so the
  same fields in any order, and `1` vs `np.int64(1)`, give one key. Pass only what the stage
  depends on: a stage keyed by RL-only fields would be recomputed when they change.
* the library fingerprint (`library_fingerprint`): sha256 of the path and bytes of every
  `jaxrl_suite/**/*.py`, so a value made by other library code (an env, a learner, a loss) is
  never reused; a change to an experiment script's plumbing alone keeps the cache (pass
  `extra_sources=[__file__]` to key on the script too).

Storage (no pickle anywhere, so a workdir copied from elsewhere can only yield data):
  `<workdir>/stages/<name>.<key>.json`  a value made of dicts (str keys), lists, str, int,
                                        float, bool, None: readable and diffable;
  `<workdir>/stages/<name>.<key>.npz`   anything holding arrays (numpy / jax leaves, tuples),
                                        through `core.tree_io` (npz + JSON, allow_pickle=False).
The value returned is always the one read back from the file (arrays come back as numpy arrays),
so a first run and a resumed run go on from identical data. Each file also holds the stage's
name, key, config, fingerprint and the wall time `fn` took, so a resumed run can report what
the cached stages cost when they ran (`run_stage(...).wall_s`).
Writes are atomic (a temporary file, then `os.replace`): an interrupted run leaves either the
old file or the new one. A damaged or foreign file raises `StageCacheError` naming the file
(delete it and rerun), rather than being silently recomputed or trusted.

Several processes may share one workdir (`--workers` of the scripts, `repro.entry`): a stage is
computed by the process that holds its lock, `<workdir>/locks/<name>.<key>.lock` (an advisory
`flock`, released by the kernel when its process ends, however it ends, so no lock outlives a
killed run). `run_stages` takes a list of independent stages: it computes the ones no other
process holds, then waits for the others and reads their values, so N processes looping over
the same list share it out. A process that finds a stage locked waits for it rather than
computing it twice; a stage whose holder died without storing it is computed by the next
process to take the lock. Nested stages must be taken in one order by every process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import math
import os
import re
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from jaxrl_suite.core import tree_io

FORMAT = "jaxrl_suite.stage_cache/1"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
_LIB_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class StageCacheError(ValueError):
  """A stored stage file is damaged, foreign, or from another stage; the message names it."""


@dataclasses.dataclass(frozen=True)
class StageResult:
  """A stage's value; `hit` whether it was read from `path`; `wall_s` the seconds `fn` took when
  it ran (in this process on a miss, in the run that stored it on a hit); `key` the cache key."""
  value: Any
  hit: bool
  wall_s: float
  path: str
  key: str


def canonical_json(config: Any) -> str:
  """The config as canonical JSON (sorted keys, no whitespace): equal configs, equal strings."""
  return json.dumps(_plain(config), sort_keys=True, separators=(",", ":"))


def _plain(x: Any) -> Any:
  if hasattr(x, "to_dict") and callable(x.to_dict):   # ml_collections.ConfigDict
    return _plain(x.to_dict())
  if isinstance(x, dict) or (hasattr(x, "items") and hasattr(x, "keys")):
    return {str(k): _plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_plain(v) for v in x]
  if isinstance(x, (np.ndarray, np.generic)) or type(x).__module__.startswith("jax"):
    return _plain(np.asarray(x).tolist())
  if isinstance(x, float) and not math.isfinite(x):
    return str(x)
  if x is None or isinstance(x, (bool, int, float, str)):
    return x
  raise TypeError(f"stage config: cannot key on a value of type {type(x).__name__} ({x!r:.60}); "
                  "pass plain numbers, strings, lists, dicts or ConfigDicts")


def library_fingerprint(root: str | None = None, extra_sources: Iterable[str] = ()) -> str:
  """sha256[:16] of the relative path and bytes of every .py file under `root` (default: the
  jaxrl_suite package), then of each file in `extra_sources` (e.g. the calling script)."""
  root = os.path.abspath(root or _LIB_ROOT)
  paths = []
  for d, dirs, files in os.walk(root):
    dirs[:] = [x for x in dirs if x != "__pycache__"]   # pruned in place: never walked
    paths += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".py")]
  h = hashlib.sha256()
  for rel in sorted(paths):
    h.update(rel.encode() + b"\0")
    with open(os.path.join(root, rel), "rb") as fh:
      h.update(fh.read() + b"\0")
  for path in extra_sources:
    with open(path, "rb") as fh:
      h.update(os.path.basename(path).encode() + b"\0" + fh.read() + b"\0")
  return h.hexdigest()[:16]


_PROCESS_FINGERPRINT: list[str] = []


def process_fingerprint() -> str:
  """`library_fingerprint()` taken once per process, at the first stage: the code a process
  imported does not change under it, so neither does its key (an edit to the library while a
  long run goes on would otherwise split its stages over two keys)."""
  if not _PROCESS_FINGERPRINT:
    _PROCESS_FINGERPRINT.append(library_fingerprint())
  return _PROCESS_FINGERPRINT[0]


def stage_key(config: Any, fingerprint: str) -> str:
  """sha256[:16] of the canonical config JSON and the library fingerprint."""
  blob = canonical_json(config) + "\0" + fingerprint
  return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _is_json(x: Any) -> bool:
  """Whether `x` round-trips through JSON unchanged (str-keyed dicts, lists, scalars)."""
  if isinstance(x, dict):
    return all(isinstance(k, str) for k in x) and all(_is_json(v) for v in x.values())
  if isinstance(x, list):
    return all(_is_json(v) for v in x)
  return x is None or isinstance(x, (bool, int, float, str))


def stage_paths(name: str, key: str, workdir: str) -> tuple[str, str]:
  """(json path, npz path) of stage `name` with `key` in `workdir`."""
  if (not isinstance(name, str) or not _NAME.match(name)
      or any(part in (".", "..") for part in name.split("/"))):
    raise ValueError(f"stage name {name!r}: use letters, digits, '_', '.', '-' (and '/' between "
                     "parts, e.g. 'rl/mappo')")
  base = os.path.join(workdir, "stages", f"{name}.{key}")
  return base + ".json", base + ".npz"


def _read(path: str, name: str, key: str) -> dict:
  try:
    if path.endswith(".json"):
      with open(path) as f:
        rec = json.load(f)
    else:
      rec = tree_io.load_tree(path)
  except Exception as e:   # JSONDecodeError, zipfile.BadZipFile, TreeFileError, OSError, ...
    raise StageCacheError(f"{path}: damaged stage cache file ({type(e).__name__}: "
                          f"{str(e)[:200]}); delete it and rerun to recompute stage "
                          f"{name!r}") from e
  if not isinstance(rec, dict) or rec.get("format") != FORMAT or "value" not in rec:
    raise StageCacheError(f"{path}: not a stage cache file written by {FORMAT} (fields "
                          f"{sorted(rec) if isinstance(rec, dict) else type(rec).__name__}); "
                          f"delete it and rerun to recompute stage {name!r}")
  if rec.get("name") != name or rec.get("key") != key:
    raise StageCacheError(f"{path}: holds stage {rec.get('name')!r} with key "
                          f"{rec.get('key')!r}, expected {name!r} / {key!r} (a renamed or "
                          "copied file); delete it and rerun")
  return rec


def _write(path: str, rec: dict) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  if path.endswith(".json"):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
      json.dump(rec, f)
    os.replace(tmp, path)
  else:
    tree_io.save_tree(path, rec)   # atomic too


@dataclasses.dataclass(frozen=True)
class Stage:
  """One entry of `run_stages`: `fn()`'s value stored as stage `name`, keyed by `config`."""
  name: str
  config: Any
  fn: Callable[[], Any]


def _stored(name: str, key: str, workdir: str) -> StageResult | None:
  for path in stage_paths(name, key, workdir):
    if os.path.exists(path):
      rec = _read(path, name, key)
      return StageResult(rec["value"], True, float(rec.get("wall_s", 0.0)), path, key)
  return None


def _lock_path(name: str, key: str, workdir: str) -> str:
  stage_paths(name, key, workdir)   # validates the name
  return os.path.join(workdir, "locks", f"{name}.{key}.lock")


def _compute(stage: Stage, key: str, fingerprint: str, workdir: str) -> StageResult:
  t0 = time.time()
  value = stage.fn()
  wall = time.time() - t0
  jpath, npath = stage_paths(stage.name, key, workdir)
  path = jpath if _is_json(value) else npath
  rec = {"format": FORMAT, "name": stage.name, "key": key, "fingerprint": fingerprint,
         "config": _plain(stage.config), "wall_s": wall, "value": value}
  try:
    _write(path, rec)
  except TypeError as e:   # tree_io: a non-str dict key or an object leaf
    raise TypeError(f"stage {stage.name!r}: its value cannot be stored without pickle ({e}); "
                    "return dicts with str keys, lists, tuples, numbers, strings and "
                    "arrays") from e
  # What a resumed run would read (numpy arrays, not jax ones): a first run and a resumed run
  # compute from identical data, and every run exercises the read path.
  return StageResult(_read(path, stage.name, key)["value"], False, wall, path, key)


@contextlib.contextmanager
def file_lock(path: str, wait: bool = True) -> Iterator[bool]:
  """An advisory exclusive `flock` on `path` (created if missing) for the `with` block: yields
  True once held, or False at once when `wait` is False and another process holds it. The
  kernel releases it when the block ends or the process dies, however it dies. For caches kept
  outside this module (a study's own files) that processes sharing a workdir must fill once."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
      yield False
      return
    yield True
  finally:
    os.close(fd)   # releases the lock


def each_under_lock(items: Sequence[Any], lock_of: Callable[[Any], str],
                    fn: Callable[[Any], None],
                    on_wait: Callable[[Any], None] | None = None) -> None:
  """fn(item) for every item while holding its `file_lock(lock_of(item))`: first each item no
  other process holds, then the others, waiting for each (`on_wait(item)` first). So processes
  walking the same items take different ones; `fn` must skip work a holder before it finished
  (read its stored result instead)."""
  busy = []
  for item in items:
    with file_lock(lock_of(item), wait=False) as held:
      if held:
        fn(item)
      else:
        busy.append(item)
  for item in busy:
    if on_wait is not None:
      on_wait(item)
    with file_lock(lock_of(item)):
      fn(item)


def run_stages(stages: Sequence[Stage], workdir: str, *, fingerprint: str | None = None,
               on_wait: Callable[[Stage], None] | None = None) -> list[StageResult]:
  """Each stage's stored or computed value (`run_stage`), in order, for independent stages.

  Every stored stage is read; the others are computed under their locks (`each_under_lock`):
  first those no other process holds, then the rest, waited for (`on_wait(stage)` first, when
  it is still unstored) and read, or computed if their holder died without storing them. So
  processes that call `run_stages` on the same list and workdir compute each stage once
  between them."""
  fingerprint = process_fingerprint() if fingerprint is None else fingerprint
  keys = [stage_key(s.config, fingerprint) for s in stages]
  out = [_stored(s.name, k, workdir) for s, k in zip(stages, keys)]

  def fill(i):   # under stage i's lock: the holder before us may have stored it
    out[i] = (_stored(stages[i].name, keys[i], workdir)
              or _compute(stages[i], keys[i], fingerprint, workdir))

  def waiting(i):
    if on_wait is not None and _stored(stages[i].name, keys[i], workdir) is None:
      on_wait(stages[i])

  each_under_lock([i for i, r in enumerate(out) if r is None],
                  lambda i: _lock_path(stages[i].name, keys[i], workdir), fill, waiting)
  return out


def run_stage(name: str, config: Any, fn: Callable[[], Any], workdir: str, *,
              fingerprint: str | None = None) -> StageResult:
  """`fn()` or its stored value for the same stage config and library (module doc).

  name: the stage (file-name safe; '/' makes a sub-folder). config: what the stage's result
  depends on. fn: computes the value (pure data: dicts, lists, scalars, arrays). workdir: where
  `stages/` lives. fingerprint: the library fingerprint (default `process_fingerprint()`).
  A stage another process is computing is waited for, then read.
  """
  return run_stages([Stage(name, config, fn)], workdir, fingerprint=fingerprint)[0]


def cached_stage(name: str, config: Any, fn: Callable[[], Any], workdir: str, *,
                 fingerprint: str | None = None) -> Any:
  """The stage's value (see `run_stage` for the hit flag and the stored wall time)."""
  return run_stage(name, config, fn, workdir, fingerprint=fingerprint).value


def optional_stages(stages: Sequence[Stage], workdir: str | None,
                    timing: dict | None = None) -> list:
  """The values of independent long-run segments (`optional_stage`, one list): with workdir
  None each `fn()` in order; else `run_stages`, so processes sharing the workdir split them
  (module doc). Each stored segment read back adds the seconds it cost when it ran to
  timing["cached_s"] and says so on stdout, as does each wait for another process."""
  if workdir is None:
    return [s.fn() for s in stages]
  waited = lambda s: print(f"{s.name}: another process is computing it; waiting", flush=True)
  values = []
  for r, s in zip(run_stages(stages, workdir, on_wait=waited), stages):
    if r.hit:
      if timing is not None:
        timing["cached_s"] = timing.get("cached_s", 0.0) + r.wall_s
      print(f"{s.name}: read back ({r.wall_s:.0f} s when it ran)", flush=True)
    values.append(r.value)
  return values


def optional_stage(name: str, config: Any, fn: Callable[[], Any], workdir: str | None,
                   timing: dict | None = None) -> Any:
  """A long run's segment (a sweep cell, a budget checkpoint) as a stage, so a stopped run
  resumes from its last finished segment: `run_stage(...).value`, or `fn()` itself when
  `workdir` is None (no cache). A stored segment read back adds the seconds it cost when it
  ran to timing["cached_s"] and says so on stdout. A segment that carries a pytree (a train
  state) stores `jax.tree.leaves(tree)`; the caller rebuilds it with
  `jax.tree.unflatten(jax.tree.structure(fresh_init), leaves)`."""
  return optional_stages([Stage(name, config, fn)], workdir, timing)[0]
