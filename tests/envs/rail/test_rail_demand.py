"""Demand model: MNL vs a float64 numpy reference, Poisson splitting, rationing never oversells."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from jaxrl_suite.envs.rail import demand


def _np_mnl(u, avail):
  e = np.where(avail[:, :, None] > 0, np.exp(u), 0.0)
  z = 1.0 + e.sum(0)
  return e / z[None], 1.0 / z


def test_mnl_shares_match_numpy_reference():
  rng = np.random.default_rng(0)
  u = rng.normal(0, 2, (5, 4, 3))
  avail = (rng.uniform(size=(5, 4)) < 0.7).astype(np.float64)
  with jax.enable_x64(True):
    p, p0 = demand.mnl_shares(jnp.asarray(u), jnp.asarray(avail))
    np.testing.assert_allclose(np.asarray(p), _np_mnl(u, avail)[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(p0), _np_mnl(u, avail)[1], rtol=1e-12)
    ls = demand.logsum(jnp.asarray(u), jnp.asarray(avail))
    ref = np.log(1 + np.where(avail[:, :, None] > 0, np.exp(u), 0).sum(0))
    np.testing.assert_allclose(np.asarray(ls), ref, rtol=1e-12)


def test_mnl_is_stable_for_large_utilities():
  u = jnp.full((3, 2, 1), 500.0)
  p, p0 = demand.mnl_shares(u, jnp.ones((3, 2)))
  np.testing.assert_allclose(np.asarray(p.sum(0) + p0), 1.0, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(p[:, 0, 0]), 1 / 3, rtol=1e-5)


@pytest.mark.parametrize("lam", [0.3, 4.0, 9.5, 25.0, 300.0])
def test_poisson_sampler_mean_and_variance(lam):
  x = np.asarray(demand.poisson(jax.random.PRNGKey(1), jnp.full((40000,), lam)))
  assert np.all(x == np.round(x)) and x.min() >= 0
  se = np.sqrt(lam / x.size)
  assert abs(x.mean() - lam) < 5 * se
  assert abs(x.var() / lam - 1) < 0.05


def test_poisson_small_means_are_the_inverse_cdf_of_a_float64_reference():
  """mean <= SMALL: count = #{k : CDF_k < u} for the sampler's own uniforms, against a float64
  CDF; only draws with u within float32 rounding of a CDF value may differ."""
  from scipy.special import gammaln
  key = jax.random.PRNGKey(7)
  mean = jnp.asarray(np.random.default_rng(0).uniform(0.0, demand.SMALL, 200_000), jnp.float32)
  x = np.asarray(demand.poisson(key, mean))
  u = np.asarray(jax.random.uniform(jax.random.split(key)[0], mean.shape), np.float64)
  lam = np.asarray(mean, np.float64)[:, None]
  k = np.arange(demand._N_TERMS)
  cdf = np.cumsum(np.exp(-lam + k * np.log(lam) - gammaln(k + 1)), -1)
  ref = (cdf < u[:, None]).sum(-1)
  bad = x != ref
  assert bad.mean() < 1e-4                        # a handful of boundary draws at most
  gap = np.abs(cdf[bad, np.minimum(ref[bad], x[bad]).astype(int)] - u[bad])
  assert np.all(gap < 1e-5)                       # and only where u sits on a CDF value (float32)


def test_poisson_splitting_conserves_expected_demand():
  """Counts per alternative incl. the outside option: sum of means == lam, exactly and sampled."""
  rng = np.random.default_rng(2)
  u = jnp.asarray(rng.normal(0, 1, (4, 3, 2)), jnp.float32)
  p, p0 = demand.mnl_shares(u, jnp.ones((4, 3)))
  probs = jnp.concatenate([p, p0[None]], 0)                    # [5, M, G]
  lam = jnp.asarray(rng.uniform(2, 60, (3, 2)), jnp.float32)
  np.testing.assert_allclose(np.asarray((lam[None] * probs).sum(0)), np.asarray(lam), rtol=1e-5)
  keys = jax.random.split(jax.random.PRNGKey(3), 4000)
  n = jax.vmap(lambda k: demand.split_poisson(k, lam, probs))(keys)   # [R, 5, M, G]
  total = np.asarray(n.sum(1))
  se = np.sqrt(np.asarray(lam) / keys.shape[0])
  assert np.all(np.abs(total.mean(0) - np.asarray(lam)) < 5 * se + 0.02)


_RATION = jax.jit(demand.ration)


@given(st.integers(0, 10_000), st.floats(0.0, 40.0))
def test_rationing_never_oversells(seed, scale):
  """Fixed shapes (one compile), random markets / requests / seats: no leg is oversold."""
  rng = np.random.default_rng(seed)
  m, n_trains, n_legs = 6, 4, 4
  legs = np.zeros((m, n_legs), np.float32)
  for i in range(m):
    o = rng.integers(0, n_legs)
    legs[i, o:rng.integers(o + 1, n_legs + 1)] = 1
  n = rng.poisson(scale, (n_trains, m, 2)).astype(np.float32)
  rem = rng.integers(0, 40, (n_trains, n_legs)).astype(np.float32)
  acc = np.asarray(_RATION(jnp.asarray(n), jnp.asarray(rem), jnp.asarray(legs)))
  used = np.asarray(demand.seats_used(jnp.asarray(acc), jnp.asarray(legs)))
  assert np.all(used <= rem + 1e-4)
  assert np.all(acc <= n) and np.all(acc >= 0) and np.all(acc == np.floor(acc))
  # nothing is refused where every leg has room
  fits = (n.sum(-1) @ legs <= rem)
  free = np.all(np.where(legs[None] > 0, fits[:, None, :], True), -1)
  np.testing.assert_array_equal(acc[free], n[free])
