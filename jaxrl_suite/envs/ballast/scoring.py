"""BallastNet-v0 policies and heuristics scored on paired episode banks.

Every policy is run on the same keys by one evaluator (rollout.make_baseline_evaluate or
make_switch_evaluate), so episode i has the same clogs, plan and sounding noise for all of them
and every statistic here is paired over episodes. An `out` is one evaluator call's output for N
episodes, on the host (jax.device_get): steps [N], success [N], capsized [N], clog [N, E],
exercised [N, E], diag [N, E], flag_steps [N, 2]. `reg` [N] is net_bank.regime_of(clog) (index
into REGIMES).

  score_baseline(ev, p, bp, name, keys)   one heuristic on a key bank (oracle sees the clogs)
  regime_sets(reg, blocked=True)          [(name, bool [N])]: all, blocked, then each regime
  steps_row / saving / gap_share          mean steps [95% bootstrap CI] and success; 1 - mean(a)
                                          / mean(b) with a paired bootstrap CI; the share of
                                          the replan -> oracle gap a policy closes
  group_means(steps, mask, G)             per evaluation group means (one unit per group)
  seed_mean(runs)                         per-episode mean of steps and success over seeds
  regime_table / v2_table / steps_rows    those rows per regime and policy
  diagnosis_rows / failure_rows           diagnosis metrics and why episodes fail, per regime
  seed_rows                               per RL seed x action mode rows
  v1_summary / v2_summary / generalisation_summary   a stage's rows, from its outs
  dt_sweep(score, dts, ...)               oracle vs B-replan / B-tabu at other step lengths

Numbers only: the claims are judged from these samples by jaxrl_suite.repro, in the script.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import jax
import numpy as np

from jaxrl_suite.core import stats
from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast.diagnosis import diagnosis_metrics
# The study's regimes are net_bank's (the v2 banks stratify by them); the script imports both
# names from here.
from jaxrl_suite.envs.ballast.net_bank import REGIMES, regime_of

BLOCKED = "blocked (1 or >=2)"
SWEEP_POLICIES = ("oracle", "replan", "tabu")   # the heuristics of the dt sweep


def score_baseline(ev: Callable, p, bp, name: str, keys: jax.Array, *extra: Any) -> dict:
  """One heuristic (a name in baselines.BASELINES) on the episode keys [N]: ev is
  make_baseline_evaluate's evaluator, extra its optional extra_params. The oracle runs with
  reveal_clog (it is the true-clog planner). Returns the host-side out."""
  pp = p.replace(reveal_clog=name == "oracle")
  return jax.device_get(ev(pp, bp, B.BASELINES.index(name), keys, *extra))


def is_blocked(reg: np.ndarray) -> np.ndarray:
  """bool [N]: one or more pipes blocked (regimes 1 and 2)."""
  return (reg == 1) | (reg == 2)


def regime_sets(reg: np.ndarray, blocked: bool = True) -> list[tuple[str, np.ndarray]]:
  """[(row name, bool [N])]: every episode, the blocked ones (if `blocked`), then each of
  REGIMES (possibly empty)."""
  sets = [("all", np.ones_like(reg, bool))] + ([(BLOCKED, is_blocked(reg))] if blocked else [])
  return sets + [(REGIMES[r], reg == r) for r in range(len(REGIMES))]


def steps_row(steps, success, dt_h: float, n_boot: int, seed: int) -> dict:
  """{"n", "steps" (mean), "ci" [lo, hi] (bootstrap 95%), "hours", "hours_ci" (steps x dt_h),
  "success" (rate)} of the episodes given (NaN if none)."""
  m, lo, hi = stats.bootstrap_ci(steps, n_boot=n_boot, seed=seed) if len(steps) else (np.nan,) * 3
  return {"n": int(len(steps)), "steps": m, "ci": [lo, hi], "hours": m * dt_h,
          "hours_ci": [lo * dt_h, hi * dt_h],
          "success": float(np.mean(success)) if len(steps) else np.nan}


def saving(a, b, n_boot: int, seed: int) -> dict:
  """{"saving": 1 - mean(a)/mean(b), "ci": [lo, hi]} with a paired bootstrap CI over episodes
  a[i], b[i] [N]; NaN with fewer than two episodes."""
  if len(a) < 2:
    return {"saving": np.nan, "ci": [np.nan, np.nan]}
  r, lo, hi = stats.paired_ratio_ci(a, b, n_boot=n_boot, seed=seed)
  return {"saving": 1 - r, "ci": [1 - hi, 1 - lo]}


def gap_share(rl, rep, orc, n_boot: int, seed: int) -> dict:
  """{"share": (mean rep - mean rl) / (mean rep - mean orc), "ci": [lo, hi]}: the share of the
  replanner -> oracle gap a policy closes, paired bootstrap CI over episodes [N] (resamples
  with no gap are left out). NaN with fewer than two episodes or no gap."""
  rl, rep, orc = (np.asarray(x, np.float64) for x in (rl, rep, orc))
  if len(rl) < 2 or rep.mean() - orc.mean() <= 0:
    return {"share": np.nan, "ci": [np.nan, np.nan]}
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, len(rl), (n_boot, len(rl)))
  gap = rep[idx].mean(1) - orc[idx].mean(1)
  share = np.where(gap > 0, (rep[idx].mean(1) - rl[idx].mean(1)) / np.maximum(gap, 1e-9), np.nan)
  lo, hi = np.nanquantile(share, [0.025, 0.975])
  return {"share": float((rep.mean() - rl.mean()) / (rep.mean() - orc.mean())),
          "ci": [float(lo), float(hi)]}


def group_means(steps, mask, n_groups: int) -> list[float]:
  """Per evaluation group (episodes cut into n_groups contiguous groups of independent keys),
  the mean of steps [N] over the episodes in mask [N] (NaN for a group with none): one unit per
  group for the baseline-only claims."""
  steps, mask = np.asarray(steps, np.float64), np.asarray(mask, bool)
  g = (np.arange(steps.shape[0]) * n_groups) // steps.shape[0]
  return [float(steps[mask & (g == i)].mean()) if (mask & (g == i)).any() else float("nan")
          for i in range(n_groups)]


def seed_mean(runs: Sequence[dict]) -> dict:
  """Seed 0's out with steps and success replaced by their per-episode means over the seeds'
  outs (the RL column, paired with the baselines' episodes)."""
  out = dict(runs[0])
  out["steps"] = np.mean([o["steps"] for o in runs], 0)
  out["success"] = np.mean([o["success"] for o in runs], 0)
  return out


def regime_table(outs: dict, reg, dt_h: float, n_boot: int, seed: int, rl: str = "rl") -> dict:
  """{row: {policy: steps_row + "saving_vs_replan" (not for replan) + "saving_vs_tabu" (if
  tabu ran, not for tabu)}} over regime_sets, and outs[rl]'s "gap_share" (replan -> oracle)."""
  table = {}
  for rname, sel in regime_sets(reg):
    row = {}
    rep = outs["replan"]["steps"][sel]
    for name, o in outs.items():
      row[name] = steps_row(o["steps"][sel], o["success"][sel], dt_h, n_boot, seed)
      if name != "replan":
        row[name]["saving_vs_replan"] = saving(o["steps"][sel], rep, n_boot, seed)
      if "tabu" in outs and name != "tabu":
        row[name]["saving_vs_tabu"] = saving(o["steps"][sel], outs["tabu"]["steps"][sel],
                                             n_boot, seed)
    row[rl]["gap_share"] = gap_share(outs[rl]["steps"][sel], rep, outs["oracle"]["steps"][sel],
                                     n_boot, seed)
    table[rname] = row
  return table


def v2_table(o2: dict, reg, dt_h: float, n_boot: int, seed: int) -> dict:
  """Task v2's {row: {"oracle-v2" | "replan-v2" | "rl-v2": steps_row, "oracle_vs_replan",
  "rl_vs_replan": saving, "rl_gap_share"}} over regime_sets."""
  rows = {}
  for rname, sel in regime_sets(reg):
    row = {n: steps_row(o["steps"][sel], o["success"][sel], dt_h, n_boot, seed)
           for n, o in o2.items()}
    rep, orc = o2["replan-v2"]["steps"][sel], o2["oracle-v2"]["steps"][sel]
    row["oracle_vs_replan"] = saving(orc, rep, n_boot, seed)
    row["rl_vs_replan"] = saving(o2["rl-v2"]["steps"][sel], rep, n_boot, seed)
    row["rl_gap_share"] = gap_share(o2["rl-v2"]["steps"][sel], rep, orc, n_boot, seed)
    rows[rname] = row
  return rows


def steps_rows(outs: dict, reg, dt_h: float, n_boot: int, seed: int) -> dict:
  """{"all" | BLOCKED: {policy: steps_row}} (the generalisation test's rows)."""
  return {rname: {n: steps_row(o["steps"][sel], o["success"][sel], dt_h, n_boot, seed)
                  for n, o in outs.items()}
          for rname, sel in regime_sets(reg)[:2]}


def diagnosis_rows(out: dict, edge_mask, reg) -> dict:
  """{row: {"all_edges" | "exercised": diagnosis_metrics}} of out["diag"] against the true
  blocked/partial edges (clog < 1), over every real edge (edge_mask [E]) and over the edges the
  episode moved water through; rows "all" and each non-empty regime."""
  label = out["clog"] < 1
  rows = {}
  for name, sel in regime_sets(reg, blocked=False):
    if not sel.any():
      continue
    m_all = np.broadcast_to(edge_mask, label.shape)[sel]
    m_ex = m_all & out["exercised"][sel]
    rows[name] = {"all_edges": diagnosis_metrics(out["diag"][sel], label[sel], m_all),
                  "exercised": diagnosis_metrics(out["diag"][sel], label[sel], m_ex)}
  return rows


def failure_rows(runs: Sequence[dict], reg) -> dict:
  """{regime: {"success" | "capsized" | "step_limit": share of episodes}} over the outs of one
  policy (one per seed; a heuristic has one), for the non-empty regimes. Step limit = neither
  success nor capsize (|heel| > heel_max)."""
  rows = {}
  for r, rname in enumerate(REGIMES):
    sel = reg == r
    if sel.any():
      rows[rname] = {
          "success": float(np.mean([o["success"][sel] for o in runs])),
          "capsized": float(np.mean([o["capsized"][sel] for o in runs])),
          "step_limit": float(np.mean([(~o["success"] & ~o["capsized"].astype(bool))[sel]
                                       for o in runs]))}
  return rows


def deviation_shares(out: dict) -> dict:
  """Share of decision steps on which the agent's deviation flags held (flag_steps [N, 2]:
  the route is not B-replan's top slot; it is believed worse than B-replan's)."""
  n = max(float(np.sum(out["steps"])), 1.0)
  fs = np.asarray(out["flag_steps"]).sum(0)
  return {"off_top": float(fs[0] / n), "believed_worse": float(fs[1] / n)}


def seed_rows(by_mode: dict, sel_steps: dict, ref_steps, blk, n_boot: int, seed: int
              ) -> list[dict]:
  """Per action mode and seed (by_mode {mode: [out per seed]}): eval steps / success, saving vs
  the reference's steps [N] on the blocked episodes blk [N], deviation shares, and the
  selection-episode mean steps that chose the mode (sel_steps {mode: [S]})."""
  rows = []
  for m, outs in by_mode.items():
    for s, o in enumerate(outs):
      rows.append({"seed": s, "mode": m, "steps": float(o["steps"].mean()),
                   "success": float(o["success"].mean()), "selection_steps": sel_steps[m][s],
                   "saving_vs_replan_blocked": saving(o["steps"][blk], ref_steps[blk],
                                                      n_boot, seed), **deviation_shares(o)})
  return rows


def v1_summary(outs: dict, by_mode: dict, mode: str, sel_steps: dict, reg, edge_mask,
               dt_h: float, n_boot: int, seed: int) -> dict:
  """Task v1's rows. outs {policy: out} holds the heuristics and "rl" (seed_mean of
  by_mode[mode], the headline mode); by_mode {mode: [out per seed]}; sel_steps {mode: [S]};
  edge_mask [E]. Returns {"seed_rows" (vs B-replan on blocked episodes), "failures" {policy:
  failure_rows}, "table" (regime_table), "diag" {diagnoser: diagnosis_rows} (the RL head, the
  reference diagnoser on B-replan's and, if it ran, B-Bayes's episodes)}."""
  failures = {n: failure_rows([o], reg) for n, o in outs.items() if n != "rl"}
  failures["rl"] = failure_rows(by_mode[mode], reg)
  diag = {"rl head": diagnosis_rows(outs["rl"], edge_mask, reg),
          "reference on B-replan": diagnosis_rows(outs["replan"], edge_mask, reg)}
  if "bayes" in outs:
    diag["reference on B-Bayes"] = diagnosis_rows(outs["bayes"], edge_mask, reg)
  return {"seed_rows": seed_rows(by_mode, sel_steps, outs["replan"]["steps"], is_blocked(reg),
                                 n_boot, seed),
          "failures": failures, "table": regime_table(outs, reg, dt_h, n_boot, seed),
          "diag": diag}


def v2_summary(o2: dict, by_mode: dict, mode: str, sel_steps: dict, dt_h: float, n_boot: int,
               seed: int) -> dict:
  """Task v2's rows. o2 {"oracle-v2" | "replan-v2" | "rl-v2": out} (rl-v2 the seed mean of
  by_mode[mode], the headline mode); by_mode {mode: [out per seed]}; sel_steps {mode: [S]}.
  Returns {"rows" (v2_table), "blocked_steps" {"rl_per_seed": [S][n_blocked] (headline mode),
  "replan": [n_blocked]} (the claim's samples), "seeds" (seed_rows vs replan-v2)}."""
  reg = regime_of(o2["oracle-v2"]["clog"])
  blk = is_blocked(reg)
  return {"rows": v2_table(o2, reg, dt_h, n_boot, seed),
          "blocked_steps": {"rl_per_seed": [o["steps"][blk].tolist() for o in by_mode[mode]],
                            "replan": o2["replan-v2"]["steps"][blk].tolist()},
          "seeds": seed_rows(by_mode, sel_steps, o2["replan-v2"]["steps"], blk, n_boot, seed)}


def generalisation_summary(outs: dict, rl: str, edge_mask, dt_h: float, n_boot: int,
                           seed: int) -> dict:
  """The generalisation test's rows from outs {policy: out} on the unseen layout (the oracle,
  B-replan and the agent named rl): {"rows" (steps_rows), "diag_rl_head",
  "diag_reference_replan" (diagnosis_rows' "all" row)}."""
  reg = regime_of(outs["oracle"]["clog"])
  return {"rows": steps_rows(outs, reg, dt_h, n_boot, seed),
          "diag_rl_head": diagnosis_rows(outs[rl], edge_mask, reg).get("all"),
          "diag_reference_replan": diagnosis_rows(outs["replan"], edge_mask, reg).get("all")}


def dt_sweep(score: Callable[[float, str], dict], dts: Iterable, n_boot: int, seed: int,
             n_groups: int, known: dict | None = None, with_all: bool = True) -> dict:
  """Oracle vs B-replan / B-tabu per step length (minutes) on the same keys: score(dt_min,
  name) -> out for name in SWEEP_POLICIES, except where known {dt_min: {name: out}} already
  holds them. Returns {str(dt_min): {"oracle_vs_replan_blocked", "oracle_vs_tabu_blocked"
  (savings on blocked episodes), "oracle_vs_replan_all" (with_all only), "groups_blocked"
  {name: [n_groups]}, "mean_steps" and "success" {name: float}}}."""
  known = known or {}
  sweep = {}
  for dt_min in dts:
    o = known[dt_min] if dt_min in known else {n: score(dt_min, n) for n in SWEEP_POLICIES}
    blk = is_blocked(regime_of(o["oracle"]["clog"]))
    row = {"oracle_vs_replan_blocked": saving(o["oracle"]["steps"][blk],
                                              o["replan"]["steps"][blk], n_boot, seed),
           "oracle_vs_tabu_blocked": saving(o["oracle"]["steps"][blk], o["tabu"]["steps"][blk],
                                            n_boot, seed)}
    if with_all:
      row["oracle_vs_replan_all"] = saving(o["oracle"]["steps"], o["replan"]["steps"], n_boot,
                                           seed)
    row["groups_blocked"] = {n: group_means(o[n]["steps"], blk, n_groups)
                             for n in SWEEP_POLICIES}
    row["mean_steps"] = {n: float(o[n]["steps"].mean()) for n in SWEEP_POLICIES}
    row["success"] = {n: float(o[n]["success"].mean()) for n in SWEEP_POLICIES}
    sweep[str(dt_min)] = row
  return sweep
