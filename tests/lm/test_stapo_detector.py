"""STAPO's outlier detector on rarely visited states.

The references here are written from the equation in docs/stapo.md, in float64 numpy, one step
at a time (no pairwise masks, no shared code with `lm/stapo.py`):
    z_t = (H_t - mean{H_s : k_s = k_t, s != t}) / (std{H_s : k_s = k_t, s != t} + eps)
The old rule put H_t itself inside the mean and std; for a state seen n times that caps
z_t at sqrt(n - 1) (Samuelson's bound), so z > 2 could never fire below n = 6.
"""

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from jaxrl_suite.lm import stapo

EPS = 1e-3


def loo_z(h, keys, valid, g, min_count=2, eps=EPS):
  """Float64 leave-one-out z of every valid step (task-group LOO fallback, no EMA)."""
  b, t = h.shape
  z = np.zeros((b, t))
  for i in range(b):
    grp = range((i // g) * g, (i // g + 1) * g)
    for j in range(t):
      if not valid[i, j]:
        continue
      others = [h[a, c] for a in grp for c in range(t)
                if valid[a, c] and (a, c) != (i, j) and keys[a, c] == keys[i, j]]
      if len(others) < min_count:
        others = [h[a, c] for a in grp for c in range(t) if valid[a, c] and (a, c) != (i, j)]
      mu = sum(others) / len(others)
      sd = (sum((x - mu) ** 2 for x in others) / len(others)) ** 0.5
      z[i, j] = (h[i, j] - mu) / (sd + eps)
  return z


def inclusive_z(values, eps=0.0):
  """The OLD rule for one state's n visits: the step inside its own mean and std."""
  v = np.asarray(values, np.float64)
  return (v - v.mean()) / (v.std() + eps)


def rare_state_batch(n_visits: int, drift: float = 1.5):
  """G=4 episodes x T=4 turns of one task; key 5 is visited n_visits times (one per episode row,
  then wrapping), its last visit drifted up by `drift`; every other step has its own key and
  H = 1.0 (the common states are unremarkable). Returns h, keys, valid and the drifted cell."""
  g, t = 4, 4
  h = np.full((g, t), 1.0)
  keys = np.arange(100, 100 + g * t).reshape(g, t)
  cells = [(r % g, 1 + r // g) for r in range(n_visits)]
  for r, (i, j) in enumerate(cells):
    keys[i, j] = 5
    h[i, j] = 0.60 + 0.02 * (r % 2)   # siblings alternate: none stands out
  i, j = cells[-1]
  h[i, j] += drift
  return h, keys, np.ones((g, t), bool), (i, j)


def flagged(z, cell, threshold=2.0):
  return bool(z[cell] > threshold)


def test_old_rule_is_capped_at_sqrt_n_minus_one():
  """The defect: with self included, even an extreme step of a state seen n times has z <=
  sqrt(n-1), equal when the other n-1 visits agree; so it is never flagged for n <= 5."""
  for n in range(2, 7):
    vals = [0.0] * (n - 1) + [1e6]
    np.testing.assert_allclose(inclusive_z(vals)[-1], np.sqrt(n - 1), rtol=1e-9)
  for n in range(3, 6):
    h, keys, valid, cell = rare_state_batch(n)
    z_old = inclusive_z(h[keys == 5], eps=EPS)
    assert z_old.max() <= np.sqrt(n - 1) + 1e-9
    assert not (z_old > 2.0).any()   # the check below would have failed on the old rule


def test_drifted_step_in_rare_state_is_flagged():
  for n in range(3, 6):                 # 2..4 other visits: min_count=2 others is met
    h, keys, valid, cell = rare_state_batch(n)
    ref = loo_z(h, keys, valid, 4)
    out = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                   jnp.asarray(valid), 4, min_count=2)
    z = np.asarray(out.z, np.float64)
    np.testing.assert_allclose(z, ref, rtol=2e-4, atol=2e-3)
    assert flagged(ref, cell) and flagged(z, cell)
    assert int(out.source[cell]) == stapo.SOURCE_GROUP and int(out.count[cell]) == n
    flags = np.asarray(stapo.outliers(out.z, jnp.asarray(valid)))
    assert flags[cell] and flags.sum() == 1   # only the drifted step, not its siblings


def test_undrifted_rare_state_is_not_flagged():
  h, keys, valid, cell = rare_state_batch(4, drift=0.0)   # 0.60, 0.62, 0.60, 0.62
  out = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                 jnp.asarray(valid), 4)
  assert not np.asarray(stapo.outliers(out.z, jnp.asarray(valid))).any()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 31 - 1))
def test_normalised_entropy_matches_loo_reference(seed):
  rng = np.random.default_rng(seed)
  g, t = 3, 4
  h = rng.uniform(0.0, 3.0, (2 * g, t))
  keys = rng.integers(0, 4, (2 * g, t))
  valid = rng.uniform(size=(2 * g, t)) < 0.85
  valid[:, 0] = True
  out = stapo.normalised_entropy(jnp.asarray(h, jnp.float32), jnp.asarray(keys),
                                 jnp.asarray(valid), g)
  np.testing.assert_allclose(np.asarray(out.z, np.float64)[valid], loo_z(h, keys, valid, g)[valid],
                             rtol=1e-3, atol=2e-3)
