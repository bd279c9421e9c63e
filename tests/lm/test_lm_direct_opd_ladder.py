"""The pretraining ladder's divergence rule (lm.pretrain.diverged), with known answers."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.lm import pretrain


def test_lm_diverged_flags_the_family_above_factor_times_the_best():
  # The case: one family of l ended at 0.306, the other at 0.176 (factor 1.5).
  assert pretrain.diverged([0.306, 0.176], 1.5) == [True, False]
  assert pretrain.diverged([0.20, 0.176, 0.19, 0.18], 1.5) == [False] * 4
  assert pretrain.diverged([0.2, float("nan"), float("inf")], 1.5) == [False, True, True]
  assert pretrain.diverged([float("nan")] * 2, 1.5) == [True, True]


@settings(max_examples=50, deadline=None)
@given(losses=st.lists(st.floats(0.01, 5.0), min_size=1, max_size=8),
       factor=st.floats(1.01, 3.0))
def test_lm_diverged_never_flags_the_best_and_matches_float64_rule(losses, factor):
  bad = pretrain.diverged(losses, factor)
  x = np.asarray(losses, np.float64)
  assert not bad[int(np.argmin(x))]
  assert bad == [bool(v > factor * x.min()) for v in x]


def test_lm_diverged_is_scale_free():
  # Relative rule: multiplying every loss by a constant changes nothing.
  a = [0.3, 0.5, 0.2, 0.9]
  assert pretrain.diverged(a, 2.0) == pretrain.diverged([10 * v for v in a], 2.0)
  with pytest.raises(TypeError):
    pretrain.diverged(a)  # the factor is registered in the config, never defaulted
