"""RM baselines: EMSR-b hand case, MR adjustment, LP (simplex) vs brute force, policies' ranges."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from jaxrl_suite.envs.rail import baselines as B
from jaxrl_suite.envs.rail import emsr, evaluate as E, forecast, lp, make_rail


def test_emsr_b_two_class_hand_case():
  # r1 = 100, r2 = 60, mu1 = 20, sigma1 = 5: y1 = 20 + 5 * Phi^-1(1 - 0.6) = 18.733
  y = emsr.protection_levels(jnp.array([100.0, 60.0]), jnp.array([20.0, 30.0]),
                             jnp.array([5.0, 6.0]))
  np.testing.assert_allclose(float(y[0]), 20 + 5 * norm.ppf(0.4), rtol=1e-5)
  # capacity 50: booking limit of class 2 = 50 - 18.73 -> open; capacity 19: limit 0.27 < 1 seat
  assert int(emsr.lowest_open(50.0, jnp.array([100.0, 60.0]), jnp.array([20.0, 30.0]),
                              jnp.array([5.0, 6.0]))) == 1
  assert int(emsr.lowest_open(19.0, jnp.array([100.0, 60.0]), jnp.array([20.0, 30.0]),
                              jnp.array([5.0, 6.0]))) == 0


def test_emsr_b_three_class_pooled_fares():
  f, mu, sd = np.array([200.0, 120.0, 80.0]), np.array([10.0, 15.0, 30.0]), np.array([3., 4., 6.])
  y = np.asarray(emsr.protection_levels(jnp.asarray(f), jnp.asarray(mu), jnp.asarray(sd)))
  rbar2 = (200 * 10 + 120 * 15) / 25
  np.testing.assert_allclose(y[1], 25 + np.sqrt(9 + 16) * norm.ppf(1 - 80 / rbar2), rtol=1e-5)


def test_mr_adjustment_hand_case():
  # R_j, Q_j with class 2 adding 10 seats and 300 revenue -> f2 = 30; class 3 adds revenue < 0
  f, d = emsr.mr_adjust(jnp.array([1000.0, 1300.0, 1250.0]), jnp.array([10.0, 20.0, 35.0]))
  np.testing.assert_allclose(np.asarray(f), [100.0, 30.0, -50.0 / 15.0], rtol=1e-5)
  np.testing.assert_allclose(np.asarray(d), [10.0, 10.0, 15.0])
  # an inefficient class (negative marginal revenue) is never opened, whatever the capacity
  j = emsr.lowest_open(1e6, f, d, jnp.sqrt(d))
  assert int(j) == 1


def _brute_force_lp(c, a, b):
  """max c.x, A x <= b, x >= 0 by enumerating the vertices (basic solutions)."""
  m, n = a.shape
  full = np.concatenate([a, np.eye(m)], 1)
  best = -np.inf
  for cols in itertools.combinations(range(n + m), m):
    bm = full[:, cols]
    if abs(np.linalg.det(bm)) < 1e-10:
      continue
    xb = np.linalg.solve(bm, b)
    if np.any(xb < -1e-9):
      continue
    x = np.zeros(n + m)
    x[list(cols)] = xb
    best = max(best, float(c @ x[:n]))
  return best


@pytest.mark.parametrize("seed", range(6))
def test_simplex_matches_brute_force_and_strong_duality(seed):
  rng = np.random.default_rng(seed)
  m, n = 3, 4
  a = rng.uniform(0, 2, (m, n)) * (rng.uniform(size=(m, n)) < 0.8)
  b, c = rng.uniform(0.5, 5, m), rng.uniform(-1, 3, n)
  with jax.enable_x64(True):
    x, v, y = lp.simplex_max(jnp.asarray(c), jnp.asarray(a), jnp.asarray(b))
    x, y = np.asarray(x), np.asarray(y)
  ref = _brute_force_lp(c, a, b)
  np.testing.assert_allclose(float(v), ref, rtol=1e-9, atol=1e-9)
  assert np.all(a @ x <= b + 1e-9) and np.all(x >= -1e-12) and np.all(y >= -1e-12)
  np.testing.assert_allclose(float(b @ y), ref, rtol=1e-9, atol=1e-9)


def test_bid_price_lp_on_tiny_instance_matches_brute_force():
  """The per-train CDLP built from the env's forecasts: simplex optimum == vertex enumeration,
  and its duals are the bid prices the policy uses."""
  env, p = make_rail("tiny")
  _, s = env.reset_env(jax.random.PRNGKey(0), p)
  lam = forecast.window_demand(s.time, p, True)
  _, leg, _, rev_op, closed = forecast.by_level(s, p, lam)
  rev = np.asarray(rev_op - closed[:, None], np.float64)
  for a_i in range(2):
    runs = np.asarray(p.capacity[a_i]) > 0
    lg = np.asarray(leg[a_i], np.float64)[:, runs]                    # [L, legs run]
    a = np.concatenate([lg.T, np.ones((1, lg.shape[0]))], 0)
    b = np.concatenate([np.asarray(s.remaining[a_i], np.float64)[runs], [1.0]])
    with jax.enable_x64(True):
      _, v, y = lp.simplex_max(jnp.asarray(rev[a_i]), jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(float(v), _brute_force_lp(rev[a_i], a, b), rtol=1e-7)
  pi, _, _ = B.bid_prices(s, p, 1.0)
  assert np.all(np.asarray(pi) >= -1e-4)
  # capacity is tight on the tiny instance (10 seats, heavy demand): some leg has a bid price
  assert float(jnp.max(pi)) > 0


# `make test` checks two of the families (static, the LP bid price); the rest (6-12 CPU-s each
# with a cold compile cache) run in test-slow. Rationing, not the policy, prevents overselling.
_DEFAULT_FAMILIES = ("static", "cdlp")


@pytest.mark.parametrize("name", [n if n in _DEFAULT_FAMILIES else
                                  pytest.param(n, marks=pytest.mark.slow) for n in B.BASELINES])
def test_baselines_return_valid_buckets_and_never_oversell(name):
  env, p = make_rail("tiny")
  keys = jax.random.split(jax.random.PRNGKey(1), 4)
  th = B.THETA_GRID[name][len(B.THETA_GRID[name]) // 2]
  pol = E.baseline_policy(B.POLICIES[name], p, th)
  m = jax.jit(lambda ks: E.evaluate(env, p, pol, ks))(keys)
  assert float(jnp.min(m["min_remaining"])) >= 0
  assert np.all(np.isfinite(np.asarray(m["revenue_total"])))
  _, s = env.reset_env(keys[0], p)
  a = np.asarray(B.POLICIES[name](keys[0], s, p, th))
  assert a.shape == (2,) and a.min() >= 0 and a.max() < 8
