"""FORE estimator: population exactness, numpy reference, CIs, batching, chunking, checks.

float64 via `jax.enable_x64(True)` (jax 0.10 spelling of the x64 context). Population values come
from the FORE design notes (docs/fore.md) (deterministic); finite-n thresholds from its tables.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M

J_HUB = 45.0 / 38.0


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def np_fore(z, x, xn, r, c, nu0, gamma, ridge=0.0):
  """numpy reference (the closed-form algebra, written independently in numpy)."""
  n = c.sum()
  d = z.shape[1]
  a = (z * c[:, None]).T @ (x - gamma * xn) / n
  b = (z * c[:, None]).T @ r / n
  lam = ridge * np.trace((z * c[:, None]).T @ z / n) / d
  areg = a + lam * np.eye(d)
  theta = np.linalg.solve(areg, b)
  u = np.linalg.solve(areg.T, nu0)
  delta = r + gamma * xn @ theta - x @ theta
  psi = (z @ u) * delta
  mean = (c * psi).sum() / n
  var = (c * (psi - mean) ** 2).sum() / (n - 1)
  return nu0 @ theta, np.sqrt(var / n), theta, (1 - gamma) * u


def hub_cells():
  p = M.hub_mdp()
  phi, phn, r, nu0 = M.cell_arrays(p)
  return p, phi, phn, r, nu0, M.cell_probs(p)


def test_hub_population_exact():
  p, phi, phn, r, nu0, probs = hub_cells()
  res = F.fore(phi, phn, r, nu0, p.gamma, weights=probs * 1e6)  # exact d_mu x P as weights
  assert abs(float(res.value) - J_HUB) < 1e-12
  w = M.problem_exact(p)["w"]
  np.testing.assert_allclose(p.phi @ np.asarray(res.alpha), w, atol=1e-12)
  assert abs(float(res.mean_w) - 1.0) < 1e-12          # intercept in span(phi)
  assert abs(float(res.cond) - 7.35) < 0.01             # design value: cond A = 7.35
  assert float(res.frac_negative_w) == 0.0
  # LSTDQ's Q-hat is wrong although its value is exact (FORE design notes)
  qhat = p.phi @ np.asarray(res.theta)
  np.testing.assert_allclose(qhat, [1.184, 1.184, 0.856, 0.856, 1.349, 1.431], atol=1e-3)


def test_matches_numpy_reference_with_padding_and_weights():
  rng = np.random.default_rng(0)
  p = M.random_mdp(rng, "moderate")
  phi, phn, r, nu0 = M.cell_arrays(p)
  c = rng.multinomial(5000, M.cell_probs(p)).astype(float)
  for ridge in (0.0, 1e-3):
    ref = np_fore(phi, phi, phn, r, c, nu0, p.gamma, ridge)
    res = F.fore_core(jnp.asarray(phi), jnp.asarray(phn), jnp.asarray(r), jnp.asarray(c),
                      jnp.asarray(nu0), p.gamma, ridge)
    assert abs(float(res.value) - ref[0]) < 1e-10
    assert abs(float(res.se) - ref[1]) < 1e-12
    np.testing.assert_allclose(res.theta, ref[2], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(res.alpha, ref[3], rtol=1e-9, atol=1e-10)
  # theta form == ratio form; the MWL moment equations hold exactly at ridge 0, not with ridge
  r0 = F.fore_core(*(jnp.asarray(a) for a in (phi, phn, r, c, nu0)), p.gamma, 0.0)
  r1 = F.fore_core(*(jnp.asarray(a) for a in (phi, phn, r, c, nu0)), p.gamma, 1e-2)
  assert abs(float(r0.value_gap)) < 1e-10
  assert abs(float(r1.value_gap)) < 1e-10     # identity even with ridge (same A_lambda)
  assert float(r0.moment_residual) < 1e-12
  assert float(r1.moment_residual) > 1e-5


def test_instruments_iv_exact_on_hub():
  p = M.hub_mdp()
  z, _, r, _ = M.cell_arrays(p)
  x, xn, _, nu0x = M.cell_arrays(p, p.extra["psi"])
  res = F.fore(x, xn, r, nu0x, p.gamma, z=z, weights=M.cell_probs(p) * 1e6)
  assert abs(float(res.value) - J_HUB) < 1e-12
  lstdq_psi = F.fore(x, xn, r, nu0x, p.gamma, weights=M.cell_probs(p) * 1e6)
  assert abs(float(lstdq_psi.value) - 2.271293) < 1e-6


def test_vmap_equals_python_loop_with_zero_weight_padding():
  rng = np.random.default_rng(1)
  p = M.random_mdp(rng, "moderate")
  phi, phn, r, nu0 = M.cell_arrays(p)
  sets = []
  for n_rows in (300, 500, 420):   # ragged datasets, padded to 500 rows with weight 0
    idx = rng.integers(0, len(phi), n_rows)
    pad = 500 - n_rows
    padf = lambda a: np.concatenate([a[idx], np.zeros((pad,) + a.shape[1:])])
    w = np.concatenate([np.ones(n_rows), np.zeros(pad)])
    sets.append((padf(phi), padf(phn), padf(r), w, nu0, idx))
  batched = F.fore_batched(*(jnp.asarray(np.stack([s[i] for s in sets])) for i in range(5)), p.gamma, 0.0)
  for b, s in enumerate(sets):
    idx = s[5]
    single = F.fore(phi[idx], phn[idx], r[idx], nu0, p.gamma, on_ill_conditioned="ignore")
    np.testing.assert_allclose(batched.value[b], single.value, rtol=1e-10)
    np.testing.assert_allclose(batched.se[b], single.se, rtol=1e-9)
    np.testing.assert_allclose(batched.ess[b], single.ess, rtol=1e-9)


def test_chunked_scan_equals_in_memory():
  rng = np.random.default_rng(2)
  p = M.random_mdp(rng, "moderate")
  phi, phn, r, nu0 = M.cell_arrays(p)
  idx = rng.integers(0, len(phi), 10_001)
  args = [jnp.asarray(a[idx]) for a in (phi, phn, r)]
  w = jnp.asarray(rng.random(10_001))
  full = F.fore_core(*args, w, jnp.asarray(nu0), p.gamma)
  ch = F.fore_chunked(*args, w, jnp.asarray(nu0), p.gamma, chunk_size=1024)
  for f in ("value", "se", "sigma_min", "cond", "ess", "frac_negative_w", "mean_w"):
    assert float(ch.moment_residual) < 1e-10
    np.testing.assert_allclose(getattr(ch, f), getattr(full, f), rtol=1e-8, err_msg=f)


def test_fore_scan_generates_data_on_the_fly():
  p, phi, phn, r, nu0, probs = hub_cells()
  tab = [jnp.asarray(a) for a in (phi, phn, r)]
  key = jax.random.PRNGKey(3)
  chunk = 4096

  def chunk_fn(i):  # chunk i of i.i.d. transitions, regenerated identically in both passes
    cells = jax.random.choice(jax.random.fold_in(key, i), len(probs), (chunk,), p=jnp.asarray(probs))
    return tab[0][cells], tab[1][cells], tab[2][cells], jnp.ones(chunk)

  res = jax.jit(lambda: F.fore_scan(chunk_fn, 25, jnp.asarray(nu0), 0.9, dtype=jnp.float64))()
  assert float(res.n) == 25 * chunk
  assert abs(float(res.value) - J_HUB) < 5 * float(res.se)
  assert 0.002 < float(res.se) < 0.02


def test_cluster_robust_se():
  p, phi, phn, r, nu0, probs = hub_cells()
  rng = np.random.default_rng(4)
  idx = rng.choice(len(probs), 2000, p=probs)
  a = (phi[idx], phn[idx], r[idx])
  iid = F.fore(*a, nu0, p.gamma)
  singleton = F.fore(*a, nu0, p.gamma, cluster_ids=np.arange(2000) * 7)
  np.testing.assert_allclose(singleton.se, iid.se, rtol=1e-10)   # one sample per cluster == iid
  # duplicating every sample inside its own cluster: iid SE shrinks by sqrt(2), cluster SE does not
  a2 = tuple(np.concatenate([x, x]) for x in a)
  dup_iid = F.fore(*a2, nu0, p.gamma)
  dup_cl = F.fore(*a2, nu0, p.gamma, cluster_ids=np.concatenate([np.arange(2000)] * 2))
  np.testing.assert_allclose(dup_iid.se * np.sqrt(2), iid.se, rtol=1e-3)
  np.testing.assert_allclose(dup_cl.se, iid.se, rtol=1e-3)


def test_estimated_nu0_adds_variance():
  rng = np.random.default_rng(5)
  p = M.random_mdp(rng, "moderate")
  phi, phn, r, nu0 = M.cell_arrays(p)
  idx = rng.choice(len(phi), 3000, p=M.cell_probs(p))
  phi_pi_s = M.expected_next_features(p.phi, p.pi)
  s0 = rng.choice(p.num_states, 50, p=p.d0)
  nu0_samples = phi_pi_s[s0]
  kw = dict(on_ill_conditioned="ignore")
  exact_nu0 = F.fore(phi[idx], phn[idx], r[idx], nu0_samples.mean(0), p.gamma, **kw)
  est = F.fore(phi[idx], phn[idx], r[idx], nu0_samples, p.gamma, **kw)
  assert float(est.value) == pytest.approx(float(exact_nu0.value), rel=1e-10)
  extra = np.var(nu0_samples @ np.asarray(est.theta), ddof=1) / 50
  np.testing.assert_allclose(est.se ** 2, exact_nu0.se ** 2 + extra, rtol=1e-8)


def test_poisson_bootstrap_matches_sandwich_and_is_deterministic():
  p, phi, phn, r, nu0, probs = hub_cells()
  counts = jnp.asarray(np.random.default_rng(6).multinomial(10_000, probs).astype(float))
  args = [jnp.asarray(a) for a in (phi, phn, r)]
  key = jax.random.PRNGKey(0)
  b1 = F.poisson_bootstrap(key, *args, counts, jnp.asarray(nu0), p.gamma, num_boot=500,
                           weights_are_counts=True)
  b2 = F.poisson_bootstrap(key, *args, counts, jnp.asarray(nu0), p.gamma, num_boot=500,
                           weights_are_counts=True)
  np.testing.assert_array_equal(b1["values"], b2["values"])
  res = F.fore_core(*args, counts, jnp.asarray(nu0), p.gamma)
  assert float(b1["se"]) == pytest.approx(float(res.se), rel=0.15)
  assert float(b1["ci_low"]) < float(res.value) < float(b1["ci_high"])


def test_consistency_and_coverage_on_hub():
  """the FORE design notes: n=1e5 |mean-J|<0.01, RMSE<0.02; 200 seeds at n=1e4 coverage in [0.90, 0.99]."""
  p, phi, phn, r, nu0, probs = hub_cells()
  args = [jnp.asarray(a) for a in (phi, phn, r)]
  rng = np.random.default_rng(7)
  for n, seeds in ((100_000, 50), (10_000, 200)):
    counts = jnp.asarray(rng.multinomial(n, probs, size=seeds).astype(float))
    res = F.fore_over_weights(*args, counts, jnp.asarray(nu0), p.gamma, 0.0)
    v = np.asarray(res.value)
    if n == 100_000:
      assert abs(v.mean() - J_HUB) < 0.01
      assert np.sqrt(np.mean((v - J_HUB) ** 2)) < 0.02
    else:
      cov = np.mean(np.abs(v - J_HUB) <= 1.96 * np.asarray(res.se))
      assert 0.90 <= cov <= 0.99, cov


def test_ratio_weighted_fqe_fixed_point_equals_fore():
  p, phi, phn, r, nu0, probs = hub_cells()
  counts = jnp.asarray(np.random.default_rng(8).multinomial(20_000, probs).astype(float))
  args = [jnp.asarray(a) for a in (phi, phn, r)]
  res = F.fore_core(*args, counts, jnp.asarray(nu0), p.gamma)
  wf = F.ratio_weighted_fqe(*args, counts, jnp.asarray(nu0), p.gamma)
  assert bool(wf.converged)
  assert float(wf.spectral_radius) < 1.0
  assert abs(float(wf.value) - float(res.value)) < 1e-10
  plain = F.fitted_q_iteration(*args, counts, jnp.asarray(nu0), p.gamma, max_iters=200)
  assert float(plain.spectral_radius) > 1.1 and not bool(plain.converged)


def test_singular_a_is_refused_not_silent():
  p = M.hub_mdp()
  z, _, r, _ = M.cell_arrays(p)
  x, xn, _, nu0x = M.cell_arrays(p, M.hub_singular_path(M.hub_singular_t()))
  w = M.cell_probs(p) * 1e6
  with pytest.raises(F.IllConditionedError, match="not identified"):
    F.fore(x, xn, r, nu0x, p.gamma, z=z, weights=w)
  with pytest.warns(F.IllConditionedWarning):
    res = F.fore(x, xn, r, nu0x, p.gamma, z=z, weights=w, on_ill_conditioned="warn")
  assert float(res.sigma_min) < 1e-10
  # well-conditioned case: no warning at all
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    F.fore(z, *M.cell_arrays(p)[1:3], M.cell_arrays(p)[3], p.gamma, weights=w)


def test_statistical_identification_check_on_finite_samples():
  """At the singular point of the C1 path, A_n is invertible by sampling noise alone (cond ~1e2):
  the ident_t test must refuse it; at t = 0 (well identified) it must not."""
  p = M.hub_mdp()
  z, _, r, _ = (jnp.asarray(a) for a in M.cell_arrays(p))
  counts = jnp.asarray(np.random.default_rng(11).multinomial(10_000, M.cell_probs(p), size=100).astype(float))
  flags = {}
  for frac in (0.0, 1.0):
    x, xn, _, nu0x = (jnp.asarray(a) for a in M.cell_arrays(p, M.hub_singular_path(frac * M.hub_singular_t())))
    out = jax.vmap(lambda w: F.fore_core(x, xn, r, w, nu0x, p.gamma, z=z))(counts)
    flags[frac] = F.check_conditioning(out, np.float64, "ignore")
    if frac == 1.0:
      assert float(np.median(out.cond)) < 1e6           # the numerical check alone would pass it
  assert flags[0.0].mean() == 0.0
  assert flags[1.0].mean() >= 0.9   # ident_t ~ |N(0,1)| when A is singular: ~95% below 2
  x, xn, _, nu0x = M.cell_arrays(p, M.hub_singular_path(M.hub_singular_t()))
  with pytest.raises(F.IllConditionedError, match="standard errors of 0"):
    F.fore(x, xn, M.cell_arrays(p)[2], nu0x, p.gamma, z=np.asarray(z), weights=np.asarray(counts[0]))


@pytest.mark.parametrize("bad,match", [
    (dict(phi_next=np.zeros((10, 3))), "phi_next shape"),
    (dict(rewards=np.zeros(9)), "rewards must have shape"),
    (dict(rewards=np.r_[np.nan, np.zeros(9)]), "rewards contains non-finite"),
    (dict(gamma=1.0), "gamma must be a scalar in \\[0, 1\\)"),
    (dict(gamma=-0.1), "gamma must be"),
    (dict(nu0=np.zeros(3)), "nu0 must have shape"),
    (dict(weights=-np.ones(10)), "non-negative"),
    (dict(phi=np.zeros(10)), "phi must be 2-D"),
])
def test_bad_inputs_rejected(bad, match):
  rng = np.random.default_rng(0)
  kw = dict(phi=rng.random((10, 2)), phi_next=rng.random((10, 2)), rewards=rng.random(10),
            nu0=rng.random(2), gamma=0.9, weights=None)
  kw.update(bad)
  with pytest.raises(ValueError, match=match):
    F.fore(kw["phi"], kw["phi_next"], kw["rewards"], kw["nu0"], kw["gamma"], weights=kw["weights"])


def test_float32_vs_float64_documented_tolerance():
  """Documented behaviour: float32 agrees with float64 to ~cond(A) * eps32 relative error."""
  rng = np.random.default_rng(9)
  p = M.random_mdp(rng, "moderate")
  phi, phn, r, nu0 = M.cell_arrays(p)
  c = rng.multinomial(100_000, M.cell_probs(p)).astype(float)
  r64 = F.fore_core(*(jnp.asarray(a) for a in (phi, phn, r, c, nu0)), p.gamma)
  r32 = F.fore_core(*(jnp.asarray(a, jnp.float32) for a in (phi, phn, r, c, nu0)), p.gamma)
  assert r32.value.dtype == jnp.float32
  rel = abs(float(r32.value) - float(r64.value)) / abs(float(r64.value))
  bound = 100 * float(r64.cond) * np.finfo(np.float32).eps
  assert rel < bound, (rel, bound)
  assert abs(float(r32.value) - float(r64.value)) < 0.5 * float(r64.se)


def test_jit_deterministic_and_no_retrace():
  p, phi, phn, r, nu0, probs = hub_cells()
  args = [jnp.asarray(a) for a in (phi, phn, r, probs * 100, nu0)]
  f = jax.jit(F.fore_core)
  a, b = f(*args, 0.9), f(*args, 0.9)
  assert float(a.value) == float(b.value) and float(a.se) == float(b.se)
