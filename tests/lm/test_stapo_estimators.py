"""STAPO estimators vs float64 numpy references on hand-made groups."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from jaxrl_suite.lm import stapo


def _np_normalised(h, keys, valid, g, ema=None, min_count=2, eps=1e-3):
  """Loop reference of the leave-one-out state-normalised z / ratio with EMA and task fallbacks:
  each step is compared with the OTHER steps of its state (docs/stapo.md)."""
  b, t = h.shape
  z = np.zeros((b, t)); ratio = np.zeros((b, t)); src = np.zeros((b, t), int)
  for gi in range(b // g):
    rows = range(gi * g, (gi + 1) * g)
    cells = [(i, j) for i in rows for j in range(t) if valid[i, j]]
    for i, j in cells:
      allh = np.array([h[a, c] for a, c in cells if (a, c) != (i, j)])
      same = np.array([h[a, c] for a, c in cells if keys[a, c] == keys[i, j] and (a, c) != (i, j)])
      if len(same) >= min_count:
        mu, sd, s = same.mean(), same.std(), 0
      elif ema is not None and ema["seen"][keys[i, j]]:
        mu = ema["mean"][keys[i, j]]
        sd = np.sqrt(max(ema["sq"][keys[i, j]] - mu ** 2, 0.0)); s = 1
      else:
        mu, sd, s = allh.mean(), allh.std(), 2
      z[i, j] = (h[i, j] - mu) / (sd + eps)
      ratio[i, j] = h[i, j] / (mu + eps)
      src[i, j] = s
  return z, ratio, src


# A hand-made group: 2 task instances x G=3 episodes x T=4 turns; key 7 recurs, 9 is rare.
H = np.array([[1.0, 2.0, 0.5, 0.1], [1.2, 2.5, 0.4, 0.0], [0.8, 0.1, 3.0, 0.0],
              [0.3, 0.6, 0.9, 1.5], [0.2, 0.7, 1.1, 0.0], [0.4, 0.4, 0.4, 0.4]])
K = np.array([[7, 8, 9, 3], [7, 8, 5, 0], [7, 2, 8, 0],
              [1, 2, 3, 4], [1, 2, 3, 0], [1, 1, 6, 6]])
VALID = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 0],
                  [1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]], bool)


def test_normalised_entropy_matches_numpy_on_hand_made_group():
  n = stapo.normalised_entropy(jnp.asarray(H, jnp.float32), jnp.asarray(K), jnp.asarray(VALID), 3)
  z, ratio, src = _np_normalised(H, K, VALID, 3)
  np.testing.assert_allclose(np.asarray(n.z), z, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(n.ratio), ratio, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(n.source)[VALID], src[VALID])
  # key 7 appears 3 times in group 0 with H = 1.0, 1.2, 0.8: step (1, 0) is compared with
  # {1.0, 0.8}: mean 0.9, std 0.1, so z = 0.3 / (0.1 + eps)
  np.testing.assert_allclose(float(n.z[0, 0]), 0.0, atol=1e-5)
  np.testing.assert_allclose(float(n.z[1, 0]), 0.3 / (0.1 + 1e-3), rtol=1e-4)


def test_ema_fallback_and_update_match_numpy():
  ema = stapo.init_ema(16)
  prev_h = np.array([[0.5, 1.5]]); prev_k = np.array([[9, 9]])
  ema = stapo.update_ema(ema, jnp.asarray(prev_h, jnp.float32), jnp.asarray(prev_k),
                         jnp.ones((1, 2), bool))
  np.testing.assert_allclose(float(ema.mean[9]), 1.0)
  np.testing.assert_allclose(float(ema.sq[9]), (0.25 + 2.25) / 2)
  n = stapo.normalised_entropy(jnp.asarray(H, jnp.float32), jnp.asarray(K), jnp.asarray(VALID),
                               3, ema=ema)
  ref = {k: np.asarray(v, np.float64) for k, v in ema._asdict().items()}
  z, ratio, src = _np_normalised(H, K, VALID, 3, ema=ref)
  np.testing.assert_allclose(np.asarray(n.z), z, rtol=1e-4, atol=1e-4)
  assert int(n.source[0, 2]) == stapo.SOURCE_EMA
  # a second update blends with decay 0.9
  ema2 = stapo.update_ema(ema, jnp.array([[3.0]]), jnp.array([[9]]), jnp.ones((1, 1), bool))
  np.testing.assert_allclose(float(ema2.mean[9]), 0.9 * 1.0 + 0.1 * 3.0, rtol=1e-6)


def test_recurrence_counts():
  n = stapo.normalised_entropy(jnp.asarray(H, jnp.float32), jnp.asarray(K), jnp.asarray(VALID), 3)
  r = stapo.recurrence(n.count, n.source, jnp.asarray(VALID))
  _, _, src = _np_normalised(H, K, VALID, 3)
  np.testing.assert_allclose(float(r["share_group"]), (src[VALID] == 0).mean(), rtol=1e-6)
  # recurring: the key occurs >= 2 times in its task group (counted by hand, self included)
  rec = [sum(K[a, c] == K[i, j] for a in range(i // 3 * 3, i // 3 * 3 + 3) for c in range(4)
             if VALID[a, c]) >= 2 for i in range(6) for j in range(4) if VALID[i, j]]
  np.testing.assert_allclose(float(r["share_recurring"]), np.mean(rec), rtol=1e-6)
  # group stats need >= 2 OTHER visits, so fewer steps use them than recur
  assert float(r["share_group"]) < float(r["share_recurring"])


def test_outlier_rules():
  s = jnp.array([[3.0, -2.5, 0.0, 1.0, 2.1]])
  v = jnp.array([[True, True, True, True, False]])
  np.testing.assert_array_equal(np.asarray(stapo.outliers(s, v, "z")), [[1, 0, 0, 0, 0]])
  np.testing.assert_array_equal(np.asarray(stapo.outliers(s, v, "two_sided")), [[1, 1, 0, 0, 0]])
  np.testing.assert_array_equal(np.asarray(stapo.outliers(s, v, "top", top_frac=0.5)),
                                [[1, 0, 0, 1, 0]])
  with pytest.raises(ValueError, match="outlier rule"):
    stapo.outliers(s, v, "bogus")


def test_stapo_advantages_both_readings():
  base = jnp.array([[0.3, 0.3], [-0.3, -0.3]])
  step = jnp.array([[1.0, 2.0], [3.0, 4.0]])
  out = jnp.array([[True, False], [False, True]])
  succ = jnp.array([True, False])
  valid = jnp.ones((2, 2), bool)
  a, w = stapo.stapo_advantages(base, step, out, succ, valid, 0.5, "targeted")
  np.testing.assert_allclose(np.asarray(a), [[1.0, 0.3], [-0.3, 3.5]])
  np.testing.assert_allclose(np.asarray(w), np.ones((2, 2)))
  a2, w2 = stapo.stapo_advantages(base, step, out, succ, valid, 0.5, "only")
  np.testing.assert_allclose(np.asarray(a2), np.asarray(a))
  np.testing.assert_allclose(np.asarray(w2), [[1, 0], [0, 1]])


def test_empg_modulation_numpy():
  h = np.array([[0.0, 1.0, 2.0], [0.5, 0.0, 0.0]])
  valid = np.array([[1, 1, 1], [1, 0, 0]], bool)
  adv = np.array([[1.0, 1.0, 1.0], [-1.0, 0.0, 0.0]])
  got = np.asarray(stapo.empg_modulation(jnp.asarray(adv, jnp.float32), jnp.asarray(h, jnp.float32),
                                         jnp.asarray(valid), k=1.0, k_future=2.0, zeta=0.1))
  hn = np.where(valid, h / 2.0, 0.0)
  g = np.exp(-hn) / np.exp(-hn)[valid].mean()
  bonus = np.zeros_like(h)
  bonus[0, 0] = 0.1 * np.exp(-2 * hn[0, 1]); bonus[0, 1] = 0.1 * np.exp(-2 * hn[0, 2])
  np.testing.assert_allclose(got, np.where(valid, g * adv + bonus, 0.0), rtol=1e-5)


def test_high_entropy_token_mask_keeps_top_fifth():
  ent = jnp.arange(10.0).reshape(2, 5)
  m = stapo.high_entropy_token_mask(ent, jnp.ones((2, 5), bool), 0.2)
  assert int(m.sum()) == 2 and bool(m[1, 4]) and bool(m[1, 3])


@given(st.integers(0, 10_000))
def test_auroc_matches_pairwise_definition(seed):
  rng = np.random.default_rng(seed)
  s = rng.integers(0, 5, 30).astype(float)
  y = rng.random(30) < 0.4
  if y.all() or not y.any():
    return
  pos, neg = s[y], s[~y]
  ref = ((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (
      len(pos) * len(neg))
  assert abs(stapo.auroc(s, y) - ref) < 1e-12


def test_step_entropy_is_mean_over_action_tokens():
  logits = jax.random.normal(jax.random.PRNGKey(0), (2, 3, 7))
  mask = jnp.array([[1, 1, 0], [1, 0, 0]], bool)
  te = stapo.token_entropy(logits)
  x = np.asarray(logits, np.float64)
  p = np.exp(x - x.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
  ref_te = -(p * np.log(p)).sum(-1)
  np.testing.assert_allclose(np.asarray(te), ref_te, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(stapo.step_entropy(te, mask)),
                             [ref_te[0, :2].mean(), ref_te[1, 0]], rtol=1e-5)
