"""Test problems: the hub MDP exactly as specified, random families, samplers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.ope import mdps as M


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def test_hub_exact_quantities():
  p = M.hub_mdp()
  ex = M.problem_exact(p)
  assert ex["J"] == pytest.approx(45 / 38, abs=1e-13)
  np.testing.assert_allclose(ex["dpi"], np.array([319, 319, 81, 81, 540, 180]) / 1520, atol=1e-14)
  np.testing.assert_allclose(p.dmu, np.array([638, 638, 81, 81, 2160, 1440]) / 5038, atol=1e-15)
  np.testing.assert_allclose(ex["w"], 2519 / 6080 * M.HUB_WTILDE, atol=1e-13)
  np.testing.assert_allclose(ex["Q"], [45 / 38] * 4 + [81 / 76, 157 / 76], atol=1e-13)
  np.testing.assert_allclose(p.mu[:, 1], [0.5, 0.5, 0.4], atol=1e-12)
  # (i) ratio realizable, (ii) Q not, span not complete
  assert M.span_residual(p.phi, ex["w"]) < 1e-14
  assert M.span_residual(p.phi, ex["Q"], p.dmu) > 0.1
  ppi_wt = ex["Ppi"] @ M.HUB_WTILDE
  np.testing.assert_allclose(ppi_wt, [1.75, 1.75, 1.75, 1.75, 4, 8], atol=1e-12)
  assert M.span_residual(p.phi, ppi_wt) > 0.3


def test_hub_population_estimators_and_singular_point():
  p = M.hub_mdp()
  ex = M.problem_exact(p)
  vals, rho = M.population_fqe(p.phi, p.dmu, ex, p.gamma)
  assert rho == pytest.approx(1.1516, abs=1e-4)
  assert vals[10] == pytest.approx(0.978, abs=1e-3) and vals[50] == pytest.approx(65.3, abs=0.1)
  _, rho_w = M.population_fqe(p.phi, p.dmu, ex, p.gamma, weights=ex["w"])
  assert rho_w == pytest.approx(0.9, abs=1e-9) and rho_w <= np.sqrt(0.9)
  assert M.population_iv(p.phi, p.extra["psi"], p.dmu, ex, p.gamma)[0] == pytest.approx(45 / 38, abs=1e-12)
  tstar = M.hub_singular_t()
  assert tstar == pytest.approx(0.33696, abs=1e-5)
  x = M.hub_singular_path(tstar)
  b = p.phi.T @ (p.dmu[:, None] * (x - p.gamma * ex["Ppi"] @ x))
  assert np.linalg.svd(b)[1].min() < 1e-10


@pytest.mark.parametrize("family", ["moderate", "severe"])
def test_random_families_contain_ratio_not_q(family):
  rng = np.random.default_rng(0)
  for _ in range(3):
    p = M.random_mdp(rng, family)
    ex = M.problem_exact(p)
    assert M.span_residual(p.phi, ex["w"]) < 1e-10
    assert M.span_residual(p.phi, ex["Q"] - p.dmu @ ex["Q"], p.dmu) > 0.05
    j, _, _ = M.population_iv(p.phi, p.phi, p.dmu, ex, p.gamma)
    assert j == pytest.approx(ex["J"], rel=1e-9)
    assert abs(ex["dpi"].sum() - 1) < 1e-12 and abs(p.dmu.sum() - 1) < 1e-12
  with pytest.raises(ValueError, match="unknown family"):
    M.random_mdp(rng, "nope")


def test_multi_policy_features_contain_every_ratio():
  prob, pis = M.multi_policy_mdp(np.random.default_rng(0), num_policies=5, num_states=8,
                                 num_actions=3, horizon=20)
  for pk in pis:
    w = M.exact(prob.P, prob.R, pk, prob.d0, prob.gamma)["dpi"] / prob.dmu
    assert M.span_residual(prob.phi, w) < 1e-9


def test_samplers_match_the_data_distribution():
  p = M.hub_mdp()
  probs = M.cell_probs(p)
  counts = M.sample_cell_counts(jax.random.PRNGKey(0), 200_000.0, jnp.asarray(probs))
  assert float(counts.sum()) == 200_000
  np.testing.assert_allclose(np.asarray(counts) / 2e5, probs, atol=4e-3)
  x, sp = M.sample_transitions(jax.random.PRNGKey(1), p, 50_000)
  freq = np.bincount(np.asarray(x), minlength=6) / 50_000
  np.testing.assert_allclose(freq, p.dmu, atol=0.01)
  # deterministic transitions: s' is the designed successor
  nxt = np.array([2, 2, 2, 2, 0, 1])
  np.testing.assert_array_equal(np.asarray(sp), nxt[np.asarray(x)])
  # same key, same draw
  x2, _ = M.sample_transitions(jax.random.PRNGKey(1), p, 50_000)
  np.testing.assert_array_equal(np.asarray(x), np.asarray(x2))


def test_trajectory_sampler_follows_dynamics():
  p = M.hub_mdp()
  tr = M.sample_trajectories(jax.random.PRNGKey(2), p.P, p.R, p.mu, p.d0, 50, 12)
  s, a, r, sp = (np.asarray(tr[k]) for k in ("states", "actions", "rewards", "next_states"))
  assert s.shape == (50, 12)
  assert (s[:, 0] == 0).all()                               # d0 = delta_s0
  np.testing.assert_array_equal(s[:, 1:], sp[:, :-1])       # chained
  np.testing.assert_allclose(r, p.R[s, a])
  assert (p.P[s, a, sp] > 0).all()
