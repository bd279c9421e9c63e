"""FORE: closed-form ratio-realizable off-policy evaluation (linear MWL / IV-LSTDQ).

"FORE" is the name used here for the estimator of the FORE design notes (docs/fore.md). Its honest name is
**linear MWL / IV-LSTDQ**: with instruments z (the ratio class) and value features x,

    A = E_n[z (x - γ x'_π)^T],  b = E_n[z r],  θ = A^{-1} b,  u = A^{-T} ν0,  J = ν0^T θ,

and the fitted occupancy ratio is ŵ(s, a) = (1 - γ) z(s, a)^T u. With z = x = φ this is exactly
LSTDQ, linear MWL, MQL and (linear) DualDICE: all give the same number.

It is consistent under THREE assumptions, not one (FORE design notes):
  1. realizability: the ratio w = d_π / d_μ lies in span(z) **or** Q^π lies in span(x);
  2. identification: A (population) is nonsingular -- its variance grows like ||A^{-1}||²;
  3. coverage: E_μ[w² δ²] < ∞ (δ: TD error at the fitted fixed point), i.e. finite
     variance of the influence function ψ = (z^T u) δ.
Bellman completeness is not needed, and neither is contraction of the FQE operator.

Conventions (shapes): n samples, d features.
  phi         (n, d)  φ(s_i, a_i)
  phi_next    (n, d)  φ'_π(s'_i) = Σ_a' π(a'|s'_i) φ(s'_i, a'), times (1 - terminated_i)
                      (or one sample a' ~ π; A is linear in φ', so this stays unbiased)
  rewards     (n,)
  weights     (n,)    frequency / sample weights; 0 marks padding (fixed shapes under vmap)
  nu0         (d,)    E_{s0~d0}[φ_π(s0)], or (m, d) samples φ_π(s0_j) (estimated ν0; adds
                      Var(φ_π(s0)^T θ)/m to the variance)
  gamma       scalar in [0, 1)
J is the unnormalised value E[Σ_t γ^t r_t]; (1 - γ) J is the normalised one.

Precision: the tests run in float64 (`jax.experimental.enable_x64()`). In float32 the solve loses
about cond(A)·eps32 ≈ cond(A)·1.2e-7 relative accuracy; `fore` warns when cond(A) > 1/sqrt(eps)
(≈ 2.9e3 in float32, 6.7e7 in float64) and refuses when cond(A) > min(1/(100 eps),
1/rel_sigma_floor) with the default floor 1e-10 (≈ 8.4e4 in float32, 1e10 in float64; see
`conditioning_thresholds`). The f32-vs-f64 gap is measured in `tests/ope/test_fore_estimator.py`.

Support (`support_diagnostic`): every check above is in-sample. When the ratio puts target mass
on cells the data never visited, A_n, the sandwich SE, ident_t and the ESS all look healthy and
the interval still misses (the moment equations simply do not contain those cells). What the
data can show is the warning sign before that: a small effective sample size of the fitted
ratio, and a large share of the fitted target mass sitting on cells with fewer than k samples.
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
Z95 = 1.959963984540054


class IllConditionedError(ValueError):
  """A (the moment matrix) is numerically singular: the value is not identified by the data."""


class IllConditionedWarning(UserWarning):
  """A is badly conditioned: the estimate is numerically fragile or has huge variance."""


@flax.struct.dataclass
class ForeResult:
  """Estimate, uncertainty and diagnostics. All leaves are arrays (batched under vmap).

  Attributes:
    value: Ĵ = ν0^T θ (unnormalised discounted value).
    se: sandwich standard error of Ĵ (cluster-robust when clusters were given).
    ci_low, ci_high: 95% Wald interval Ĵ ∓ 1.96 se.
    theta: (d,) LSTDQ / MQL coefficients, Q̂ = x^T θ (generally NOT Q^π; only ν0^T θ is).
    alpha: (d,) ratio coefficients, ŵ = z^T α, α = (1 - γ) A^{-T} ν0.
    sigma_min: smallest singular value of the unregularised A_n (identification check).
    sigma_min_se: its sampling standard error to first order, sd_i((u^T z_i)(v^T Δx_i))/√n with
      (u, v) the singular vectors of sigma_min and Δx = x - γ x' (perturbation of a simple
      singular value: δσ = u^T δA v).
    ident_t: sigma_min / sigma_min_se. Small values (< 2, the default refusal threshold) mean A is statistically
      indistinguishable from singular: the value is weakly identified and the Wald CI is unreliable
      even if cond(A_n) looks finite (finite-sample noise hides a singular population A).
    cond: condition number of A_n.
    ess: effective sample size (Σ m ŵ)² / Σ m ŵ².
    frac_negative_w: weighted share of samples with ŵ < 0 (the linear ratio is unconstrained).
    mean_w: E_n[ŵ]; exactly 1 when the constant is in span(φ) and ridge = 0.
    value_gap: Ĵ_θ - Ĵ_ratio with Ĵ_ratio = E_n[ŵ r]/(1 - γ). Both use the same (ridged) A, so
      this is an algebraic identity (ν0^T A_λ^{-1} b = u^T b) and only measures solver round-off;
      the FORE design notes expect it nonzero for ridge > 0, which does not hold -- use moment_residual.
    moment_residual: max |A_n^T α - (1 - γ) ν0| with the unregularised A_n: the MWL moment
      equations' violation; 0 (round-off) at ridge 0, O(λ) with ridge.
    n: total weight Σ m.
  """
  value: Array
  se: Array
  ci_low: Array
  ci_high: Array
  theta: Array
  alpha: Array
  sigma_min: Array
  sigma_min_se: Array
  ident_t: Array
  cond: Array
  ess: Array
  frac_negative_w: Array
  mean_w: Array
  value_gap: Array
  moment_residual: Array
  n: Array


@flax.struct.dataclass
class FqeResult:
  """Iterative (optionally ratio-weighted) linear FQE.

  Attributes:
    value: ν0^T θ_K (inf when the iteration blew up).
    theta: (d,) last iterate.
    num_iters: iterations run.
    converged: ||θ_k - θ_{k-1}||_∞ <= tol (1 + ||θ_k||_∞) before the cap.
    diverged: iterate non-finite or larger than `blowup`, or stopped unconverged while the
      value's steps |J_k - J_{k-1}| still grow (and exceed round-off, sqrt(eps)(1 + |J_k|)):
      geometric growth at the cap is divergence, whatever the iteration count.
    spectral_radius: ρ(γ Σ_w^{-1} C_w); FQE converges iff it is < 1.
  """
  value: Array
  theta: Array
  num_iters: Array
  converged: Array
  diverged: Array
  spectral_radius: Array


# ----------------------------------------------------------------------------------------------
# input checks (python level: shapes always, values when concrete)
# ----------------------------------------------------------------------------------------------
def _is_concrete(x) -> bool:
  return not isinstance(x, jax.core.Tracer)


def validate_inputs(phi, phi_next, rewards, weights=None, nu0=None, gamma=None, z=None) -> None:
  """Raises ValueError with a clear message on shape mismatch, non-finite data or bad gamma.

  Value checks (NaN, gamma range, negative weights) run only on concrete (non-traced) inputs, so
  this is safe to call inside jit/vmap, where only the shape checks apply.
  """
  phi_shape, next_shape = np.shape(phi), np.shape(phi_next)
  if len(phi_shape) != 2:
    raise ValueError(f"phi must be 2-D (n, d); got shape {phi_shape}")
  n, d = phi_shape
  if next_shape != phi_shape:
    raise ValueError(f"phi_next shape {next_shape} does not match phi shape {phi_shape}")
  if np.shape(rewards) != (n,):
    raise ValueError(f"rewards must have shape ({n},) to match phi; got {np.shape(rewards)}")
  if weights is not None and np.shape(weights) != (n,):
    raise ValueError(f"weights must have shape ({n},) to match phi; got {np.shape(weights)}")
  if z is not None and (len(np.shape(z)) != 2 or np.shape(z)[0] != n or np.shape(z)[1] != d):
    raise ValueError(f"instruments z must have shape ({n}, {d}) (square A); got {np.shape(z)}")
  if nu0 is not None:
    s = np.shape(nu0)
    if not (s == (d,) or (len(s) == 2 and s[1] == d)):
      raise ValueError(f"nu0 must have shape ({d},) or (m, {d}); got {s}")
  if gamma is not None and _is_concrete(gamma):
    g = np.asarray(gamma)
    if g.ndim != 0 or not np.isfinite(g) or not 0.0 <= float(g) < 1.0:
      raise ValueError(f"gamma must be a scalar in [0, 1); got {gamma!r}")
  for name, arr in (("rewards", rewards), ("phi", phi), ("phi_next", phi_next),
                    ("weights", weights), ("nu0", nu0), ("z", z)):
    if arr is None or not _is_concrete(arr):
      continue
    a = np.asarray(arr)
    bad = ~np.isfinite(a)
    if bad.any():
      idx = np.argwhere(bad)[0].tolist()
      raise ValueError(f"{name} contains non-finite values (NaN/inf), first at index {idx}")
  if weights is not None and _is_concrete(weights):
    w = np.asarray(weights)
    if (w < 0).any():
      raise ValueError("weights must be non-negative (0 marks padding)")
    if w.sum() <= 1:
      raise ValueError(f"total weight must exceed 1 (got {w.sum()}); is everything padding?")


# ----------------------------------------------------------------------------------------------
# the closed form
# ----------------------------------------------------------------------------------------------
def fore_core(phi: Array, phi_next: Array, rewards: Array, weights: Array, nu0: Array,
              gamma: float, ridge: float = 0.0, z: Optional[Array] = None,
              cluster_ids: Optional[Array] = None, num_clusters: int = 0) -> ForeResult:
  """FORE closed form, pure and jittable/vmappable (no value checks; see `fore`).

  Args:
    phi, phi_next, rewards, weights, nu0, gamma: see module docstring. nu0 may be (m, d) samples.
    ridge: λ0; the solve uses A + λ I with λ = λ0 · tr(E_n[z zᵀ])/d (scale-free). Bias O(λ ||A⁻¹||²).
    z: optional instruments (n, d) (the ratio class); default z = phi (LSTDQ).
    cluster_ids: optional int (n,) trajectory ids in [0, num_clusters); the SE then sums ψ within
      each trajectory (cluster-robust sandwich) instead of treating samples as independent.
    num_clusters: static number of clusters (needed for fixed shapes).

  Returns:
    ForeResult.
  """
  dtype = jnp.result_type(phi.dtype, jnp.float32)
  phi = phi.astype(dtype)
  phi_next = phi_next.astype(dtype)
  z = phi if z is None else z.astype(dtype)
  r = rewards.astype(dtype)
  m = weights.astype(dtype)
  n = m.sum()
  d = phi.shape[-1]
  zm = z * m[:, None]
  a_mat = zm.T @ (phi - gamma * phi_next) / n
  b = zm.T @ r / n
  # tr(E_n[z z^T]) = E_n[||z||^2]: O(n d), not the O(n d^2) product z^T z (wasted at ridge 0)
  lam = ridge * jnp.sum(zm * z) / n / d
  lu = jax.scipy.linalg.lu_factor(a_mat + lam * jnp.eye(d, dtype=dtype))
  theta = jax.scipy.linalg.lu_solve(lu, b)
  nu0 = jnp.asarray(nu0, dtype)
  nu0_vec = nu0 if nu0.ndim == 1 else nu0.mean(0)
  u = jax.scipy.linalg.lu_solve(lu, nu0_vec, trans=1)
  value = nu0_vec @ theta
  # estimated ν0 from m initial states: independent sample, add Var(φ_π(s0)^T θ)/m
  nu0_var = (jnp.zeros((), dtype) if nu0.ndim == 1
             else jnp.var(nu0 @ theta, ddof=1) / nu0.shape[0])
  # influence function ψ_i = (z_i^T u) δ_i with δ the TD error at the fitted fixed point
  delta = r + gamma * (phi_next @ theta) - phi @ theta
  zu = z @ u
  psi = zu * delta
  psi_mean = (m * psi).sum() / n
  if cluster_ids is None:
    var = (m * (psi - psi_mean) ** 2).sum() / (n - 1) / n
  else:
    sums = jax.ops.segment_sum(m * (psi - psi_mean), cluster_ids, num_segments=num_clusters)
    nonempty = jax.ops.segment_sum(m, cluster_ids, num_segments=num_clusters) > 0
    g = nonempty.sum().astype(dtype)
    var = g / jnp.maximum(g - 1, 1) * (sums ** 2).sum() / n ** 2
  se = jnp.sqrt(var + nu0_var)
  usv, svals, vsv = jnp.linalg.svd(a_mat)
  dx = phi - gamma * phi_next
  pert = (z @ usv[:, -1]) * (dx @ vsv[-1])       # per-sample contribution to u^T A_n v
  pmean = (m * pert).sum() / n
  smin_se = jnp.sqrt((m * (pert - pmean) ** 2).sum() / (n - 1) / n)
  alpha = (1 - gamma) * u
  w_hat = (1 - gamma) * zu
  sw = (m * w_hat).sum()
  value_ratio = (m * w_hat * r).sum() / n / (1 - gamma)
  return ForeResult(
      value=value, se=se, ci_low=value - Z95 * se, ci_high=value + Z95 * se, theta=theta,
      alpha=alpha, sigma_min=svals[-1], sigma_min_se=smin_se, ident_t=svals[-1] / smin_se,
      cond=svals[0] / svals[-1],
      ess=sw ** 2 / (m * w_hat ** 2).sum(), frac_negative_w=(m * (w_hat < 0)).sum() / n,
      mean_w=sw / n, value_gap=value - value_ratio,
      moment_residual=jnp.max(jnp.abs(a_mat.T @ alpha - (1 - gamma) * nu0_vec)), n=n)


def fore_value(phi, phi_next, rewards, weights, nu0, gamma, ridge=0.0, z=None) -> Array:
  """Only Ĵ (no SE, no SVD): the cheap kernel used by the bootstrap and benchmarks."""
  dtype = jnp.result_type(phi.dtype, jnp.float32)
  z = phi if z is None else z
  m = weights.astype(dtype)
  n = m.sum()
  d = phi.shape[-1]
  # One matmul zᵀ[m (x − γx'), m r] -> [A | b]: the weights go on the right-hand factor and the
  # two products share one pass over z. Under vmap this is one batched dot with no [B, n, d]
  # weighted copy of z, which is what made the batched path slower than a loop on XLA:CPU.
  rhs = jnp.concatenate([phi - gamma * phi_next, rewards.astype(dtype)[:, None]], -1) * m[:, None]
  moments = z.T @ rhs / n
  a_mat, b = moments[:, :-1], moments[:, -1]
  lam = ridge * jnp.einsum("nd,n,nd->", z, m, z) / n / d  # tr(E_n[z z^T]) in O(n d)
  theta = jnp.linalg.solve(a_mat + lam * jnp.eye(d, dtype=dtype), b)
  nu0 = jnp.asarray(nu0, dtype)
  return (nu0 if nu0.ndim == 1 else nu0.mean(0)) @ theta


# datasets × seeds: flatten to one leading batch axis B and pad n with zero weights.
fore_batched = jax.jit(jax.vmap(fore_core, in_axes=(0, 0, 0, 0, 0, None, None)))
fore_batched.__doc__ = """vmap of `fore_core` over a leading batch axis of (phi, phi_next, rewards,
weights, nu0); gamma and ridge are shared. Pad ragged datasets with weight 0."""
# same data, many weight vectors (count data, bootstrap, seeds of a multinomial sampler)
fore_over_weights = jax.jit(jax.vmap(fore_core, in_axes=(None, None, None, 0, None, None, None)))


DEFAULT_REL_SIGMA_FLOOR = 1e-10


def conditioning_thresholds(dtype, rel_sigma_floor: float = DEFAULT_REL_SIGMA_FLOOR
                            ) -> tuple[float, float]:
  """(warn_cond, error_cond) for a float dtype: 1/sqrt(eps) and min(1/(100 eps), 1/floor).

  error_cond is exactly the refusal threshold `check_conditioning` applies (float32: 8.4e4;
  float64 with the default floor: 1e10).
  """
  eps = float(jnp.finfo(dtype).eps)
  return 1.0 / np.sqrt(eps), min(1.0 / (100.0 * eps), 1.0 / rel_sigma_floor)


# An estimate is identified when sigma_min(A_n) is more than this many standard errors from 0.
IDENTIFIED_T = 2.0


def check_conditioning(result, dtype=None, on_ill_conditioned: str = "raise",
                       rel_sigma_floor: float = DEFAULT_REL_SIGMA_FLOOR,
                       min_ident_t: float = IDENTIFIED_T) -> np.ndarray:
  """Flags unidentified estimates. Works on single or batched results.

  Two checks:
    numerical:   cond(A_n) > conditioning_thresholds(dtype, rel_sigma_floor)[1]
                 = min(1/(100 eps), 1/rel_sigma_floor) -- A_n itself is singular;
    statistical: ident_t = sigma_min(A_n)/se(sigma_min) < min_ident_t -- the population A may be
                 singular and sampling noise alone made A_n invertible (the FORE design notes: at the
                 singular point of the C1 path, cond(A_n) is ~1e2 at n = 1e4 yet the error is 3x J).
  A warning (never an error) is also issued when cond(A_n) > 1/sqrt(eps) (float rounding).

  Args:
    result: a ForeResult, or any object with .value, .cond, .sigma_min (and optionally .ident_t).
    dtype: float dtype the estimate was computed in (default: that of result.value).
    on_ill_conditioned: "raise" (IllConditionedError), "warn" or "ignore".
    rel_sigma_floor: numerical floor on sigma_min / sigma_max.
    min_ident_t: threshold on ident_t (set 0 to disable the statistical check). When the
      population A is singular, ident_t is roughly |N(0, 1)|, so 2.0 refuses ~95% of unidentified
      data sets; 3.0 refuses ~99.7% but also more weakly identified yet usable ones.

  Returns:
    Boolean array, True where the estimate is refused (unidentified).
  """
  if on_ill_conditioned not in ("raise", "warn", "ignore"):
    raise ValueError(f"on_ill_conditioned must be raise/warn/ignore, got {on_ill_conditioned!r}")
  dtype = dtype or np.asarray(result.value).dtype
  warn_c, err_c = conditioning_thresholds(dtype, rel_sigma_floor)
  cond = np.asarray(result.cond, np.float64)
  singular = ~np.isfinite(cond) | (cond > err_c)
  ident = getattr(result, "ident_t", None)
  weak = np.zeros_like(singular) if ident is None else ~singular & ~(np.asarray(ident) >= min_ident_t)
  bad = singular | weak
  fragile = ~bad & (cond > warn_c)
  if on_ill_conditioned != "ignore":
    if bad.any():
      parts = []
      if singular.any():
        parts.append(f"A_n is numerically singular in {int(singular.sum())}/{bad.size} estimate(s) "
                     f"(max cond(A)={np.max(cond):.3g} > {err_c:.3g} for "
                     f"{np.dtype(dtype)})")
      if weak.any():
        parts.append(f"sigma_min(A_n) is within {min_ident_t:g} standard errors of 0 in "
                     f"{int(weak.sum())}/{bad.size} estimate(s) (min ident_t="
                     f"{np.nanmin(np.asarray(ident)[weak]):.3g}): A may be singular in the population")
      msg = ("; ".join(parts) + ". The value is not identified by these features/data: FORE needs A "
             "nonsingular in addition to ratio realizability. Use better-conditioned features or more "
             "data (ridge>0 only trades this for bias).")
      if on_ill_conditioned == "raise":
        raise IllConditionedError(msg)
      warnings.warn(msg, IllConditionedWarning, stacklevel=2)
    if fragile.any():
      warnings.warn(f"A is badly conditioned in {int(fragile.sum())}/{fragile.size} estimate(s) "
                    f"(max cond(A)={np.max(cond[fragile]):.3g} > {warn_c:.3g}): expect float rounding "
                    "error; check se and consider float64.", IllConditionedWarning, stacklevel=2)
  return bad


class SupportWarning(UserWarning):
  """The fitted ratio rests on few samples: the interval may miss even if A is identified."""


def support_diagnostic(w_hat: Array, weights: Array, cell_ids: Optional[Array] = None,
                       num_cells: int = 0, k: int = 10) -> dict:
  """Support of the fitted ratio ŵ (jittable; batch with vmap).

  Args:
    w_hat: (n,) fitted ratio per sample, (1 - γ) z_i^T u (= z @ ForeResult.alpha).
    weights: (n,) sample weights; for count data (one row per cell, weight = its count) pass
      cell_ids=None and the rows are the cells.
    cell_ids: optional (n,) int cell index in [0, num_cells) (e.g. s * A + a) when rows are
      individual samples.
    num_cells: static number of cells (with cell_ids).
    k: a cell is "rare" when it has 0 < count < k samples.

  Returns:
    dict(ess = (Σ m ŵ)² / Σ m ŵ², ess_frac = ess / n,
         rare_mass_share = Σ_{rare cells} |mass_c| / Σ_c |mass_c| with mass_c = Σ_{i in c} m_i ŵ_i
         (the fitted target occupancy of cell c, up to 1/n),
         rare_cells = number of rare cells carrying mass).
  Cells with no samples carry no in-sample mass at all: no in-sample statistic can see them.
  """
  dtype = jnp.result_type(w_hat.dtype, jnp.float32)
  m = weights.astype(dtype)
  w = w_hat.astype(dtype)
  n = m.sum()
  ess = (m * w).sum() ** 2 / jnp.maximum((m * w * w).sum(), jnp.finfo(dtype).tiny)
  if cell_ids is None:
    counts, mass = m, m * w
  else:
    counts = jax.ops.segment_sum(m, cell_ids, num_segments=num_cells)
    mass = jax.ops.segment_sum(m * w, cell_ids, num_segments=num_cells)
  rare = (counts > 0) & (counts < k)
  am = jnp.abs(mass)
  share = (am * rare).sum() / jnp.maximum(am.sum(), jnp.finfo(dtype).tiny)
  return dict(ess=ess, ess_frac=ess / n, rare_mass_share=share,
              rare_cells=(rare & (am > 0)).sum())


def check_support(diag: dict, min_ess_frac: float = 0.01, max_rare_share: float = 0.05,
                  warn: bool = True) -> np.ndarray:
  """Flags (and warns about) estimates whose fitted ratio rests on few samples.

  Flagged where ess_frac < min_ess_frac or rare_mass_share > max_rare_share. Works on single or
  batched diagnostics; returns the boolean flag array. A pass does NOT certify coverage: target
  mass on never-sampled cells is invisible to every in-sample statistic (module docstring).
  """
  ess_frac = np.asarray(diag["ess_frac"], np.float64)
  share = np.asarray(diag["rare_mass_share"], np.float64)
  bad = ~np.isfinite(ess_frac) | (ess_frac < min_ess_frac) | ~(share <= max_rare_share)
  if warn and bad.any():
    warnings.warn(
        f"weak support in {int(bad.sum())}/{bad.size} estimate(s): ESS/n min "
        f"{np.nanmin(ess_frac):.3g} (< {min_ess_frac:g} flags), share of fitted target mass on "
        f"cells with few samples max {np.nanmax(share):.3g} (> {max_rare_share:g} flags). The Wald "
        "interval may under-cover; more data on those cells (or a bootstrap) is needed.",
        SupportWarning, stacklevel=2)
  return bad


MANY_PATHS = ("vmap", "map", "loop")


def default_many_path() -> str:
  """"vmap" on every backend: one program whose per-dataset moments are one batched matmul
  zᵀ[m (x − γx'), m r]. experiments/bench_fore.py measures it against "map" (datasets in
  sequence inside one program) and a Python loop: on CPU (256 datasets x 4096 x 64, jax 0.10.2)
  vmap 0.59x and map 0.61x the loop's time. Use path="map" when B datasets do not fit in memory
  at once. (Before fore_value put the weights on the right-hand factor, vmap materialised a
  weighted [B, n, d] copy of z and ran 2.2x slower than the loop on CPU.)"""
  return "vmap"


_fore_value_vmap = jax.jit(jax.vmap(fore_value, in_axes=(0, 0, 0, 0, 0, None, None)))
_fore_value_one = jax.jit(fore_value)


@jax.jit
def _fore_value_map(phi, phi_next, rewards, weights, nu0, gamma, ridge):
  # lax.map = a scan over the leading axis: one program, one dataset's matmuls at a time
  return jax.lax.map(lambda a: fore_value(*a, gamma, ridge), (phi, phi_next, rewards, weights, nu0))


def fore_value_many(phi, phi_next, rewards, weights, nu0, gamma, ridge: float = 0.0,
                    path: Optional[str] = None) -> Array:
  """Ĵ for B datasets stacked on a leading axis ((B, n, d), ..., nu0 (B, d)) -> (B,).

  path: "vmap" (one program, jax.vmap: batched matmuls), "map" (one program, jax.lax.map: the
  datasets in sequence), "loop" (a Python loop of one jitted single-dataset call), or None =
  `default_many_path()`. All give the same numbers up to float round-off (tested).
  """
  path = path or default_many_path()
  if path not in MANY_PATHS:
    raise ValueError(f"path must be one of {MANY_PATHS} or None, got {path!r}")
  if path == "vmap":
    return _fore_value_vmap(phi, phi_next, rewards, weights, nu0, gamma, ridge)
  if path == "map":
    return _fore_value_map(phi, phi_next, rewards, weights, nu0, gamma, ridge)
  return jnp.stack([_fore_value_one(phi[i], phi_next[i], rewards[i], weights[i], nu0[i], gamma,
                                    ridge) for i in range(phi.shape[0])])


_fore_core_jit = jax.jit(fore_core, static_argnames=("num_clusters",))


def fore(phi, phi_next, rewards, nu0, gamma, *, weights=None, ridge: float = 0.0, z=None,
         cluster_ids=None, on_ill_conditioned: str = "raise",
         min_ident_t: float = 2.0) -> ForeResult:
  """Checked front end of `fore_core`: validates inputs, estimates, refuses unidentified A.

  Args:
    phi, phi_next, rewards, nu0, gamma: see module docstring.
    weights: optional (n,) sample weights (default ones).
    ridge: λ0 ≥ 0 (0 in tests; 1e-8..1e-6 when A_n may be singular at small n).
    z: optional instruments (ratio class), default phi.
    cluster_ids: optional (n,) trajectory ids for the cluster-robust SE (any ints; relabelled).
    on_ill_conditioned: "raise" | "warn" | "ignore" (see `check_conditioning`).
    min_ident_t: statistical identification threshold on sigma_min(A_n)/se (0 disables).

  Returns:
    ForeResult.

  Raises:
    ValueError: bad shapes, non-finite data, gamma outside [0, 1), negative weights.
    IllConditionedError: A numerically singular, or sigma_min(A_n) statistically
      indistinguishable from 0 (when on_ill_conditioned="raise").
  """
  validate_inputs(phi, phi_next, rewards, weights, nu0, gamma, z)
  if ridge < 0:
    raise ValueError(f"ridge must be >= 0; got {ridge}")
  phi = jnp.asarray(phi)
  weights = jnp.ones(phi.shape[0], phi.dtype) if weights is None else jnp.asarray(weights)
  num_clusters = 0
  if cluster_ids is not None:
    ids = np.asarray(cluster_ids)
    if ids.shape != (phi.shape[0],):
      raise ValueError(f"cluster_ids must have shape ({phi.shape[0]},); got {ids.shape}")
    _, ids = np.unique(ids, return_inverse=True)
    num_clusters = int(ids.max()) + 1
    cluster_ids = jnp.asarray(ids, jnp.int32)
  res = _fore_core_jit(phi, jnp.asarray(phi_next), jnp.asarray(rewards), weights,
                       jnp.asarray(nu0), gamma, ridge, None if z is None else jnp.asarray(z),
                       cluster_ids, num_clusters)
  check_conditioning(res, phi.dtype, on_ill_conditioned, min_ident_t=min_ident_t)
  return res


# ----------------------------------------------------------------------------------------------
# Poisson bootstrap
# ----------------------------------------------------------------------------------------------
def poisson_bootstrap(key: Array, phi, phi_next, rewards, weights, nu0, gamma, ridge=0.0,
                      num_boot: int = 1000, cluster_ids=None, num_clusters: int = 0,
                      z=None, weights_are_counts: bool = False) -> dict:
  """Poisson(1) bootstrap of Ĵ, vmapped over replicates (jittable with static num_boot).

  Each replicate multiplies the sample weights by independent Poisson(1) draws -- per sample, or
  per trajectory when cluster_ids are given (cluster bootstrap). Poisson weights keep shapes
  fixed, unlike resampling indices. With `weights_are_counts=True` (row i stands for weights[i]
  identical i.i.d. samples, e.g. multinomial cell counts) row i gets Poisson(weights[i]) -- the sum
  of that many Poisson(1) draws -- instead of weights[i] * Poisson(1).

  Returns:
    dict(values (num_boot,), se (bootstrap sd), ci_low, ci_high (percentile 2.5/97.5%)).
  """
  n = phi.shape[0]
  if weights_are_counts:
    bw = jax.random.poisson(key, weights[None, :], (num_boot, n)).astype(phi.dtype)
  else:
    if cluster_ids is None:
      pw = jax.random.poisson(key, 1.0, (num_boot, n))
    else:
      pw = jax.random.poisson(key, 1.0, (num_boot, num_clusters))[:, cluster_ids]
    bw = pw.astype(phi.dtype) * weights[None, :].astype(phi.dtype)
  vals = jax.vmap(lambda w: fore_value(phi, phi_next, rewards, w, nu0, gamma, ridge, z))(bw)
  lo, hi = jnp.nanquantile(vals, jnp.array([0.025, 0.975]))
  return dict(values=vals, se=jnp.nanstd(vals, ddof=1), ci_low=lo, ci_high=hi)


# ----------------------------------------------------------------------------------------------
# chunked accumulation for n too large for memory
# ----------------------------------------------------------------------------------------------
ChunkFn = Callable[[Array], tuple[Array, Array, Array, Array]]


def fore_scan(chunk_fn: ChunkFn, num_chunks: int, nu0: Array, gamma: float,
              ridge: float = 0.0, dtype=jnp.float32) -> ForeResult:
  """FORE over data produced chunk by chunk: two `lax.scan` passes, O(chunk·d + d²) memory.

  Pass 1 accumulates A, b, tr(Σ) and n; after the solve, pass 2 accumulates the influence-function
  moments (ψ has mean ≈ 0 at the fixed point, so Σψ² - (Σψ)²/n loses nothing) and the ŵ
  diagnostics. `chunk_fn(i)` must be pure (e.g. slice a memory-mapped array via
  `lax.dynamic_slice`, or simulate chunk i from `jax.random.fold_in(key, i)`); it is called twice
  per chunk and must return the same data both times.

  Args:
    chunk_fn: i -> (phi (c, d), phi_next (c, d), rewards (c,), weights (c,)).
    num_chunks: static number of chunks.
    nu0: (d,).
    gamma, ridge: as in `fore_core`.
    dtype: accumulation dtype.

  Returns:
    ForeResult (i.i.d. sandwich SE; no clusters).
  """
  ph0, _, _, _ = jax.eval_shape(chunk_fn, jnp.zeros((), jnp.int32))
  d = ph0.shape[-1]

  def pass1(carry, i):
    a_mat, b, tr, n = carry
    phi, phin, r, m = (x.astype(dtype) for x in chunk_fn(i))
    zm = phi * m[:, None]
    return (a_mat + zm.T @ (phi - gamma * phin), b + zm.T @ r, tr + (zm * phi).sum(),
            n + m.sum()), None

  init = (jnp.zeros((d, d), dtype), jnp.zeros(d, dtype), jnp.zeros((), dtype), jnp.zeros((), dtype))
  (a_sum, b_sum, tr, n), _ = jax.lax.scan(pass1, init, jnp.arange(num_chunks))
  a_mat, b = a_sum / n, b_sum / n
  lam = ridge * tr / n / d
  lu = jax.scipy.linalg.lu_factor(a_mat + lam * jnp.eye(d, dtype=dtype))
  theta = jax.scipy.linalg.lu_solve(lu, b)
  nu0 = jnp.asarray(nu0, dtype)
  u = jax.scipy.linalg.lu_solve(lu, nu0, trans=1)
  value = nu0 @ theta

  usv, svals, vsv = jnp.linalg.svd(a_mat)

  def pass2(carry, i):
    s1, s2, sw, sw2, neg, swr, p1, p2 = carry
    phi, phin, r, m = (x.astype(dtype) for x in chunk_fn(i))
    zu = phi @ u
    psi = zu * (r + gamma * phin @ theta - phi @ theta)
    w = (1 - gamma) * zu
    pert = (phi @ usv[:, -1]) * ((phi - gamma * phin) @ vsv[-1])
    return (s1 + (m * psi).sum(), s2 + (m * psi ** 2).sum(), sw + (m * w).sum(),
            sw2 + (m * w ** 2).sum(), neg + (m * (w < 0)).sum(), swr + (m * w * r).sum(),
            p1 + (m * pert).sum(), p2 + (m * pert ** 2).sum()), None

  zero = jnp.zeros((), dtype)
  (s1, s2, sw, sw2, neg, swr, p1, p2), _ = jax.lax.scan(pass2, (zero,) * 8, jnp.arange(num_chunks))
  var = (s2 - s1 ** 2 / n) / (n - 1) / n
  se = jnp.sqrt(jnp.maximum(var, 0.0))
  smin_se = jnp.sqrt(jnp.maximum((p2 - p1 ** 2 / n) / (n - 1) / n, 0.0))
  return ForeResult(
      value=value, se=se, ci_low=value - Z95 * se, ci_high=value + Z95 * se, theta=theta,
      alpha=(1 - gamma) * u, sigma_min=svals[-1], sigma_min_se=smin_se,
      ident_t=svals[-1] / smin_se, cond=svals[0] / svals[-1], ess=sw ** 2 / sw2,
      frac_negative_w=neg / n, mean_w=sw / n, value_gap=value - swr / n / (1 - gamma),
      moment_residual=jnp.max(jnp.abs(a_mat.T @ ((1 - gamma) * u) - (1 - gamma) * nu0)), n=n)


def fore_chunked(phi, phi_next, rewards, weights, nu0, gamma, ridge=0.0,
                 chunk_size: int = 65536) -> ForeResult:
  """`fore_scan` over in-memory arrays split into chunks (last chunk zero-weight padded)."""
  n, d = phi.shape
  num_chunks = -(-n // chunk_size)
  pad = num_chunks * chunk_size - n
  padf = lambda x: jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)])
  phi, phi_next, rewards, weights = map(padf, (phi, phi_next, rewards, weights))

  def chunk_fn(i):
    sl = lambda x: jax.lax.dynamic_slice_in_dim(x, i * chunk_size, chunk_size)
    return sl(phi), sl(phi_next), sl(rewards), sl(weights)

  return fore_scan(chunk_fn, num_chunks, nu0, gamma, ridge,
                   dtype=jnp.result_type(phi.dtype, jnp.float32))


# ----------------------------------------------------------------------------------------------
# (ratio-weighted) fitted Q iteration, the iterative forms with the same fixed point
# ----------------------------------------------------------------------------------------------
def fitted_q_iteration(phi, phi_next, rewards, weights, nu0, gamma, *, ratio=None,
                       max_iters: int = 1000, tol: float = 1e-8, blowup: float = 1e12,
                       theta0=None, ridge: float = 0.0) -> FqeResult:
  """Linear FQE run as repeated weighted least-squares regressions (jittable).

    θ_{k+1} = argmin_θ E_n[m ρ (φ^T θ - r - γ φ'^T θ_k)²]  =  Σ_ρ^{-1} E_n[m ρ φ (r + γ φ'^T θ_k)]

  with ρ ≡ 1 (plain FQE; converges iff ρ(γ Σ^{-1} C) < 1) or ρ = ŵ (ratio-weighted FQE, the
  van der Laan–Kallus stationary-weighting idea). With ρ = the discounted-occupancy ratio, γ P_π
  is a √γ-contraction in L2(d_π); with ρ = ŵ from FORE and the constant in span(φ), the fixed
  point's value ν0^T θ equals FORE's Ĵ exactly (E_n[ŵ(φ - γφ')] = (1-γ)ν0 and E_n[ŵ δ] = 0).
  Each iteration costs O(n d) (targets and one back-substitution with a cached Cholesky factor),
  which is the regression a nonlinear Q-class would replace.

  Args:
    phi, phi_next, rewards, weights, nu0, gamma: see module docstring.
    ratio: optional (n,) per-sample weights ρ (e.g. ŵ = phi @ ForeResult.alpha).
    max_iters: iteration cap (bounded `lax.while_loop`).
    tol: stop when ||θ_k - θ_{k-1}||_∞ <= tol (1 + ||θ_k||_∞).
    blowup: declare divergence when ||θ||_∞ exceeds this (also declared, below the cap, when
      the value's steps are still growing at the last iteration).
    theta0: start (default 0).
    ridge: relative ridge on Σ_ρ.

  Returns:
    FqeResult.
  """
  dtype = jnp.result_type(phi.dtype, jnp.float32)
  d = phi.shape[-1]
  m = weights.astype(dtype) * (1.0 if ratio is None else ratio.astype(dtype))
  n = weights.astype(dtype).sum()
  pm = phi * m[:, None]
  sigma = pm.T @ phi / n
  sigma = sigma + ridge * jnp.trace(sigma) / d * jnp.eye(d, dtype=dtype)
  # Σ_ρ may be indefinite for signed ratios: LU, not Cholesky
  lu = jax.scipy.linalg.lu_factor(sigma)
  nu0 = jnp.asarray(nu0, dtype)
  nu0 = nu0 if nu0.ndim == 1 else nu0.mean(0)
  c_mat = pm.T @ phi_next / n
  rho = jnp.max(jnp.abs(jnp.linalg.eigvals(gamma * jax.scipy.linalg.lu_solve(lu, c_mat))))
  theta0 = jnp.zeros(d, dtype) if theta0 is None else theta0.astype(dtype)

  def step(theta):
    y = rewards.astype(dtype) + gamma * (phi_next @ theta)   # regression targets, O(n d)
    return jax.scipy.linalg.lu_solve(lu, pm.T @ y / n)

  eps = float(jnp.finfo(dtype).eps)

  def cond_fn(c):
    k, _, diff, scale, _, _ = c
    running = (diff > tol * (1 + scale)) & (scale < blowup) & jnp.isfinite(diff)
    return (k < max_iters) & ((k == 0) | running)

  def body(c):
    k, theta, _, _, vstep, _ = c
    new = step(theta)
    # |J_k - J_{k-1}| now and one step earlier: growing value steps = geometric divergence
    return (k + 1, new, jnp.max(jnp.abs(new - theta)), jnp.max(jnp.abs(new)),
            jnp.abs(nu0 @ (new - theta)), vstep)

  inf = jnp.array(jnp.inf, dtype)
  k, theta, diff, scale, vstep, vstep_prev = jax.lax.while_loop(
      cond_fn, body, (jnp.zeros((), jnp.int32), theta0, inf, jnp.zeros((), dtype), inf, inf))
  converged = (diff <= tol * (1 + scale)) & jnp.isfinite(diff)
  value = nu0 @ theta
  # Divergence from the value's growth, not only the blow-up cap: stopped unconverged while the
  # value's steps still grow and are not round-off (hub, K=100: J = -5e5, steps x1.15 each).
  growing = (vstep > vstep_prev) & (vstep > jnp.sqrt(eps) * (1.0 + jnp.abs(value)))
  diverged = (~jnp.isfinite(scale) | (scale >= blowup) | ~jnp.isfinite(diff) | ~jnp.isfinite(value)
              | (~converged & growing))
  value = jnp.where(diverged, jnp.inf, value)
  return FqeResult(value=value, theta=theta, num_iters=k, converged=converged & ~diverged,
                   diverged=diverged, spectral_radius=rho)


def ratio_weighted_fqe(phi, phi_next, rewards, weights, nu0, gamma, *, ratio=None,
                       max_iters: int = 2000, tol: float = 1e-12) -> FqeResult:
  """Ratio-weighted FQE; by default the ratio is FORE's own ŵ = (1-γ) φ^T A^{-T} ν0."""
  if ratio is None:
    res = fore_core(phi, phi_next, rewards, weights, nu0, gamma)
    ratio = phi @ res.alpha
  return fitted_q_iteration(phi, phi_next, rewards, weights, nu0, gamma, ratio=ratio,
                            max_iters=max_iters, tol=tol)
