"""Tabular OPE problems with features: the hub-and-spoke counterexample and random families.

Conventions (as in the FORE design notes (docs/fore.md)):
  pair index x = s * A + a;  value J = E_{s0~d0, a0~π}[Σ_t γ^t r_t] (unnormalised);
  d_π(s, a) = (1 - γ) Σ_t γ^t Pr_π(s_t = s, a_t = a) (normalised discounted occupancy);
  data: (s, a) ~ d_μ, s' ~ P(.|s, a), r = R(s, a); the ratio is w = d_π / d_μ;
  φ_π(s') = Σ_a' π(a'|s') φ(s', a');  ν0 = E_{s0~d0}[φ_π(s0)].

Exact quantities come from linear solves in float64 numpy (instances are small). Samplers are JAX:
`sample_cell_counts` draws the multinomial counts N(x, s') of n i.i.d. transitions -- exactly the
law of n i.i.d. samples when rewards are deterministic -- so n = 1e6 costs as much as n = 1e2 and
the counts plug into FORE as sample weights; `sample_transitions` draws explicit i.i.d. samples and
`sample_trajectories` rolls out a behaviour policy.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class TabularProblem:
  """A finite MDP, target policy, data distribution and features (all float64 numpy).

  Attributes:
    P: (S, A, S) transitions. R: (S, A) rewards. pi: (S, A) target policy. d0: (S,) start.
    gamma: discount. phi: (S*A, d) features. dmu: (S*A,) data distribution over pairs.
    mu: optional (S, A) behaviour policy (for trajectory data).
    extra: named alternative feature matrices (e.g. "psi", "ctrl").
    name: label.
  """
  P: np.ndarray
  R: np.ndarray
  pi: np.ndarray
  d0: np.ndarray
  gamma: float
  phi: np.ndarray
  dmu: np.ndarray
  mu: Optional[np.ndarray] = None
  extra: dict = dataclasses.field(default_factory=dict)
  name: str = ""

  @property
  def num_states(self) -> int:
    return self.R.shape[0]

  @property
  def num_actions(self) -> int:
    return self.R.shape[1]


# ----------------------------------------------------------------------------------------------
# exact quantities
# ----------------------------------------------------------------------------------------------
def policy_transition(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
  """P_π over pairs: (S*A, S*A), (s,a) -> (s', a') with a' ~ π(.|s')."""
  S, A, _ = P.shape
  return np.einsum("xas,sb->xasb", P, pi).reshape(S * A, S * A)


def exact(P, R, pi, d0, gamma) -> dict:
  """Exact Q^π, d_π, J and helpers by linear solves. Returns dict(Ppi, r, nu0_sa, Q, dpi, J)."""
  S, A = R.shape
  ppi = policy_transition(P, pi)
  r = R.reshape(S * A)
  nu0_sa = (d0[:, None] * pi).reshape(S * A)
  eye = np.eye(S * A)
  q = np.linalg.solve(eye - gamma * ppi, r)
  dpi = (1 - gamma) * np.linalg.solve((eye - gamma * ppi).T, nu0_sa)
  return dict(Ppi=ppi, r=r, nu0_sa=nu0_sa, Q=q, dpi=dpi, J=float(nu0_sa @ q))


def problem_exact(prob: TabularProblem, pi: Optional[np.ndarray] = None) -> dict:
  """`exact` for a problem (optionally another target policy), plus the ratio w = d_π/d_μ."""
  ex = exact(prob.P, prob.R, prob.pi if pi is None else pi, prob.d0, prob.gamma)
  ex["w"] = ex["dpi"] / prob.dmu
  return ex


def expected_next_features(phi: np.ndarray, pi: np.ndarray) -> np.ndarray:
  """φ_π(s) = Σ_a π(a|s) φ(s, a): (S, d)."""
  S, A = pi.shape
  return np.einsum("sa,sad->sd", pi, phi.reshape(S, A, -1))


def nu0_of(phi: np.ndarray, pi: np.ndarray, d0: np.ndarray) -> np.ndarray:
  return d0 @ expected_next_features(phi, pi)


def span_residual(phi: np.ndarray, v: np.ndarray, weight: Optional[np.ndarray] = None) -> float:
  """Relative residual of the (weighted) least-squares projection of v onto span(phi)."""
  sw = np.ones(len(v)) if weight is None else np.sqrt(weight)
  coef, *_ = np.linalg.lstsq(phi * sw[:, None], v * sw, rcond=None)
  return float(np.linalg.norm((phi @ coef - v) * sw) / max(np.linalg.norm(v * sw), 1e-300))


def population_iv(z, x, dmu, ex, gamma):
  """Population IV-LSTDQ / linear MWL: returns (J, theta, B) with B = E_μ[z (x - γ P_π x)^T]."""
  b_mat = z.T @ (dmu[:, None] * (x - gamma * ex["Ppi"] @ x))
  theta = np.linalg.solve(b_mat, z.T @ (dmu * ex["r"]))
  return float((x.T @ ex["nu0_sa"]) @ theta), theta, b_mat


def population_fqe(phi, dmu, ex, gamma, iters=(10, 50, 100, 200, 400), weights=None):
  """Population linear FQE values after K iterations and its spectral radius ρ(γ Σ^{-1} C)."""
  wt = dmu if weights is None else dmu * weights
  sig = phi.T @ (wt[:, None] * phi)
  c = phi.T @ (wt[:, None] * (ex["Ppi"] @ phi))
  b = phi.T @ (wt * ex["r"])
  m = gamma * np.linalg.solve(sig, c)
  rho = float(max(abs(np.linalg.eigvals(m))))
  th = np.zeros(phi.shape[1])
  sb = np.linalg.solve(sig, b)
  vals = {}
  with np.errstate(over="ignore", invalid="ignore"):
    for k in range(1, max(iters) + 1):
      th = sb + m @ th
      if k in iters:
        v = float((phi.T @ ex["nu0_sa"]) @ th)
        vals[k] = v if np.isfinite(v) else float("inf")
  return vals, rho


def population_brm(phi, dmu, ex, gamma) -> float:
  """Ideal (double-sampling) Bellman-residual minimisation value."""
  x = phi - gamma * ex["Ppi"] @ phi
  th = np.linalg.solve(x.T @ (dmu[:, None] * x), x.T @ (dmu * ex["r"]))
  return float((phi.T @ ex["nu0_sa"]) @ th)


# ----------------------------------------------------------------------------------------------
# the hub-and-spoke counterexample (FORE design notes)
# ----------------------------------------------------------------------------------------------
HUB_J = 45.0 / 38.0
HUB_WTILDE = np.array([4.0, 4.0, 8.0, 8.0, 2.0, 1.0])


def hub_mdp() -> TabularProblem:
  """3 states (s0 start, s1, s2 hub), 2 actions, γ = 0.9; true value J = 45/38.

  s0 -> s2 and s1 -> s2 under any action; s2 --a0--> s0, s2 --a1--> s1; R(s2, a1) = 1.
  π(a1|s) = (0.5, 0.5, 0.25). φ(s, a) = (1, w̃(s, a)), w̃ = (4, 4, 8, 8, 2, 1) over pairs
  (s0a0, s0a1, s1a0, s1a1, s2a0, s2a1). d_μ ∝ d_π / w̃ = (638, 638, 81, 81, 2160, 1440)/5038, so
  w = d_π/d_μ = (2519/6080) w̃ lies in span(φ) while Q^π does not and span(φ) is not complete.
  extra["psi"] = (1, 1[s=s0]) is a value class that does not contain w (LSTDQ biased +92%).
  """
  gamma = 0.9
  nxt = np.array([[2, 2], [2, 2], [0, 1]])
  P = np.zeros((3, 2, 3))
  for s in range(3):
    for a in range(2):
      P[s, a, nxt[s, a]] = 1.0
  R = np.zeros((3, 2))
  R[2, 1] = 1.0
  pi = np.array([[0.5, 0.5], [0.5, 0.5], [0.75, 0.25]])
  d0 = np.array([1.0, 0.0, 0.0])
  phi = np.stack([np.ones(6), HUB_WTILDE], 1)
  dmu = np.array([638, 638, 81, 81, 2160, 1440], float) / 5038.0
  nu_s = dmu.reshape(3, 2).sum(1)
  mu = dmu.reshape(3, 2) / nu_s[:, None]
  psi = np.stack([np.ones(6), np.repeat([1.0, 0.0, 0.0], 2)], 1)
  return TabularProblem(P=P, R=R, pi=pi, d0=d0, gamma=gamma, phi=phi, dmu=dmu, mu=mu,
                        extra={"psi": psi}, name="hub")


def hub_singular_path(t: float) -> np.ndarray:
  """Part C1 value class X_t = (1, (1-t) 1[s=s0] + t 1[s=s2]); with instruments φ, B_t is
  singular at t* = `hub_singular_t()` although the ratio stays exactly realizable in span(φ)."""
  h0, h1 = np.repeat([1.0, 0, 0], 2), np.repeat([0, 0, 1.0], 2)
  return np.column_stack([np.ones(6), (1 - t) * h0 + t * h1])


def hub_singular_t() -> float:
  prob = hub_mdp()
  ex = problem_exact(prob)
  t_mat = np.eye(6) - prob.gamma * ex["Ppi"]
  det = lambda t: np.linalg.det(prob.phi.T @ (prob.dmu[:, None] * (t_mat @ hub_singular_path(t))))
  return float(det(0) / (det(0) - det(1)))  # det is affine in t


# ----------------------------------------------------------------------------------------------
# random families (FORE design notes)
# ----------------------------------------------------------------------------------------------
# name: (S, A, d, gamma, Dirichlet conc. of P, conc. of state sampling nu, pi temp, mu temp)
FAMILIES = {
    "moderate": (20, 4, 8, 0.9, 0.3, 1.0, 2.0, 1.0),
    "severe": (10, 2, 4, 0.9, 0.1, 0.3, 3.0, 3.0),
}


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def random_mdp(rng: np.random.Generator, family: str = "moderate") -> TabularProblem:
  """A random MDP whose features contain the true ratio (but not Q^π, and are not complete).

  φ = [1, w/||w||, d-2 Gaussian columns] × a random rotation (so w is not a raw coordinate);
  extra["ctrl"] is the same construction with w replaced by noise (a class without the ratio).
  """
  if family not in FAMILIES:
    raise ValueError(f"unknown family {family!r}; choose from {sorted(FAMILIES)}")
  S, A, d, gamma, cp, cnu, tpi, tmu = FAMILIES[family]
  P = rng.dirichlet(cp * np.ones(S), size=(S, A))
  R = rng.random((S, A))
  pi = _softmax(tpi * rng.standard_normal((S, A)))
  d0 = rng.dirichlet(np.ones(S))
  ex = exact(P, R, pi, d0, gamma)
  nu = 0.02 / S + 0.98 * rng.dirichlet(cnu * np.ones(S))
  mu = _softmax(tmu * rng.standard_normal((S, A)))
  dmu = (nu[:, None] * mu).ravel()
  w = ex["dpi"] / dmu
  nsa = S * A
  g = rng.standard_normal((nsa, d - 2))
  basis = np.column_stack([np.ones(nsa), w / np.sqrt(dmu @ w ** 2), g])
  mix = np.linalg.qr(rng.standard_normal((d, d)))[0]
  phi = basis @ mix
  ctrl = np.column_stack([np.ones(nsa), g, rng.standard_normal(nsa)]) @ mix
  return TabularProblem(P=P, R=R, pi=pi, d0=d0, gamma=gamma, phi=phi, dmu=dmu, mu=mu,
                        extra={"ctrl": ctrl}, name=family)


def random_singular_path(prob: TabularProblem):
  """Part C2: returns f(t) -> features [φ, g_t], g_t = (1-t) g0 + t g*, with det A_1 = 0 while the
  ratio stays in span(φ) for all t (FORE design notes)."""
  ex = problem_exact(prob)
  nsa = prob.phi.shape[0]
  dt = prob.dmu[:, None] * (np.eye(nsa) - prob.gamma * ex["Ppi"])
  a0 = prob.phi.T @ dt @ prob.phi
  k = dt - dt @ prob.phi @ np.linalg.solve(a0, prob.phi.T @ dt)  # det[φ, g] = det(A0) gᵀ K g
  ks = (k + k.T) / 2
  u = np.linalg.svd(prob.phi)[0][:, prob.phi.shape[1]:]
  ev, v = np.linalg.eigh(u.T @ ks @ u)
  gstar = u @ (np.sqrt(-ev.min()) * v[:, -1] + np.sqrt(ev.max()) * v[:, 0])
  gstar /= np.sqrt(prob.dmu @ gstar ** 2)
  g0 = u @ v[:, -1]
  g0 /= np.sqrt(prob.dmu @ g0 ** 2)
  if g0 @ ks @ gstar < 0:
    gstar = -gstar
  return lambda t: np.column_stack([prob.phi, (1 - t) * g0 + t * gstar])


def multi_policy_mdp(rng: np.random.Generator, num_policies: int = 8, num_states: int = 20,
                     num_actions: int = 4, num_noise: int = 3, gamma: float = 0.9,
                     horizon: int = 50, spread=(0.25, 2.0)) -> tuple[TabularProblem, list]:
  """One MDP, one behaviour policy μ, several target policies: the DOPE-style OPE table.

  Data are `horizon`-step trajectories of μ from d0, so the data distribution is
  d_μ = (1/H) Σ_{t<H} Pr_μ(s_t, a_t). The shared features φ = [1, w_1 .. w_K, noise] × rotation
  contain every target policy's ratio w_k = d_{π_k}/d_μ.

  Returns:
    (problem with pi = π_0, list of K target policies (S, A)).
  """
  S, A = num_states, num_actions
  P = rng.dirichlet(0.3 * np.ones(S), size=(S, A))
  R = rng.random((S, A))
  d0 = rng.dirichlet(np.ones(S))
  base = rng.standard_normal((S, A))
  mu = _softmax(base)
  temps = np.linspace(spread[0], spread[1], num_policies)
  pis = [_softmax(base + t * rng.standard_normal((S, A))) for t in temps]
  # trajectory data distribution over pairs
  pmu = policy_transition(P, mu)
  x = (d0[:, None] * mu).ravel()
  dmu = np.zeros(S * A)
  for _ in range(horizon):
    dmu += x
    x = x @ pmu
  dmu /= horizon
  nsa = S * A
  ws = [exact(P, R, p, d0, gamma)["dpi"] / dmu for p in pis]
  cols = [np.ones(nsa)] + [w / np.sqrt(dmu @ w ** 2) for w in ws]
  cols += list(rng.standard_normal((num_noise, nsa)))
  basis = np.column_stack(cols)
  mix = np.linalg.qr(rng.standard_normal((basis.shape[1],) * 2))[0]
  phi = basis @ mix
  ctrl = np.column_stack([np.ones(nsa), rng.standard_normal((nsa, basis.shape[1] - 1))]) @ mix
  prob = TabularProblem(P=P, R=R, pi=pis[0], d0=d0, gamma=gamma, phi=phi, dmu=dmu, mu=mu,
                        extra={"ctrl": ctrl}, name="multi_policy")
  return prob, pis


# ----------------------------------------------------------------------------------------------
# samplers (JAX)
# ----------------------------------------------------------------------------------------------
def cell_probs(prob: TabularProblem) -> np.ndarray:
  """Probability of each transition cell (x, s'): (S*A*S,)."""
  p = (prob.dmu[:, None] * prob.P.reshape(len(prob.dmu), -1)).ravel()
  return p / p.sum()


def cell_arrays(prob: TabularProblem, phi: Optional[np.ndarray] = None, pi=None):
  """Per-cell (φ(x), φ_π(s'), r(x)) for all S*A*S cells, and ν0 -- weights come from counts."""
  phi = prob.phi if phi is None else phi
  pi = prob.pi if pi is None else pi
  S = prob.num_states
  nsa = phi.shape[0]
  x = np.repeat(np.arange(nsa), S)
  sp = np.tile(np.arange(S), nsa)
  phi_pi_s = expected_next_features(phi, pi)
  return phi[x], phi_pi_s[sp], prob.R.reshape(-1)[x], nu0_of(phi, pi, prob.d0)


def sample_cell_counts(key: jax.Array, n: int, probs: jax.Array) -> jax.Array:
  """Multinomial counts of n i.i.d. transitions over cells (exactly their law). vmappable."""
  return jax.random.multinomial(key, n, probs, dtype=probs.dtype)


def sample_transitions(key: jax.Array, prob: TabularProblem, n: int):
  """Explicit i.i.d. transitions: returns (pair index x (n,), next state s' (n,))."""
  k1, k2 = jax.random.split(key)
  x = jax.random.choice(k1, len(prob.dmu), (n,), p=jnp.asarray(prob.dmu))
  logits = jnp.log(jnp.asarray(prob.P.reshape(len(prob.dmu), -1)))[x]
  sp = jax.random.categorical(k2, logits)
  return x, sp


def sample_trajectories(key: jax.Array, P, R, mu, d0, num_traj: int, horizon: int) -> dict:
  """Roll out behaviour policy μ for `horizon` steps from d0 (jittable; static sizes).

  Returns:
    dict of (num_traj, horizon) int/float arrays: states, actions, rewards, next_states.
  """
  P, R, mu, d0 = (jnp.asarray(a) for a in (P, R, mu, d0))
  logp, logmu = jnp.log(P), jnp.log(mu)
  k0, key = jax.random.split(key)
  s0 = jax.random.categorical(k0, jnp.log(d0), shape=(num_traj,))

  def step(s, k):
    ka, ks = jax.random.split(k)
    a = jax.random.categorical(ka, logmu[s])
    sp = jax.random.categorical(ks, logp[s, a])
    return sp, (s, a, R[s, a], sp)

  _, (s, a, r, sp) = jax.lax.scan(step, s0, jax.random.split(key, horizon))
  tr = lambda v: jnp.swapaxes(v, 0, 1)
  return dict(states=tr(s), actions=tr(a), rewards=tr(r), next_states=tr(sp))
