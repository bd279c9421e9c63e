r"""Section B at one n: a random MDP's per-seed statistics and the family's pooled table row.

For an MDP with S states, A actions (C = S*A*S cells, SA = S*A state-action cells) and `seeds`
count draws at n, `mdp_at_n` returns per-seed arrays [seeds] (nan = refused as numerically
singular):
  fe      relative error |J_hat - J| / J of FORE;
  cov     Wald hit |J_hat - J| <= 1.96 se;  covs: the same among identified (ident_t >= 2);
  flag    the fitted ratio's support diagnostic flags the estimate (fore.check_support: ESS/n
          below cfg.support_min_ess_frac, or more than cfg.support_max_rare_share of the fitted
          target mass on cells with < cfg.support_k samples);
  passed  Wald hit when every in-sample diagnostic passes (identified, support not flagged);
  unseen  ORACLE share of the true target occupancy d_pi = w * d_mu on (s, a) cells with no
          sample (not available to the estimator: what in-sample diagnostics cannot see);
  ce, fq  relative errors of control LSTDQ (features without w) and FQE(cfg.fqe_iters);
plus the raw ok / ident / hit / sup_bad / essf / rare arrays for the per-MDP table.

`family_row(n, stats)` pools seeds over MDPs into one table row (medians, Wilson CI of the
pooled coverage, shares) and keeps per-MDP coverages, the unit of the family's coverage claims;
`per_mdp_row` is one MDP's line of the per-MDP table at the largest n.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M
from jaxrl_suite.ope.studies.kernels import cell_counts, usable
from jaxrl_suite.ope.studies.summaries import binom_ci, nanmean

IDENTIFIED_T = F.IDENTIFIED_T   # ident_t >= this: identified (fore.check_conditioning)


def _unseen_target_mass(p, ex, counts, seeds) -> np.ndarray:
  """[seeds] ORACLE share of d_pi on (s, a) cells no transition of the draw visited."""
  sa = p.num_states * p.num_actions
  cx = counts.reshape(seeds, sa, p.num_states).sum(-1)           # [seeds, SA] visits
  dpi = np.asarray(ex["w"]) * np.asarray(p.dmu)
  return ((cx == 0) * dpi[None]).sum(1) / dpi.sum()


def mdp_at_n(cfg, k: dict, rng: np.random.Generator, p, ex: dict, n: int) -> dict:
  """One MDP p (exact values ex) at one n over cfg.family_seeds count draws: the per-seed
  arrays of the module doc. k: kernels.build_kernels()."""
  phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p))
  ph2, pn2, _, nu02 = (jnp.asarray(a) for a in M.cell_arrays(p, p.extra["ctrl"]))
  counts = cell_counts(rng, n, M.cell_probs(p), cfg.family_seeds)
  w = jnp.asarray(counts)
  sa = p.num_states * p.num_actions
  cell_x = jnp.asarray(np.arange(sa * p.num_states) // p.num_states)  # (s, a) of each row
  v, se, cond, ident, essf, rare = (np.asarray(a) for a in k["support"](
      phi, phn, r, w, nu0, p.gamma, cell_x, sa, cfg.support_k))
  ok = usable(v, cond)
  J = ex["J"]
  hit = np.abs(v - J) <= 1.96 * se
  sup_bad = F.check_support(dict(ess_frac=essf, rare_mass_share=rare),
                            cfg.support_min_ess_frac, cfg.support_max_rare_share, warn=False)
  vc, _, condc, _ = (np.asarray(a) for a in k["fore"](ph2, pn2, r, w, nu02, p.gamma))
  fv = np.asarray(k["fqe"](phi, phn, r, w, nu0, p.gamma, cfg.fqe_iters))
  strong = ok & (ident >= IDENTIFIED_T)
  return dict(
      fe=np.where(ok, np.abs(v - J) / J, np.nan), cov=np.where(ok, hit, np.nan),
      covs=np.where(strong, hit, np.nan), flag=np.where(ok, sup_bad, np.nan),
      # every in-sample diagnostic passes: numerically and statistically identified, support ok
      passed=np.where(strong & ~sup_bad, hit, np.nan),
      unseen=_unseen_target_mass(p, ex, counts, cfg.family_seeds),
      ce=np.where(usable(vc, condc), np.abs(vc - J) / J, np.nan), fq=np.abs(fv - J) / J,
      ok=ok, ident=ident, hit=hit, sup_bad=sup_bad, essf=essf, rare=rare)


def per_mdp_row(j: int, rho: float, st: dict) -> dict:
  """MDP j's line of the per-MDP table at the largest n (st: `mdp_at_n`'s dict)."""
  ok, essf, rare = st["ok"], st["essf"], st["rare"]
  c_ok = st["hit"][ok]
  return dict(
      mdp=j, fqe_rho=float(rho), coverage=float(c_ok.mean()) if c_ok.size else None,
      refused_or_weak=float(1 - (ok & (st["ident"] >= IDENTIFIED_T)).mean()),
      support_flagged=float(st["sup_bad"][ok].mean()) if ok.any() else None,
      ess_frac_median=float(np.median(essf[ok])) if ok.any() else None,
      rare_share_median=float(np.median(rare[ok])) if ok.any() else None,
      unseen_target_mass=float(st["unseen"].mean()))


def family_row(n: int, stats: list[dict]) -> dict:
  """The family's row at one n, seeds of every MDP pooled; per-MDP coverage (the MDP is the unit
  of the family's coverage claims) is None where an MDP has no estimate that counts."""
  cov_mdp = [nanmean(st["cov"]) for st in stats]
  pass_mdp = [nanmean(st["passed"]) for st in stats]
  fe, ce, cov, fq, covs, flag, passed, unseen = (
      np.concatenate([st[f] for st in stats])
      for f in ("fe", "ce", "cov", "fq", "covs", "flag", "passed", "unseen"))
  cv = cov[np.isfinite(cov)]
  cs = covs[np.isfinite(covs)]
  fl = flag[np.isfinite(flag)].astype(bool)
  cf = cov[np.isfinite(flag)]
  ps = passed[np.isfinite(passed)]
  return dict(n=n, fore_median=float(np.nanmedian(fe)), fore_p90=float(np.nanquantile(fe, 0.9)),
              refused=int(np.isnan(fe).sum()), coverage=float(cv.mean()),
              coverage_ci=binom_ci(cv.sum(), len(cv)), ctrl_median=float(np.nanmedian(ce)),
              weak_ident_frac=float(1 - len(cs) / max(len(cv), 1)),
              coverage_identified=float(cs.mean()) if len(cs) else None,
              support_flagged_frac=float(fl.mean()) if len(fl) else None,
              coverage_support_flagged=float(cf[fl].mean()) if fl.any() else None,
              coverage_all_pass=float(ps.mean()) if len(ps) else None,
              all_pass_frac=float(len(ps) / max(len(cv), 1)),
              unseen_target_mass_mean=float(unseen.mean()),
              coverage_per_mdp=cov_mdp, coverage_all_pass_per_mdp=pass_mdp,
              fqe_median=float(np.median(fq)))
