"""The rail pricing record's figure: training curves, the budget sweep, held-out revenue.

  plot(curves, sweep, rl_meta, best_b, best_b_rev, table, path, ci)  writes a PNG at `path`

curves {variant: [S, U]} training returns; sweep {variant: {mode: [S, B], "updates": [B]}} tuning
revenue; rl_meta {variant: meta} (rl_stage); best_b / best_b_rev the best tuned baseline and its
tuning revenue; table report.table(); ci x [S] -> (mean, lo, hi).
"""

from __future__ import annotations

import numpy as np


def _curves(ax, curves):
  for name, cur in curves.items():
    m = cur.mean(0)
    ax.plot(m, label=name)
    ax.fill_between(np.arange(len(m)), cur.min(0), cur.max(0), alpha=0.2)
  ax.set_xlabel("update")
  ax.set_ylabel("training return (sum over trains, reward units)")
  ax.legend()
  ax.set_title("RL training returns (mean, min-max over seeds)")


def _sweep(ax, sweep, rl_meta, best_b, best_b_rev, ci):
  for name, sw in sweep.items():
    rev = np.asarray(sw[rl_meta[name]["mode"]]) / 1e3
    iv = np.array([ci(rev[:, b]) for b in range(rev.shape[1])])
    fl = rl_meta[name]["flattening"]
    sl = fl["gain_ci"]
    ax.errorbar(sw["updates"], iv[:, 0], yerr=[iv[:, 0] - iv[:, 1], iv[:, 2] - iv[:, 0]],
                marker="o", capsize=3,
                label=f"{name} ({rl_meta[name]['mode']}; last doubling {sl[0]:+.1%} "
                      f"[{sl[1]:+.1%}, {sl[2]:+.1%}], {fl['state']})")
  ax.axhline(best_b_rev / 1e3, color="k", ls="--", label=f"best tuned baseline ({best_b})")
  main = next(iter(rl_meta.values()))["updates"]
  ax.axvline(main, color="grey", ls=":", label=f"main comparison ({main} updates)")
  ax.set_xscale("log", base=2)
  ax.set_xlabel("RL budget, PPO updates per seed (x192 env steps)")
  ax.set_ylabel("revenue on tuning episodes, GBP k (95% CI)")
  ax.set_title("budget sweep")
  ax.legend(fontsize=7)


def _held_out(ax, table):
  rows = sorted(table["train_level"].items(), key=lambda kv: kv[1]["revenue_total"][0])
  names = [r[0] for r in rows]
  m = np.array([r[1]["revenue_total"] for r in rows]) / 1e3
  ax.barh(names, m[:, 0], xerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]])
  ax.set_xlim(m[:, 1].min() * 0.97, m[:, 2].max() * 1.01)
  ax.set_xlabel("revenue per departure day, GBP k (held-out, 95% CI)")


def plot(curves, sweep, rl_meta, best_b, best_b_rev, table, path, ci):
  """Three panels side by side, saved at `path` (100 dpi)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(1, 3, figsize=(17, 4))
  _curves(ax[0], curves)
  _sweep(ax[1], sweep, rl_meta, best_b, best_b_rev, ci)
  _held_out(ax[2], table)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
