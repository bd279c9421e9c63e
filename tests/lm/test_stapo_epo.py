"""EPO as a baseline on the shared learner: its advantage, coefficient and history (float64 numpy
references) and the probe that its surprisal advantage is the entropy gradient."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from jaxrl_suite.lm import stapo


def ref_epo_adv(adv, s, valid, g, c):
  out = np.zeros_like(adv)
  b, t = adv.shape
  for i in range(b):
    grp = range((i // g) * g, (i // g + 1) * g)
    vals = [s[a, j] for a in grp for j in range(t) if valid[a, j]]
    base = np.mean(vals) if vals else 0.0
    for j in range(t):
      if valid[i, j]:
        out[i, j] = adv[i, j] + c * (s[i, j] - base)
  return out


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.floats(-0.2, 0.2))
def test_epo_advantages_match_reference(seed, c):
  rng = np.random.default_rng(seed)
  g, t = 3, 4
  adv = rng.normal(size=(2 * g, t))
  s = rng.uniform(0, 3, (2 * g, t))
  valid = rng.uniform(size=(2 * g, t)) < 0.8
  got = stapo.epo_advantages(jnp.asarray(adv, jnp.float32), jnp.asarray(s, jnp.float32),
                             jnp.asarray(valid), g, jnp.float32(c))
  np.testing.assert_allclose(np.asarray(got, np.float64), ref_epo_adv(adv, s, valid, g, c),
                             rtol=1e-5, atol=1e-5)


def test_batch_entropy_is_mean_of_trajectory_means():
  h = np.array([[1.0, 3.0, 9.0], [2.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
  valid = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0]], bool)   # last trajectory empty
  got = float(stapo.batch_entropy(jnp.asarray(h), jnp.asarray(valid)))
  np.testing.assert_allclose(got, (2.0 + 2.0) / 2, rtol=1e-6)


def test_coefficient_band_phase_and_history():
  fresh = stapo.init_history()
  # no history yet: only the entropy bonus lambda
  assert float(stapo.epo_coefficient(fresh, jnp.float32(0.1), 0.05, 0.1)) == np.float32(0.05)
  hist = stapo.update_history(fresh, jnp.float32(2.0))
  assert bool(hist.seen) and int(hist.iteration) == 1 and float(hist.mean) == 2.0
  hist = stapo.update_history(hist, jnp.float32(1.0), decay=0.9)
  np.testing.assert_allclose(float(hist.mean), 0.9 * 2.0 + 0.1 * 1.0, rtol=1e-6)
  h = stapo.EntropyHistory(jnp.float32(2.0), jnp.bool_(True), jnp.int32(15))
  kw = dict(coef=0.05, smooth=0.1, lower=0.9, upper=1.1, phase_steps=30)
  # half-way through the phase: w = 0.5; below the band pushes up, above pushes down
  np.testing.assert_allclose(float(stapo.epo_coefficient(h, jnp.float32(1.0), **kw)), 0.1, rtol=1e-6)
  np.testing.assert_allclose(float(stapo.epo_coefficient(h, jnp.float32(3.0), **kw)), 0.0, atol=1e-7)
  np.testing.assert_allclose(float(stapo.epo_coefficient(h, jnp.float32(2.1), **kw)), 0.05, rtol=1e-6)
  late = h._replace(iteration=jnp.int32(90))       # w capped at 1
  np.testing.assert_allclose(float(stapo.epo_coefficient(late, jnp.float32(3.0), **kw)), -0.05,
                             rtol=1e-6)


def test_surprisal_advantage_is_the_entropy_gradient():
  """Known answer: for pi = softmax(theta), sum_a pi(a) grad log pi(a) (-log pi(a)) = grad H
  exactly (E[grad log pi] = 0), so the advantage c s_t trains the entropy term c H."""
  theta = jnp.array([0.3, -1.2, 2.0, 0.1, 0.0], jnp.float64 if jax.config.x64_enabled
                    else jnp.float32)
  logp = jax.nn.log_softmax(theta)
  p = jnp.exp(logp)
  jac = jax.jacobian(lambda th: jax.nn.log_softmax(th))(theta)       # [a, theta]
  pg = (p[:, None] * jac * (-logp)[:, None]).sum(0)
  grad_h = jax.grad(lambda th: -(jax.nn.softmax(th) * jax.nn.log_softmax(th)).sum())(theta)
  np.testing.assert_allclose(np.asarray(pg), np.asarray(grad_h), rtol=1e-5, atol=1e-6)
  assert float(jnp.abs(grad_h).max()) > 0.05
