"""The serving studies' measurement protocol: tuning, capacity, evaluation tables, report rows.

What `experiments/serving_batching.py` and `experiments/serving_routing.py` share below the
verdicts (those go through `jaxrl_suite.repro`, which this env package does not import):

  tune                   grid search of every heuristic family at every load, training windows
  best_heuristic_capacity  SLO capacity of the best tuned heuristic (harness.slo_capacity_best)
  evaluate_table         {(policy, load): harness.Cells [S][W]} on one compiled evaluator
  cells / paired_ratio   the per-(seed, window) samples a claim is judged from, and a display CI
  budget_gain / late_gain  display gains: last budget checkpoint over the one before, and a
                         learning curve's rise over its last updates (mean, lo, hi)
  capacity_on_loads      each policy's SLO capacity on the load grid (attainment >= target)
  curve_sweep            a learning curve [S, U] as a budget-doubling sweep (b = U/2, 2b = U)
  results_rows / ratio_rows / knob_line / tuned_payload   markdown and JSON of the report

Everything here is host-side bookkeeping around `harness.Evaluator` (which is jitted): plain
numpy in float64, no file I/O.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

from jaxrl_suite.core import stats
from jaxrl_suite.envs.serving import harness, heuristics


# ------------------------------------------------------------------------------ tune / capacity

def tune(ev: harness.Evaluator, grids: dict[str, list], params, starts, scales: dict, key, slo,
         type_id=None):
  """Grid search of every family at every load on the same training windows, one batched call.

  grids: {family: [universal params]}; scales: {load: rate scale}. Picks, per (family, load),
  argmax over the grid of the mean goodput over `starts` (NaN-safe; the first of ties).
  Returns (tuned {(family, load): params}, score {(family, load): training goodput}, #evals).
  """
  flat = [(f, i) for f, g in grids.items() for i in range(len(g))]
  loads = list(scales)
  res = ev.grid([grids[f][i] for f, i in flat], params, starts, [scales[l] for l in loads], key,
                slo, type_id)
  tuned, score = pick_tuned(grids, flat, loads,
                            lambda j, li: res[j, li]["goodput"])
  return tuned, score, len(flat) * len(loads) * len(starts)


def pick_tuned(grids: dict[str, list], flat: Sequence[tuple[str, int]], loads: Sequence,
               goodput) -> tuple[dict, dict]:
  """The argmax of `goodput(row j of flat, load index li)` per (family, load) (see `tune`)."""
  tuned, score = {}, {}
  for f in grids:
    rows = [j for j, (ff, _) in enumerate(flat) if ff == f]
    for li, ld in enumerate(loads):
      gp = np.array([goodput(j, li) for j in rows], np.float64)
      best = int(np.nanargmax(gp)) if np.isfinite(gp).any() else 0
      tuned[(f, ld)] = grids[f][flat[rows[best]][1]]
      score[(f, ld)] = float(gp[best])
  return tuned, score


def tuned_index(grids: dict[str, list], tuned: dict, loads: Sequence) -> dict[str, int]:
  """{"family@load": index of the tuned grid point in grids[family]} (JSON for a stage cache;
  `pick_tuned` returns the grid's own objects, so identity finds them)."""
  index = lambda f, g: next(i for i, x in enumerate(grids[f]) if x is g)
  return {f"{f}@{ld}": index(f, tuned[(f, ld)]) for f in grids for ld in loads}


def tuned_from_index(grids: dict[str, list], idx: dict, loads: Sequence) -> dict:
  """{(family, load): grid point} back from `tuned_index`'s value."""
  return {(f, ld): grids[f][int(idx[f"{f}@{ld}"])] for f in grids for ld in loads}


def best_heuristic_capacity(ev: harness.Evaluator, grids: dict[str, list], params, starts, key,
                            slo, trace_rate: float, type_id=None) -> tuple[float, float, str]:
  """Capacity = the largest rate at which the BEST tuned heuristic meets the SLO for 90% of
  requests on the training windows `starts`: every grid point of every family is a candidate at
  every probed rate, so each family is tuned per rate (SITA's threshold, ...). Returns
  (capacity req/s, rate scale, "family knobs" of the heuristic that sets it)."""
  flat = [(f, g) for f, gs in grids.items() for g in gs]
  cap, scale, i = harness.slo_capacity_best(ev, [g for _, g in flat], params, starts, key, slo,
                                            trace_rate, type_id=type_id)
  if i < 0:
    return cap, scale, "none"
  f, g = flat[i]
  label = f"{f} ({heuristics.describe(f, g)})" if heuristics.FAMILY_KNOBS.get(f) else f
  if scale >= 2.0 ** (harness.CAPACITY_HI / 4):
    # Every probed rate met the SLO (short replays of a near-idle cluster: quick mode).
    label += (f"; the SLO held up to the highest probed rate "
              f"({2.0 ** (harness.CAPACITY_HI / 4):.0f}x the trace rate): a lower bound")
  return cap, scale, label


def capacity_on_loads(loads: Sequence[float], attainment: Sequence[float],
                      target: float = 0.9) -> tuple[float, str]:
  """A policy's SLO capacity on the load grid: the highest load at which its attainment is at
  least `target`, refined by linear interpolation to the crossing with the next load.

  loads: increasing loads x_1 < ... < x_L (fractions of a capacity); attainment: the policy's
  mean SLO attainment a_i at each. With k the last i such that a_j >= target for all j <= i:
    k = L            -> (x_L, "at least"): the target held at every load (a lower bound);
    no such k        -> (x_1, "below"): it failed at the lowest load (an upper bound);
    else             -> x_k + (x_{k+1} - x_k) (a_k - target) / (a_k - a_{k+1}), "interpolated".
  Requiring every lower load to pass keeps a noisy pass above a failure from setting capacity.
  """
  x = np.asarray(loads, np.float64)
  a = np.asarray(attainment, np.float64)
  if x.ndim != 1 or x.shape != a.shape or x.size == 0:
    raise ValueError(f"capacity_on_loads: loads {x.shape} and attainment {a.shape} must be "
                     "equal non-empty vectors")
  if np.any(np.diff(x) <= 0):
    raise ValueError(f"capacity_on_loads: loads must increase, got {x.tolist()}")
  ok = np.isfinite(a) & (a >= target)
  k = int(np.argmin(ok)) - 1 if not ok.all() else x.size - 1
  if k == x.size - 1:
    return float(x[-1]), "at least"
  if k < 0:
    return float(x[0]), "below"
  lo, hi = a[k], a[k + 1]
  frac = (lo - target) / (lo - hi) if np.isfinite(hi) and lo > hi else 0.0
  return float(x[k] + (x[k + 1] - x[k]) * frac), "interpolated"


def policy_capacities(table: dict, policies: Sequence[str], loads: Sequence[float],
                      capacity_rps: float, target: float = 0.9) -> dict[str, dict[str, Any]]:
  """{policy: {"load", "rps", "how"}}: `capacity_on_loads` of each policy's mean SLO attainment
  over the (seed, window) cells of `table`, in req/s as load x the cluster's capacity_rps."""
  out = {}
  for p in policies:
    att = [float(np.nanmean(cells(table, p, ld, "slo_attainment"))) for ld in loads]
    ld, how = capacity_on_loads(loads, att, target)
    out[p] = {"load": ld, "rps": ld * float(capacity_rps), "how": how,
              "attainment": att}
  return out


# ------------------------------------------------------------------------------ evaluate

def evaluate_table(ev: harness.Evaluator, tuned: dict, families: Sequence[str],
                   learned: dict[str, Any], rl_pp, params, starts, scales: dict, seeds, slo,
                   type_id=None) -> dict:
  """{(policy, load): harness.Cells [S][W]} of per-(seed, window) metrics over `starts`.

  Baselines: one evaluation key per (seed, window) (predictor noise, random routers); RL: seed
  i's network with the same keys, so cells pair RL and baselines by (seed, window). All jobs go
  through one compiled evaluator.
  """
  jobs, tags = [], []
  for ld, sc in scales.items():
    for si, s in enumerate(seeds):
      keys = jax.random.split(jax.random.PRNGKey(1000 + s), len(starts))
      pols = [(f, tuned[(f, ld)]) for f in families]
      pols += [(a, rl_pp(jax.tree.map(lambda x, i=si: x[i], net))) for a, net in learned.items()]
      for name, pp in pols:
        for w, st in enumerate(starts):
          jobs.append((pp, st, sc, keys[w]))
          tags.append((name, ld, si))
  ms = ev.metrics([j[0] for j in jobs], params, [j[1] for j in jobs], [j[2] for j in jobs],
                  [j[3] for j in jobs], slo, type_id)
  groups: dict = {}
  for t, m in zip(tags, ms):
    groups.setdefault(t, []).append(m)
  table: dict = {}
  for (name, ld, si), v in groups.items():
    table.setdefault((name, ld), [None] * len(seeds))[si] = v
  return {k: harness.Cells(v) for k, v in table.items()}


def cells(table: dict, policy: str, load, metric: str = "goodput") -> np.ndarray:
  """[S, W] float64 of one metric of one policy at one load: a claim's per-unit samples."""
  return table[(policy, load)].grid(metric)


def mean_of(table: dict, policy: str, load, metric: str = "goodput") -> float:
  """Mean of a metric over the seeds (each a mean over its windows)."""
  return float(np.mean([m[metric] for m in table[(policy, load)]]))


def paired_ratio(table: dict, a: str, b: str, load, metric: str = "goodput"):
  """(ratio, lo, hi) of a's mean metric over b's, paired by (seed, window) with the two-way
  bootstrap (`stats.crossed_ratio_ci`) when the table keeps its cells, else paired over seeds
  (a table of per-seed metric dicts): a display interval for the report tables (claims are
  judged by jaxrl_suite.repro from `cells`)."""
  ta, tb = table[(a, load)], table[(b, load)]
  if isinstance(ta, harness.Cells) and isinstance(tb, harness.Cells):
    return stats.crossed_ratio_ci(ta.grid(metric), tb.grid(metric))
  return stats.paired_ratio_ci(np.array([m[metric] for m in ta]),
                               np.array([m[metric] for m in tb]))


def budget_gain(table: dict, name: str, prev: str, load, metric: str = "goodput"):
  """Gain of the last budget checkpoint over the one before (paired cells, two-way bootstrap
  over seeds x windows): (mean, lo, hi) of metric(name) - metric(prev)."""
  return stats.crossed_ci(cells(table, name, load, metric) - cells(table, prev, load, metric))


def late_gain(curve, frac: float = 0.125) -> tuple[float, float, float]:
  """How much a learning curve [S, U] still rose at its end: per seed, the mean of the last
  `frac` of updates minus the mean of the `frac` before it; mean and 95% CI over seeds."""
  cv = np.asarray(curve, np.float64)
  n = max(1, int(round(frac * cv.shape[-1])))
  return stats.mean_ci(cv[:, -n:].mean(-1) - cv[:, -2 * n:-n].mean(-1))


def curve_sweep(curve, per_episode: float) -> dict[str, Any] | None:
  """A learning curve [S, U] (mean episode return per update) as a budget-doubling sweep.

  Budgets b = U // 2 and 2b updates (U even, or the last update dropped); the score of seed s
  at budget B is its mean return over the last eighth of b updates before B, divided by
  `per_episode` (e.g. the replay's request count, so a score is a share of the episode):
    y_{B,s} = mean(curve[s, B - n : B]) / per_episode,  n = max(1, round(b / 8)).
  Returns {"scores" [2, S], "budgets" [b, 2b], "scale": "difference"} (the layer's sweep input,
  training data), or None when the curve has fewer than 2 updates (no doubling to judge).
  """
  cv = np.asarray(curve, np.float64)
  if cv.ndim != 2 or cv.shape[1] < 2:
    return None
  b = cv.shape[1] // 2
  n = max(1, int(round(b / 8)))
  scores = np.stack([cv[:, b - n:b].mean(1), cv[:, 2 * b - n:2 * b].mean(1)]) / per_episode
  return {"scores": scores, "budgets": [float(b), float(2 * b)], "scale": "difference"}


# ------------------------------------------------------------------------------ report

def results_rows(summary: dict, policies: Sequence[str], loads, prefix: str = "",
                 segregation: bool = False) -> list[str]:
  """Markdown rows: goodput, throughput, SLO attainment and latency percentiles per policy and
  load from `summary` ({f"{prefix}{policy}@{load}": harness.summarize(...)})."""
  head = ("| policy | load | goodput (req/s) | throughput (req/s) | SLO attain. | "
          "TTFT p50 / p99 (s) | E2E p50 / p99 (s) |" + (" segregation |" if segregation else ""))
  rows = [head, "|---" * (8 if segregation else 7) + "|"]
  for ld in loads:
    for p in policies:
      s = summary[f"{prefix}{p}@{ld}"]
      rows.append(
          f"| {p} | {ld} | {harness.fmt(s['goodput'])} | {harness.fmt(s['throughput'])} | "
          f"{s['slo_attainment'][0]:.3f} | {s['ttft_p50'][0]:.2f} / {s['ttft_p99'][0]:.2f} | "
          f"{s['e2e_p50'][0]:.2f} / {s['e2e_p99'][0]:.2f} |"
          + (f" {s['segregation'][0]:+.2f} |" if segregation else ""))
  return rows


def capacity_rows(caps: dict[str, dict[str, Any]], target: float = 0.9) -> list[str]:
  """Markdown rows of `policy_capacities`: each policy's SLO capacity (headline metric)."""
  how = {"interpolated": "", "at least": " (held at every load: a lower bound)",
         "below": " (failed at the lowest load: an upper bound)"}
  rows = [f"| policy | SLO capacity (>= {target:.0%} attainment), load | req/s |", "|---|---|---|"]
  for p, v in caps.items():
    rows.append(f"| {p} | {v['load']:.3f}{how[v['how']]} | {v['rps']:.3f} |")
  return rows


def ratio_rows(ratios: dict) -> list[str]:
  """Markdown rows of {"rl/base@load:metric": (ratio, lo, hi)}."""
  rows = ["| pair (RL / baseline) | load | metric | ratio [95% CI] |", "|---|---|---|---|"]
  for k, v in ratios.items():
    pair, rest = k.split("@")
    ld, metric = rest.split(":")
    rows.append(f"| {pair} | {ld} | {metric} | {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}] |")
  return rows


def knob_line(tuned: dict) -> str:
  """Tuned knobs per (family, load), only those the family uses (heuristics.describe)."""
  return "; ".join(f"{k[0]}@{k[1]} {heuristics.describe(k[0], v)}" for k, v in tuned.items()
                   if heuristics.FAMILY_KNOBS.get(k[0]))


def tuned_payload(tuned: dict, prefix: str = "") -> dict:
  """{"family@load": {knob: float}} of the tuned baselines (JSON; the network slot left out)."""
  return {f"{prefix}{k[0]}@{k[1]}": {kk: float(vv) for kk, vv in v.items() if kk != "net"}
          for k, v in tuned.items()}


def iteration_cost_line(c) -> str:
  """The report sentence naming the engine's per-iteration cost model (config.iteration_cost;
  a config without the field predates it and ran the analytic model)."""
  cost = c.get("iteration_cost", "analytic")
  return {"analytic": "Iteration cost: analytic (cost_model.iteration_time, roofline constants).",
          "profiled": "Iteration cost: profiled (profiled_cost: tables fitted to Vidur's A100 "
                      "Llama-2-7B operator profiles, derived for the other GPUs)."}[cost]
