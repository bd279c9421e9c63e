"""Metric writer: stride, JSONL/CSV agreement, NaN handling, seed averaging."""

import csv
import json

import numpy as np
import pytest

from jaxrl_suite.core import logging as mlog


def test_stride_and_formats(tmp_path):
  w = mlog.MetricWriter(str(tmp_path), stride=3)
  n = w.write_chunk(0, {"a": np.arange(7.0), "b": np.full((7, 2), np.nan)})
  assert n == 3  # steps 0, 2, 5
  rows = mlog.read_jsonl(w.jsonl_path)
  assert [r["step"] for r in rows] == [0, 2, 5]
  assert [r["a"] for r in rows] == [0.0, 2.0, 5.0]
  assert rows[0]["b"] is None  # all-NaN (no finished episode) is stored as null, not NaN
  with open(w.csv_path) as f:
    table = list(csv.DictReader(f))
  assert [float(r["a"]) for r in table] == [0.0, 2.0, 5.0]
  w.write_chunk(7, {"a": np.array([7.0, 8.0]), "b": np.array([[1.0, 3.0], [2.0, np.nan]])})
  rows = mlog.read_jsonl(w.jsonl_path)
  assert rows[-1] == {"step": 8, "a": 8.0, "b": 2.0}  # seeds averaged ignoring NaN


def test_plot_and_bad_stride(tmp_path):
  w = mlog.MetricWriter(str(tmp_path))
  w.write_chunk(0, {"returned_episode_returns": np.linspace(0, 1, 5)})
  png = mlog.plot_learning_curve(w.jsonl_path, str(tmp_path / "c.png"))
  assert open(png, "rb").read(4) == b"\x89PNG"
  with pytest.raises(ValueError, match="stride"):
    mlog.MetricWriter(str(tmp_path), stride=0)
