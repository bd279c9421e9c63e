"""Losses and GAE against float64 numpy reference loops on random inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import jax

from jaxrl_suite.core import gae as gae_lib
from jaxrl_suite.core import losses


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _rng(seed=0):
  return np.random.default_rng(seed)


def test_ppo_clip_loss_matches_loop():
  r = _rng(0)
  lp, olp, adv = r.normal(size=50) * 0.3, r.normal(size=50) * 0.3, r.normal(size=50)
  eps = 0.2
  ref = 0.0
  for a, b, A in zip(lp, olp, adv):
    ratio = np.exp(a - b)
    ref += -min(ratio * A, min(max(ratio, 1 - eps), 1 + eps) * A)
  ref /= 50
  got = losses.ppo_clip_loss(jnp.asarray(lp), jnp.asarray(olp), jnp.asarray(adv), eps)
  np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_ppo_clip_gradient_is_zero_when_clipped():
  # ratio 2 > 1 + eps with positive advantage: the clipped branch is active, gradient is 0.
  g = jax.grad(lambda lp: losses.ppo_clip_loss(lp, jnp.zeros(1), jnp.ones(1), 0.2))(
      jnp.log(2.0) * jnp.ones(1))
  np.testing.assert_allclose(g, 0.0)
  g = jax.grad(lambda lp: losses.ppo_clip_loss(lp, jnp.zeros(1), jnp.ones(1), 0.2))(jnp.zeros(1))
  np.testing.assert_allclose(g, -1.0)


def test_clipped_value_loss_matches_loop():
  r = _rng(1)
  v, ov, t = r.normal(size=40), r.normal(size=40), r.normal(size=40)
  eps = 0.3
  ref = np.mean([0.5 * max((a - c) ** 2, (b + np.clip(a - b, -eps, eps) - c) ** 2)
                 for a, b, c in zip(v, ov, t)])
  np.testing.assert_allclose(losses.clipped_value_loss(v, ov, t, eps), ref, rtol=1e-12)


def test_entropy_and_log_prob_match_numpy():
  r = _rng(2)
  logits = r.normal(size=(7, 5))
  p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(losses.categorical_entropy(logits), -(p * np.log(p)).sum(-1),
                             rtol=1e-12)
  a = r.integers(0, 5, size=7)
  np.testing.assert_allclose(losses.categorical_log_prob(logits, a),
                             np.log(p[np.arange(7), a]), rtol=1e-12)


def test_entropy_ignores_masked_actions():
  logits = jnp.array([[0.0, 0.0, losses.MASKED_LOGIT]])
  np.testing.assert_allclose(losses.categorical_entropy(logits), [np.log(2.0)], rtol=1e-9)


def test_reinforce_loss_matches_loop_and_gradient():
  r = _rng(3)
  lp, g, b = r.normal(size=30), r.normal(size=30), r.normal(size=30)
  np.testing.assert_allclose(losses.reinforce_loss(lp, g, b), -np.mean(lp * (g - b)), rtol=1e-12)
  grad = jax.grad(lambda x: losses.reinforce_loss(x, jnp.asarray(g), jnp.asarray(b)))(
      jnp.asarray(lp))
  np.testing.assert_allclose(grad, -(g - b) / 30, rtol=1e-12)


def test_grpo_advantages_match_loop():
  r = _rng(4)
  rew = r.normal(size=(6, 8))
  ref = np.stack([(row - row.mean()) / (row.std() + 1e-6) for row in rew])
  np.testing.assert_allclose(losses.grpo_advantages(rew), ref, rtol=1e-10)
  np.testing.assert_allclose(losses.grpo_advantages(rew, scale=False),
                             rew - rew.mean(-1, keepdims=True), rtol=1e-10)
  np.testing.assert_allclose(losses.grpo_advantages(jnp.ones((2, 4))), 0.0)


def test_kl_k3_is_unbiased_and_nonnegative():
  # p = N(0,1), ref = N(0.5,1): KL(p||ref) = 0.125.
  x = np.random.default_rng(5).normal(size=400_000)
  log_p = -0.5 * x ** 2
  log_ref = -0.5 * (x - 0.5) ** 2
  k3 = np.asarray(losses.kl_k3(log_p, log_ref))
  assert (k3 >= 0).all()
  np.testing.assert_allclose(k3.mean(), 0.125, atol=3e-3)
  d = log_ref[:5] - log_p[:5]
  np.testing.assert_allclose(k3[:5], np.exp(d) - d - 1, rtol=1e-12)


def _gae_loop(r, v, nv, term, done, gamma, lam):
  T, E = r.shape
  adv = np.zeros((T, E))
  for e in range(E):
    last = 0.0
    for t in reversed(range(T)):
      delta = r[t, e] + gamma * (1 - term[t, e]) * nv[t, e] - v[t, e]
      last = delta + gamma * lam * (1 - done[t, e]) * last
      adv[t, e] = last
  return adv


def test_gae_matches_loop_with_termination_and_truncation():
  rng = _rng(6)
  T, E = 23, 5
  r, v, nv = rng.normal(size=(T, E)), rng.normal(size=(T, E)), rng.normal(size=(T, E))
  term = rng.random((T, E)) < 0.1
  trunc = (rng.random((T, E)) < 0.1) & ~term
  done = term | trunc
  adv, targets = gae_lib.gae(r, v, nv, term, done, 0.97, 0.9)
  ref = _gae_loop(r, v, nv, term.astype(float), done.astype(float), 0.97, 0.9)
  np.testing.assert_allclose(adv, ref, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(targets, ref + v, rtol=1e-10, atol=1e-12)


def test_gae_truncation_bootstraps_but_termination_does_not():
  r = np.ones((1, 2))
  v = np.zeros((1, 2))
  nv = np.full((1, 2), 10.0)
  term = np.array([[True, False]])
  done = np.array([[True, True]])  # env 1 truncated
  adv, _ = gae_lib.gae(r, v, nv, term, done, 0.9, 0.95)
  np.testing.assert_allclose(adv, [[1.0, 1.0 + 0.9 * 10.0]])


def test_discounted_returns_matches_loop():
  rng = _rng(7)
  r = rng.normal(size=(11, 3))
  d = rng.random((11, 3)) < 0.2
  boot = rng.normal(size=3)
  g = np.asarray(gae_lib.discounted_returns(r, d, 0.9, bootstrap=boot))
  ref = np.zeros_like(r)
  nxt = boot.copy()
  for t in reversed(range(11)):
    nxt = r[t] + 0.9 * (1 - d[t]) * nxt
    ref[t] = nxt
  np.testing.assert_allclose(g, ref, rtol=1e-12)
