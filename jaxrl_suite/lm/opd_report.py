"""Descriptive tables, scale text and figure of the Direct-OPD study (no claim is judged here).

Inputs are the study's records: `r` = one task's `opd_study.run_task` output (JSON lists),
`acc` = r["acc"] as float64 arrays {method: {size: [S]}}, `pre` = {size: info} of
`opd_ladder.pretrain_size`. Every function returns markdown lines or text, except `plot`, which
writes a PNG. Verdicts on the registered claims come from jaxrl_suite.repro in the script.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_suite.core import plotting
from jaxrl_suite.core import stats
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm.opd_study import METHODS

_COLORS = {"base": "k", "decode": "tab:blue", "decode_shuffled": "tab:gray",
           "direct_opd": "tab:red", "direct_opd_fixed": "tab:purple", "vanilla_opd": "tab:orange",
           "shuffled_opd": "tab:brown", "grpo": "tab:green"}


def num_params(size: str) -> int:
  """Parameter count of family member `size` (from shapes only: nothing is initialised)."""
  shapes = jax.eval_shape(lambda k: lm_model.init_params(lm_model.FAMILY[size], k),
                          jax.random.PRNGKey(0))
  return lm_model.num_params(shapes)


def fmt(x) -> str:
  """'mean [lo, hi]' (95% CI over seeds) of per-seed values x [S], 3 decimals."""
  m, lo, hi = stats.mean_ci(np.asarray(x, np.float64))
  return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def margin(acc, method: str, size: str) -> np.ndarray:
  """Delta_M per seed [S]: accuracy of `method` minus base at `size`."""
  return acc[method][size] - acc["base"][size]


def accuracy_table(config, task_name: str, acc) -> list[str]:
  """Held-out accuracy per size (rows) and method (columns, in METHODS order)."""
  methods = [m for m in METHODS if m in acc]
  md = [f"### Task `{task_name}`: held-out accuracy (mean [95% CI] over {config.num_seeds} "
        f"seeds, {config.eval_problems} problems each)\n",
        "| size | params | " + " | ".join(methods) + " |", "|---" * (len(methods) + 2) + "|"]
  for s in config.sizes:
    cells = [fmt(acc[m][s]) if s in acc[m] else "–" for m in methods]
    md.append(f"| {s} | {num_params(s)} | " + " | ".join(cells) + " |")
  return md + [""]


def margin_table(config, r, acc, transfer) -> list[str]:
  """Per (transfer method in `transfer`, size): margin, normalised gain, sqrt KL, beta, wall
  seconds and GFLOPs of the transfer against the GRPO ceiling."""
  md = ["| size | method | margin Δ_M [95% CI] | g_M = Δ/(1-acc) | √KL to start | beta | "
        "wall s (transfer / GRPO) | GFLOPs (transfer / GRPO) |", "|---" * 8 + "|"]
  for method in [m for m in transfer if m in acc]:
    for s in [x for x in config.sizes if x in acc[method]]:
      d = margin(acc, method, s)
      g = d.mean() / max(1.0 - acc["base"][s].mean(), 1e-6)
      get = lambda k, m: np.mean(r[k].get(m, {}).get(s, np.nan))
      beta = r["beta"].get(s, float("nan")) if method == "decode" else float("nan")
      md.append(f"| {s} | {method} | {fmt(d)} | {g:+.3f} | "
                f"{np.mean(r['sqrt_kl'].get(method, {}).get(s, np.nan)):.3f} | {beta:g} | "
                f"{get('wall_s', method):.0f} / {get('wall_s', 'grpo'):.0f} | "
                f"{get('flops', method) / 1e9:.1f} / {get('flops', 'grpo') / 1e9:.1f} |")
  return md + [""]


def _ladder_text(config, pre) -> str:
  """The divergence rule, its reruns per size and the final pretraining losses."""
  reruns = {s: sum(len(a) - 1 for a in p["attempts"]) for s, p in pre.items()}
  return (
      f"**Divergence rule:** a family whose final loss exceeds {config.diverge_factor}"
      f" x the best family's at its size is rerun with lr halved (at most {config.max_reruns} "
      "times); reruns per size: " + ", ".join(f"{s} {n}" for s, n in reruns.items()) +
      "; still diverged: " + (", ".join(f"{s} {p['still_diverged']}" for s, p in pre.items()
                                      if p["still_diverged"]) or "none") +
      ". Final pretraining losses (seed 0 / 1 / ...): " + "; ".join(
          f"{s} " + "/".join(f"{x:.4f}" for x in pre[s]["loss_last"]) for s in pre) +
      " (XLA:CPU float reassociation can move them in the 3rd digit across machines).")


def scale_text(config, pre, wall) -> str:
  """The report's opening paragraphs: budgets, what is repeated per seed, the ladder, and the
  pipeline's wall time (wall = the script's {"this_process_s", "from_cache_s",
  "stages_from_cache"})."""
  return (
      f"Scale: {len(config.sizes)} sizes ("
      + ", ".join(f"{s}={pre[s]['num_params']}" for s in config.sizes) + " params), "
      "pretraining steps x batch @ lr " + ", ".join(
          f"{s}={pre[s]['steps']}x{pre[s]['batch']}@{config.pretrain_lr[s]:g}"
          for s in config.sizes) + ", "
      f"GRPO {config.grpo_steps} steps x {config.grpo_prompts} prompts x {config.grpo_group} "
      f"samples, distillation {config.distill_steps} steps x {config.distill_prompts} prompts x "
      f"{config.distill_rollouts} rollouts (student top-k "
      f"{config.top_k or 'off: full vocabulary'}), {config.num_seeds} seeds, "
      f"{config.eval_problems} held-out problems per seed, temperature-1 sampling.\n\n"
      "**Repeated per seed:** the pretraining family (one per seed, its own PRNG key "
      "fold_in(PRNGKey(config.seed), 100 + size index + 1000 seed)), teacher GRPO (each seed "
      "has its own delta), every distillation run, every GRPO ceiling, and evaluation "
      "sampling. " + _ladder_text(config, pre) + "\n\n"
      "Wall times in the tables are execution only (programs compiled ahead of time; compile "
      "seconds are in the JSON); FLOPs are analytic. Pipeline wall time "
      f"{wall['this_process_s'] + wall['from_cache_s']:.0f} s (this process "
      f"{wall['this_process_s']:.0f} s + {wall['from_cache_s']:.0f} s measured earlier by the "
      f"stages loaded from the workdir: {', '.join(wall['stages_from_cache']) or 'none'}).")


def _accuracy_bars(ax, config, t, r) -> None:
  """Held-out accuracy by size, one bar per method, 95% CI error bars."""
  x = np.arange(len(config.sizes))
  methods = [m for m in METHODS if m in r["acc"]]
  w = 0.8 / len(methods)
  for i, m in enumerate(methods):
    stats_ = [stats.mean_ci(r["acc"][m][s]) if s in r["acc"][m] else (np.nan,) * 3
              for s in config.sizes]
    mean = np.array([s[0] for s in stats_])
    err = np.array([[s[0] - s[1] for s in stats_], [s[2] - s[0] for s in stats_]])
    ax.bar(x + i * w - 0.4 + w / 2, mean, w, yerr=err, label=m, color=_COLORS[m])
  ax.set_xticks(x, config.sizes)
  ax.set_ylabel("held-out accuracy")
  ax.set_title(f"{t}: accuracy by size and method (95% CI)")
  ax.legend(fontsize=7)


def _accuracy_vs_kl(ax, config, t, r) -> None:
  """Mean accuracy against mean sqrt KL to the start, marker = size."""
  for m in ("base", "decode", "direct_opd", "direct_opd_fixed", "vanilla_opd", "shuffled_opd",
            "grpo"):
    if m not in r["sqrt_kl"]:
      continue
    for k, s in enumerate(config.sizes):
      if s not in r["sqrt_kl"][m] or s not in r["acc"][m]:
        continue
      ax.scatter(np.mean(r["sqrt_kl"][m][s]), np.mean(r["acc"][m][s]), color=_COLORS[m],
                 marker="os^D"[k % 4], label=m if k == 0 else None)
  ax.set_xlabel("sqrt KL(pi || pi_start) (sequence level)")
  ax.set_ylabel("held-out accuracy")
  ax.set_title(f"{t}: accuracy vs sqrt KL (marker = size {', '.join(config.sizes)})")
  ax.legend(fontsize=7)


def _alpha_curves(ax, config, t, r) -> None:
  """alpha over distillation steps (mean over seeds): adaptive (solid) vs fixed (dotted)."""
  for k, s in enumerate(config.sizes):
    for m, ls in (("direct_opd", "-"), ("direct_opd_fixed", ":")):
      c = r["curves"].get(f"{m}_{s}_alpha")
      if c is not None:
        ax.plot(c, ls, color=f"C{k}", label=f"{m} {s}")
  ax.set_xlabel("distillation step")
  ax.set_ylabel("alpha (mean over seeds)")
  ax.set_title(f"{t}: KL coefficient alpha over training")
  ax.legend(fontsize=7)


def plot(config, res, path: str) -> None:
  """One column per task (res = {task: record}): accuracy bars, accuracy vs sqrt KL, alpha."""
  plt = plotting.pyplot()
  tasks = list(res)
  fig, axes = plt.subplots(3, len(tasks), figsize=(6 * len(tasks), 12), squeeze=False)
  for j, t in enumerate(tasks):
    _accuracy_bars(axes[0, j], config, t, res[t])
    _accuracy_vs_kl(axes[1, j], config, t, res[t])
    _alpha_curves(axes[2, j], config, t, res[t])
  plotting.save_figure(fig, path, dpi=90)
