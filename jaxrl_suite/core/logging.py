"""Metric logging on the host: JSONL and CSV files with a stride, a progress bar, a plot.

Training runs jit in chunks of updates; each chunk returns stacked per-update metrics, and the
host loop hands them to `MetricWriter.write_chunk`, which keeps every `stride`-th update. This
avoids both per-step host callbacks inside jit and unbounded metric arrays (purejaxrl #13).
"""

from __future__ import annotations

import csv
import json
import math
import os
from typing import Mapping, Sequence

import numpy as np


class MetricWriter:
  """Appends scalar metrics to `<workdir>/metrics.jsonl` and `<workdir>/metrics.csv`."""

  def __init__(self, workdir: str, stride: int = 1):
    if stride < 1:
      raise ValueError(f"logging stride must be >= 1, got {stride}")
    os.makedirs(workdir, exist_ok=True)
    self.jsonl_path = os.path.join(workdir, "metrics.jsonl")
    self.csv_path = os.path.join(workdir, "metrics.csv")
    self.stride = stride
    self._fields: list[str] | None = None
    if os.path.exists(self.csv_path):
      with open(self.csv_path) as f:
        header = f.readline().strip()
      self._fields = header.split(",") if header else None

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
                        title: str = "") -> str:
  """Plots metrics against update step from a metrics.jsonl; returns the PNG path."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  rows = read_jsonl(jsonl_path)
  fig, ax = plt.subplots(figsize=(6, 3.5))
  for k in keys:
    pts = [(r["step"], r[k]) for r in rows if r.get(k) is not None]
    if pts:
      xs, ys = zip(*pts)
      ax.plot(xs, ys, label=k)
  ax.set_xlabel("update")
  ax.set_title(title)
  ax.legend()
  fig.tight_layout()
  fig.savefig(png_path, dpi=100)
  plt.close(fig)
  return png_path
