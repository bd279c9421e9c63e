"""Audit mends in jaxrl_suite/ope/fore.py: no wasted n x d^2 product, one refusal threshold,
FQE divergence from the value's growth, the support diagnostic, the many-datasets paths."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.ope import baselines as B
from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _square_products(fn, n, d, *args):
  """Number of dot_generals in fn's jaxpr that contract the n axis into a (d, d) output, or
  (d, d + 1): A and b computed together as zᵀ[x − γx', r]."""
  jaxpr = jax.make_jaxpr(fn)(*args)
  return sum(1 for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"
             and tuple(e.outvars[0].aval.shape) in ((d, d), (d, d + 1)))


def test_closed_form_computes_only_one_n_by_d_squared_product():
  n, d = 64, 5
  rng = np.random.default_rng(0)
  phi, phn = rng.normal(size=(n, d)), rng.normal(size=(n, d)) * 0.5
  r, w, nu0 = rng.normal(size=n), np.ones(n), rng.normal(size=d)
  f_val = lambda *a: F.fore_value(*a, 0.9, 0.0)
  assert _square_products(f_val, n, d, phi, phn, r, w, nu0) == 1   # A only (was A and z^T z)
  # ridge still uses tr(E_n[z z^T]) = E_n[||z||^2]: same numbers as the explicit trace
  lam_ref = 1e-3 * np.trace(phi.T @ phi / n) / d
  a_ref = phi.T @ (phi - 0.9 * phn) / n
  want = nu0 @ np.linalg.solve(a_ref + lam_ref * np.eye(d), phi.T @ r / n)
  np.testing.assert_allclose(F.fore_value(phi, phn, r, w, nu0, 0.9, 1e-3), want, rtol=1e-10)
  np.testing.assert_allclose(F.fore_core(phi, phn, r, w, nu0, 0.9, 1e-3).value, want, rtol=1e-10)


def test_refusal_threshold_is_the_documented_one():
  warn64, err64 = F.conditioning_thresholds(jnp.float64)
  assert err64 == pytest.approx(1e10)                               # 1/rel_sigma_floor wins
  assert F.conditioning_thresholds(jnp.float32)[1] == pytest.approx(1 / (100 * 2 ** -23))
  assert "1e10 in float64" in F.__doc__
  for cond, refused in ((0.5 * err64, False), (2 * err64, True)):
    res = type("R", (), dict(value=np.float64(1.0), cond=np.float64(cond), sigma_min=1.0,
                             ident_t=np.float64(50.0)))()
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      assert bool(F.check_conditioning(res, np.float64, "ignore")) is refused


def test_fqe_divergence_follows_the_value_growth():
  p = M.hub_mdp()                          # rho = 1.15: FQE diverges with infinite data
  phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p))
  w = jnp.asarray(M.cell_probs(p)) * 1e6
  res = B.fqe(phi, phn, r, w, nu0, p.gamma, max_iters=100)
  assert float(res.spectral_radius) > 1.1
  assert bool(res.diverged) and not np.isfinite(float(res.value))   # was False, J = -5e5
  # A contracting problem stopped early (not converged, steps shrinking) is not "diverged",
  # nor is one run to round-off with tol = 0.
  q = M.random_mdp(np.random.default_rng(3), "moderate")
  phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(q))
  w = jnp.asarray(M.cell_probs(q)) * 1e6
  for k in (5, 600):
    res = B.fqe(phi, phn, r, w, nu0, q.gamma, max_iters=k)
    assert float(res.spectral_radius) < 1 and not bool(res.diverged), k
  exact = F.fore_core(phi, phn, r, w, nu0, q.gamma).value
  np.testing.assert_allclose(res.value, exact, rtol=1e-8)


def test_support_diagnostic_known_answer_and_warning():
  counts = jnp.array([100.0, 100.0, 3.0, 0.0])
  w_hat = jnp.array([0.5, 0.5, 10.0, 40.0])    # the unsampled cell's ratio is invisible
  d = F.support_diagnostic(w_hat, counts, k=10)
  mass = np.array([50.0, 50.0, 30.0, 0.0])
  assert float(d["rare_mass_share"]) == pytest.approx(30.0 / 130.0)
  assert float(d["ess"]) == pytest.approx(130.0 ** 2 / (25 + 25 + 300))
  assert float(d["ess_frac"]) == pytest.approx(float(d["ess"]) / 203.0)
  assert int(d["rare_cells"]) == 1 and mass[3] == 0
  with pytest.warns(F.SupportWarning, match="few samples"):
    assert bool(F.check_support(d))
  # per-sample rows with cell ids give the same answer as the count rows
  ids = jnp.asarray(np.repeat(np.arange(4), [100, 100, 3, 0]))
  d2 = F.support_diagnostic(w_hat[ids], jnp.ones(203), cell_ids=ids, num_cells=4, k=10)
  for k in ("rare_mass_share", "ess", "ess_frac"):
    np.testing.assert_allclose(d2[k], d[k], rtol=1e-12)
  ok = F.support_diagnostic(jnp.ones(4), jnp.full(4, 50.0), k=10)
  assert not bool(F.check_support(ok, warn=False))


def test_many_datasets_paths_agree_and_default_is_named():
  rng = np.random.default_rng(1)
  b, n, d = 3, 40, 4
  phi = rng.normal(size=(b, n, d))
  phn = 0.5 * rng.normal(size=(b, n, d))
  r, w, nu0 = rng.normal(size=(b, n)), np.ones((b, n)), rng.normal(size=(b, d))
  v = {p: np.asarray(F.fore_value_many(phi, phn, r, w, nu0, 0.9, path=p)) for p in F.MANY_PATHS}
  # float64 reference: each dataset's normal equations solved by numpy
  ref = [nu0[i] @ np.linalg.solve(phi[i].T @ (phi[i] - 0.9 * phn[i]), phi[i].T @ r[i])
         for i in range(b)]
  for p in F.MANY_PATHS:
    np.testing.assert_allclose(v[p], ref, rtol=1e-10, err_msg=p)   # float64 (x64 fixture)
    np.testing.assert_allclose(v[p], v["loop"], rtol=1e-12, err_msg=p)
  assert F.default_many_path() == "vmap"
  assert F.fore_value_many(phi, phn, r, w, nu0, 0.9).shape == (b,)
  with pytest.raises(ValueError, match="path"):
    F.fore_value_many(phi, phn, r, w, nu0, 0.9, path="threads")
