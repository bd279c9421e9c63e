"""The BallastHydro-v0 report tables: per group x regime x policy, comparisons, diagnosis F1.

  group_names(groups, group) -> [layout]                    layouts of one group, in order
  pool(scores, names, pol, m) -> [S | 1, N]                 one metric over a group's layouts
  n_blocked(scores, names) -> int [N]                       blocked pipes per pooled episode
  regime_tables(scores, groups, variants, n_boot) -> (table, comparisons)
  diagnosis_table(diag, scores, groups, variants, n_boot) -> table
  oracle_bound(table, metric="steps_eff") -> {"cells", "violations", "holds"}

scores {layout: {policy: hydro_scoring.episode_metrics ([N], RL [S, N]), "_n_blocked": [N]}},
groups {layout: "shipped" | "held_out"}, diag {layout: {variant: {"head" | "reference":
{tp, fp, fn [S, N]}}, "heel_aware": {"reference": {...}}}}. Cells are (mean, lo, hi) from
hydro_stats (None for an empty regime). Report numbers only: verdicts come from
jaxrl_suite.repro in the script.
"""

from __future__ import annotations

import numpy as np

from jaxrl_suite.envs.ballast.hydro_stats import f1_ci, reduction_ci, rl_stat_ci

GROUPS = ("shipped", "held_out")
REGIME_ROWS = (("0 blocked", lambda nb: nb == 0), ("1 blocked", lambda nb: nb == 1),
               ("2 blocked", lambda nb: nb == 2), ("3 blocked", lambda nb: nb == 3),
               (">=1 blocked", lambda nb: nb >= 1), ("all", lambda nb: nb >= 0))
DIAG_ROWS = ((">=1 blocked", lambda nb: nb >= 1), ("all", lambda nb: nb >= 0))
METRICS = ("steps_eff", "steps", "hours", "success", "violated", "energy_kwh", "broke_heel",
           "broke_gm", "broke_trim", "broke_draught")
POLICIES = ("oracle", "replan", "heel_replan_1", "heel_replan_multi", "heel_aware")


def group_names(groups, group: str) -> list[str]:
  """The layouts of `group`, in the order of `groups`."""
  return [n for n, g in groups.items() if g == group]


def pool(scores, names, pol: str, m: str) -> np.ndarray:
  """Metric m of policy pol over layouts `names`, episodes concatenated: [S, N] (a baseline's
  [N] becomes [1, N])."""
  return np.concatenate([np.atleast_2d(scores[n][pol][m]) for n in names], -1)


def n_blocked(scores, names) -> np.ndarray:
  return np.concatenate([scores[n]["_n_blocked"] for n in names])


def _stat(x: np.ndarray, n_boot: int):
  """rl_stat_ci of x ([N] read as one seed), None with no episodes."""
  if x.ndim == 1:
    x = x[None]
  if x.shape[-1] == 0:
    return None
  return rl_stat_ci(x, n_boot)


def _comparisons(pg, variants, n_boot: int) -> dict:
  """On episodes with >= 1 blocked pipe: 1 - RL / baseline steps_eff per variant vs the
  heel-aware and the plain replanner, and rl_gru's heel-limit violation rate minus the
  heel-aware replanner's (where RL could help)."""
  mask = pg["_n_blocked"] >= 1
  out = {}
  for var in variants:
    rl = pg[var]["steps_eff"][:, mask]
    for base in ("heel_aware", "replan"):
      out[f"{var}_vs_{base}"] = reduction_ci(rl, pg[base]["steps_eff"][0, mask], n_boot)
  if "rl_gru" in pg:
    d = pg["rl_gru"]["violated"] - pg["heel_aware"]["violated"][0][None]
    out["violation_rate_diff_rl_minus_heel_aware"] = rl_stat_ci(d, n_boot)
  return out


def regime_tables(scores, groups, variants, n_boot: int):
  """Per group x regime x policy x metric: (mean, lo, hi), with "episodes" per regime; and per
  group the paired comparisons (_comparisons). Groups without layouts are left out."""
  policies = POLICIES + tuple(variants)
  table: dict = {}
  comparisons: dict = {}
  for group in GROUPS:
    names = group_names(groups, group)
    if not names:
      continue
    nb = n_blocked(scores, names)
    pg = {"_n_blocked": nb, **{pol: {m: pool(scores, names, pol, m) for m in METRICS}
                              for pol in policies}}
    table[group] = {}
    for reg, sel in REGIME_ROWS:
      mask = sel(nb)
      row = {"episodes": int(mask.sum())}
      for pol in policies:
        row[pol] = {m: _stat(pg[pol][m][..., mask], n_boot) for m in METRICS}
      table[group][reg] = row
    comparisons[group] = _comparisons(pg, variants, n_boot)
  return table, comparisons


def pool_counts(diag, names, who: str, src: str) -> dict[str, np.ndarray]:
  """{tp, fp, fn} [S, N] of diagnoser src ("head" | "reference") on `who`'s episodes over
  layouts `names`."""
  return {k: np.concatenate([diag[n][who][src][k] for n in names], -1) for k in ("tp", "fp", "fn")}


def diagnosis_table(diag, scores, groups, variants, n_boot: int) -> dict:
  """Per group x regime (DIAG_ROWS): F1 (mean, lo, hi) of each RL head, of the reference on the
  same episodes, their paired difference, the clogged exercised edges, and the reference on the
  heel-aware replanner's own episodes."""
  table = {}
  for group in GROUPS:
    names = group_names(groups, group)
    if not names:
      continue
    nb = n_blocked(scores, names)
    table[group] = {}
    for reg, sel in DIAG_ROWS:
      m = sel(nb)
      sub = lambda d: tuple(d[k][:, m] for k in ("tp", "fp", "fn"))
      row = {"episodes": int(m.sum())}
      for var in variants:
        h, r = sub(pool_counts(diag, names, var, "head")), sub(pool_counts(diag, names, var,
                                                                            "reference"))
        row[var] = {"head_f1": f1_ci(*h, n_boot), "reference_f1": f1_ci(*r, n_boot),
                    "head_minus_reference": f1_ci(*h, n_boot, base=r),
                    "clogged_exercised_edges": int(h[0].sum() + h[2].sum())}
      row["heel_aware_reference_f1"] = f1_ci(*sub(pool_counts(diag, names, "heel_aware",
                                                              "reference")), n_boot)
      table[group][reg] = row
  return table


def oracle_bound(table, metric: str = "steps_eff") -> dict:
  """Whether the oracle is a bound in a regime table (regime_tables' first output, as the record
  stores it): in every group x regime, the oracle's mean `metric` is at most each other
  policy's upper CI end (the same episodes, so "<= every policy's mean, within the CI").
  Returns {"cells": checked (group, regime, policy) cells, "violations": [[group, regime,
  policy, oracle mean, policy (mean, lo, hi)]], "holds": no violation}."""
  cells, bad = 0, []
  for group, rows in table.items():
    for regime, row in rows.items():
      if not isinstance(row, dict) or not row.get("oracle"):
        continue
      o = row["oracle"][metric][0]
      for pol, v in row.items():
        if pol in ("oracle", "episodes") or not isinstance(v, dict):
          continue
        cells += 1
        if o > v[metric][2]:
          bad.append([group, regime, pol, float(o), [float(x) for x in v[metric]]])
  return {"cells": cells, "violations": bad, "holds": not bad}
