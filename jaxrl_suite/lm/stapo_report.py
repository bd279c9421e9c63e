"""The STAPO study's report: summary table, markdown, figure and record payload (no verdicts).

  summary_table(tr, methods, ci) -> {method: {metric: [mean, lo, hi]}, gain_vs_start,
                                     val_success_by_budget [K]}
  markdown(config, ws_info, det, table, tr, sels, timing) -> str
  plot(tr, det, methods, path)      one PNG: training curves and detection before training
  payload(config, measured, table) -> the record's payload dict

`tr` is `stapo_study.train_until_flat`'s output, `det` `stapo_study.detection`'s; sels maps a
method to its lr selection (an object with .scores and .choice). Intervals come in as
`ci(values [S]) -> [mean, lo, hi]` (the caller's repro rule: lm/ may not import repro).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxrl_suite.core import plotting

# The training curves the record keeps (mean over seeds, per method).
CURVES = ("success", "neglect_per100", "outlier_share", "outlier_precision", "share_recurring",
          "epo_coef")


def smooth(c: np.ndarray, n: int) -> np.ndarray:
  """Trailing moving average over the last n iterations of curves [seeds, steps]."""
  cs = np.cumsum(np.pad(c, ((0, 0), (1, 0))), axis=1)
  idx = np.arange(1, c.shape[1] + 1)
  lo = np.maximum(idx - n, 0)
  return (cs[:, idx] - cs[:, lo]) / (idx - lo)


def show(ci, scale: float = 1.0) -> str:
  """'m [lo, hi]' of a [mean, lo, hi] triple, each times scale, 3 significant digits."""
  m, lo, hi = (scale * float(v) for v in ci)
  return f"{m:.3g} [{lo:.3g}, {hi:.3g}]"


def summary_table(tr: dict, methods: list, ci: Callable) -> dict:
  """Per method: evaluation metrics (mean, 95% CI over seeds), gain over the warm start on the
  same evaluation keys (paired), and the validation success at each budget."""
  out = {}
  for m in methods:
    ev = tr["ev"][m]
    out[m] = {k: ci(v) for k, v in ev.items()}
    out[m]["gain_vs_start"] = ci(np.asarray(ev["success"]) - np.asarray(tr["start"]["success"]))
    out[m]["val_success_by_budget"] = np.asarray(tr["val"][m]["success"]).mean(1).tolist()
  return out


def _setup_and_detection(config, ws_info, det, start) -> list[str]:
  L = ["## Setup", "",
       f"GoalHouse-v0 {config.env.to_dict()}, model FAMILY_V2[{config.model!r}], window W = "
       f"{config.window} (TruncateOldest without the task: the goal scrolls out), G = "
       f"{config.group_size}, {config.train_envs} trajectories per iteration, {config.num_seeds} "
       f"evaluation seeds (identical rollout keys across methods). Warm start: {ws_info}. "
       f"Warm start before RL: success {100 * np.mean(start['success']):.1f}%, neglect "
       f"{np.mean(start['neglect_per100']):.1f} / 100 steps.", "",
       f"## Detection before training (rule {config.outlier_rule!r}, false-flag rate "
       f"{config.false_flag_rate})", "", "| metric | mean [95% CI] over seeds |", "|---|---|"]
  L += [f"| {k} | {show(det[k])} |" for k in det if k not in ("per_seed", "label_rates")]
  L += ["", f"Label rates per step (N1..N4): {np.round(det['label_rates'], 3).tolist()}", ""]
  return L


def _lr_table(config, sels) -> list[str]:
  L = ["## Learning rate per method (training seeds, repro.selection)", "",
       "| method | " + " | ".join(f"lr {x:g}" for x in config.lr_grid) + " | chosen |",
       "|---|" + "---|" * (len(config.lr_grid) + 1)]
  for m, s in sels.items():
    L.append(f"| {m} | " + " | ".join(f"{100 * v:.1f}%" for v in s.scores) + f" | {s.choice} |")
  return L


def _evaluation_table(config, table, tr) -> list[str]:
  L = ["", f"## Budget (doubled until {', '.join(tr['flat'])} flat on validation rollouts)", "",
       f"Budgets {tr['budgets']} iterations; " + "; ".join(
           f"{m}: {f['reason']}" for m, f in tr["flat"].items()), "",
       "## Evaluation (fresh rollouts after training)", "",
       "| method | success | neglect / 100 steps | episodes with neglect | gain vs warm start "
       "| validation success by budget |", "|---|---|---|---|---|---|"]
  for m in config.methods:
    t = table[m]
    L.append(f"| {m} | {show(t['success'], 100)}% | {show(t['neglect_per100'])} | "
             f"{show(t['neglect_episodes'], 100)}% | {show(t['gain_vs_start'], 100)} pts | "
             + ", ".join(f"{100 * v:.1f}%" for v in t["val_success_by_budget"]) + " |")
  return L


def markdown(config, ws_info, det, table, tr, sels, timing) -> str:
  """The record's markdown: setup, detection, lr choice, budget and evaluation tables."""
  L = (_setup_and_detection(config, ws_info, det, tr["start"]) + _lr_table(config, sels)
       + _evaluation_table(config, table, tr))
  L += ["", f"Training time: compile {timing.get('compile_s', 0):.0f} s, run "
        f"{timing.get('run_s', 0):.0f} s (lr sweep and main runs)"
        + (f"; stages read back from the workdir's stage cache cost {timing['cached_s']:.0f} s "
           "when they ran." if timing.get("cached_s") else ".")]
  return "\n".join(L)


def plot(tr, det, methods, path, smooth_n: int = 5):
  """Training success and neglect curves (95% band over seeds) and detection bars."""
  plt = plotting.pyplot()
  fig, ax = plt.subplots(1, 3, figsize=(15, 4))
  for m in methods:
    for a, k in ((ax[0], "success"), (ax[1], "neglect_per100")):
      c = smooth(tr["curves"][m][k], smooth_n)
      mu = c.mean(0)
      half = 1.96 * c.std(0, ddof=1) / np.sqrt(c.shape[0]) if c.shape[0] > 1 else 0 * mu
      x = np.arange(len(mu))
      a.plot(x, mu, label=m)
      a.fill_between(x, mu - half, mu + half, alpha=0.15)
  ax[0].set(title=f"success (training rollouts, {smooth_n}-iteration mean)", xlabel="iteration")
  ax[1].set(title=f"neglect events / 100 steps ({smooth_n}-iteration mean)", xlabel="iteration")
  ax[0].legend(fontsize=7)
  names = ["auroc_z", "auroc_ratio", "auroc_raw", "precision_flag", "precision_raw"]
  mu = [det[k][0] for k in names]
  err = [[det[k][0] - det[k][1] for k in names], [det[k][2] - det[k][0] for k in names]]
  ax[2].bar(names, mu, yerr=np.nan_to_num(err), color=["C0", "C0", "C1", "C2", "C3"])
  ax[2].axhline(det["base_rate"][0], ls="--", c="k", lw=0.8, label="neglect base rate")
  ax[2].set(title="detection before training (95% CI)")
  ax[2].tick_params(axis="x", rotation=30)
  ax[2].legend(fontsize=7)
  plotting.save_figure(fig, path, dpi=110)


def payload(config, measured: dict, table: dict) -> dict:
  """The record's payload from `run`'s measurements and the summary table."""
  det, tr = measured["det"], measured["tr"]
  return {"warm_start": measured["ws_info"], "detection": det, "final": table,
          "lr_sweep": {"scores": measured["lr_scores"], "selections": measured["sels"]},
          "budgets": tr["budgets"], "flatness": tr["flat"],
          "start": {k: float(np.mean(v)) for k, v in tr["start"].items()},
          "curves": {k: {m: tr["curves"][m][k].mean(0) for m in config.methods} for k in CURVES},
          "timing": measured["timing"]}
