"""Metric logging on the host: JSONL, CSV and TensorBoard files with a stride, and a plot.

Training runs jit in chunks of updates; each chunk returns stacked per-update metrics, and the
host loop hands them to `MetricWriter.write_chunk`, which keeps every `stride`-th update. This
avoids both per-step host callbacks inside jit and unbounded metric arrays (purejaxrl #13).

Resume: `MetricWriter(workdir, start_step=k)` first drops the rows of steps >= k from the JSONL
and CSV files (a run killed between checkpoints wrote rows that the resumed run writes again),
and its TensorBoard writer starts with `purge_step=k`, which tells TensorBoard to discard the
older event files' points at steps >= k. So every file holds each step once.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Mapping, Sequence

import numpy as np

from jaxrl_suite.core import plotting


class MetricWriter:
  """Appends scalar metrics to `<workdir>/metrics.jsonl` and `<workdir>/metrics.csv`."""

  def __init__(self, workdir: str, stride: int = 1, start_step: int | None = None,
               tensorboard: bool = False):
    """`start_step`: drop rows of steps >= start_step first (resume); `tensorboard`: also write
    TensorBoard event files (tensorboardX, no TensorFlow) into `workdir`."""
    if stride < 1:
      raise ValueError(f"logging stride must be >= 1, got {stride}")
    os.makedirs(workdir, exist_ok=True)
    self.workdir = workdir
    self.jsonl_path = os.path.join(workdir, "metrics.jsonl")
    self.csv_path = os.path.join(workdir, "metrics.csv")
    self.stride = stride
    self._fields: list[str] | None = None
    if start_step is not None:
      truncate_metrics(workdir, start_step)
    if os.path.exists(self.csv_path):
      with open(self.csv_path) as f:
        header = f.readline().strip()
      self._fields = header.split(",") if header else None
    self._tb = None
    if tensorboard:
      from tensorboardX import SummaryWriter  # lazy: only runs that log to TensorBoard need it
      self._tb = SummaryWriter(logdir=workdir, purge_step=start_step or None,
                               flush_secs=30)

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    row = {"step": int(step)}
    row.update({k: _scalar(v) for k, v in metrics.items()})
    with open(self.jsonl_path, "a") as f:
      f.write(json.dumps(row) + "\n")
    if self._fields is None:
      self._fields = list(row)
      with open(self.csv_path, "w", newline="") as f:
        csv.writer(f).writerow(self._fields)
    with open(self.csv_path, "a", newline="") as f:
      csv.writer(f).writerow([row.get(k, "") for k in self._fields])
    if self._tb is not None:
      for k, v in row.items():
        if k != "step" and v is not None:
          self._tb.add_scalar(k, v, global_step=int(step))

  def flush(self) -> None:
    if self._tb is not None:
      self._tb.flush()

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
      self._tb = None

  def write_chunk(self, first_step: int, metrics: Mapping[str, np.ndarray]) -> int:
    """Writes rows for updates first_step .. first_step+n-1 whose index is a stride multiple.

    `metrics` maps names to arrays [n] (or [n, seeds], averaged over seeds). Returns rows written.
    """
    arrays = {k: np.asarray(v) for k, v in metrics.items()}
    n = len(next(iter(arrays.values())))
    written = 0
    for i in range(n):
      step = first_step + i
      if (step + 1) % self.stride == 0 or step == 0:
        self.write(step, {k: _nanmean(v[i]) for k, v in arrays.items()})
        written += 1
    return written


def truncate_metrics(workdir: str, start_step: int) -> int:
  """Removes the rows of steps >= start_step from metrics.{jsonl,csv}; returns rows kept.

  Each file is rewritten to a temporary name and renamed, so a kill mid-way leaves either the
  old or the new file, never half of one.
  """
  kept = 0
  jsonl = os.path.join(workdir, "metrics.jsonl")
  if os.path.exists(jsonl):
    with open(jsonl) as f:
      lines = [l for l in f if l.strip()]
    good = []
    for l in lines:
      try:
        if json.loads(l)["step"] < start_step:
          good.append(l)
      except (json.JSONDecodeError, KeyError, TypeError):
        pass   # a row cut by a kill mid-write
    _replace(jsonl, "".join(good))
    kept = len(good)
  path = os.path.join(workdir, "metrics.csv")
  if os.path.exists(path):
    with open(path, newline="") as f:
      rows = list(csv.reader(f))
    if rows:
      head, body = rows[0], rows[1:]
      i = head.index("step") if "step" in head else 0
      body = [r for r in body if len(r) == len(head) and _int_or_none(r[i]) is not None
              and _int_or_none(r[i]) < start_step]
      buf = io.StringIO()
      csv.writer(buf).writerows([head] + body)
      _replace(path, buf.getvalue())
  return kept


def _int_or_none(s: str) -> int | None:
  try:
    return int(s)
  except ValueError:
    return None


def _replace(path: str, text: str) -> None:
  tmp = path + ".tmp"
  with open(tmp, "w", newline="") as f:
    f.write(text)
  os.replace(tmp, path)


def _nanmean(x) -> float:
  x = np.asarray(x, dtype=np.float64)
  return float(np.nanmean(x)) if x.size and not np.all(np.isnan(x)) else float("nan")


def _scalar(v) -> float | None:
  v = float(np.asarray(v))
  return None if math.isnan(v) else v


def read_jsonl(path: str) -> list[dict]:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def plot_learning_curve(jsonl_path: str, png_path: str,
                        keys: Sequence[str] = ("returned_episode_returns",),
                        title: str = "", x_key: str = "step", xlabel: str | None = None,
                        ylabel: str | None = None) -> str:
  """Plots metrics against `x_key` (a column of the rows: "step" = update, or "env_steps")
  from a metrics.jsonl; returns the PNG path.

  Rows without `x_key` (written before the column existed) fall back to "step". Axis labels
  default to the column names: the x column, and the metric when one is plotted ("value" for
  several, told apart by the legend).
  """
  plt = plotting.pyplot()
  rows = read_jsonl(jsonl_path)
  if any(r.get(x_key) is None for r in rows):
    x_key = "step"
  fig, ax = plt.subplots(figsize=(6, 3.5))
  for k in keys:
    pts = [(r[x_key], r[k]) for r in rows if r.get(k) is not None]
    if pts:
      xs, ys = zip(*pts)
      ax.plot(xs, ys, label=k)
  ax.set_xlabel(xlabel if xlabel and x_key != "step" else
                {"step": "update", "env_steps": "env steps"}.get(x_key, x_key))
  ax.set_ylabel(ylabel or (keys[0] if len(keys) == 1 else "value"))
  ax.set_title(title)
  if len(keys) > 1:
    ax.legend()
  plotting.save_figure(fig, png_path, dpi=100)
  return png_path
