r"""Builds colabs/stapo.ipynb (run from anywhere: python colabs/build_stapo_notebook.py).

Cells are Python strings here (reviewable); the shared setup cell comes from
`build_notebooks.with_setup`. The notebook runs in seconds: it plays GoalHouse-v0, shows the
neglect labels and the state-normalised entropy on a hand-made group, and reads the committed
results/stapo.json (it trains nothing; `python -m experiments.stapo` does).
"""

from __future__ import annotations

import os
import sys

import nbformat

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_notebooks as bn  # noqa: E402
from build_notebooks import _code, _md, notebook, verdicts_cell  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def stapo_notebook() -> nbformat.NotebookNode:
  cells = [
      _md(r"""
# STAPO: normalised entropy and trajectory neglect (GoalHouse-v0)

The claim: agents "forget" the goal halfway through long tasks (*trajectory neglect*); raw step
entropy confuses hard states with lost agents, while entropy normalised against the agent's own
average behaviour **in the same state** flags the drifted steps. This notebook shows the pieces:
the environment, its ground-truth neglect labels (N1-N4), and the normalised entropy; the
measured verdicts come from `results/stapo.json` (see `docs/stapo.md`).
"""),
      _code(r"""
import jax, jax.numpy as jnp, numpy as np
from jaxrl_suite.envs.text import goal_house as gh
from jaxrl_suite.lm import stapo
env, p = gh.make_goal_house(num_rooms=4, num_receptacles=6, num_objects=6, max_steps=20)
V = gh.V
"""),
      _md("**One scripted episode** (the expert picks uniformly among optimal actions; "
          "`<note>` restates the goal into the agent's own context). The goal is shown only "
          "in the first observation."),
      _code(r"""
ep = gh.scripted_episodes(jax.random.PRNGKey(0), 4, p, note_prob=0.2, noise=0.3)
for t in range(int(ep["valid"][1].sum())):
  obs = V.decode(ep["obs"][1, t, :ep["obs_len"][1, t]])
  act = V.decode(ep["act"][1, t, :ep["act_len"][1, t]])
  labels = [n for n, on in zip(gh.LABEL_NAMES, np.asarray(ep["neglect"][1, t])) if on]
  print(f"{t:2d} {obs:32s} -> {act:18s} {labels}")
print("success:", bool(ep["success"][1]))
"""),
      _md("**Normalised entropy** on a hand-made group (G=3 rollouts of one task, 3 turns). "
          "State 7 recurs, so its steps are compared with each other; a step whose state is "
          "seen once falls back to the EMA (if seen in earlier batches) or the task mean."),
      _code(r"""
h = jnp.array([[1.0, 2.0, 0.5], [1.2, 2.5, 0.4], [0.8, 0.1, 3.0]])
keys = jnp.array([[7, 8, 9], [7, 8, 5], [7, 2, 8]])
n = stapo.normalised_entropy(h, keys, jnp.ones((3, 3), bool), group_size=3)
print("z:\n", np.round(np.asarray(n.z), 2))
print("source (0 group, 1 EMA, 2 task mean):\n", np.asarray(n.source))
raw = stapo.raw_zscore(h, jnp.ones((3, 3), bool))
print("raw z:\n", np.round(np.asarray(raw), 2))
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 3))
x = np.arange(9)
ax.bar(x - 0.2, np.asarray(n.z).ravel(), 0.4, label="state-normalised z")
ax.bar(x + 0.2, np.asarray(raw).ravel(), 0.4, label="raw entropy z")
ax.axhline(2.0, ls="--", c="k", lw=0.8, label="z > 2 (ablation; default rule: Student-t prediction interval, docs/stapo.md)")
ax.set(xlabel="step (episode-major)", ylabel="score"); ax.legend(fontsize=7)
plt.show()
"""),
      _md("**Measured verdicts** (from the committed full run, if present)."),
      verdicts_cell("stapo"),
  ]
  return notebook(cells)


if __name__ == "__main__":
  bn.write(stapo_notebook(), "stapo.ipynb")
