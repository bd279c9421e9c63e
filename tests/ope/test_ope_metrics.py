"""DOPE-style ranking metrics (ope/metrics.py): hand-computed answers, a brute-force float64
reference, invariances, and input errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxrl_suite.ope import metrics


def test_known_answer():
  truths = np.array([0.0, 1.0, 2.0, 4.0])                        # range 4
  est = np.array([[0.0, 1.0, 2.0, 4.0],                          # perfect
                  [4.0, 2.0, 1.0, 0.0],                          # reversed
                  [0.5, 1.0, np.inf, 3.0]])                      # one non-finite (ranks last)
  m = metrics.ranking_metrics(est, truths, k=2)
  np.testing.assert_allclose(m["norm_abs_err"][:2], [0.0, (4 + 1 + 1 + 4) / 4 / 4])
  assert m["norm_abs_err"][2] == np.inf
  np.testing.assert_allclose(m["spearman"][:2], [1.0, -1.0])
  assert np.isnan(m["spearman"][2])
  # reversed: picks policy 0 (J = 0): regret 1; its top 2 are policies 0, 1: best J 1 -> 3/4
  np.testing.assert_allclose(m["regret1"], [0.0, 1.0, 0.0])
  np.testing.assert_allclose(m["regret_k"], [0.0, 0.75, 0.0])
  # row 2: policy 2 is inf but ranks LAST, so the pick is policy 3 (J = 4): no regret
  assert m["finite"].tolist() == [True, True, False]


def _reference(e, t, k):
  """Brute force: sorted lists, explicit ranks, Pearson on ranks (no ties in the draws)."""
  span = max(t) - min(t)
  out = []
  for row in e:
    err = sum(abs(a - b) for a, b in zip(row, t)) / len(t) / span
    re = np.argsort(np.argsort(row)).astype(float)
    rt = np.argsort(np.argsort(t)).astype(float)
    rho = np.corrcoef(re, rt)[0, 1]
    best = sorted(range(len(t)), key=lambda p: -row[p])
    out.append((err, rho, (max(t) - t[best[0]]) / span, (max(t) - max(t[p] for p in best[:k])) / span))
  return np.array(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 6), st.integers(2, 8))
def test_matches_brute_force_reference(seed, seeds, policies):
  rng = np.random.default_rng(seed)
  t = rng.normal(size=policies)
  e = t[None] + rng.normal(scale=0.7, size=(seeds, policies))
  k = int(rng.integers(1, policies + 1))
  m = metrics.ranking_metrics(e, t, k=k)
  ref = _reference(e, t, k)
  got = np.stack([m["norm_abs_err"], m["spearman"], m["regret1"], m["regret_k"]], 1)
  np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
  assert m["finite"].all()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.1, 10.0), st.floats(-5.0, 5.0))
def test_order_preserving_estimates_rank_perfectly(seed, scale, shift):
  """An estimator that is any increasing map of the truth has Spearman 1 and no regret."""
  t = np.random.default_rng(seed).normal(size=7)
  m = metrics.ranking_metrics((scale * t + shift)[None], t, k=3)
  np.testing.assert_allclose(m["spearman"], 1.0)
  assert m["regret1"][0] == 0.0 and m["regret_k"][0] == 0.0


def test_regret_k_never_exceeds_regret1():
  rng = np.random.default_rng(3)
  t = rng.normal(size=6)
  e = rng.normal(size=(50, 6))
  for k in range(1, 7):
    m = metrics.ranking_metrics(e, t, k=k)
    assert np.all(m["regret_k"] <= m["regret1"] + 1e-15)
  assert np.all(metrics.ranking_metrics(e, t, k=6)["regret_k"] == 0.0)


@pytest.mark.parametrize("est,truths,k,match", [
    (np.zeros((2, 3)), np.zeros(4), 1, "must be"),
    (np.zeros(3), np.arange(3.0), 1, "must be"),
    (np.zeros((2, 3)), np.arange(3.0), 4, "k must"),
    (np.zeros((2, 3)), np.ones(3), 1, "all be equal")])
def test_bad_inputs_name_the_argument(est, truths, k, match):
  with pytest.raises(ValueError, match=match):
    metrics.ranking_metrics(est, truths, k=k)


def test_permuting_policies_changes_nothing():
  rng = np.random.default_rng(5)
  t = rng.normal(size=5)
  e = t + rng.normal(scale=0.3, size=(4, 5))
  base = metrics.ranking_metrics(e, t, k=2)
  for perm in itertools.islice(itertools.permutations(range(5)), 10):
    m = metrics.ranking_metrics(e[:, perm], t[list(perm)], k=2)
    for key in ("norm_abs_err", "spearman", "regret1", "regret_k"):
      np.testing.assert_allclose(m[key], base[key], rtol=1e-12)
