"""The revenue-management baselines of RailRM-v0 tuned and scored on episode keys.

  rows(information, pooled_reference) -> [(row, family, information index)]
  evaluators(env)            {family: jit(keys [N, 2], theta, params) -> metrics [N]}, and
                             "fixed": jit(keys [N, 2], levels [A] int, params) -> metrics [N]
  tune(evals, rows, keys, params, tuning=None) -> {row: {"grid", "revenue", "chosen"}}
  score(evals, rows, tuned, fixed, keys, scenarios) -> {row: {scenario: {metric: [S]}}}
  seed_means(ms)             per-seed metric dicts (leading [N]) -> {metric: [S]}

A family is one of `baselines.BASELINES` (one parameter theta, grid `baselines.THETA_GRID`); a
row is a family under one information mode (`information.INFORMATION_MODES`). Every family is
tuned by grid search on the same tuning keys (mean revenue_total), then scored with its chosen
theta on each seed's held-out keys. Metrics are those of `evaluate.run_episode`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.rail import baselines, evaluate
from jaxrl_suite.envs.rail.information import INFORMATION_MODES


def rows(information: str, pooled_reference) -> list[tuple[str, str, int]]:
  """(row name, family, information index) of every RM row: each family under `information`,
  then the families in `pooled_reference` with pooled information ("<family>_pooled"), unless
  `information` is already "pooled"."""
  info = INFORMATION_MODES.index(information)
  out = [(name, name, info) for name in baselines.BASELINES]
  pooled = INFORMATION_MODES.index("pooled")
  if info != pooled:
    out += [(f"{name}_pooled", name, pooled) for name in pooled_reference]
  return out


def _family_evaluator(env, fn):
  """jit(keys [N], theta, params) -> metrics [N] of baseline `fn` (one compile per family)."""
  return jax.jit(lambda ks, th, ps: evaluate.evaluate(env, ps, evaluate.baseline_policy(fn, ps, th),
                                                      ks))


def evaluators(env) -> dict:
  """One jitted evaluator per family plus "fixed" (static fare buckets per train). Params (the
  scenario and information mode), theta and the keys are arguments, so one compile serves
  tuning, every scenario and every seed when the key counts agree."""
  evals = {name: _family_evaluator(env, baselines.POLICIES[name]) for name in baselines.BASELINES}
  evals["fixed"] = jax.jit(lambda ks, lv, ps: evaluate.evaluate(env, ps, lambda k, o, s: lv, ks))
  return evals


def tune(evals: dict, rm_rows, keys, params, tuning: dict | None = None) -> dict:
  """Grid search of every row not already in `tuning` on `keys` [N, 2] (mean revenue_total at
  `params` with the row's information). Returns {row: {"grid": [K], "revenue": [K] floats,
  "chosen": theta}}: `tuning`'s rows first (kept as given), then the new ones in `rm_rows`
  order. Ties go to the first grid value."""
  out = dict(tuning or {})
  for name, fam, info in [r for r in rm_rows if r[0] not in out]:
    grid = baselines.THETA_GRID[fam]
    p_info = params.replace(information=info)
    vals = [float(evals[fam](keys, jnp.asarray(th, jnp.float32), p_info)["revenue_total"].mean())
            for th in grid]
    chosen = float(grid[int(np.argmax(vals))])
    out[name] = {"grid": list(grid), "revenue": vals, "chosen": chosen}
  return out


def seed_means(ms: list) -> dict:
  """Per-seed metric dicts (leading [N]) -> per-seed means [S] (revenue_op -> [S, O])."""
  ms = jax.device_get(ms)
  return {k: np.stack([np.asarray(m[k], np.float64).mean(0) for m in ms]) for k in ms[0]}


def score(evals: dict, rm_rows, tuned: dict, fixed: dict, keys, scenarios: dict) -> dict:
  """Every row at its tuned theta and every fixed fare vector on each seed's keys [S, N, 2], in
  each scenario {name: params}. tuned {row: theta}; fixed {name: levels [A] int} (e.g. the Nash
  and monopoly fares). Returns {row or fixed name: {scenario: {metric: [S]}}}."""
  out = {}
  n_seeds = keys.shape[0]
  for sc, ps_ in scenarios.items():
    for name, fam, info in rm_rows:
      th, p_info = jnp.asarray(tuned[name], jnp.float32), ps_.replace(information=info)
      out.setdefault(name, {})[sc] = seed_means(
          [evals[fam](keys[s], th, p_info) for s in range(n_seeds)])
    for name, lv in fixed.items():
      lvj = jnp.asarray(lv, jnp.int32)
      out.setdefault(name, {})[sc] = seed_means(
          [evals["fixed"](keys[s], lvj, ps_) for s in range(n_seeds)])
  return out
