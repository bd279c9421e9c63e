"""Figure plumbing shared by the reproduction scripts: a headless pyplot, error bars from
(mean, lo, hi) triples, and one way to write a figure.

Every script draws with matplotlib's Agg backend (no display on CI or a Colab runtime's
background process), plots 95% CIs as asymmetric error bars, and writes a PNG next to its JSON
record; these three helpers are that shared part, so a script keeps only what it draws.
"""

from __future__ import annotations

from typing import Sequence


def pyplot():
  """matplotlib.pyplot on the Agg backend (imported lazily: the library never needs it)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt


def ci_yerr(stats: Sequence[Sequence[float]]):
  """[[mean - lo, ...], [hi - mean, ...]] for `ax.errorbar(yerr=...)` from (mean, lo, hi) rows."""
  return [[s[0] - s[1] for s in stats], [s[2] - s[0] for s in stats]]


def errorbar_ci(ax, x, stats: Sequence[Sequence[float]], **kwargs):
  """ax.errorbar of means with their (lo, hi) CIs; `stats` rows are (mean, lo, hi)."""
  kwargs.setdefault("capsize", 3)
  return ax.errorbar(x, [s[0] for s in stats], yerr=ci_yerr(stats), **kwargs)


def save_figure(fig, path: str, dpi: int = 100) -> str:
  """Lays out, writes and closes `fig` (closing frees it: long sweeps draw many); returns path."""
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  pyplot().close(fig)
  return path
