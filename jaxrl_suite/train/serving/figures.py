"""The serving studies' figures.

  plot_curves(ax, curves, prefix)  training curves {name: [S, U]}: mean and 95% band over seeds
  routing_figure(c, summary, summary_h, policies, curves, sweep_summary, variants, main, held,
                 path) -> the PNG's file name; writes the routing study's 2 x 2 figure at `path`

summary / summary_h {"policy@load": {metric: [mean, lo, hi]}} on the claims' and the held-out
cluster; sweep_summary {"variant@checkpoint@load": [mean, lo, hi]} goodput on training windows.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from jaxrl_suite.core import plotting
from jaxrl_suite.envs.serving import heuristics
from jaxrl_suite.train.serving.routing_setup import checkpoint_steps


def plot_curves(ax, curves: dict[str, Any], prefix: str = "") -> None:
  """Each learning curve [S, U]: the mean over seeds, with a 95% band when S > 1."""
  for a, cv in curves.items():
    cv = np.asarray(cv, np.float64)
    m = cv.mean(0)
    ax.plot(m, label=f"{prefix}{a}")
    if cv.shape[0] > 1:
      se = cv.std(0, ddof=1) / np.sqrt(cv.shape[0])
      ax.fill_between(np.arange(len(m)), m - 1.96 * se, m + 1.96 * se, alpha=0.15)
  ax.set_xlabel("update")
  ax.set_ylabel("episode return (SLO-met requests)")
  ax.legend(fontsize=7)


def routing_figure(c, summary, summary_h, policies, curves, sweep_summary, variants, main, held,
                   path):
  """Four panels in a 2 x 2 grid: goodput vs load on the claims' cluster and on the held-out
  one (top; one legend for both, right of the row, since they show the same policies), the
  budget sweep and the training curves (bottom; legends under their panels). Every legend
  sits outside the data, which at ~15 policies would otherwise hide the curves."""
  plt = plotting.pyplot()
  fig, axes = plt.subplots(2, 2, figsize=(13, 9.5))
  for ax, summ, cl in ((axes[0, 0], summary, main), (axes[0, 1], summary_h, held)):
    for p in policies:
      rl = p not in heuristics.CACHE_ROUTERS
      plotting.errorbar_ci(ax, list(c.loads), [summ[f"{p}@{ld}"]["goodput"] for ld in c.loads],
                           fmt="-o" if rl else "--.", label=p, lw=2 if rl else 1)
    ax.set_xlabel("load (fraction of the cluster's capacity)")
    ax.set_ylabel("goodput (req/s)")
    ax.set_title(f"{cl.name}" + (" (never trained on)" if cl is held else ""), fontsize=9)
  axes[0, 1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="policy",
                    title_fontsize=8)
  n_ck = int(c.budget_chunks)
  for v in variants:
    for ld in c.loads:
      plotting.errorbar_ci(axes[1, 0], checkpoint_steps(c, v),
                           [sweep_summary[f"{v}@{i + 1}@{ld}"] for i in range(n_ck)], fmt="-o",
                           label=f"{v} @ load {ld}")
  axes[1, 0].set_xlabel("env steps (budget checkpoint)")
  axes[1, 0].set_ylabel(f"goodput on {main.name} training windows")
  axes[1, 0].set_title("budget sweep", fontsize=9)
  plot_curves(axes[1, 1], curves)
  axes[1, 1].set_title("training curves (mean, 95% band over seeds)", fontsize=9)
  for ax in (axes[1, 0], axes[1, 1]):   # under the panel: outside the data, below its x label
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  plotting.save_figure(fig, path, dpi=90)
  return os.path.basename(path)