"""Jitted FORE / FQE / BRM / bootstrap kernels vmapped over data-seed weight vectors.

A tabular data set of n transitions is summarised by its cell counts: for S states and A actions
there are C = S * A * S cells (s, a, s'), and a draw of n i.i.d. transitions from d_mu x P is a
multinomial count vector w [C] (`cell_counts`). Every estimator below is a weighted moment
estimator on the C cell rows, so one call evaluates `seeds` data sets at once from w [seeds, C].

Shared arguments: phi [C, d] features of (s, a), phn [C, d] expected next features under pi,
r [C] rewards, nu0 [d] initial feature mean under pi, gamma scalar. `build_kernels` returns
{name: jitted fn}; each returns per-seed arrays [seeds]:

  fore(phi, phn, r, w, nu0, gamma)            -> (value, se, cond, ident_t)
  support(..., cell_ids, num_cells, k)         -> (value, se, cond, ident_t, ess_frac, rare_share)
  iv(z, x, xn, r, w, nu0, gamma)               -> (value, se, cond, ident_t), instruments z
  fqe(..., iters)                              -> value after `iters` FQE steps
  brm(...)                                     -> Bellman-residual-minimisation value
  boot(key, ..., num_boot)                     -> (ci_low, ci_high) Poisson-bootstrap percentiles

Float64 needs `jax_enable_x64` set by the caller.
"""
from __future__ import annotations


import jax
import numpy as np

from jaxrl_suite.ope import baselines as B
from jaxrl_suite.ope import fore as F

MAX_COND = 1e12  # cond(A_n) at or above this: the estimate is numerically singular (refused)


def cell_counts(rng: np.random.Generator, n: int, probs: np.ndarray, seeds: int) -> np.ndarray:
  """[seeds, C] float64 multinomial counts of n draws over the C cells with probabilities probs:
  exactly the law of the cell counts of n i.i.d. transitions."""
  return rng.multinomial(int(n), probs, size=seeds).astype(np.float64)


def usable(values: np.ndarray, cond: np.ndarray) -> np.ndarray:
  """[seeds] bool: the estimate is finite and A_n is not numerically singular."""
  return np.isfinite(values) & np.isfinite(cond) & (cond < MAX_COND)


def _fore(phi, phn, r, w, nu0, gamma):
  res = jax.vmap(lambda ww: F.fore_core(phi, phn, r, ww, nu0, gamma))(w)
  return res.value, res.se, res.cond, res.ident_t


def _fore_support(phi, phn, r, w, nu0, gamma, cell_ids, num_cells, k):
  # FORE plus the support diagnostic of its own fitted ratio phi @ alpha on the (s, a) cells
  def one(ww):
    res = F.fore_core(phi, phn, r, ww, nu0, gamma)
    d = F.support_diagnostic(phi @ res.alpha, ww, cell_ids, num_cells, k)
    return res.value, res.se, res.cond, res.ident_t, d["ess_frac"], d["rare_mass_share"]
  return jax.vmap(one)(w)


def _fore_iv(z, x, xn, r, w, nu0, gamma):
  res = jax.vmap(lambda ww: F.fore_core(x, xn, r, ww, nu0, gamma, z=z))(w)
  return res.value, res.se, res.cond, res.ident_t


def _fqe(phi, phn, r, w, nu0, gamma, iters):
  return jax.vmap(lambda ww: B.fqe(phi, phn, r, ww, nu0, gamma, max_iters=iters).value)(w)


def _brm(phi, phn, r, w, nu0, gamma):
  return jax.vmap(lambda ww: B.brm(phi, phn, r, ww, nu0, gamma))(w)


def _boot(key, phi, phn, r, w, nu0, gamma, num_boot):
  # one bootstrap key per data seed; weights are counts, so resampling is Poisson per cell count
  keys = jax.random.split(key, w.shape[0])
  out = jax.vmap(lambda k, ww: F.poisson_bootstrap(k, phi, phn, r, ww, nu0, gamma,
                                                    num_boot=num_boot,
                                                    weights_are_counts=True))(keys, w)
  return out["ci_low"], out["ci_high"]


def build_kernels() -> dict:
  """{name: jitted kernel} (see the module doc); each compiles once per input shape. Fresh jit
  wrappers per call, so one run's compilations are not shared with another's."""
  return dict(fore=jax.jit(_fore), iv=jax.jit(_fore_iv), brm=jax.jit(_brm),
              support=jax.jit(_fore_support, static_argnames=("num_cells", "k")),
              fqe=jax.jit(_fqe, static_argnames=("iters",)),
              boot=jax.jit(_boot, static_argnames=("num_boot",)))
