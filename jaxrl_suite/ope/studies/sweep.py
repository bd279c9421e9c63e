r"""Section C: the ratio stays exactly realizable while A becomes singular (sigma_min(A) -> 0).

FORE with instruments Z and value features X solves A theta = b with
A = Z^T D_mu (X - gamma P_pi X). Two paths t -> X_t reach a singular A at t = t* while w stays
in the span of the instruments, so the "ratio realizable is enough" claim predicts no effect:
  C1_hub     hub MDP, Z = phi (contains w), X_t = mdps.hub_singular_path(t), B_t singular at
             t* = mdps.hub_singular_t(); fractions t / t* from cfg.sweep_fracs;
  C2_random  one "moderate" random MDP (numpy seed 7), Z = X_t = span[phi, g_t]
             (mdps.random_singular_path), det A_1 = 0; t from cfg.sweep_fracs.
At each t: cfg.sweep_seeds count draws at n = cfg.sweep_n; per row the population sigma_min,
the ratio's span residual, median |err|, sd, the share refused by fore.check_conditioning
(numerically singular or ident_t < 2) and Wald coverage among the kept. C1's `units` hold the
per-seed |err| at the first and last t (the single-condition claim's samples).
"""
from __future__ import annotations

import types

import jax.numpy as jnp
import numpy as np

from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M
from jaxrl_suite.ope.studies.kernels import cell_counts

C2_MDP_SEED = 7


def _row(t_frac, sigma_min, w_residual, v, se, cond, ident, J) -> tuple[dict, np.ndarray]:
  """One sweep row from per-seed (value, se, cond, ident_t) [seeds]; also |err| [seeds]."""
  res = types.SimpleNamespace(value=v, cond=cond, sigma_min=np.zeros_like(v), ident_t=ident)
  flagged = F.check_conditioning(res, np.float64, "ignore")
  err = np.abs(v - J)
  kept = ~flagged
  row = dict(t_frac=t_frac, sigma_min_pop=sigma_min, w_residual=w_residual,
             median_abs_err=float(np.nanmedian(np.where(np.isfinite(err), err, np.nan))),
             sd=float(np.nanstd(np.where(np.isfinite(v), v, np.nan))),
             flagged_frac=float(flagged.mean()),
             coverage=float(np.mean(err[kept] <= 1.96 * se[kept])) if kept.any() else None)
  return row, err


def hub_sweep(cfg, k: dict, rng: np.random.Generator) -> dict:
  """C1: dict(t_star, J, rows, units=dict(err_first, err_last))."""
  p = M.hub_mdp()
  ex = M.problem_exact(p)
  tstar = M.hub_singular_t()
  zc, _, r, _ = (jnp.asarray(a) for a in M.cell_arrays(p))
  probs = M.cell_probs(p)
  rows, errs = [], []
  for frac in cfg.sweep_fracs:
    x = M.hub_singular_path(frac * tstar)
    b_mat = p.phi.T @ (p.dmu[:, None] * (x - p.gamma * ex["Ppi"] @ x))
    xc, xn, _, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p, x))
    w = jnp.asarray(cell_counts(rng, cfg.sweep_n, probs, cfg.sweep_seeds))
    out = (np.asarray(a) for a in k["iv"](zc, xc, xn, r, w, nu0, p.gamma))
    row, err = _row(frac, float(np.linalg.svd(b_mat)[1].min()),
                    M.span_residual(p.phi, ex["w"]), *out, ex["J"])
    rows.append(row)
    errs.append(err)
  # per-seed |err| at the first and last t (the single-condition claim's samples)
  return dict(t_star=tstar, J=ex["J"], rows=rows,
              units=dict(err_first=errs[0], err_last=errs[-1]))


def random_sweep(cfg, k: dict, rng: np.random.Generator) -> dict:
  """C2: dict(J, rows)."""
  p = M.random_mdp(np.random.default_rng(C2_MDP_SEED), "moderate")
  ex = M.problem_exact(p)
  path = M.random_singular_path(p)
  probs = M.cell_probs(p)
  rows = []
  for t in cfg.sweep_fracs:
    x = path(t)
    a_mat = x.T @ (p.dmu[:, None] * (x - p.gamma * ex["Ppi"] @ x))
    xc, xn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p, x))
    w = jnp.asarray(cell_counts(rng, cfg.sweep_n, probs, cfg.sweep_seeds))
    out = (np.asarray(a) for a in k["fore"](xc, xn, r, w, nu0, p.gamma))
    rows.append(_row(t, float(np.linalg.svd(a_mat)[1].min()), M.span_residual(x, ex["w"]),
                     *out, ex["J"])[0])
  return dict(J=ex["J"], rows=rows)


def sweep(cfg, k: dict, rng: np.random.Generator) -> dict:
  """Both sweeps, C1 then C2 (they share rng, so the order fixes the draws):
  {"C1_hub": ..., "C2_random": ...}. Config fields read: sweep_fracs, sweep_n, sweep_seeds."""
  return {"C1_hub": hub_sweep(cfg, k, rng), "C2_random": random_sweep(cfg, k, rng)}
