"""The CompactionRL study's report: accuracy, fidelity, grid and training tables, the figure and
the record payload (descriptive; every verdict is the script's, through jaxrl_suite.repro).

  markdown(config, m, sweeps, names, last_doubling) -> str
  plot(config, rows, stages, path)
  payload(config, m, sweeps) -> the record's payload dict

m is the script's measurements: rows {run: {H: {metric: [S]}}}, stages {variant: {"curves":
{metric: [S, T]}, "critic", "wall", "mass"?}}, warm_start [per seed], gaps, n_params,
compute_s; sweeps {variant: {"budgets": [K], "scores": [K, S]}}. `names` orders the runs
(baselines, then variants); last_doubling(scores [K, S], budgets [K]) -> an object with .reason
(repro.flatness at the config's delta: lm/ may not import repro).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxrl_suite.core import plotting
from jaxrl_suite.core import stats


def ci(x):
  """(mean, lo, hi) over seeds of the finite entries of x (NaN when none)."""
  x = np.asarray(x, np.float64)
  x = x[np.isfinite(x)]
  if x.size == 0:
    return float("nan"), float("nan"), float("nan")
  return stats.mean_ci(x)


def fmt(x, digits=3):
  m, lo, hi = ci(x)
  return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _names(order, rows):
  """The runs of `order` (baselines, then variants) that have rows."""
  return [n for n in order if n in rows]


def accuracy_tables(config, rows, order) -> list[str]:
  """Final and mid-stream accuracy at every H (the verdict horizon and unseen ones marked)."""
  hs, seen = list(config.eval_events), max(config.train_events)
  head = "| run | " + " | ".join(
      f"H={h}" + (" (unseen)" if h > seen else "") + (" **verdicts**" if h ==
                                                        config.eval_horizon else "")
      for h in hs) + " |"
  md = []
  for metric, title in (("final_acc", "Final-answer accuracy"),
                        ("mid_acc", "Mid-stream answer accuracy")):
    md += ["", f"### {title} vs H (mean [95% CI] over seeds, {config.eval_episodes} "
           "evaluation episodes per seed)", "", head, "|---|" + "---|" * len(hs)]
    for n in _names(order, rows):
      md.append(f"| {n} | " + " | ".join(fmt(rows[n][h][metric]) if h in rows[n] else "n/a"
                                         for h in hs) + " |")
  return md


def fidelity_table(config, rows, order) -> list[str]:
  """Summary fidelity and compactions per episode at the training and verdict horizons."""
  sh = sorted({*config.train_events, config.eval_horizon, max(config.eval_events)})
  md = ["", "### Summary fidelity and compactions per episode", "",
        "Fidelity: share of the written summaries that decode to the true totals.", "",
        "| run | " + " | ".join(f"fidelity H={h}" for h in sh) + " | "
        + " | ".join(f"compactions H={h}" for h in sh) + " |",
        "|---|" + "---|" * (2 * len(sh))]
  for n in _names(order, rows):
    r = rows[n]
    if all(h in r for h in sh):
      md.append(f"| {n} | " + " | ".join(fmt(r[h]["fidelity"]) for h in sh) + " | "
                + " | ".join(fmt(r[h]["compactions"], 2) for h in sh) + " |")
  return md


def grid_table(config, rows) -> list[str]:
  """The 2x3 grid (normalisation x advantage) at the verdict horizon and the longest one."""
  advs = (("cross", "GAE across boundaries"), ("indep", "independent GAE per window"),
          ("grpo", "group advantage broadcast"))
  grid = [[f"{nm}_{a}" for a, _ in advs] for nm in ("token", "segment")]
  if not all(v in rows for row in grid for v in row):
    return []
  md = ["", "### The 2x3 grid: final-answer accuracy (same budget rule and seeds)", "",
        "| H | normalisation | " + " | ".join(d for _, d in advs) + " |", "|---|---|---|---|---|"]
  for h in sorted({config.eval_horizon, max(config.eval_events)}):
    for nm, row in zip(("token", "segment"), grid):
      md.append(f"| {h} | {nm} | " + " | ".join(fmt(rows[v][h]["final_acc"]) for v in row)
                + " |")
    md.append(f"| {h} | token - segment (paired) | " + " | ".join(
        fmt(rows[a][h]["final_acc"] - rows[b][h]["final_acc"]) for a, b in zip(*grid)) + " |")
  return md


def training_tables(config, stages, sweeps, last_doubling: Callable) -> list[str]:
  """Critic warm-up, the budget sweep with its flatness, and training return per horizon."""
  md = ["", f"### Critic warm-up ({config.critic_warmup} value-only iterations on warm-start "
        "rollouts) and the budget sweep (validation final accuracy at "
        f"H={config.eval_horizon}, {config.val_episodes} episodes per seed, own keys)", "",
        "| variant | value loss first -> last warm-up iteration | budgets (iterations) | "
        "validation accuracy per budget | last doubling | RL wall (s) |",
        "|---|---|---|---|---|---|"]
  for v, st in stages.items():
    vf = st["critic"].get("vf_loss") if st["critic"] else None
    warm = f"{fmt(vf[:, 0])} -> {fmt(vf[:, -1])}" if vf is not None else "n/a"
    sw = sweeps[v]
    fl = last_doubling(sw["scores"], sw["budgets"])
    md.append(f"| {v} | {warm} | {', '.join(f'{b:g}' for b in sw['budgets'])} | "
              + "; ".join(fmt(s) for s in np.asarray(sw["scores"])) + f" | {fl.reason} | "
              f"{float(st['wall']):.0f} |")
  trains = tuple(config.train_events)
  md += ["", "### Training return per training horizon (first and last fifth of iterations)",
         "", "| variant | H | return first | return last |", "|---|---|---|---|"]
  for v, st in stages.items():
    for h in trains:
      y = np.asarray(st["curves"][f"return_H{h}"])
      n = max(1, y.shape[1] // 5)
      md.append(f"| {v} | {h} | {fmt(y[:, :n].mean(1))} | {fmt(y[:, -n:].mean(1))} |")
  return md


def markdown(config, m, sweeps, order, last_doubling: Callable) -> str:
  """The record's markdown: scale, re-split invariance, every table."""
  gaps, warm = m["gaps"], m["warm_start"]
  scale = (f"Scale: one {m['n_params']}-parameter decoder per seed ({config.num_seeds} seeds, "
           f"each its own warm start of {config.warm_steps} steps x {config.warm_batch} rows; "
           "final loss " + ", ".join(f"{w['loss_last']:.3f}" for w in warm) + "), window "
           f"W={config.window}, RL at H in {tuple(config.train_events)} mixed in every batch of "
           f"{config.num_envs} trajectories, critic warm-up {config.critic_warmup} iterations, "
           f"budget sweep {tuple(config.budgets)} doubled up to {config.max_budget} until flat "
           f"(delta {config.flat_delta}); verdicts at the registered H={config.eval_horizon} "
           f"from {config.eval_episodes} evaluation episodes per seed. Compute "
           f"{m['compute_s']:.0f} s (cached stages count 0).")
  exact = (f"Exact re-split invariance (max |dL| over random re-splits, per seed max): token "
           f"{np.max(gaps['token']['loss']):.1e} (grad {np.max(gaps['token']['grad']):.1e}), "
           f"segment {np.max(gaps['segment']['loss']):.2e} (grad "
           f"{np.max(gaps['segment']['grad']):.2e}).")
  mass = ["", "### Gradient mass on summary tokens, warm start -> after RL", "",
          "| variant | start | end |", "|---|---|---|"]
  for v, st in m["stages"].items():
    if "mass" in st:
      mass.append(f"| {v} | {fmt(st['mass']['start']['summary_mass_share'])} | "
                  f"{fmt(st['mass']['end']['summary_mass_share'])} |")
  rows = m["rows"]
  return "\n".join([scale, "", exact, *accuracy_tables(config, rows, order),
                    *fidelity_table(config, rows, order), *grid_table(config, rows), *mass,
                    *training_tables(config, m["stages"], sweeps, last_doubling)])


def plot(config, rows, stages, path):
  """Final and mid-stream accuracy vs H (95% CI over seeds) and the training return curves."""
  plt = plotting.pyplot()
  fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
  hs = list(config.eval_events)
  for i, metric in enumerate(("final_acc", "mid_acc")):
    for n, r in rows.items():
      xs = [h for h in hs if h in r]
      if not xs:
        continue
      c = np.array([ci(r[h][metric]) for h in xs])
      ax[i].errorbar(xs, c[:, 0], yerr=[c[:, 0] - c[:, 1], c[:, 2] - c[:, 0]], label=n,
                     capsize=2, marker="o", ms=3)
    ax[i].axvline(config.eval_horizon, ls=":", c="k", lw=0.8)
    ax[i].set_xscale("log", base=2)
    ax[i].set(xlabel="H (events)", title=metric.replace("_", " ") + " (95% CI over seeds)")
  ax[0].legend(fontsize=6)
  for v, st in stages.items():
    ax[2].plot(np.asarray(st["curves"]["return"]).mean(0), label=v,
               lw=2.0 if v == "token_cross" else 0.8)
  ax[2].set(title="training return (mean over seeds)", xlabel="RL iteration")
  plotting.save_figure(fig, path, dpi=110)


def payload(config, m, sweeps) -> dict:
  """The record's payload: rows, warm starts, re-split gaps, sweeps, critic warm-up, walls,
  gradient mass and the mean training curves per variant."""
  stages = m["stages"]
  return {"rows": m["rows"], "warm_start": m["warm_start"], "resplit_gaps": m["gaps"],
          "sweeps": sweeps, "eval_horizon": config.eval_horizon,
          **{k: {v: st[k] for v, st in stages.items()} for k in ("critic", "wall")},
          "grad_mass": {v: st["mass"] for v, st in stages.items() if "mass" in st},
          "curves_mean": {v: {k: np.asarray(c).mean(0) for k, c in st["curves"].items()}
                          for v, st in stages.items()}}
