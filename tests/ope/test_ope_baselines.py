"""Baselines: equivalences with FORE, FQE divergence, BRM bias, IS-family against numpy loops."""

import jax
import jax.numpy as jnp
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from jaxrl_suite.ope import baselines as B
from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _finite_sample(seed=0, n=4000, family="moderate"):
  rng = np.random.default_rng(seed)
  p = M.random_mdp(rng, family)
  phi, phn, r, nu0 = M.cell_arrays(p)
  c = rng.multinomial(n, M.cell_probs(p)).astype(float)
  return p, [jnp.asarray(a) for a in (phi, phn, r, c, nu0)]


@pytest.mark.parametrize("seed", [0, 1])
def test_mwl_dualdice_gradientdice_lstdq_equal_fore(seed):
  p, (phi, phn, r, c, nu0) = _finite_sample(seed)
  res = F.fore_core(phi, phn, r, c, nu0, p.gamma)
  j_mwl, a_mwl = B.mwl(phi, phn, r, c, nu0, p.gamma)
  j_dd, a_dd = B.dualdice(phi, phn, r, c, nu0, p.gamma)
  j_gd, beta, theta, eta = B.gradientdice(phi, phn, r, c, nu0, p.gamma)
  for v in (j_mwl, j_dd, j_gd, B.lstdq(phi, phn, r, c, nu0, p.gamma)):
    assert abs(float(v) - float(res.value)) < 1e-9
  np.testing.assert_allclose(a_mwl, res.alpha, atol=1e-9)
  np.testing.assert_allclose(a_dd, res.alpha, atol=1e-9)
  np.testing.assert_allclose(beta, res.alpha, atol=1e-9)
  assert float(jnp.max(jnp.abs(theta))) < 1e-9 and abs(float(eta)) < 1e-9


def test_dice_differs_from_fore_without_intercept():
  """Sanity: GradientDICE's normalisation is only inactive when the constant is in span(phi)."""
  p, (phi, phn, r, c, nu0) = _finite_sample(2)
  phi2, phn2, nu02 = phi[:, 1:] - phi[:, :1] * 0.3, phn[:, 1:] - phn[:, :1] * 0.3, nu0[1:] - nu0[:1] * 0.3
  res = F.fore_core(phi2, phn2, r, c, nu02, p.gamma)
  j_gd = B.gradientdice(phi2, phn2, r, c, nu02, p.gamma)[0]
  j_dd = B.dualdice(phi2, phn2, r, c, nu02, p.gamma)[0]
  assert abs(float(j_dd) - float(res.value)) < 1e-9      # DualDICE stays = MWL
  assert abs(float(j_gd) - float(res.value)) > 1e-6      # GradientDICE's extra constraint bites


def test_hub_fqe_diverges_brm_biased():
  p = M.hub_mdp()
  phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p))
  w = jnp.asarray(M.cell_probs(p) * 1e6)
  rho = float(B.fqe_spectral_radius(phi, phn, w, p.gamma))
  assert abs(rho - 1.1516) < 1e-4
  out = B.fqe(phi, phn, r, w, nu0, p.gamma, max_iters=200)
  assert abs(float(out.value)) > 1e9                     # design value: K=200 -> 1.0e11
  assert not bool(out.converged)
  blown = B.fqe(phi, phn, r, w, nu0, p.gamma, max_iters=1000, blowup=1e8)
  assert bool(blown.diverged) and int(blown.num_iters) < 1000
  assert abs(float(B.brm(phi, phn, r, w, nu0, p.gamma)) - 0.684147) < 1e-6
  ex = M.problem_exact(p)
  assert abs(M.population_brm(p.phi, p.dmu, ex, p.gamma) - 0.684147) < 1e-6


def test_fqe_converges_to_lstdq_when_stable():
  p, (phi, phn, r, c, nu0) = _finite_sample(3)
  rho = float(B.fqe_spectral_radius(phi, phn, c, p.gamma))
  assert rho < 1
  out = B.fqe(phi, phn, r, c, nu0, p.gamma, max_iters=5000, tol=1e-13)
  assert bool(out.converged)
  assert abs(float(out.value) - float(B.lstdq(phi, phn, r, c, nu0, p.gamma))) < 1e-8


# ---------------------------------------------------------------------------- trajectory family
def _np_estimators(r, pp, mp, mask, q, v, g):
  N, H = r.shape
  out = dict(IS=0.0, PDIS=0.0, DR=0.0)
  wsum, wg = 0.0, 0.0
  num, den = np.zeros(H), np.zeros(H)
  for i in range(N):
    rho, G, pd, dr = 1.0, 0.0, 0.0, 0.0
    for t in range(H):
      if not mask[i, t]:
        continue
      prev = rho
      rho *= pp[i, t] / mp[i, t]
      G += g ** t * r[i, t]
      pd += g ** t * rho * r[i, t]
      dr += g ** t * (rho * (r[i, t] - q[i, t]) + prev * v[i, t])
      num[t] += rho * r[i, t]
      den[t] += rho
    out["IS"] += rho * G / N
    out["PDIS"] += pd / N
    out["DR"] += dr / N
    wsum += rho
    wg += rho * G
  out["WIS"] = wg / wsum
  out["WPDIS"] = sum(g ** t * num[t] / den[t] for t in range(H) if den[t] > 0)
  return out


def test_is_family_matches_numpy_loops():
  rng = np.random.default_rng(0)
  N, H, g = 7, 6, 0.9
  r = rng.random((N, H))
  pp, mp = rng.uniform(0.1, 1, (N, H)), rng.uniform(0.1, 1, (N, H))
  mask = np.ones((N, H), bool)
  mask[0, 4:] = False
  q, v = rng.random((N, H)), rng.random((N, H))
  ref = _np_estimators(r, pp, mp, mask, q, v, g)
  a = [jnp.asarray(x) for x in (r, pp, mp, mask)]
  assert float(B.is_estimate(*a, g)) == pytest.approx(ref["IS"], rel=1e-12)
  assert float(B.wis(*a, g)) == pytest.approx(ref["WIS"], rel=1e-12)
  assert float(B.pdis(*a, g)) == pytest.approx(ref["PDIS"], rel=1e-12)
  assert float(B.wpdis(*a, g)) == pytest.approx(ref["WPDIS"], rel=1e-12)
  assert float(B.doubly_robust(*a, jnp.asarray(q), jnp.asarray(v), g)) == pytest.approx(ref["DR"], rel=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.1, 10.0))
def test_on_policy_is_equals_monte_carlo_and_scales(seed, scale):
  """Properties: pi == mu makes every IS variant the Monte-Carlo mean; estimates are linear in r."""
  rng = np.random.default_rng(seed)
  N, H, g = 5, 4, 0.8
  r = rng.random((N, H))
  p = rng.uniform(0.2, 1, (N, H))
  mask = jnp.ones((N, H), bool)
  mc = (r * g ** np.arange(H)).sum(1).mean()
  for f in (B.is_estimate, B.wis, B.pdis, B.wpdis):
    assert float(f(jnp.asarray(r), jnp.asarray(p), jnp.asarray(p), mask, g)) == pytest.approx(mc, rel=1e-10)
  p2 = rng.uniform(0.2, 1, (N, H))
  base = float(B.pdis(jnp.asarray(r), jnp.asarray(p2), jnp.asarray(p), mask, g))
  scaled = float(B.pdis(jnp.asarray(scale * r), jnp.asarray(p2), jnp.asarray(p), mask, g))
  assert scaled == pytest.approx(scale * base, rel=1e-10)


def test_dr_with_exact_q_on_deterministic_chain_telescopes():
  """Deterministic dynamics and rewards + the true Q^pi: DR telescopes per trajectory to
  V(s_0) - gamma^H rho_{0:H-1} V(s_H) (no sampling noise left except the tail)."""
  p = M.hub_mdp()
  ex = M.problem_exact(p)
  H = 30
  tr = M.sample_trajectories(jax.random.PRNGKey(0), p.P, p.R, p.mu, p.d0, 20, H)
  s, a, r, sp = (np.asarray(tr[k]) for k in ("states", "actions", "rewards", "next_states"))
  q = ex["Q"].reshape(3, 2)
  v_s = (p.pi * q).sum(1)
  rho = (p.pi[s, a] / p.mu[s, a]).prod(1)
  expected = np.mean(v_s[s[:, 0]] - p.gamma ** H * rho * v_s[sp[:, -1]])
  est = B.doubly_robust(jnp.asarray(r), jnp.asarray(p.pi[s, a]), jnp.asarray(p.mu[s, a]),
                        jnp.ones(r.shape, bool), jnp.asarray(q[s, a]), jnp.asarray(v_s[s]), p.gamma)
  assert float(est) == pytest.approx(expected, abs=1e-12)
  assert v_s[0] == pytest.approx(ex["J"], abs=1e-12)
