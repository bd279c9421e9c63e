"""The cross-domain answer: when does RL beat a hand-written heuristic that was tuned fairly?

One row per task (a domain's "RL vs the best tuned heuristic" claim), read from the records:

  RL / heuristic   the claim's effect in the paper's units with its 95% CI. A record on the
                   layer gives its stored interval; on a log_ratio claim that is the geometric
                   mean ratio exp(mean_u log(a_u / b_u)) and [exp(lo), exp(hi)].
  budget           RL's fair chance: the flatness state of its budget sweep on validation data
                   (flatness.py: flat / rising / degrading / unknown), "not registered" when the
                   claim has no sweep.
  verdict          the stored label (`reanalyse` checks it is the one the layer recomputes).

A row of a record not on the layer yet (no "repro" block: no rule, no samples) is shown with its
own "ours" text and marked LEGACY, never re-interpreted: its CI may be in other units.

Aggregates (rliable style, aggregate.py) are taken over the tasks that share a `metric` and carry
per-unit samples, at least two of them: per unit u the oriented score
  s_u = exp(d_u) on a log_ratio claim (RL / heuristic, > 1 = RL better), d_u on a difference;
the IQM of the pooled s_u with its stratified-bootstrap CI, and the probability of improvement
P(RL > heuristic) averaged over tasks (from the paired samples a, b when stored; from d_u > 0
against 0 when only effects are stored).

Which claim of a record is a domain's RL-vs-heuristic claim: on the layer, a rule id containing
`RULE_KEY`; otherwise (legacy) a claim text containing every string of the domain's `legacy`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from jaxrl_suite.core import results as _results
from jaxrl_suite.repro import aggregate as _agg
from jaxrl_suite.repro import intervals as _iv
from jaxrl_suite.repro.format import fmt_ci
from jaxrl_suite.repro.records import on_layer

# A migrated claim is found by its rule id: name the RL-vs-tuned-heuristic claim
# "<anything>rl_vs_heuristic<anything>" (e.g. "routing.azure_code.rl_vs_heuristic.train_cluster").
RULE_KEY = "rl_vs_heuristic"
LEGACY = "LEGACY"
LEGACY_NOTE = "legacy record, not yet on the layer"


@dataclasses.dataclass(frozen=True)
class Domain:
  """A task of the cross-domain table: `record` (results/<record>.json), `label` (shown),
  `metric` (tasks with the same metric are aggregated together) and `legacy` (the substrings
  that find the claim in a record not on the layer yet)."""
  label: str
  record: str
  metric: str
  legacy: tuple[str, ...]


GOODPUT = "goodput at SLO, RL / best tuned heuristic"
STEPS = "decision steps, RL vs best tuned replanner"
REVENUE = "revenue, RL / best tuned RM heuristic"

DOMAINS: tuple[Domain, ...] = (
    Domain("batching", "serving_batching", GOODPUT, ("RL within ~1% of",)),
    Domain("routing (azure_conv)", "serving_routing", GOODPUT,
           ("RL beats the best tuned heuristic",)),
    Domain("routing (azure_code)", "serving_routing_azure_code", GOODPUT,
           ("RL beats the best tuned heuristic",)),
    Domain("routing (mooncake_conv)", "serving_routing_mooncake_conv", GOODPUT,
           ("RL beats the best tuned heuristic",)),
    Domain("ballast", "ballast", STEPS, ("RL needs 32% fewer decision steps",)),
    Domain("ballast hydraulics", "ballast_hydro", STEPS,
           ("RL needs 32% fewer decision steps", "heel-aware")),
    Domain("rail", "rail_pricing", REVENUE, ("relational MARL beats revenue-management",)),
)


@dataclasses.dataclass
class Row:
  """One task of the table. `effect` (estimate, lo, hi) in the paper's units, None for a legacy
  row; `scores`/`pairs`: the per-unit oriented scores and (RL, heuristic) samples that feed the
  aggregates (None when the record holds no samples)."""
  domain: Domain
  claim: str
  verdict: str
  ours: str
  budget: str
  legacy: bool
  effect: tuple[float, float, float] | None = None
  scores: np.ndarray | None = None
  pairs: tuple[np.ndarray, np.ndarray] | None = None
  ratio: bool = False       # the effect is a ratio (log_ratio interval), not a difference


def _keyed(row: Mapping[str, Any]) -> bool:
  return on_layer(row) and RULE_KEY in str(row["repro"].get("rule", {}).get("id", ""))


def _matches(domain: Domain, row: Mapping[str, Any]) -> bool:
  if on_layer(row):
    rid = str(row["repro"].get("rule", {}).get("id", ""))
    if RULE_KEY in rid:
      return True
  text = str(row.get("claim", ""))
  return all(s in text for s in domain.legacy)


def _unit_values(x) -> np.ndarray:
  """[S] per-unit values of stored samples: [S], [S][W] (mean over windows, NaN ignored) or
  ragged [S][episodes] (mean per seed)."""
  if isinstance(x, (list, tuple)) and x and isinstance(x[0], (list, tuple)):
    return np.array([float(np.nanmean(np.asarray(r, np.float64))) for r in x])
  return np.asarray(x, np.float64).ravel()


def _oriented(rule: Mapping[str, Any], samples: Mapping[str, Any]):
  """(scores [S], pairs) of a layer row: scores s_u (module doc); pairs (RL, heuristic) per unit
  oriented so that larger is better, or None when only effects are stored."""
  sign = 1.0 if rule.get("better", "higher") == "higher" else -1.0
  log = rule.get("scale") == "log_ratio"
  if "a" in samples and "b" in samples:
    a, b = _unit_values(samples["a"]), _unit_values(samples["b"])
    d = sign * (np.log(a / b) if log else a - b)
    pairs = (sign * a, sign * b)
  else:
    d = _unit_values(samples["x"])      # stored effects are already on the oriented scale d
    pairs = None
  return (np.exp(d) if log else d), pairs


def _effect(rule: Mapping[str, Any], res: Mapping[str, Any]) -> tuple[float, float, float]:
  est, lo, hi = (float(_iv._from_json_float(res.get(k))) for k in ("estimate", "lo", "hi"))
  if res.get("scale") == "log_ratio":
    return _iv._exp(est), _iv._exp(lo), _iv._exp(hi)
  return est, lo, hi


def _budget(repro: Mapping[str, Any]) -> str:
  fair = repro.get("fair_chance")
  if not fair:
    return "not registered"
  res = fair.get("result") or {}
  return str(res.get("state", "unknown"))


def row_of(domain: Domain, row: Mapping[str, Any]) -> Row:
  """The table row of one claim row (layer or legacy)."""
  text = str(row.get("claim", ""))
  if not on_layer(row):
    return Row(domain, text, str(row.get("verdict", "?")), _results.ours_with_ci(row),
               "unknown (legacy)", True)
  r = row["repro"]
  rule = r.get("rule", {})
  eff = _effect(rule, r["interval"]["result"])
  try:
    scores, pairs = _oriented(rule, r["samples"])
  except (KeyError, ValueError, TypeError, ZeroDivisionError):
    scores, pairs = None, None
  label = r.get("verdict", {}).get("label", row.get("verdict", "?"))
  ratio = r["interval"]["result"].get("scale") == "log_ratio"
  return Row(domain, text, str(label), fmt_ci(*eff, suffix="x" if ratio else ""), _budget(r),
             False, eff, scores, pairs, ratio)


def collect(records: Sequence[Mapping[str, Any]],
            domains: Sequence[Domain] = DOMAINS) -> tuple[list[Row], list[Domain]]:
  """(rows in domain order, domains with no record or no matching claim)."""
  by_name = {}
  for rec in records:
    by_name.setdefault(rec.get("_file", rec.get("name")), rec)
  rows, missing = [], []
  for dom in domains:
    rec = by_name.get(dom.record)
    rows_ = [c for c in (rec or {}).get("claims", []) if isinstance(c, Mapping)]
    keyed = [c for c in rows_ if _keyed(c)]
    # A record that names its RL-vs-heuristic claim by RULE_KEY is read by that id alone (its
    # other claims may share the legacy text, e.g. batching's per-load claims).
    found = [row_of(dom, c) for c in (keyed or [c for c in rows_ if _matches(dom, c)])]
    if not found:
      missing.append(dom)
    rows.extend(found)
  return rows, missing


@dataclasses.dataclass
class Aggregate:
  """IQM and probability of improvement of one metric over `n_tasks` tasks with samples."""
  metric: str
  n_tasks: int
  n_without: int
  iqm: _iv.Interval | None
  p_improve: _iv.Interval | None
  note: str


def aggregates(rows: Sequence[Row], seed: int = 0) -> list[Aggregate]:
  """One Aggregate per metric shared by at least two tasks (see the module doc)."""
  out = []
  metrics = []
  for r in rows:
    if r.domain.metric not in metrics:
      metrics.append(r.domain.metric)
  for m in metrics:
    tasks = [r for r in rows if r.domain.metric == m]
    if len(tasks) < 2:
      continue
    with_s = [r for r in tasks if r.scores is not None and r.scores.size > 0]
    n_without = len(tasks) - len(with_s)
    if len(with_s) < 2:
      out.append(Aggregate(m, len(with_s), n_without, None, None,
                           f"needs per-unit samples of >= 2 tasks; {len(with_s)} of "
                           f"{len(tasks)} on the layer"))
      continue
    iqm = _agg.iqm_ci([r.scores for r in with_s], seed=seed)
    xs = [r.pairs[0] if r.pairs is not None else r.scores for r in with_s]
    zero = [np.array([1.0 if r.ratio else 0.0]) for r in with_s]
    ys = [r.pairs[1] if r.pairs is not None else z for r, z in zip(with_s, zero)]
    poi = _agg.probability_of_improvement(xs, ys, seed=seed)
    note = "" if not n_without else f"{n_without} legacy task(s) left out (no samples)"
    out.append(Aggregate(m, len(with_s), n_without, iqm, poi, note))
  return out


def _md(x: Any) -> str:
  return str(x).replace("|", "\\|").replace("\n", " ").strip()


def table(rows: Sequence[Row], missing: Sequence[Domain] = ()) -> str:
  """The markdown table of the rows (one per task), legacy rows marked."""
  lines = ["| domain | claim | RL vs best tuned heuristic (95% CI) | RL budget flattened? | "
           "verdict |", "|---|---|---|---|---|"]
  for r in rows:
    tag = f" ({LEGACY}: {LEGACY_NOTE})" if r.legacy else ""
    lines.append(f"| {_md(r.domain.label)} | {_md(r.claim)}{tag} | {_md(r.ours)} | "
                 f"{_md(r.budget)} | **{_md(r.verdict)}** |")
  for d in missing:
    lines.append(f"| {_md(d.label)} | (no record `{d.record}.json` with this claim yet) | - | - "
                 "| - |")
  return "\n".join(lines)


def aggregate_table(aggs: Sequence[Aggregate]) -> str:
  """IQM / probability of improvement per shared metric (markdown)."""
  lines = ["| metric | tasks with samples | IQM of RL / heuristic (95% CI) | "
           "P(RL > heuristic) (95% CI) | note |", "|---|---:|---|---|---|"]
  for a in aggs:
    iqm = fmt_ci(a.iqm.estimate, a.iqm.lo, a.iqm.hi) if a.iqm else "-"
    poi = fmt_ci(a.p_improve.estimate, a.p_improve.lo, a.p_improve.hi) if a.p_improve else "-"
    lines.append(f"| {_md(a.metric)} | {a.n_tasks} | {iqm} | {poi} | {_md(a.note)} |")
  return "\n".join(lines)


def section(records: Sequence[Mapping[str, Any]], figure: str | None = None) -> str:
  """The markdown section at the top of SUMMARY.md: the question, the figure link, the task
  table and the aggregates."""
  rows, missing = collect(records)
  n_legacy = sum(r.legacy for r in rows)
  out = ["## When does RL beat a tuned hand-written heuristic?", "",
         "One row per task: RL against the best heuristic of its family tuned on training data, "
         "the effect with its 95% CI, whether RL's budget sweep had flattened (its fair chance, "
         "judged on validation data) and the verdict. "
         + (f"{n_legacy} row(s) come from records not on the reproduction layer yet "
            f"({LEGACY}): their numbers are the record's own text, with no rule or samples "
            "behind them." if n_legacy else "Every row is on the reproduction layer."), ""]
  if figure:
    out += [f"![RL vs best tuned heuristic per domain]({figure})", ""]
  out += [table(rows, missing), ""]
  aggs = aggregates(rows)
  if aggs:
    out += ["Aggregates over tasks that share a metric (rliable: IQM of per-seed RL / "
            "heuristic scores, probability that an RL run beats a heuristic run; stratified "
            "bootstrap):", "", aggregate_table(aggs), ""]
  return "\n".join(out)


def figure(records: Sequence[Mapping[str, Any]], path: str) -> str | None:
  """A forest plot of the rows with an interval: one panel for ratios (log axis, line at 1),
  one for differences (line at 0); legacy rows are left out (their numbers are the records' own
  text, in mixed units). Returns `path`, or None when no row has an interval."""
  rows = [r for r in collect(records)[0] if r.effect is not None
          and all(math.isfinite(v) for v in r.effect)]
  if not rows:
    return None
  from jaxrl_suite.core.plotting import pyplot, save_figure
  plt = pyplot()
  panels = [(True, [r for r in rows if r.ratio]), (False, [r for r in rows
                                                                if not r.ratio])]
  panels = [(ratio, rs) for ratio, rs in panels if rs]
  fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                           figsize=(7, 0.45 * len(rows) + 1.2 * len(panels)))
  for ax, (ratio, rs) in zip(axes[:, 0], panels):
    ys = np.arange(len(rs))[::-1]
    for y, r in zip(ys, rs):
      est, lo, hi = r.effect
      ax.errorbar([est], [y], xerr=[[est - lo], [hi - est]], fmt="o", capsize=3)
    ax.axvline(1.0 if ratio else 0.0, color="grey", lw=1, ls="--")
    if ratio:
      ax.set_xscale("log")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r.domain.label}: {r.verdict}" for r in rs], fontsize=8)
    ax.set_xlabel("RL / best tuned heuristic (95% CI)" if ratio
                  else "RL - best tuned heuristic (95% CI)")
  fig.tight_layout()
  return save_figure(fig, path, dpi=120)
