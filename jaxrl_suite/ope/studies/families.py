r"""Section B: random tabular families "moderate" and "severe" (mdps.random_mdp), where the
features contain the ratio w = d_pi/d_mu but never Q^pi, and "severe" shifts mu far from pi.

Population (exact distribution) per MDP: relative errors |J_hat - J| / |J| of FORE (exact:
w in span(phi)), control LSTDQ on features without w, BRM and FQE (when it converges), the
projected FQE spectral radius rho, cond(A), the centred-Q span residual and max w.

Finite n: a pool of cfg.family_mdps MDPs ("severe": only MDPs with rho > 1, i.e. population FQE
diverges; chosen from the model, never from coverage), each at every n of cfg.ns over
cfg.family_seeds count draws (family_stats).

`families(cfg, kernels, rng)` returns {family: dict(population, finite [row per n],
finite_mdps, finite_fqe_rho, per_mdp_at_max_n, units)}; units.population_signed_rel_err [MDPs]
is the sample of the population-exactness claim. Config fields read: family_population_mdps,
family_mdps, family_seeds, ns, fqe_iters, support_k, support_min_ess_frac,
support_max_rare_share.
"""
from __future__ import annotations

import numpy as np
import tqdm

from jaxrl_suite.ope import mdps as M
from jaxrl_suite.ope.studies import family_stats

FAMILIES = ("moderate", "severe")
FQE_CONVERGES = 0.999   # rho below this: population FQE's value after 3000 steps is its limit
MAX_POOL_TRIES = 2000   # severe pool top-up: extra MDPs drawn at most


def families(cfg, k: dict, rng: np.random.Generator) -> dict:
  """Section B for both families (see the module doc); k: kernels.build_kernels()."""
  out = {}
  for fam in FAMILIES:
    pop, insts, signed = population(rng, fam, cfg.family_population_mdps)
    pool = finite_pool(rng, fam, insts, cfg.family_mdps)
    rows, per_mdp = [], []
    for n in tqdm.tqdm(cfg.ns, desc=f"{fam}: n"):
      stats = [family_stats.mdp_at_n(cfg, k, rng, p, ex, n) for rho, p, ex in pool]
      rows.append(family_stats.family_row(n, stats))
      if n == cfg.ns[-1]:
        per_mdp = [family_stats.per_mdp_row(j, rho, st)
                   for j, ((rho, _, _), st) in enumerate(zip(pool, stats))]
    out[fam] = dict(population=pop, finite=rows, finite_mdps=len(pool),
                    finite_fqe_rho=[float(x[0]) for x in pool], per_mdp_at_max_n=per_mdp,
                    units=dict(population_signed_rel_err=signed))
  return out


def _population_one(p, ex) -> dict:
  """One MDP's population numbers (relative errors, rho, cond(A), residual, max w)."""
  jf, _, a_mat = M.population_iv(p.phi, p.phi, p.dmu, ex, p.gamma)
  jc = M.population_iv(p.extra["ctrl"], p.extra["ctrl"], p.dmu, ex, p.gamma)[0]
  vals, rho = M.population_fqe(p.phi, p.dmu, ex, p.gamma, iters=(200, 3000))
  rel = lambda j: abs(j - ex["J"]) / abs(ex["J"])
  return dict(
      fore=rel(jf), fore_signed=(jf - ex["J"]) / abs(ex["J"]), ctrl=rel(jc),
      brm=rel(M.population_brm(p.phi, p.dmu, ex, p.gamma)), rho=rho, cond=np.linalg.cond(a_mat),
      qres=M.span_residual(p.phi, ex["Q"] - p.dmu @ ex["Q"], p.dmu), wmax=ex["w"].max(),
      fqe_conv=rel(vals[3000]) if rho < FQE_CONVERGES else None)


def population(rng: np.random.Generator, fam: str, num: int):
  """Population errors over `num` random MDPs of `fam`: (summary dict, [(rho, problem, exact)],
  [num] signed relative FORE errors)."""
  insts, per = [], []
  for _ in tqdm.tqdm(range(num), desc=f"{fam}: population"):
    p = M.random_mdp(rng, fam)
    ex = M.problem_exact(p)
    per.append(_population_one(p, ex))
    insts.append((per[-1]["rho"], p, ex))
  s = {kk: np.array([d[kk] for d in per]) for kk in per[0] if kk != "fqe_conv"}
  conv = np.array([d["fqe_conv"] for d in per if d["fqe_conv"] is not None])
  pop = dict(
      mdps=len(insts), fore_rel_err_max=float(s["fore"].max()),
      ctrl_rel_err_median=float(np.median(s["ctrl"])),
      ctrl_rel_err_p90=float(np.quantile(s["ctrl"], 0.9)),
      brm_rel_err_median=float(np.median(s["brm"])),
      brm_rel_err_p90=float(np.quantile(s["brm"], 0.9)),
      fqe_rho_median=float(np.median(s["rho"])), fqe_diverge_frac=float(np.mean(s["rho"] > 1)),
      fqe_converged_max_rel_err=float(conv.max()) if len(conv) else None,
      cond_median=float(np.median(s["cond"])), cond_max=float(s["cond"].max()),
      q_residual_min=float(s["qres"].min()), w_max_median=float(np.median(s["wmax"])))
  return pop, insts, s["fore_signed"]


def finite_pool(rng: np.random.Generator, fam: str, insts: list, num: int) -> list:
  """The finite-n pool: the first `num` population MDPs; for "severe" only those whose population
  FQE diverges (rho > 1), drawing more (at most MAX_POOL_TRIES) when too few did."""
  pool = [x for x in insts if x[0] > 1] if fam == "severe" else insts
  tries = 0
  while fam == "severe" and len(pool) < num and tries < MAX_POOL_TRIES:
    p = M.random_mdp(rng, fam)
    ex = M.problem_exact(p)
    _, rho = M.population_fqe(p.phi, p.dmu, ex, p.gamma, iters=(1,))
    if rho > 1:
      pool.append((rho, p, ex))
    tries += 1
  return pool[:num]
