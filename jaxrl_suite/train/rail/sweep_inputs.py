"""The fair-chance inputs of the rail claims, built from the variants' budget sweeps.

  revenue(sweep, mode) -> {"scores": [B, S], "budgets": [B], "scale", "better"}
  relative(sweep_a, mode_a, sweep_b, mode_b) -> the same for the per-seed ratio a / b

sweep is rl_stage's {"greedy" | "sampled": [S, B] tuning revenue, "updates": [B]}; mode the
variant's chosen evaluation mode. The dicts are what jaxrl_suite.repro's claim_record takes as
`sweep` (scores one row per budget, a column per seed; higher is better; judged on the log
ratio of the last doubling).
"""

from __future__ import annotations

import numpy as np


def revenue(sweep: dict, mode: str, scale: str = "log_ratio") -> dict:
  """A variant's tuning-revenue sweep in its chosen mode."""
  return {"scores": np.asarray(sweep[mode], np.float64).T,
          "budgets": np.asarray(sweep["updates"]).tolist(), "scale": scale, "better": "higher"}


def relative(sweep_a: dict, mode_a: str, sweep_b: dict, mode_b: str) -> dict:
  """The per-seed ratio of a's to b's tuning revenue at the budgets both reached (a sweep may
  stop earlier, e.g. a relational one at rel_max_updates; both start at the same budget)."""
  k = min(len(sweep_a["updates"]), len(sweep_b["updates"]))
  ratio = np.asarray(sweep_a[mode_a])[:, :k] / np.asarray(sweep_b[mode_b])[:, :k]
  return {"scores": ratio.T, "budgets": np.asarray(sweep_a["updates"])[:k].tolist(),
          "scale": "log_ratio", "better": "higher"}
