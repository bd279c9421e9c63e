"""Student top-k Direct-OPD (the paper's k = 16 candidates): float64 numpy reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.lm import direct_opd


def _reference(z, r, mask, k):
  """float64: loss value -mean_t sum_{v in K} p_k r log p_k and d E_{p_k}[r] / dz per state."""
  z, r = np.asarray(z, np.float64), np.asarray(r, np.float64)
  kth = np.sort(z, -1)[..., -k][..., None]
  in_k = z >= kth
  zk = np.where(in_k, z, -np.inf)
  logp = zk - np.log(np.exp(zk - zk.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
      - zk.max(-1, keepdims=True)
  p = np.where(in_k, np.exp(logp), 0.0)
  er = (p * r).sum(-1, keepdims=True)                              # E_{p_k}[r]
  per_t = -(p * r * np.where(in_k, logp, 0.0)).sum(-1)
  m = mask.astype(np.float64)
  loss = (per_t * m).sum() / m.sum()
  grad = p * (r - er) * m[..., None] / m.sum()                     # grad of mean_t E_pk[r]
  rbar = (er[..., 0] * m).sum() / m.sum()
  return loss, -grad, rbar


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 32))
def test_lm_top_k_loss_and_gradient_match_float64_reference(seed, k):
  rng = np.random.default_rng(seed)
  z = rng.normal(0, 2, (2, 3, 32)).astype(np.float32)
  r = rng.normal(0, 1, (2, 3, 32)).astype(np.float32)
  mask = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
  tokens = jnp.zeros((2, 3), jnp.int32)
  start = jax.nn.log_softmax(jnp.asarray(z), -1)  # pi_S = pi_theta: the KL term is 0

  def f(zz):
    return direct_opd.direct_opd_loss(zz, jnp.asarray(r), tokens, start, jnp.asarray(mask),
                                      jnp.float32(0.0), "full", top_k=k)

  (loss, aux), g = jax.value_and_grad(f, has_aux=True)(jnp.asarray(z))
  ref_loss, ref_grad, ref_rbar = _reference(z, r, mask, k)
  np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.asarray(g), ref_grad, rtol=1e-3, atol=1e-6)
  np.testing.assert_allclose(float(aux["rbar"]), ref_rbar, rtol=1e-4, atol=1e-5)
  # Gradient only on the top-k set: tokens outside it get none.
  kth = np.sort(z, -1)[..., -k][..., None]
  assert np.all(np.asarray(g)[z < kth] == 0.0)


def test_lm_top_k_full_vocabulary_equals_default_loss():
  rng = np.random.default_rng(0)
  z = jnp.asarray(rng.normal(0, 1, (2, 4, 32)), jnp.float32)
  r = jnp.asarray(rng.normal(0, 1, (2, 4, 32)), jnp.float32)
  start = jnp.asarray(rng.normal(0, 1, (2, 4, 32)), jnp.float32)
  args = (z, r, jnp.zeros((2, 4), jnp.int32), jax.nn.log_softmax(start, -1), jnp.ones((2, 4)),
          jnp.float32(0.7))
  full = direct_opd.direct_opd_loss(*args)[0]
  for k in (0, 32, 40):
    assert float(direct_opd.direct_opd_loss(*args, top_k=k)[0]) == pytest.approx(float(full),
                                                                                  rel=1e-6)
  assert float(direct_opd.direct_opd_loss(*args, top_k=4)[0]) != pytest.approx(float(full))


def test_lm_top_k_one_token_has_no_policy_gradient():
  # K = {argmax}: p_k is a point mass, E_pk[r] = r(argmax) is flat in z (gradient 0).
  rng = np.random.default_rng(1)
  z = jnp.asarray(rng.normal(0, 1, (1, 2, 32)), jnp.float32)
  r = jnp.asarray(rng.normal(0, 1, (1, 2, 32)), jnp.float32)
  g = jax.grad(lambda zz: direct_opd.direct_opd_loss(
      zz, r, jnp.zeros((1, 2), jnp.int32), jax.nn.log_softmax(z, -1), jnp.ones((1, 2)),
      jnp.float32(0.0), top_k=1)[0])(z)
  np.testing.assert_allclose(np.asarray(g), 0.0, atol=1e-7)


def test_lm_distill_config_rejects_negative_top_k():
  with pytest.raises(ValueError, match="top_k"):
    direct_opd.DistillConfig(top_k=-1)
