"""STAPO's calibrated outlier rule: a Student-t prediction interval per visit count.

Under the null (a state's visits i.i.d. normal) a new step compared with its m other visits,
    t = (H - mean) / (s sqrt(1 + 1/m)),  s the sample std (ddof 1) of the m others,
is t_{m-1}-distributed, so flagging t > q_{1-alpha}(t_{m-1}) has false-flag rate alpha at every
m. The references are float64 numpy/scipy, written from that equation (docs/stapo.md).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as st

from jaxrl_suite.lm import stapo

ALPHA = 0.025


def null_groups(m: int, n_groups: int, seed: int):
  """n_groups task groups of m + 1 one-turn episodes, all in one state: every step is a new
  observation against m other i.i.d. N(1, 0.3^2) visits."""
  rng = np.random.default_rng(seed)
  h = rng.normal(1.0, 0.3, (n_groups * (m + 1), 1))
  keys = np.zeros(h.shape, np.int32)
  return h, keys, np.ones(h.shape, bool)


def ref_t(h, keys, valid, g, eps=1e-3):
  """Float64 prediction-interval t of every valid step against its same-key group mates."""
  b, t = h.shape
  out = np.zeros((b, t))
  for i in range(b):
    grp = range((i // g) * g, (i // g + 1) * g)
    for j in range(t):
      if not valid[i, j]:
        continue
      o = np.array([h[a, c] for a in grp for c in range(t)
                    if valid[a, c] and (a, c) != (i, j) and keys[a, c] == keys[i, j]])
      m = len(o)
      out[i, j] = (h[i, j] - o.mean()) / ((o.std(ddof=1) + eps) * np.sqrt(1 + 1 / m))
  return out


@pytest.mark.parametrize("m", [2, 3, 5, 10])
def test_null_false_flag_rate_is_alpha_at_every_visit_count(m):
  h, keys, valid = null_groups(m, 40000 // (m + 1) * 2, seed=m)
  norm = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                  jnp.asarray(valid), m + 1, min_count=2)
  assert (np.asarray(norm.source) == stapo.SOURCE_GROUP).all()
  np.testing.assert_array_equal(np.asarray(norm.others), m)
  rate = float(np.asarray(stapo.calibrated_outliers(norm, jnp.asarray(valid), ALPHA)).mean())
  # ~80k steps (correlated within a group): SE of the rate <~ 0.001; the old z > 2 rule is far off
  assert abs(rate - ALPHA) < 0.006, (m, rate)
  old = float((np.asarray(norm.z) > 2.0).mean())
  if m <= 5:
    assert old > 2 * ALPHA + 0.02, (m, old)


def test_t_matches_float64_reference():
  rng = np.random.default_rng(7)
  g, t = 4, 3
  h = rng.uniform(0.0, 3.0, (2 * g, t))
  keys = rng.integers(0, 2, (2 * g, t))         # two keys: most steps have >= 2 other visits
  valid = np.ones((2 * g, t), bool)
  norm = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                  jnp.asarray(valid), g, min_count=2)
  grp = np.asarray(norm.source) == stapo.SOURCE_GROUP
  assert grp.mean() > 0.8
  np.testing.assert_allclose(np.asarray(norm.t, np.float64)[grp],
                             ref_t(h, keys, valid, g)[grp], rtol=1e-3, atol=1e-3)


def test_quantile_table_against_scipy():
  q = stapo.t_quantile_table(0.05, 12)
  assert q[0] == np.inf
  np.testing.assert_allclose(q[1:13], st.t.ppf(0.95, np.arange(1, 13)), rtol=1e-12)
  np.testing.assert_allclose(q[-1], st.norm.ppf(0.95), rtol=1e-12)
  for bad in (0.0, 0.5, -0.1):
    with pytest.raises(ValueError, match="alpha"):
      stapo.t_quantile_table(bad, 3)


def test_drifted_rare_state_step_is_flagged_and_only_it():
  """A state seen 3 times in the group (m = 2 other visits, 0.60 and 0.62); the third visit
  drifted to 2.1: t = 1.49 / (0.0141 sqrt(1.5)) ~ 86 > q_0.975(t_1) = 12.7. Its siblings and
  the unrelated steps (singletons: task fallback, all at 1.0) are not flagged."""
  g, t = 3, 2
  h = np.array([[0.60, 1.0], [0.62, 1.0], [2.10, 1.0]])
  keys = np.array([[5, 11], [5, 12], [5, 13]])
  valid = np.ones((g, t), bool)
  norm = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                  jnp.asarray(valid), g, min_count=2)
  flags = np.asarray(stapo.calibrated_outliers(norm, jnp.asarray(valid), ALPHA))
  assert flags[2, 0] and flags.sum() == 1
  expect = (2.10 - 0.61) / ((np.std([0.60, 0.62], ddof=1) + 1e-3) * np.sqrt(1.5))
  np.testing.assert_allclose(float(norm.t[2, 0]), expect, rtol=1e-4)
  # without the drift the same state is not flagged
  h[2, 0] = 0.61
  norm = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                  jnp.asarray(valid), g, min_count=2)
  assert not np.asarray(stapo.calibrated_outliers(norm, jnp.asarray(valid), ALPHA)).any()


def test_one_other_visit_is_never_flagged_and_ema_uses_the_normal_quantile():
  norm = stapo.Normalised(*(jnp.zeros((1, 3)),) * 6, t=jnp.array([[50.0, 1.95, 1.97]]),
                          others=jnp.array([[1.0, jnp.inf, jnp.inf]]))
  flags = np.asarray(stapo.calibrated_outliers(norm, jnp.ones((1, 3), bool), ALPHA))
  np.testing.assert_array_equal(flags, [[False, False, True]])   # q_0.975(normal) = 1.960


def test_flag_steps_dispatches_on_the_rule():
  h, keys, valid = null_groups(3, 50, seed=1)
  norm = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                  jnp.asarray(valid), 4)
  v = jnp.asarray(valid)
  np.testing.assert_array_equal(stapo.flag_steps(stapo.MethodConfig(outlier_rule="t"), norm, v),
                                stapo.calibrated_outliers(norm, v, ALPHA))
  np.testing.assert_array_equal(stapo.flag_steps(stapo.MethodConfig(outlier_rule="z"), norm, v),
                                stapo.outliers(norm.z, v, "z", 2.0))
