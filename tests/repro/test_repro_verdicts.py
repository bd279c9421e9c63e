"""The verdict table (protocol section 3), one test per cell, with hand-made intervals; the
fair-chance, selection and testbed overrides; the sample-size estimate."""

import math

import pytest
from scipy import stats

from jaxrl_suite.repro import flatness, selection
from jaxrl_suite.repro import verdicts as vd
from jaxrl_suite.repro.claims import Claim
from jaxrl_suite.repro.intervals import Interval


def _claim(**kw):
  base = dict(id="c1", text="RL beats X", paper="Fig. 1", statistic="goodput", unit="seed",
              why="the paper's number; margin = the noise floor of the testbed")
  return Claim(**{**base, **kw})


def _iv(lo, hi, scale="difference", n=5, sd=1.0):
  return Interval((lo + hi) / 2, lo, hi, "t_mean", n, scale, df=n - 1, sd=sd)


SIZE = _claim(kind="superiority", size=0.5)
NO_SIZE = _claim(kind="superiority", min_effect=0.2)
EQUIV = _claim(kind="equivalence", margin=0.1)
NONINF = _claim(kind="non_inferiority", margin=0.1)
TARGET = _claim(kind="target", size=3.5, tolerance=0.2, scale="log_ratio")
L, U = math.log(3.5 / 1.2), math.log(3.5 * 1.2)


@pytest.mark.parametrize("claim,lo,hi,word", [
    # superiority with a claimed size c = 0.5
    (SIZE, 0.1, 0.7, vd.REPRODUCED),            # lo > 0, hi >= c
    (SIZE, 0.1, 0.4, vd.PARTLY_REPRODUCED),     # lo > 0, hi < c
    (SIZE, -0.1, 0.3, vd.NOT_REPRODUCED),       # lo <= 0 <= hi < c
    (SIZE, -0.5, -0.1, vd.CONTRADICTED),        # hi < 0
    (SIZE, -0.2, 0.8, vd.INCONCLUSIVE),         # lo <= 0, hi >= c
    # superiority without a size, smallest effect that matters m_min = 0.2
    (NO_SIZE, 0.05, 0.3, vd.REPRODUCED),        # lo > 0
    (NO_SIZE, -0.1, 0.15, vd.NOT_REPRODUCED),   # lo <= 0 <= hi < m_min
    (NO_SIZE, 0.0, 0.0, vd.NOT_REPRODUCED),     # zero width at 0 (a clone of its baseline)
    (SIZE, 0.0, 0.0, vd.NOT_REPRODUCED),        # the same with a registered size
    (NO_SIZE, -0.3, -0.01, vd.CONTRADICTED),    # hi < 0
    (NO_SIZE, -0.1, 0.3, vd.INCONCLUSIVE),      # otherwise
    # equivalence within +-0.1 (TOST)
    (EQUIV, -0.05, 0.08, vd.REPRODUCED),
    (EQUIV, -0.3, -0.15, vd.CONTRADICTED),      # hi < -m
    (EQUIV, 0.12, 0.3, vd.CONTRADICTED),        # lo > m
    (EQUIV, -0.05, 0.15, vd.INCONCLUSIVE),
    # non-inferiority by 0.1
    (NONINF, -0.08, 0.3, vd.REPRODUCED),        # lo > -m
    (NONINF, -0.4, -0.15, vd.CONTRADICTED),     # hi < -m
    (NONINF, -0.2, 0.1, vd.INCONCLUSIVE),
    # target 3.5x with tolerance 20% (band [2.92x, 4.2x]) on log-ratios
    (TARGET, L + 0.01, U - 0.01, vd.REPRODUCED),
    (TARGET, 0.1, L - 0.01, vd.PARTLY_REPRODUCED),   # lo > 0, CI below the band
    (TARGET, -0.3, -0.01, vd.CONTRADICTED),          # hi < 0
    (TARGET, 0.5, U + 0.2, vd.INCONCLUSIVE),         # straddles the band
    (TARGET, U + 0.01, U + 0.3, vd.EXCEEDS),         # above the band
])
def test_verdict_table_row(claim, lo, hi, word):
  scale = "log_ratio" if claim.scale == "log_ratio" else "difference"
  v = vd.judge(claim, _iv(lo, hi, scale))
  assert v.label == word, v
  assert v.reason


def test_exceeds_the_paper_is_reproduced_with_the_overshoot_shown():
  v = vd.judge(TARGET, _iv(math.log(5.0), math.log(6.0), "log_ratio"))
  assert v.word == vd.REPRODUCED and v.label == vd.EXCEEDS
  assert "3.5" in v.reason and "above the target band" in v.reason


def test_better_lower_flips_the_interval():
  claim = _claim(kind="superiority", size=0.8, scale="log_ratio", better="lower",
                 text="RL cuts latency 20%")
  # latency ratio ours / theirs in [0.7, 0.75]: log in [-0.357, -0.288], d in [0.288, 0.357]
  v = vd.judge(claim, _iv(math.log(0.7), math.log(0.75), "log_ratio"))
  assert v.label == vd.REPRODUCED   # d lo > 0 and hi >= -log(0.8) = 0.223


def test_a_fieller_ratio_interval_is_judged_on_the_log_scale():
  claim = _claim(kind="superiority", size=1.48, scale="log_ratio")
  iv = Interval(1.2, 1.1, 1.3, "fieller", 5, "ratio", df=4, sd=0.1)
  assert vd.judge(claim, iv).label == vd.PARTLY_REPRODUCED
  unbounded = Interval(1.2, -math.inf, math.inf, "fieller", 3, "ratio", df=2, sd=1.0)
  assert vd.judge(claim, unbounded).label == vd.INCONCLUSIVE


def test_scale_mismatch_is_an_error():
  with pytest.raises(ValueError, match="scale"):
    vd.judge(SIZE, _iv(0.1, 0.2, "log_ratio"))


def test_descriptive_has_no_verdict():
  v = vd.judge(_claim(kind="descriptive"), _iv(0.1, 0.2))
  assert v.word == vd.DESCRIPTIVE


# ----------------------------------------------------------------------------------------------
# Reasons of "inconclusive"


def test_underpowered_reason_says_how_many_units():
  v = vd.judge(SIZE, _iv(-0.2, 0.8, n=4, sd=0.6))
  assert v.word == vd.INCONCLUSIVE
  n = vd.units_needed(0.6, 0.25)
  assert v.reason.startswith(vd.UNDERPOWERED) and f"about {n} seeds" in v.reason
  assert "half-width of 0.25" in v.reason


def test_units_needed_is_the_smallest_n_reaching_the_half_width():
  n = vd.units_needed(1.0, 0.5)
  assert stats.t.ppf(0.975, n - 1) / math.sqrt(n) <= 0.5
  assert stats.t.ppf(0.975, n - 2) / math.sqrt(n - 1) > 0.5
  assert vd.units_needed(0.0, 0.5) is None


def _sweep(gains, delta=0.05):
  # Validation scores of 3 budgets x len(gains) seeds; last doubling gains `gains` per seed.
  prev = [1.0] * len(gains)
  return flatness.last_doubling([[0.9] * len(gains), prev, [p + g for p, g in zip(prev, gains)]],
                                [1, 2, 4], delta)


FAIR = _claim(kind="superiority", min_effect=0.2, fair_chance=True, flat_delta=0.05)


def test_a_negative_verdict_needs_a_flat_budget_sweep():
  not_repro = _iv(-0.1, 0.15)
  flat = _sweep([0.01, -0.01, 0.0, 0.005])
  assert flat.state == "flat"
  v = vd.judge(FAIR, not_repro, fair_chance=flat)
  assert v.word == vd.NOT_REPRODUCED and "flat" in v.reason
  rising = _sweep([0.3, 0.32, 0.31, 0.29])
  v = vd.judge(FAIR, not_repro, fair_chance=rising)
  assert v.word == vd.INCONCLUSIVE and v.reason.startswith(vd.FAIR_CHANCE_NOT_SHOWN)
  assert "rising" in v.reason
  unknown = _sweep([0.3, -0.2])
  assert unknown.state == "unknown"
  assert vd.judge(FAIR, not_repro, fair_chance=unknown).word == vd.INCONCLUSIVE
  v = vd.judge(FAIR, not_repro)   # registered fair_chance=True but no sweep given
  assert v.word == vd.INCONCLUSIVE and "no budget sweep" in v.reason


def test_degrading_keeps_the_negative_verdict_and_says_so():
  degrading = _sweep([-0.3, -0.32, -0.31, -0.29])
  v = vd.judge(FAIR, _iv(-0.5, -0.2), fair_chance=degrading)
  assert v.word == vd.CONTRADICTED and "degrading" in v.reason


def test_a_positive_verdict_does_not_need_a_fair_chance():
  rising = _sweep([0.3, 0.32, 0.31, 0.29])
  assert vd.judge(FAIR, _iv(0.1, 0.3), fair_chance=rising).word == vd.REPRODUCED


def test_selection_failed_and_testbed_cannot_express():
  failed = selection.pick_best("load", {"0.5": [float("nan")]}, data="training windows")
  v = vd.judge(SIZE, _iv(0.1, 0.7), selection=failed)
  assert v.word == vd.INCONCLUSIVE and v.reason.startswith(vd.SELECTION_FAILED)
  v = vd.judge(SIZE, _iv(0.1, 0.7), cannot_express="no prefix cache in the simulator")
  assert v.word == vd.INCONCLUSIVE and v.reason.startswith(vd.CANNOT_EXPRESS)
  assert "prefix cache" in v.reason


def test_verdict_vocabulary_is_the_core_one_plus_descriptive():
  from jaxrl_suite.core.results import VERDICTS
  assert vd.VERDICTS == VERDICTS
  with pytest.raises(ValueError, match="reason"):
    vd.Verdict(vd.INCONCLUSIVE, "")
  with pytest.raises(ValueError, match="not one of"):
    vd.Verdict("roughly reproduced", "typed by hand")


def test_partly_reproduced_under_a_rising_sweep_says_the_size_may_be_understated():
  claim = _claim(kind="superiority", size=0.5, fair_chance=True, flat_delta=0.05)
  v = vd.judge(claim, _iv(0.1, 0.3), fair_chance=_sweep([0.3, 0.32, 0.31, 0.29]))
  assert v.word == vd.PARTLY_REPRODUCED and "understated" in v.reason


def test_aggregate_intervals_without_a_per_unit_sd_still_get_a_reason():
  iv = Interval(0.5, 0.3, 0.9, "iqm_stratified", 20, sd=None)
  v = vd.judge(SIZE, Interval(0.3, -0.1, 0.7, "iqm_stratified", 20, sd=None))
  assert v.word == vd.INCONCLUSIVE and "no sample-size estimate" in v.reason
  assert vd.judge(SIZE, iv).word == vd.REPRODUCED


def test_zero_spread_says_more_units_cannot_help():
  """A CI of identical per-unit values that straddles the decision point names the cause
  instead of a sample size (units_needed has none at SD 0)."""
  v = vd.judge(EQUIV, _iv(0.1, 0.1, sd=0.0))      # exactly on the margin
  assert v.word == vd.INCONCLUSIVE and "SD 0" in v.reason and "100000" not in v.reason
