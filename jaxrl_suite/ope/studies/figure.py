"""The FORE record's 2 x 2 summary figure, returned for the caller to save.

Panels: (0, 0) error vs n on log-log axes (hub RMSE, each family's median relative error, an
n^-1/2 guide through the hub's second n); (0, 1) Wald 95% CI coverage vs n (hub and both
families); (1, 0) the sweeps' median |err| vs the population sigma_min(A) (x reversed: A ->
singular to the right); (1, 1) the DOPE table's median normalised |err| per method (log).
"""
from __future__ import annotations

import numpy as np

from jaxrl_suite.core import plotting
from jaxrl_suite.ope.studies.dope import METHODS


def _error_panel(ax, R, ns, rm):
  ax.loglog(ns, rm, "o-", label="FORE hub")
  for fam in ("moderate", "severe"):
    ax.loglog(ns, [r["fore_median"] for r in R["families"][fam]["finite"]], "s--",
              label=f"{fam}: median rel. err")
  ax.loglog(ns, rm[1] * np.sqrt(ns[1] / ns), "k:", label="n^-1/2")
  ax.set(xlabel="n", ylabel="error",
         title=f"FORE error vs n (slope {R['hub_finite']['slope']:.3f})")
  ax.legend(fontsize=7)


def _coverage_panel(ax, R, ns, rows):
  for lab, rr in (("hub", rows), ("moderate", R["families"]["moderate"]["finite"]),
                  ("severe", R["families"]["severe"]["finite"])):
    ax.semilogx(ns, [r["coverage"] for r in rr], "o-", label=lab)
  ax.axhline(0.95, color="k", ls=":")
  ax.set(xlabel="n", ylabel="Wald CI coverage", title="95% CI coverage", ylim=(0.5, 1.0))
  ax.legend(fontsize=7)


def _sweep_panel(ax, R):
  for name, S in R["sweep"].items():
    sm = [r["sigma_min_pop"] for r in S["rows"]]
    ax.loglog(np.maximum(sm, 1e-17), [r["median_abs_err"] for r in S["rows"]], "o-", label=name)
  ax.invert_xaxis()
  ax.set(xlabel="sigma_min(A) (population)", ylabel="median |err| (n=1e4)",
         title="ratio realizable, A -> singular")
  ax.legend(fontsize=7)


def _dope_panel(ax, R):
  tb = R["dope"]["table"]
  vals = [tb[m]["norm_abs_err_median"] for m in METHODS]
  ax.bar(range(len(vals)), vals)
  ax.set_yscale("log")
  ax.set_xticks(range(len(vals)), METHODS, rotation=60, fontsize=7)
  ax.set(title="DOPE-style: median normalised |err|")


def figure(R: dict):
  """The matplotlib Figure of the record R (the studies' dicts); the caller saves it."""
  plt = plotting.pyplot()
  fig, ax = plt.subplots(2, 2, figsize=(11, 8))
  rows = R["hub_finite"]["rows"]
  ns = np.array([r["n"] for r in rows], float)
  rm = np.array([r["rmse"] for r in rows])
  _error_panel(ax[0, 0], R, ns, rm)
  _coverage_panel(ax[0, 1], R, ns, rows)
  _sweep_panel(ax[1, 0], R)
  _dope_panel(ax[1, 1], R)
  return fig
