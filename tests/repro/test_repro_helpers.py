"""Flatness, selection on training data, rliable-style aggregates, the formatter, layering."""

import ast
import math
import os

import numpy as np
import pytest
from scipy import stats

from jaxrl_suite.repro import aggregate, flatness, selection
from jaxrl_suite.repro.format import decimals_for, fmt_ci, fmt_interval
from jaxrl_suite.repro.intervals import Interval

# ----------------------------------------------------------------------------------------------
# flatness


@pytest.mark.parametrize("lo,hi,state", [(-0.01, 0.02, "flat"), (0.06, 0.2, "rising"),
                                          (-0.2, -0.06, "degrading"), (-0.01, 0.2, "unknown")])
def test_flatness_classes(lo, hi, state):
  assert flatness.classify(lo, hi, 0.05) == state


def test_last_doubling_uses_the_per_seed_gain_of_the_last_doubling():
  scores = np.array([[0.5, 0.6, 0.55], [0.8, 0.82, 0.81], [0.9, 0.93, 0.91]])
  f = flatness.last_doubling(scores, [1e5, 2e5, 4e5], delta=0.02)
  g = scores[2] - scores[1]
  ref = stats.t.interval(0.95, 2, loc=g.mean(), scale=stats.sem(g))
  assert (f.gain.lo, f.gain.hi) == pytest.approx(ref)
  assert f.state == flatness.classify(*ref, 0.02)
  assert "validation" in f.reason


def test_last_doubling_log_ratio_and_lower_is_better():
  scores = np.array([[2.0, 2.2], [1.0, 1.1], [0.5, 0.55]])   # a cost halving each doubling
  f = flatness.last_doubling(scores, [1, 2, 4], delta=0.1, scale="log_ratio", better="lower")
  assert f.gain.estimate == pytest.approx(math.log(2.0))


def test_last_doubling_crossed_seeds_x_windows():
  rng = np.random.default_rng(0)
  scores = 1.0 + rng.normal(0, 0.01, (2, 4, 6))
  f = flatness.last_doubling(scores, [10, 20], delta=0.05)
  assert f.gain.method == "crossed" and f.state == "flat"


def test_last_doubling_refuses_a_sweep_that_does_not_double():
  with pytest.raises(ValueError, match="doubling"):
    flatness.last_doubling(np.ones((3, 4)), [1, 2, 3], 0.1)
  with pytest.raises(ValueError, match="one row per budget"):
    flatness.last_doubling(np.ones((2, 4)), [1, 2, 4], 0.1)


# ----------------------------------------------------------------------------------------------
# selection


def test_pick_best_records_what_was_chosen_on_which_data():
  s = selection.pick_heuristic({"sita": {0.5: [1.0, 1.2], 1.0: [1.5, 1.4]},
                                "jsq": {None: [1.3, 1.3]}}, data="training windows 0-7")
  assert s.choice == "sita(1.0)" and s.ok and s.split == "training"
  assert s.candidates == ("sita(0.5)", "sita(1.0)", "jsq(None)")
  assert s.scores == pytest.approx((1.1, 1.45, 1.3))
  assert selection.Selection.from_dict(s.to_dict()) == s
  assert s.recheck() == s


def test_pick_load_checkpoint_mode_and_lower_is_better():
  assert selection.pick_load([0.5, 0.9, 1.1], [[1.0], [1.1], [1.05]],
                             data="train").choice == "0.9"
  assert selection.pick_checkpoint([100, 200], [[3.0], [2.0]], data="validation layouts",
                                   better="lower").choice == "200"
  assert selection.pick_mode({"greedy": [2.0], "sampled": [1.0]}, data="train").choice == \
      "greedy"


def test_selection_refuses_evaluation_data_and_fails_without_finite_scores():
  with pytest.raises(ValueError, match="evaluation"):
    selection.pick_best("load", {"a": [1.0]}, data="eval windows", split="evaluation")
  s = selection.pick_best("load", {"a": [np.nan], "b": [np.inf]}, data="train")
  assert not s.ok and s.choice is None and "finite" in s.reason


def test_an_edited_choice_is_caught_by_recheck():
  s = selection.pick_mode({"greedy": [2.0], "sampled": [1.0]}, data="train")
  forged = selection.Selection.from_dict({**s.to_dict(), "choice": "sampled"})
  assert forged.recheck().choice != forged.choice


# ----------------------------------------------------------------------------------------------
# aggregate (rliable)


def test_iqm_matches_scipy_trim_mean():
  rng = np.random.default_rng(0)
  for n in (4, 7, 10, 33):
    x = rng.normal(size=n)
    assert aggregate.iqm(x) == pytest.approx(stats.trim_mean(x, 0.25))


def test_iqm_ci_stratified_bootstrap_resamples_within_tasks():
  rng = np.random.default_rng(1)
  scores = {"t1": rng.normal(1, 0.1, 5), "t2": rng.normal(3, 0.1, 5)}
  iv = aggregate.iqm_ci(scores, n_boot=500)
  assert iv.lo <= iv.estimate <= iv.hi
  # Stratified: every draw keeps 5 runs of each task, so the pooled IQM stays near the middle.
  assert iv.lo > 1.0 and iv.hi < 3.0
  assert iv.extra["n_tasks"] == 2


def test_probability_of_improvement_matches_mann_whitney():
  rng = np.random.default_rng(2)
  x = [rng.normal(1, 1, 6), rng.normal(0, 1, 5)]
  y = [rng.normal(0, 1, 6), rng.normal(0, 1, 4)]
  ref = np.mean([stats.mannwhitneyu(a, b).statistic / (a.size * b.size) for a, b in zip(x, y)])
  iv = aggregate.probability_of_improvement(x, y, n_boot=300)
  assert iv.estimate == pytest.approx(ref)
  assert 0.0 <= iv.lo <= iv.estimate <= iv.hi <= 1.0
  same = aggregate.probability_of_improvement([np.ones(3)], [np.ones(3)], n_boot=50)
  assert same.estimate == 0.5


# ----------------------------------------------------------------------------------------------
# format


@pytest.mark.parametrize("est,lo,hi,text", [
    (1.17521, 1.14623, 1.20062, "1.175 [1.146, 1.201]"),
    (48.3, 12.1, 84.6, "48 [12, 85]"),
    (0.0123, 0.0101, 0.0145, "0.0123 [0.0101, 0.0145]"),
    (2.0, -math.inf, math.inf, "2.000 [-inf, inf]"),
])
def test_fmt_ci_digits_follow_the_ci_width(est, lo, hi, text):
  assert fmt_ci(est, lo, hi) == text


def test_fmt_interval_shows_log_ratios_as_ratios():
  iv = Interval(math.log(1.2), math.log(1.1), math.log(1.3), "log_ratio", 4, "log_ratio")
  assert fmt_interval(iv) == "1.20x [1.10x, 1.30x]"
  assert decimals_for(1.1, 1.3) == 2


# ----------------------------------------------------------------------------------------------
# layering: repro may use core, nothing above it


_PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "jaxrl_suite", "repro")
_ABOVE = ("envs", "agents", "algos", "lm", "ope", "experiments", "configs", "train")


def test_repro_imports_only_core_and_itself():
  bad = []
  for f in sorted(os.listdir(_PKG)):
    if not f.endswith(".py"):
      continue
    tree = ast.parse(open(os.path.join(_PKG, f), encoding="utf-8").read())
    for node in ast.walk(tree):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      for n in names:
        parts = n.split(".")
        if parts[0] == "jaxrl_suite" and len(parts) > 1 and parts[1] in _ABOVE:
          bad.append(f"{f}:{node.lineno} imports {n}")
        if parts[0] in ("jax", "flax", "optax", "pickle"):
          bad.append(f"{f}:{node.lineno} imports {n}")
  assert not bad, bad
