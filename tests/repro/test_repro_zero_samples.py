"""Claims with no samples at all: a row with an inconclusive verdict and its reason, never a crash.

A testbed that cannot express a claim (or a stage that measured nothing) still owes the claim a
row; `claim_record` used to raise on 0 units (a NaN estimate reached the formatter).
"""

import json

import numpy as np
import pytest

from jaxrl_suite.core import results
from jaxrl_suite.repro import intervals, records
from jaxrl_suite.repro import verdicts as vd
from jaxrl_suite.repro.claims import Claim


def _claim(unit="seed", kind="superiority", **kw):
  return Claim(id=f"zero.{kind}.{unit.replace(' ', '_')}", text="t", paper="p",
               statistic="s", unit=unit, kind=kind, **kw)


CLAIMS = [
    _claim(),
    _claim(size=1.48, scale="log_ratio", why="headline"),
    _claim(kind="non_inferiority", margin=0.5, why="noise floor", fair_chance=True,
           flat_delta=0.25),
    _claim(kind="equivalence", margin=0.1, why="w"),
    _claim(kind="target", size=3.5, tolerance=0.2, scale="log_ratio", why="w"),
    _claim(unit="seed x window", size=1.2, scale="log_ratio", why="w"),
    _claim(unit="seed x episode", better="lower", min_effect=0.05, why="w"),
]
EMPTY = [([], []), ([], None), (np.zeros((0,)), np.zeros((0,)))]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
@pytest.mark.parametrize("a,b", EMPTY, ids=["pair", "effect", "ndarray"])
def test_cannot_express_with_zero_samples_is_inconclusive_for_that_reason(claim, a, b):
  row = records.claim_record(claim, a, b, cannot_express="no second tier in this testbed")
  assert row["verdict"] == vd.INCONCLUSIVE
  assert row["detail"].startswith(vd.CANNOT_EXPRESS)
  assert "no second tier in this testbed" in row["detail"]
  assert row["repro"]["cannot_express"] == "no second tier in this testbed"
  assert row["ci95"] is None and "nan" in row["ours"]
  back = json.loads(json.dumps(row, allow_nan=False))   # strict JSON: no bare NaN/inf
  assert records.check_row(back) is None
  assert records.rejudge(back).word == vd.INCONCLUSIVE


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_zero_samples_without_the_flag_is_underpowered_and_says_so(claim):
  row = records.claim_record(claim, [], [])
  assert row["verdict"] == vd.INCONCLUSIVE
  assert row["detail"].startswith(vd.UNDERPOWERED)
  assert "no samples" in row["detail"] and "0 seeds" in row["detail"]
  assert records.check_row(json.loads(json.dumps(row, allow_nan=False))) is None


def test_a_descriptive_claim_with_zero_samples_stays_descriptive():
  row = records.claim_record(_claim(kind="descriptive"), [], [])
  assert row["verdict"] == vd.DESCRIPTIVE


@pytest.mark.parametrize("method,params,scale", [
    ("t_mean", {}, "difference"), ("t_mean", {"scale": "log_ratio"}, "log_ratio"),
    ("paired_difference", {}, "difference"), ("log_ratio", {}, "log_ratio"),
    ("fieller", {}, "ratio"), ("crossed", {"transform": "log_ratio"}, "log_ratio"),
    ("crossed", {}, "difference")])
def test_no_units_interval_is_unbounded_on_the_methods_scale(method, params, scale):
  samples = {"x": []} if method == "t_mean" else {"a": [], "b": []}
  iv = intervals.compute(method, samples, params)
  assert iv.n_units == 0 and iv.scale == scale and iv.method == method
  assert np.isnan(iv.estimate) and iv.lo == -np.inf and iv.hi == np.inf


def test_one_empty_side_of_a_pair_is_still_an_error():
  # Zero units on one side only is a pairing bug, not "nothing measured".
  with pytest.raises(ValueError, match="paired"):
    intervals.compute("paired_difference", {"a": [1.0, 2.0], "b": []})


def test_zero_sample_rows_pass_the_results_schema(tmp_path):
  rows = [records.claim_record(c, [], [], cannot_express="not expressible") for c in CLAIMS]
  path = results.write_results("zero", mode="quick", config={}, seeds=[0], claims=rows,
                               wall_time_s=0.0, results_dir=str(tmp_path))
  with open(path) as f:
    results.validate_record(json.load(f))
  rep = records.reanalyse(str(tmp_path))
  assert rep.ok and rep.checked == len(rows) == rep.agree
