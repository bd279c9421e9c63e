"""repro.grid: a claim about where an effect is reachable, judged on one grid of conditions.
Known answers for each verdict, the registration checks, and the reanalysis of a grid row
(a tampered cell is a mismatch)."""

import copy

import numpy as np
import pytest

from jaxrl_suite.repro import Claim, grid, records

CLAIM = Claim(id="t.grid.v1", text="32% reachable only against the weak baseline",
              paper="test", statistic="ours / reference per unit", unit="seed",
              kind="superiority", better="lower", scale="log_ratio", size=0.68, why="test")
EXPECTED = {"strong fine": False, "weak fine": True, "strong coarse": True}


def _cells(ratios, n=10, sd=0.01, seed=0):
  """Per-unit (ours, reference) with ours / reference = the cell's ratio (lognormal noise)."""
  rng = np.random.default_rng(seed)
  out = {}
  for k, r in ratios.items():
    ref = 20.0 + rng.normal(0, 1, n)
    out[k] = ((ref * r * np.exp(rng.normal(0, sd, n))).tolist(), ref.tolist())
  return out


@pytest.mark.parametrize("ratios, word", [
    ({"strong fine": 0.90, "weak fine": 0.55, "strong coarse": 0.75}, "reproduced"),
    ({"strong fine": 0.55, "weak fine": 0.55, "strong coarse": 0.75}, "contradicted"),
    ({"strong fine": 0.90, "weak fine": 0.85, "strong coarse": 0.80}, "not reproduced"),
    ({"strong fine": 0.68, "weak fine": 0.85, "strong coarse": 0.80}, "inconclusive"),
])
def test_grid_verdicts_have_known_answers(ratios, word):
  row = grid.grid_record(CLAIM, _cells(ratios), EXPECTED)
  assert row["verdict"] == word, row["detail"]
  assert records.check_row(row) is None
  if word == "inconclusive":
    assert row["detail"].startswith("underpowered") and "strong fine" in row["detail"]


def test_a_tampered_cell_is_a_reanalysis_mismatch():
  row = grid.grid_record(CLAIM, _cells({"strong fine": 0.90, "weak fine": 0.55,
                                        "strong coarse": 0.75}), EXPECTED)
  bad = copy.deepcopy(row)
  bad["repro"]["grid"]["cells"]["strong fine"]["samples"]["a"] = (
      np.asarray(bad["repro"]["grid"]["cells"]["strong fine"]["samples"]["b"]) * 0.5).tolist()
  why = records.check_row(bad)
  assert why is not None and "verdict" in why


def test_grid_registration_is_checked():
  cells = _cells({"strong fine": 0.9, "weak fine": 0.5, "strong coarse": 0.7})
  with pytest.raises(ValueError, match="one expectation per cell"):
    grid.grid_record(CLAIM, cells, {"strong fine": False, "weak fine": True})
  with pytest.raises(ValueError, match="expected to reach the size and cells expected to miss"):
    grid.grid_record(CLAIM, cells, {k: True for k in cells})
  desc = Claim(id="t.d.v1", text="x", paper="x", statistic="x", unit="seed", kind="descriptive")
  with pytest.raises(ValueError, match="superiority"):
    grid.grid_record(desc, cells, EXPECTED)
