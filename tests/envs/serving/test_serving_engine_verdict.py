"""serving_batching's verdict: RL falling short of the tuned heuristic counts against it only
once its learning curve has flattened (the fair-chance gate)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from experiments import serving_batching as sb  # noqa: E402

FLAT, RISING = (0.0, -0.5, 0.5), (2.0, 1.0, 3.0)
TIE, SHORT, BETTER = (1.0, 0.995, 1.005), (0.9, 0.88, 0.92), (1.1, 1.05, 1.15)
WIDE, TOUCHING = (0.75, 0.25, 1.0), (0.981, 0.966, 0.995)


def test_batching_verdict_gates_a_shortfall_on_the_learning_curve():
  assert sb.batching_verdict({0.5: TIE, 1.1: TIE}, {0.5: RISING, 1.1: RISING}) == (
      "reproduced", "")
  assert sb.batching_verdict({0.5: TIE, 1.1: BETTER}, {0.5: FLAT, 1.1: RISING})[0] == (
      "contradicted")
  # short at 1.1 with a flat curve: a measured shortfall
  assert sb.batching_verdict({0.5: TIE, 1.1: SHORT}, {0.5: RISING, 1.1: FLAT}) == (
      "partly reproduced", "")
  # short at 1.1 while still learning there: no verdict against RL
  v, why = sb.batching_verdict({0.5: TIE, 1.1: SHORT}, {0.5: FLAT, 1.1: RISING})
  assert v == "inconclusive" and "still rising" in why and "1.1" in why and "0.5" not in why


def test_within_1_percent_needs_the_whole_ci_inside_the_band():
  # an equivalence test: a CI that merely overlaps +-1% shows nothing (the d477bb5 record called
  # -25% [-75, 0] and -1.9% [-3.4, -0.5] "reproduced" under the old overlap rule)
  from experiments import serving_common as common
  assert common.within_verdict(TIE) == "reproduced"
  assert common.within_verdict(WIDE) == "inconclusive"
  assert common.within_verdict(TOUCHING) == "inconclusive"
  assert common.within_verdict(SHORT) == "partly reproduced"
  assert common.within_verdict(BETTER) == "contradicted"
  v, why = sb.batching_verdict({0.5: TIE, 1.1: WIDE}, {0.5: FLAT, 1.1: FLAT})
  assert v == "inconclusive" and "too wide" in why and "1.1" in why and "0.5" not in why
  # a measured shortfall at one load decides, even where another load is too wide to tell
  assert sb.batching_verdict({0.5: WIDE, 1.1: SHORT}, {0.5: FLAT, 1.1: FLAT}) == (
      "partly reproduced", "")
