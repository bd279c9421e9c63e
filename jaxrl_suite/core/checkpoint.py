"""Checkpoints of whole runner states with orbax's `CheckpointManager` (V0 `args` API).

A runner state (parameters, optimiser state, environment state, PRNG keys, counters) is one
pytree; saving and restoring it lets a run that was interrupted after update k resume and end with
exactly the parameters of an uninterrupted run.

Safety: orbax writes each step into a temporary directory and renames it when complete, so an
interrupted save never replaces good data; saving a step that already exists is refused; a
missing, truncated or corrupted checkpoint raises `CheckpointError` naming the path.

Quiet: orbax logs every file it writes at INFO (most of a stage's log) and, on unreadable data,
ERROR lines and straggling TensorStore callbacks ("Event loop is closed" tracebacks) before the
exception that this module turns into its two-line `CheckpointError`. Importing this module
drops orbax's INFO/DEBUG records; its warnings and errors raised while a step is read are held
back and shown only if the read succeeds (when it fails, the CheckpointError says it all), and
asyncio's "Future exception was never retrieved" records for the abandoned TensorStore reads are
dropped whenever they come.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from typing import Any

import jax
import orbax.checkpoint as ocp


class CheckpointError(RuntimeError):
  """A checkpoint could not be read or written; the message names the path and what to do."""


_ORBAX_DIR = os.path.dirname(os.path.abspath(ocp.__file__))


class _OrbaxLogFilter(logging.Filter):
  """On absl's logger (orbax logs through absl.logging): drops orbax's records below WARNING;
  while `held` is a list (a read in progress), moves orbax's other records into it."""

  def __init__(self):
    super().__init__("jaxrl_suite.orbax_quiet")
    self.held: list[logging.LogRecord] | None = None
    self.lock = threading.Lock()

  def filter(self, record: logging.LogRecord) -> bool:
    if not os.path.abspath(record.pathname).startswith(_ORBAX_DIR):
      return True
    if record.levelno < logging.WARNING:
      return False
    with self.lock:
      if self.held is not None:
        self.held.append(record)
        return False
    return True


def _install_orbax_filter() -> _OrbaxLogFilter:
  logger = logging.getLogger("absl")
  for f in logger.filters:   # once per process (a module reload must not stack filters)
    if isinstance(f, logging.Filter) and f.name == "jaxrl_suite.orbax_quiet":
      return f
  f = _OrbaxLogFilter()
  logger.addFilter(f)
  return f


_FILTER = _install_orbax_filter()


def _straggler_hook(previous):
  """sys.unraisablehook that drops the RuntimeError('Event loop is closed') which TensorStore
  reads still in flight raise when orbax has already closed its event loop after a failed read
  (harmless: the read's error was raised; each would print a 6-line traceback)."""

  def hook(unraisable):
    exc = unraisable.exc_value
    if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
      return
    previous(unraisable)

  hook._jaxrl_orbax = True
  return hook


if not getattr(sys.unraisablehook, "_jaxrl_orbax", False):
  sys.unraisablehook = _straggler_hook(sys.unraisablehook)


class _TensorStoreFutureFilter(logging.Filter):
  """On asyncio's logger: drops "Future exception was never retrieved" for TensorStore reads.

  After a failed read orbax abandons the sibling reads of the same step; when those futures are
  garbage-collected (at any later time, often at exit, so `_quiet_read` cannot hold them) asyncio
  logs each one with the whole TensorStore spec, 70+ lines that repeat the error the
  CheckpointError already named. Other asyncio errors pass.
  """

  def __init__(self):
    super().__init__("jaxrl_suite.tensorstore_futures")

  def filter(self, record: logging.LogRecord) -> bool:
    msg = record.getMessage()
    return not ("exception was never retrieved" in msg and "tensorstore_spec" in msg)


def _install_asyncio_filter() -> None:
  logger = logging.getLogger("asyncio")
  if not any(f.name == "jaxrl_suite.tensorstore_futures" for f in logger.filters
             if isinstance(f, logging.Filter)):
    logger.addFilter(_TensorStoreFutureFilter())


_install_asyncio_filter()


@contextlib.contextmanager
def _quiet_read(show_on_success: bool = True):
  """Holds orbax's warnings/errors during a read: shown if it succeeds (unless not
  `show_on_success`: listing steps parses each step's metadata file, and a corrupt one is
  reported, naming its path, when that step is read), dropped if it raises."""
  with _FILTER.lock:
    outer = _FILTER.held
    _FILTER.held = [] if outer is None else outer
  ok = False
  try:
    yield
    ok = True
  finally:
    with _FILTER.lock:
      held, _FILTER.held = _FILTER.held, outer
    if ok and show_on_success and outer is None:
      for record in held:
        logging.getLogger("absl").handle(record)


class Checkpointer:
  """Saves every call to `save`, keeps the last `max_to_keep` steps, restores the latest.

    ckpt = Checkpointer(workdir + "/checkpoints", max_to_keep=3)
    ckpt.save(step, runner_state, metadata={"config": config.to_dict()})
    if ckpt.latest_step() is not None:
      runner_state = ckpt.restore(ckpt.latest_step(), like=runner_state)
  """

  def __init__(self, directory: str, max_to_keep: int = 3):
    if max_to_keep < 1:
      raise ValueError(f"max_to_keep must be >= 1, got {max_to_keep}")
    self.directory = os.path.abspath(directory)
    with _quiet_read(show_on_success=False):
      self._manager = ocp.CheckpointManager(
          self.directory,
          options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True),
          item_names=("state", "metadata"))

  def all_steps(self) -> list[int]:
    with _quiet_read(show_on_success=False):
      self._manager.reload()
      return list(self._manager.all_steps())

  def latest_step(self) -> int | None:
    with _quiet_read(show_on_success=False):
      return self._manager.latest_step()

  def step_path(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def save(self, step: int, state: Any, metadata: dict | None = None) -> None:
    if step in self.all_steps():
      raise CheckpointError(f"checkpoint step {step} already exists at {self.step_path(step)}; "
                            "refusing to overwrite it (delete it by hand if you mean to)")
    self._manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state),
        metadata=ocp.args.JsonSave(json.loads(json.dumps(metadata or {}, default=str)))))
    self._manager.wait_until_finished()

  def restore(self, step: int, like: Any) -> Any:
    """Restores step `step` into the structure, shapes, dtypes and shardings of `like`."""
    path = self.step_path(step)
    if step not in self.all_steps() or not os.path.isdir(path):
      raise CheckpointError(f"no checkpoint for step {step} at {path}; available steps: "
                            f"{self.all_steps() or 'none'}")
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
    try:
      with _quiet_read():
        out = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract)))
    except Exception as e:  # orbax raises many types for unreadable data; name the path.
      others = [s for s in self.all_steps() if s != step]
      raise CheckpointError(
          f"checkpoint at {path} is unreadable (truncated or corrupted: {_first_line(e)})\n"
          + (f"delete that directory to resume from step {max(others)}, or use a new workdir"
             if others else "delete it to start over, or use a new workdir")) from e
    return out.state

  def metadata(self, step: int) -> dict:
    path = self.step_path(step)
    try:
      with _quiet_read():
        out = self._manager.restore(step,
                                    args=ocp.args.Composite(metadata=ocp.args.JsonRestore()))
    except Exception as e:
      others = [s for s in self.all_steps() if s != step]
      raise CheckpointError(
          f"checkpoint metadata at {path} is unreadable ({_first_line(e)})\n"
          + (f"delete that directory to resume from step {max(others)}, or use a new workdir"
             if others else "delete it to start over, or use a new workdir")) from e
    return dict(out.metadata or {})

  def close(self) -> None:
    self._manager.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _first_line(e: BaseException, limit: int = 160) -> str:
  """`Type: first line` of an exception: orbax/TensorStore errors can span hundreds of lines."""
  lines = [l for l in str(e).splitlines() if l.strip()]
  text = lines[0] if lines else ""
  return f"{type(e).__name__}: {text[:limit]}{'...' if len(text) > limit else ''}"


def restore_latest(directory: str, like: Any) -> tuple[Any, int]:
  """Restores the newest checkpoint in `directory`. Raises CheckpointError if there is none."""
  if not os.path.isdir(directory):
    raise CheckpointError(f"checkpoint directory {os.path.abspath(directory)} does not exist")
  with Checkpointer(directory) as ckpt:
    step = ckpt.latest_step()
    if step is None:
      raise CheckpointError(f"no checkpoints in {os.path.abspath(directory)}")
    return ckpt.restore(step, like), step
