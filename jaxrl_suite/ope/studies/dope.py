r"""Section D: a DOPE-style OPE table (Fu et al. 2021's metrics) on one tabular MDP.

mdps.multi_policy_mdp gives an MDP, a behaviour policy mu and P target policies pi_p with exact
values J_p. Per data seed, N trajectories of H steps of mu (mdps.sample_trajectories) are
evaluated for every pi_p by FORE (cluster-robust SE, one cluster per trajectory) and every
baseline of ope.baselines: the linear LSTDQ, MWL, DualDICE, GradientDICE (algebraically equal to
FORE), FQE, BRM, FORE-ctrl (LSTDQ on features without the ratios), and the trajectory
importance-sampling family IS, WIS, PDIS, WPDIS, DR (which target the H-truncated value, bias
<= gamma^H max R / (1 - gamma)).

`dope(cfg, key, rng)` returns `summary(est, truths, bound)`: per method the median and mean
normalised |err| (|J_hat - J| / (max J - min J)), Spearman rank correlation and regret@1 / @5
(ope.metrics, per seed, t CIs over seeds), FORE's Wald coverage, the gaps to FORE and `units`
(per-seed equivalence gap and FORE's normalised error, the claims' samples). `groups(D)` merges
the methods equal to FORE into one entry for ranking. Config fields read: dope_policies,
dope_horizon, dope_traj, dope_seeds, dope_fqe_iters.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from jaxrl_suite.ope import baselines as B
from jaxrl_suite.ope import fore as F
from jaxrl_suite.ope import mdps as M
from jaxrl_suite.ope import metrics
from jaxrl_suite.ope.studies.summaries import binom_ci, mean_ci

METHODS = ("FORE", "LSTDQ", "MWL", "DualDICE", "GradientDICE", "FQE", "BRM", "FORE-ctrl",
           "IS", "WIS", "PDIS", "WPDIS", "DR")
LINEAR_EQUALS = ("LSTDQ", "MWL", "DualDICE", "GradientDICE")  # algebraically FORE
SEED_BATCH = 4    # seeds per jitted call: large vmapped LAPACK jits hung on 2-core CPU (jax 0.10)
TIE_TOL = 1e-9    # |estimate - FORE| / value range below which a method is FORE itself


def _estimator(prob, N: int, H: int, fqe_iters: int):
  """The jitted per-policy evaluation, vmapped over a seed batch of trajectories.

  Arguments: trajs {states, actions, rewards, next_states: [seeds, N, H]}, then the policy's
  tables phi [SA, d], phipi [S, d], nu0 [d], pi [S, A], ctrl [SA, dc], ctrlpi [S, dc],
  nu0c [dc]. Returns {method: [seeds]} plus FORE_se and cond."""
  A, g = prob.num_actions, prob.gamma
  cid = jnp.repeat(jnp.arange(N), H)
  mask = jnp.ones((N, H), bool)
  ones = jnp.ones(N * H)
  mu_t = jnp.asarray(prob.mu)

  def one(tr, phi_t, phipi_t, nu0, pi_t, ctrl_t, ctrlpi_t, nu0c):
    s, a, r, sp = tr["states"], tr["actions"], tr["rewards"], tr["next_states"]
    x = (s * A + a).reshape(-1)
    phi, phn, rr = phi_t[x], phipi_t[sp.reshape(-1)], r.reshape(-1)
    res = F.fore_core(phi, phn, rr, ones, nu0, g, cluster_ids=cid, num_clusters=N)
    pi_p, mu_p = pi_t[s, a], mu_t[s, a]
    q_taken = (phi @ res.theta).reshape(N, H)
    v_state = (phipi_t[s.reshape(-1)] @ res.theta).reshape(N, H)
    lin = (phi, phn, rr, ones, nu0, g)
    traj = (r, pi_p, mu_p, mask)
    return dict(
        FORE=res.value, FORE_se=res.se, LSTDQ=B.lstdq(*lin), MWL=B.mwl(*lin)[0],
        DualDICE=B.dualdice(*lin)[0], GradientDICE=B.gradientdice(*lin)[0],
        FQE=B.fqe(*lin, max_iters=fqe_iters, tol=1e-10).value, BRM=B.brm(*lin),
        **{"FORE-ctrl": B.lstdq(ctrl_t[x], ctrlpi_t[sp.reshape(-1)], rr, ones, nu0c, g)},
        IS=B.is_estimate(*traj, g), WIS=B.wis(*traj, g), PDIS=B.pdis(*traj, g),
        WPDIS=B.wpdis(*traj, g), DR=B.doubly_robust(*traj, q_taken, v_state, g), cond=res.cond)

  return jax.jit(jax.vmap(jax.jit(one), in_axes=(0,) + (None,) * 7))


def _policy_tables(prob, pk) -> tuple:
  """Policy pk's tables for `_estimator` (features, expected next features, nu0, on phi and
  on the control features)."""
  ctrl = prob.extra["ctrl"]
  return (jnp.asarray(prob.phi), jnp.asarray(M.expected_next_features(prob.phi, pk)),
          jnp.asarray(M.nu0_of(prob.phi, pk, prob.d0)), jnp.asarray(pk), jnp.asarray(ctrl),
          jnp.asarray(M.expected_next_features(ctrl, pk)), jnp.asarray(M.nu0_of(ctrl, pk, prob.d0)))


def dope(cfg, key: jax.Array, rng: np.random.Generator) -> dict:
  """Section D (see the module doc): `summary` of the [seeds, policies] estimates."""
  prob, pis = M.multi_policy_mdp(rng, cfg.dope_policies, horizon=cfg.dope_horizon)
  N, H, g = cfg.dope_traj, cfg.dope_horizon, prob.gamma
  truths = np.array([M.exact(prob.P, prob.R, pk, prob.d0, g)["J"] for pk in pis])
  keys = jax.random.split(key, cfg.dope_seeds)
  trajs = jax.jit(jax.vmap(lambda kk: M.sample_trajectories(
      kk, prob.P, prob.R, prob.mu, prob.d0, N, H)))(keys)
  vone = _estimator(prob, N, H, cfg.dope_fqe_iters)
  est = {m: np.zeros((cfg.dope_seeds, len(pis))) for m in METHODS + ("FORE_se", "cond")}
  for kk, pk in enumerate(tqdm.tqdm(pis, desc="dope: policies")):
    tabs = _policy_tables(prob, pk)
    for lo in range(0, cfg.dope_seeds, SEED_BATCH):
      sl = slice(lo, min(lo + SEED_BATCH, cfg.dope_seeds))
      out = vone(jax.tree.map(lambda a: a[sl], trajs), *tabs)
      for m in est:
        est[m][sl, kk] = np.asarray(out[m])
  return summary(est, truths, g ** H * prob.R.max() / (1 - g))


def _table(est: dict, truths: np.ndarray) -> dict:
  """{method: metrics row} from per-seed ope.metrics (k = 5), t CIs of means over seeds."""
  table = {}
  for m in METHODS:
    mt = metrics.ranking_metrics(est[m], truths, k=5)
    abs_err, sp = mt["norm_abs_err"], mt["spearman"]
    fin = abs_err[np.isfinite(abs_err)]
    table[m] = dict(
        norm_abs_err_median=float(np.median(abs_err)),
        norm_abs_err_mean_ci=mean_ci(fin) if len(fin) > 1 else None,
        spearman_mean_ci=mean_ci(sp[np.isfinite(sp)]) if np.isfinite(sp).sum() > 1 else None,
        regret1_mean_ci=mean_ci(mt["regret1"]), regret5_mean_ci=mean_ci(mt["regret_k"]),
        nonfinite_frac=float(np.mean(~mt["finite"])))
  return table


def summary(est: dict, truths: np.ndarray, horizon_bias_bound: float) -> dict:
  """The DOPE record from est {method: [seeds, P]} (plus FORE_se, cond) and truths [P]: table,
  FORE's coverage, max |estimate - FORE| per linear method (and FQE when it converged), and
  units: per seed the largest |estimate - FORE| / range over the linear methods (a non-finite
  estimate counts as the whole range) and FORE's mean normalised error."""
  rng_v = truths.max() - truths.min()
  cov = np.abs(est["FORE"] - truths[None]) <= 1.96 * est["FORE_se"]
  eq = {m: float(np.nanmax(np.abs(est[m] - est["FORE"]))) for m in LINEAR_EQUALS}
  gap = np.stack([np.where(np.isfinite(est[m]) & np.isfinite(est["FORE"]),
                           np.abs(est[m] - est["FORE"]) / rng_v, 1.0)
                  for m in LINEAR_EQUALS])                                     # [4, seeds, P]
  units = dict(equivalence_gap=gap.max((0, 2)),
               fore_norm_abs_err=np.abs(est["FORE"] - truths[None]).mean(1) / rng_v)
  fqe_ok = np.isfinite(est["FQE"])
  eq["FQE (when converged)"] = (float(np.max(np.abs(est["FQE"] - est["FORE"])[fqe_ok]))
                                if fqe_ok.any() else None)
  return dict(truths=truths.tolist(), value_range=float(rng_v), table=_table(est, truths),
              fore_coverage=float(cov.mean()), fore_coverage_ci=binom_ci(cov.sum(), cov.size),
              equivalence_max_abs_diff=eq, cond_median=float(np.median(est["cond"])),
              horizon_bias_bound=float(horizon_bias_bound), units=units)


def groups(D: dict) -> list[list[str]]:
  """Methods grouped for ranking: every linear method equal to FORE within TIE_TOL of the value
  range in every run joins FORE's group; the others stand alone. D: `summary`'s dict."""
  eq = D["equivalence_max_abs_diff"]
  same = {m for m in LINEAR_EQUALS
          if eq.get(m) is not None and eq[m] <= TIE_TOL * D["value_range"]}
  fore_group = ["FORE"] + [m for m in METHODS if m in same]
  return [fore_group] + [[m] for m in METHODS if m not in fore_group]
