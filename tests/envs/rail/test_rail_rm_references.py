"""The RM baselines against independent float64 references (issue #38, step 1).

EMSR-b: our closed form (emsr.protection_levels, Phi^{-1} on cumulative sums) against a textbook
loop that *solves* Belobaba's defining equation

    r_{j+1} = r_bar_j * P(D_1 + ... + D_j > y_j),   D_i ~ N(mu_i, sigma_i^2) independent,

for y_j with scipy.optimize.brentq on scipy.stats.norm.sf (no inverse CDF, no cumsum), and the
nested booking limits b_{j+1} = C - y_j (a class is open while its limit is >= 1 seat and every
dearer class is open) against a plain Python scan.

CDLP / bid prices: our JAX simplex (lp.simplex_max) against scipy.optimize.linprog(method="highs")
on random LPs of the bid-price form (max c.x, A x <= b, x >= 0, b >= 0), and on the LPs the
`cdlp` policy builds from the ecml forecasts: same optimum, and our duals y are an optimal dual
solution (y >= 0, A^T y >= c, b.y = optimum; duals need not be unique, so that is what is
checked rather than equality with HiGHS's duals).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, linprog
from scipy.stats import norm

from jaxrl_suite.envs.rail import baselines as B
from jaxrl_suite.envs.rail import emsr, forecast, lp, make_rail
from jaxrl_suite.envs.rail.instance import NL_MAX

# ------------------------------------------------------------------ EMSR-b reference (float64)


def emsr_b_reference(fares, mu, sigma):
  """Belobaba EMSR-b protection levels y_1..y_{K-1} by root finding (fares decreasing)."""
  k = len(fares)
  y = np.zeros(k - 1)
  for j in range(1, k):
    m = sum(mu[i] for i in range(j))
    s = np.sqrt(sum(sigma[i] ** 2 for i in range(j)))
    r_bar = sum(fares[i] * mu[i] for i in range(j)) / m
    if fares[j] >= r_bar:          # the next class pays at least the protected mix: protect none
      continue
    g = lambda q: r_bar * norm.sf(q, loc=m, scale=s) - fares[j]
    lo, hi = m - 40 * s, m + 40 * s
    y[j - 1] = max(brentq(g, lo, hi, xtol=1e-12, rtol=1e-14), 0.0)
  return y


def lowest_open_reference(capacity, fares, y):
  """Cheapest open class (0-based): classes open in fare order while C - y_j >= 1 and fare > 0."""
  j = 0
  for i in range(1, len(fares)):
    if capacity - y[i - 1] >= 1.0 and fares[i] > 0:
      j = i
    else:
      break
  return j


@st.composite
def emsr_instances(draw):
  k = draw(st.integers(2, 8))
  top = draw(st.floats(20.0, 500.0))
  steps = draw(st.lists(st.floats(0.55, 0.97), min_size=k - 1, max_size=k - 1))
  fares = top * np.cumprod([1.0] + steps)
  mu = np.array(draw(st.lists(st.floats(0.5, 60.0), min_size=k, max_size=k)))
  cv = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=k, max_size=k)))
  cap = draw(st.floats(1.0, 200.0))
  return fares, mu, mu * cv, cap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(emsr_instances())
def test_emsr_b_matches_root_finding_reference_float64(inst):
  fares, mu, sigma, cap = inst
  ref = emsr_b_reference(fares, mu, sigma)
  with jax.enable_x64(True):
    y = np.asarray(emsr.protection_levels(jnp.asarray(fares), jnp.asarray(mu), jnp.asarray(sigma)))
    # ours clips the tail probability to [1e-6, 1 - 1e-6]; stay inside it
    r_bar = np.cumsum(fares * mu)[:-1] / np.cumsum(mu)[:-1]
    frac = 1 - fares[1:] / r_bar
    assume(np.all((frac <= 0) | ((frac > 1e-6) & (frac < 1 - 1e-6))))
    np.testing.assert_allclose(y, ref, rtol=1e-7, atol=1e-7)
    # the booking decision: skip draws within float tolerance of the 1-seat threshold
    assume(np.all(np.abs(cap - ref - 1.0) > 1e-6))
    j = int(emsr.lowest_open(jnp.asarray(cap), jnp.asarray(fares), jnp.asarray(mu),
                             jnp.asarray(sigma)))
  assert j == lowest_open_reference(cap, fares, ref)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(emsr_instances())
def test_emsr_b_float32_production_precision(inst):
  """The policies run in float32: protection levels within 1e-3 relative (+ 1e-3 seats)."""
  fares, mu, sigma, _ = inst
  r_bar = np.cumsum(fares * mu)[:-1] / np.cumsum(mu)[:-1]
  frac = 1 - fares[1:] / r_bar
  assume(np.all((frac <= 0) | ((frac > 1e-4) & (frac < 1 - 1e-4))))
  y = np.asarray(emsr.protection_levels(jnp.asarray(fares, jnp.float32),
                                        jnp.asarray(mu, jnp.float32),
                                        jnp.asarray(sigma, jnp.float32)), np.float64)
  np.testing.assert_allclose(y, emsr_b_reference(fares, mu, sigma), rtol=1e-3, atol=1e-3)


def test_emsr_b_two_classes_is_littlewood():
  """K = 2: EMSR-b is Littlewood's rule, y_1 = F_1^{-1}(1 - r_2 / r_1) (textbook case)."""
  y = emsr_b_reference(np.array([100.0, 60.0]), np.array([20.0, 30.0]), np.array([5.0, 6.0]))
  np.testing.assert_allclose(y[0], norm.ppf(0.4, 20, 5), rtol=1e-10)


# ------------------------------------------------------------------ LP reference (HiGHS)


def _check_against_highs(c, a, b):
  with jax.enable_x64(True):
    x, v, y = lp.simplex_max(jnp.asarray(c), jnp.asarray(a), jnp.asarray(b))
    x, v, y = np.asarray(x), float(v), np.asarray(y)
  res = linprog(-c, A_ub=a, b_ub=b, bounds=[(0, None)] * len(c), method="highs")
  assert res.status == 0, res.message
  scale = 1.0 + abs(res.fun)
  np.testing.assert_allclose(v, -res.fun, atol=1e-8 * scale)
  np.testing.assert_allclose(c @ x, v, atol=1e-8 * scale)
  # primal feasible; dual feasible and strong duality: y is an optimal dual (bid prices)
  assert np.all(x >= -1e-10) and np.all(a @ x <= b + 1e-8 * (1 + np.abs(b)))
  assert np.all(y >= -1e-10)
  assert np.all(a.T @ y >= c - 1e-8 * scale)
  np.testing.assert_allclose(b @ y, -res.fun, atol=1e-8 * scale)
  return y, res


@st.composite
def bid_price_lps(draw):
  """LPs of the CDLP form: legs x buckets seat-use matrix, one time-budget row, capacities."""
  n_leg, n_b = draw(st.sampled_from([(1, 3), (2, 4), (4, 8), (7, 8)]))
  seed = draw(st.integers(0, 2 ** 31 - 1))
  rng = np.random.default_rng(seed)
  use = rng.uniform(0, 100, (n_leg, n_b)) * (rng.uniform(size=(n_leg, n_b)) < 0.85)
  use = np.sort(use, axis=1)[:, ::-1]                 # dearer bucket, fewer seats asked
  rev = rng.uniform(-500, 4000, n_b)
  cap = rng.uniform(0, 120, n_leg) * (rng.uniform(size=n_leg) < 0.9)
  a = np.concatenate([use, np.ones((1, n_b))], 0)
  b = np.concatenate([cap, [1.0]])
  return rev, a, b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bid_price_lps())
def test_simplex_matches_highs_on_random_bid_price_lps(lp_inst):
  _check_against_highs(*lp_inst)


@pytest.mark.slow   # 12 LP shapes to compile
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bid_price_lps(), st.integers(1, 3))
def test_float32_duals_with_identical_legs_after_presolve(lp_inst, n_dup):
  """Legs with identical seat use (common on a line): after lp.drop_implied_rows the float32
  simplex returns an optimal dual of the original LP (without it, round-off rows are pivoted on
  and the bid prices come out several times too high)."""
  c, a, b = lp_inst
  a = np.concatenate([np.repeat(a[:1], n_dup, 0), a], 0)
  b = np.concatenate([np.repeat(b[:1], n_dup, 0), b], 0)
  res = linprog(-c, A_ub=a, b_ub=b, bounds=[(0, None)] * len(c), method="highs")
  a32, b32, drop = lp.drop_implied_rows(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
  assert int(drop.sum()) >= n_dup
  _, v, y = lp.simplex_max(jnp.asarray(c, jnp.float32), a32, b32)
  y = np.asarray(y, np.float64)
  scale = 1.0 + abs(res.fun) + np.max(np.abs(c))      # float32 round-off is relative to these
  np.testing.assert_allclose(float(v), -res.fun, atol=1e-5 * scale)
  assert np.all(y >= 0) and np.all(y[np.asarray(drop)] == 0)
  assert np.all(a.T @ y >= c - 1e-5 * scale)
  np.testing.assert_allclose(b @ y, -res.fun, atol=1e-5 * scale)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])
def test_cdlp_policy_lps_match_highs_on_ecml(seed):
  """The LPs `baselines.bid_prices` solves on ecml states reached by random fares: same optimum
  as HiGHS on every train, and the bid prices are optimal duals of the running legs."""
  env, p = make_rail("ecml")
  key = jax.random.PRNGKey(seed)
  _, s = env.reset_env(key, p)
  for t in range(3 + 3 * seed):
    key, ka, ks = jax.random.split(key, 3)
    _, s, _, _, _ = env.step_env(ks, s, jax.random.randint(ka, (12,), 0, 8), p)
  lam = forecast.window_demand(s.time, p, True) * forecast.shock_hat(s, p)[..., None, None]
  _, leg, _, rev_op, closed = forecast.by_level(s, p, lam)
  rev = np.asarray(rev_op - closed[:, None], np.float64)
  pi, _, _ = B.bid_prices(s, p, 1.0)
  n_l = rev.shape[1]
  for a_i in np.flatnonzero(np.asarray(p.agent_mask)):
    a = np.concatenate([np.asarray(leg[a_i], np.float64).T, np.ones((1, n_l))], 0)
    b = np.concatenate([np.maximum(np.asarray(s.remaining[a_i], np.float64), 0.0), [1.0]])
    _, res = _check_against_highs(rev[a_i], a, b)
    # the policy's float32 bid prices are an optimal dual of the same LP, to float32 accuracy
    y = np.concatenate([np.asarray(pi[a_i], np.float64), [0.0]])
    runs = np.asarray(p.capacity[a_i]) > 0
    assert np.all(y[:NL_MAX][~runs] * a[:NL_MAX][~runs].sum(1) == 0)
    # the time-budget dual of the policy's LP is not returned: it is the optimum minus the legs'
    # share, and dual feasibility then requires rev_k - pi . use_k <= that for every bucket
    u = -res.fun - b[:NL_MAX] @ y[:NL_MAX]
    scale = 1.0 + abs(res.fun)
    assert u >= -1e-3 * scale
    assert np.all(rev[a_i] - a[:NL_MAX].T @ y[:NL_MAX] <= u + 1e-3 * scale)
