"""Known answers for the STAPO study's host-side stages (lm/stapo_study.py, lm/stapo_report.py):
detection metrics of one seed, their summary over seeds, the sweep's stop rule, the report's
smoothing, number formatting, summary table and payload."""

import numpy as np
import pytest

from jaxrl_suite.lm import stapo
from jaxrl_suite.lm import stapo_report
from jaxrl_suite.lm import stapo_study


def _det_arrays():
  """One seed's steps [1, 4]: the last step invalid; labels on steps 0 and 1."""
  valid = np.array([[True, True, True, False]])
  label = np.array([[True, True, False, False]])
  labels = np.zeros((1, 4, 4), bool)
  labels[0, 0, 0] = labels[0, 1, 2] = True
  return {"valid": valid, "label": label, "labels": labels,
          "h": np.array([[0.9, 0.1, 0.5, 7.0]]), "z": np.array([[3.0, 2.0, 1.0, 9.0]]),
          "ratio": np.array([[1.0, 2.0, 3.0, 0.0]]),
          "flag": np.array([[True, False, True, False]]),
          "flag_raw": np.array([[True, False, False, True]]),
          "count": np.array([[2, 1, 3, 5]]), "others": np.array([[1.0, np.nan, 3.0, 9.0]]),
          "source": np.array([[stapo.SOURCE_EMA, stapo.SOURCE_TASK, stapo.SOURCE_GROUP, 0]]),
          "success": np.array([True]), "optimal": np.array([[True, False, False, True]])}


def test_det_row_known_answers():
  r = stapo_study.det_row(_det_arrays())
  assert r["auroc_z"] == 1.0 and r["auroc_ratio"] == 0.0 and r["auroc_raw"] == 0.5
  assert r["precision_flag"] == 0.5 and r["precision_raw"] == 1.0
  assert r["flagged"] == pytest.approx(2 / 3) and r["flagged_raw"] == pytest.approx(1 / 3)
  assert r["recall_flag"] == 0.5 and r["recall_raw"] == 0.5
  assert r["flagged_unlabelled"] == 1.0        # the one unlabelled valid step is flagged
  assert r["base_rate"] == pytest.approx(2 / 3) and r["success"] == 1.0
  assert r["optimal"] == pytest.approx(1 / 3)
  assert r["share_recurring"] == pytest.approx(2 / 3)
  assert r["mean_others"] == 2.0                # NaN (no other member) is skipped
  assert r["share_ema"] == pytest.approx(1 / 3) and r["share_task"] == pytest.approx(1 / 3)
  assert r["label_rates"] == pytest.approx([1 / 3, 0.0, 1 / 3, 0.0])


def test_summarise_detection_applies_ci_per_metric():
  rows = [{"auroc_z": 0.5, "label_rates": [0.0, 1.0]}, {"auroc_z": 0.7, "label_rates": [1.0, 0.0]}]
  out = stapo_study.summarise_detection(rows, lambda x: [float(np.mean(x)), min(x), max(x)])
  assert out["per_seed"] is rows
  assert out["auroc_z"] == pytest.approx([0.6, 0.5, 0.7])
  assert out["label_rates"] == [0.5, 0.5]


def test_sweep_stops_only_when_every_flat_method_is_done():
  assert not stapo_study._is_done({})
  assert stapo_study._is_done({"grpo": {"state": "flat"}, "gigpo": {"state": "degrading"}})
  assert not stapo_study._is_done({"grpo": {"state": "flat"}, "gigpo": {"state": "rising"}})


def test_smooth_is_a_trailing_mean():
  c = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 6.0, 0.0]])
  np.testing.assert_allclose(stapo_report.smooth(c, 2), [[1.0, 1.5, 2.5, 3.5],
                                                          [0.0, 0.0, 3.0, 3.0]])
  np.testing.assert_allclose(stapo_report.smooth(c, 1), c)


def test_show_scales_and_rounds():
  assert stapo_report.show([0.12345, 0.1, 0.2], 100) == "12.3 [10, 20]"
  assert stapo_report.show([1, 0, 2]) == "1 [0, 2]"


def test_summary_table_and_payload():
  ci = lambda x: [float(np.mean(x)), float(np.min(x)), float(np.max(x))]  # noqa: E731
  tr = {"ev": {"stapo": {"success": np.array([0.5, 0.7])}},
        "start": {"success": np.array([0.25, 0.25])},
        "val": {"stapo": {"success": np.array([[0.1, 0.3], [0.4, 0.6]])}},       # [K, S]
        "curves": {"stapo": {k: np.ones((2, 3)) for k in stapo_report.CURVES}},
        "budgets": [4, 8], "flat": {}}
  t = stapo_report.summary_table(tr, ["stapo"], ci)["stapo"]
  assert t["success"] == [0.6, 0.5, 0.7]
  assert t["gain_vs_start"] == pytest.approx([0.35, 0.25, 0.45])
  assert t["val_success_by_budget"] == pytest.approx([0.2, 0.5])

  class _C(dict):
    methods = ["stapo"]
  measured = {"det": {}, "tr": tr, "ws_info": {}, "lr_scores": {}, "sels": {}, "timing": {}}
  pl = stapo_report.payload(_C(), measured, {"stapo": t})
  assert pl["start"] == {"success": 0.25} and pl["budgets"] == [4, 8]
  np.testing.assert_allclose(pl["curves"]["success"]["stapo"], np.ones(3))
