"""OPE baselines on the same logged data as FORE (pure, jittable).

Transition-based (same array conventions as `fore.py`: phi, phi_next, rewards, weights, nu0):
  fqe         iterative linear FQE (Le et al. 2019): θ ← Σ⁻¹ E_n[φ (r + γ φ'^T θ)]; converges iff
              ρ(γ Σ⁻¹ C) < 1, and then to the LSTDQ fixed point.
  lstdq       Lagoudakis & Parr 2003: E_n[φ (φ - γφ')^T] θ = E_n[φ r] (= FORE with z = φ).
  brm         Bellman-residual minimisation, min E_n[(φ^Tθ - r - γ φ'^Tθ)²] (single-sample
              residual; biased unless transitions are deterministic or φ' is an exact expectation).
  mwl         linear MWL (Uehara, Huang & Jiang 2020): A^T α = (1-γ) ν0, Ĵ = E_n[φ^T α r]/(1-γ).
  dualdice    linear DualDICE (Nachum et al. 2019): the saddle point of
              min_ν max_ζ E_n[(ν - γ ν') ζ - ζ²/2] - (1-γ) E[ν(s0)] with ν = φ^T β, ζ = φ^T α,
              solved from its KKT system [[Σ, -A], [-A^T, 0]] [α; β] = [0; -(1-γ) ν0].
  gradientdice linear GradientDICE (Zhang, Liu & Whiteson 2020), KKT system of the FORE design notes.
Trajectory-based (arrays (N, H): rewards, pi_probs = π(a_t|s_t), mu_probs = μ(a_t|s_t), mask):
  is_estimate / wis / pdis / wpdis / doubly_robust (Precup 2000; Jiang & Li 2016).
These estimate the H-truncated value Σ_{t<H} γ^t r_t (bias ≤ γ^H r_max/(1-γ)).

All DICE/MWL closed forms use their own solves (not FORE's), so equalities in tests are real.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.ope import fore as fore_lib

Array = jax.Array


def _moments(phi, phi_next, rewards, weights):
  dtype = jnp.result_type(phi.dtype, jnp.float32)
  m = weights.astype(dtype)
  n = m.sum()
  pm = phi * m[:, None]
  sigma = pm.T @ phi / n
  c = pm.T @ phi_next / n
  b = pm.T @ rewards.astype(dtype) / n
  return sigma, c, b, n, m


def _nu0(nu0, dtype):
  nu0 = jnp.asarray(nu0, dtype)
  return nu0 if nu0.ndim == 1 else nu0.mean(0)


# ---------------------------------------------------------------------------------- transitions
def fqe(phi, phi_next, rewards, weights, nu0, gamma, max_iters: int = 200, tol: float = 0.0,
        blowup: float = 1e12) -> fore_lib.FqeResult:
  """Iterative linear FQE (regression per iteration). tol=0 runs exactly `max_iters` iterations
  unless it blows up. Returns FqeResult (value = inf when diverged)."""
  return fore_lib.fitted_q_iteration(phi, phi_next, rewards, weights, nu0, gamma,
                                     max_iters=max_iters, tol=tol, blowup=blowup)


def fqe_spectral_radius(phi, phi_next, weights, gamma) -> Array:
  """ρ(γ Σ⁻¹ C): plain FQE converges iff this is < 1 (even with infinite data)."""
  sigma, c, _, _, _ = _moments(phi, phi_next, jnp.zeros(phi.shape[0], phi.dtype), weights)
  return jnp.max(jnp.abs(jnp.linalg.eigvals(gamma * jnp.linalg.solve(sigma, c))))


def lstdq(phi, phi_next, rewards, weights, nu0, gamma) -> Array:
  """LSTDQ value ν0^T A⁻¹ b (plain solve)."""
  sigma, c, b, _, _ = _moments(phi, phi_next, rewards, weights)
  theta = jnp.linalg.solve(sigma - gamma * c, b)
  return _nu0(nu0, sigma.dtype) @ theta


def brm(phi, phi_next, rewards, weights, nu0, gamma) -> Array:
  """Bellman-residual minimisation value (least squares on x = φ - γ φ')."""
  dtype = jnp.result_type(phi.dtype, jnp.float32)
  x = phi - gamma * phi_next
  m = weights.astype(dtype)
  xm = x * m[:, None]
  theta = jnp.linalg.solve(xm.T @ x, xm.T @ rewards.astype(dtype))
  return _nu0(nu0, dtype) @ theta


def mwl(phi, phi_next, rewards, weights, nu0, gamma) -> tuple[Array, Array]:
  """Linear MWL with W = F = span(φ): solve A^T α = (1-γ) ν0; Ĵ = E_n[φ^T α r]/(1-γ).

  Returns:
    (value, alpha).
  """
  sigma, c, _, n, m = _moments(phi, phi_next, rewards, weights)
  a_mat = sigma - gamma * c
  alpha = jnp.linalg.solve(a_mat.T, (1 - gamma) * _nu0(nu0, sigma.dtype))
  w = phi @ alpha
  return (m * w * rewards).sum() / n / (1 - gamma), alpha


def dualdice(phi, phi_next, rewards, weights, nu0, gamma) -> tuple[Array, Array]:
  """Linear DualDICE via its KKT system. Returns (value, zeta coefficients α)."""
  sigma, c, _, n, m = _moments(phi, phi_next, rewards, weights)
  d = phi.shape[-1]
  a_mat = sigma - gamma * c
  kkt = jnp.block([[sigma, -a_mat], [-a_mat.T, jnp.zeros((d, d), sigma.dtype)]])
  rhs = jnp.concatenate([jnp.zeros(d, sigma.dtype), -(1 - gamma) * _nu0(nu0, sigma.dtype)])
  sol = jnp.linalg.solve(kkt, rhs)
  alpha = sol[:d]
  return (m * (phi @ alpha) * rewards).sum() / n / (1 - gamma), alpha


def gradientdice(phi, phi_next, rewards, weights, nu0, gamma, lam: float = 1.0):
  """Linear GradientDICE via its KKT system (FORE design notes). Returns (value, tau coeffs β, θ, η).

  Unknowns (β: ratio τ = φ^T β, θ: critic f = φ^T θ, η: normalisation multiplier):
    -A^T β - Σ θ = -(1-γ) ν0;   φ̄^T β - η = 1;   -A θ + λ η φ̄ = 0.
  When the ratio is realizable and the constant is in span(φ): β = MWL α, θ = 0, η = 0.
  """
  sigma, c, _, n, m = _moments(phi, phi_next, rewards, weights)
  d = phi.shape[-1]
  dt = sigma.dtype
  a_mat = sigma - gamma * c
  phibar = (phi * m[:, None]).sum(0) / n
  zero_d = jnp.zeros((d, d), dt)
  kkt = jnp.block([
      [-a_mat.T, -sigma, jnp.zeros((d, 1), dt)],
      [phibar[None, :], jnp.zeros((1, d), dt), -jnp.ones((1, 1), dt)],
      [zero_d, -a_mat, lam * phibar[:, None]],
  ])
  rhs = jnp.concatenate([-(1 - gamma) * _nu0(nu0, dt), jnp.ones(1, dt), jnp.zeros(d, dt)])
  sol = jnp.linalg.solve(kkt, rhs)
  beta, theta, eta = sol[:d], sol[d:2 * d], sol[2 * d]
  return (m * (phi @ beta) * rewards).sum() / n / (1 - gamma), beta, theta, eta


# ---------------------------------------------------------------------------------- trajectories
def _cum_ratios(pi_probs, mu_probs, mask):
  rho = jnp.where(mask, pi_probs / mu_probs, 1.0)
  return jnp.cumprod(rho, axis=-1)


def _discounts(horizon, gamma, dtype):
  return gamma ** jnp.arange(horizon, dtype=dtype)


def is_estimate(rewards, pi_probs, mu_probs, mask, gamma) -> Array:
  """Trajectory-wise importance sampling: mean_i ρ_{0:H-1} Σ_t γ^t r_t."""
  w = _cum_ratios(pi_probs, mu_probs, mask)[:, -1]
  g = (jnp.where(mask, rewards, 0.0) * _discounts(rewards.shape[-1], gamma, rewards.dtype)).sum(-1)
  return (w * g).mean()


def wis(rewards, pi_probs, mu_probs, mask, gamma) -> Array:
  """Weighted (self-normalised) trajectory IS."""
  w = _cum_ratios(pi_probs, mu_probs, mask)[:, -1]
  g = (jnp.where(mask, rewards, 0.0) * _discounts(rewards.shape[-1], gamma, rewards.dtype)).sum(-1)
  return (w * g).sum() / w.sum()


def pdis(rewards, pi_probs, mu_probs, mask, gamma) -> Array:
  """Per-decision IS: mean_i Σ_t γ^t ρ_{0:t} r_t."""
  w = _cum_ratios(pi_probs, mu_probs, mask)
  disc = _discounts(rewards.shape[-1], gamma, rewards.dtype)
  return (w * jnp.where(mask, rewards, 0.0) * disc).sum(-1).mean()


def wpdis(rewards, pi_probs, mu_probs, mask, gamma) -> Array:
  """Weighted per-decision IS: Σ_t γ^t Σ_i ρ_{0:t} r_t / Σ_i ρ_{0:t}."""
  w = _cum_ratios(pi_probs, mu_probs, mask)
  disc = _discounts(rewards.shape[-1], gamma, rewards.dtype)
  num = (w * jnp.where(mask, rewards, 0.0)).sum(0)
  den = jnp.where(mask, w, 0.0).sum(0)
  return (disc * num / jnp.maximum(den, 1e-300)).sum()


def doubly_robust(rewards, pi_probs, mu_probs, mask, q_taken, v_state, gamma) -> Array:
  """Per-decision doubly robust (Jiang & Li 2016; Thomas & Brunskill 2016 form):

    V_DR = mean_i Σ_t γ^t [ρ_{0:t} (r_t - Q̂(s_t, a_t)) + ρ_{0:t-1} V̂(s_t)],  ρ_{0:-1} = 1,

  with V̂(s) = Σ_a π(a|s) Q̂(s, a). q_taken, v_state: (N, H) model values along the data.
  """
  w = _cum_ratios(pi_probs, mu_probs, mask)
  w_prev = jnp.concatenate([jnp.ones_like(w[:, :1]), w[:, :-1]], axis=1)
  disc = _discounts(rewards.shape[-1], gamma, rewards.dtype)
  terms = w * (rewards - q_taken) + w_prev * v_state
  return (jnp.where(mask, terms, 0.0) * disc).sum(-1).mean()
