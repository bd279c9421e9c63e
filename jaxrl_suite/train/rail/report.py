"""The rail pricing record's tables and markdown.

  table(rl, base, ci) -> {scenario: {policy: {metric: [mean, lo, hi], revenue_op, revenue_seeds}}}
  bound_summary(ub, table, ci) -> ({scenario: {ci, per_seed, max_policy, ...}}, markdown line)
  flat_text(flattening) -> one line on a variant's fair-chance sweep
  details_md(claims) -> "## Verdict details" section
  calibration_note(el) -> the calibration claim's note (measured vs target elasticities)
  markdown(c, r, ci) -> the report body (calibration, baselines, held-out tables, sweep, bound)

rl and base are {policy: {scenario: {metric: [S]}}} (revenue_op [S, O]) of per-seed means. `ci`
is the caller's interval of the mean over seeds, x [S] -> (mean, lo, hi) (repro.intervals.t_mean
in the script; train/ may not import repro).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxrl_suite.envs.rail import calibration
from jaxrl_suite.envs.rail.instance import ELASTICITY, SEGMENTS

METRICS = ("revenue_total", "load_factor", "spill", "cs", "equity", "volatility")
Ci = Callable[[np.ndarray], tuple[float, float, float]]


def fmt(ci, nd: int = 0, scale: float = 1.0) -> str:
  """(mean, lo, hi) -> 'mean [lo, hi]' with thousands separators, each times `scale`."""
  m, lo, hi = (x * scale for x in ci)
  return f"{m:,.{nd}f} [{lo:,.{nd}f}, {hi:,.{nd}f}]"


def table(rl: dict, base: dict, ci: Ci) -> dict:
  """{scenario: {policy: {metric: [mean, lo, hi]}}} over seeds, baselines first, with
  per-operator revenue (revenue_op [O][3]) and the per-seed revenue (revenue_seeds [S])."""
  out = {}
  for src in (base, rl):
    for pol, by_sc in src.items():
      for sc, m in by_sc.items():
        row = {k: list(ci(m[k])) for k in METRICS}
        row["revenue_op"] = [list(ci(m["revenue_op"][:, o]))
                             for o in range(m["revenue_op"].shape[1])]
        row["revenue_seeds"] = m["revenue_total"].tolist()
        out.setdefault(sc, {})[pol] = row
  return out


def bound_summary(ub: dict, tab: dict, ci: Ci):
  """({scenario: {ci, per_seed, max_policy, max_policy_revenue, holds}}, a markdown line): the
  bound ub {scenario: [S]} against the best policy's mean revenue in `tab` (table())."""
  rec, parts = {}, []
  for sc, u in ub.items():
    top = max(tab[sc], key=lambda p: tab[sc][p]["revenue_total"][0])
    top_rev = tab[sc][top]["revenue_total"][0]
    iv = list(ci(u))
    rec[sc] = {"ci": iv, "per_seed": u.tolist(), "max_policy": top,
               "max_policy_revenue": top_rev, "holds": bool(top_rev <= iv[0])}
    parts.append(f"{sc}: {fmt(iv, 1, 1e-3)}k, best policy {top} {top_rev / 1e3:.1f}k "
                 f"({top_rev / iv[0]:.0%} of it; bound "
                 f"{'holds' if top_rev <= iv[0] else 'VIOLATED'})")
  line = ("Valid upper bound on the expected revenue of any policy given each episode's demand "
          "shock (envs/rail/bound.py: every would-be passenger pays the top fare, seats pooled "
          "per leg; loose by construction). `cdlp_known` (CDLP told the shock) is an information "
          "benchmark, not a bound. " + "; ".join(parts) + ".")
  return rec, line


def flat_text(f: dict) -> str:
  """One line on a variant's fair-chance sweep (the `flattening` record of rl_stage)."""
  m, lo, hi = f["gain_ci"]
  b = f["budgets"]
  t = (f"last doubling {int(b[-2])} -> {int(b[-1])} updates gains {m:+.2%} [{lo:+.2%}, "
       f"{hi:+.2%}] (log revenue): {f['state']} at +-{f['delta']:.0%}")
  if "last_vs_main" in f:
    r, rlo, rhi = f["last_vs_main"]
    t += f", {int(b[-1])} vs main budget x{r:.3f} [{rlo:.3f}, {rhi:.3f}]"
  return t


def details_md(claims: list) -> str:
  """Each claim's registered rule id, the layer's reason and the note (the table shows none)."""
  lines = ["## Verdict details", ""]
  for i, cl in enumerate(claims, 1):
    rule = cl["repro"]["rule"]
    label = cl["repro"]["verdict"]["label"]
    kind = rule["kind"] if rule["kind"] == label else f"{rule['kind']}; {label}"
    lines.append(f"{i}. **{cl['claim']}** (`{rule['id']}`, {kind}): {cl['detail'].rstrip('.')}. "
                 f"{cl.get('note', '').rstrip('.')}.")
  return "\n".join(lines + ["", ""])


def _header(c) -> list[str]:
  """The run's size: seeds, episodes, the RL budget and the baselines' tuning budget."""
  return ["RailRM-v0 `ecml` line (5 stations, 9 trains of 3 operators, 400 seats per leg, 12 "
          "weekly periods), reward = operator revenue. Means with 95% CIs over "
          f"{c.n_seeds} seeds (RL training seeds = held-out evaluation groups of "
          f"{c.eval_episodes} episodes each). RL compared at {c.main_updates} updates = "
          f"{c.main_updates * c.rl.num_envs * c.rl.num_steps:,} env steps per seed "
          f"({c.main_updates * c.rl.num_envs:,} episodes; the sweep runs "
          f"{'every variant' if c.rel_max_updates >= c.budget_updates[-1] else 'the MLP variants'}"
          f" to {c.budget_updates[-1]} updates); every baseline family tuned on "
          f"{c.tune_episodes} x 8 = {c.tune_episodes * 8:,} episodes.", ""]


def _calibration(el) -> list[str]:
  """Measured elasticities el [G] against the targets and the UK ranges."""
  lines = ["## Calibration", "", "| segment | target | measured (rollouts) | UK range |",
           "|---|---|---|---|"]
  for s, e, t in zip(SEGMENTS, el, ELASTICITY):
    lo, hi = calibration.UK_RANGES[s]
    lines.append(f"| {s} | {t:.2f} | {e:.2f} | {lo} .. {hi} |")
  return lines


def _baselines(tuned, nash_lv, mono_lv, nash_conv) -> list[str]:
  return ["", "## Tuned baselines", "", ", ".join(f"{k}: theta={v}" for k, v in tuned.items()),
          "", f"Nash fare buckets (operators' one-shot game, fluid; "
          f"{'converged' if nash_conv else 'not converged'}): {nash_lv.tolist()}; "
          f"joint monopoly: {mono_lv.tolist()} (bucket k = multiplier 0.8 + 0.1 k).", ""]


def _held_out(c, tab) -> list[str]:
  """One table per scenario, policies by mean revenue, and revenue per operator."""
  lines = []
  for sc, title in (("train_level", f"training demand level ({c.demand_level})"),
                    ("shift", f"held-out demand shift ({c.shift_level})")):
    lines += [f"## Held-out episodes, {title}", "",
              "| policy | revenue (GBP k) | load factor | spill | consumer surplus (GBP k) | "
              "equity | volatility |", "|---|---|---|---|---|---|---|"]
    for pol, row in sorted(tab[sc].items(), key=lambda kv: -kv[1]["revenue_total"][0]):
      lines.append(f"| {pol} | {fmt(row['revenue_total'], 1, 1e-3)} | "
                   f"{fmt(row['load_factor'], 3)} | {fmt(row['spill'], 0)} | "
                   f"{fmt(row['cs'], 1, 1e-3)} | {fmt(row['equity'], 3)} | "
                   f"{fmt(row['volatility'], 3)} |")
    lines.append("")
    lines += ["Revenue per operator (GBP k): " + "; ".join(
        f"{pol}: " + ", ".join(f"op{o} {r[0] / 1e3:.1f}" for o, r in enumerate(row["revenue_op"])
                               if r[0] > 0) for pol, row in tab[sc].items()), ""]
  return lines


def _sweep_intro(c, best_b, best_b_rev) -> str:
  """How the sweep was run and read."""
  all_u = list(c.budget_updates)
  how = ("One run per budget and seed, the learning rate decayed linearly to 0 over it, "
         f"scored on the {c.tune_episodes} tuning episodes" if c.lr_decay else
         f"One run per seed at a constant learning rate, scored at each budget on the "
         f"{c.tune_episodes} tuning episodes (the first b updates of the run are a run of "
         f"budget b)")
  return (f"{how}; one update = {c.rl.num_envs * c.rl.num_steps} env steps = "
          f"{c.rl.num_envs} episodes. Entropy collapse: seeds whose final policy entropy is "
          f"under {c.entropy_collapse_frac:g} of the uniform policy's. "
          + (f"Every variant runs to {all_u[-1]} updates. " if c.rel_max_updates >= all_u[-1]
             else f"MLP variants run to {all_u[-1]} updates, relational ones to "
                  f"{c.rel_max_updates} (cost). ")
          + f"Every variant is compared at "
          f"{c.main_updates} updates. Best tuned baseline on the same episodes: {best_b} "
          f"{best_b_rev / 1e3:.1f}k. Fair chance (jaxrl_suite.repro.flatness): the per-seed "
          "log gain of the sweep's last doubling with its t 95% CI; flat inside "
          "+-FLAT_DELTA, rising above, degrading below, unknown otherwise.")


def _sweep_row(v, m, sw, all_u, ci: Ci) -> str:
  """One variant's sweep: revenue at each budget, last-doubling gain, collapse, time."""
  f = m["flattening"]
  rev = np.asarray(sw[m["mode"]])
  have = [int(u) for u in np.asarray(sw["updates"])]
  cells = " | ".join(fmt(ci(rev[:, have.index(u)]), 1, 1e-3) if u in have else "-"
                     for u in all_u)
  sl = f["gain_ci"]
  lm = f.get("last_vs_main")
  return (f"| {v} | {m['mode']} | {cells} | {sl[0]:+.2%} [{sl[1]:+.2%}, {sl[2]:+.2%}] "
          f"({f['state']}) | "
          + (f"x{lm[0]:.3f} [{lm[1]:.3f}, {lm[2]:.3f}]" if lm else "-")
          + (" | {collapsed_seeds}/{n_seeds}".format(**m["entropy"]) if "entropy" in m
             else " | -")
          + f" | {m['train_s']:.0f} |")


def _sweep(c, rl_meta, sweep, best_b, best_b_rev, ci: Ci) -> list[str]:
  all_u = list(c.budget_updates)
  lines = ["## RL budget sweep", "", _sweep_intro(c, best_b, best_b_rev), "",
           "| variant | eval mode | " + " | ".join(f"{u} upd" for u in all_u) +
           " | last doubling gain (95% CI) | last / main | collapsed seeds | train s |",
           "|---|---|" + "---|" * (len(all_u) + 4)]
  return lines + [_sweep_row(v, m, sweep[v], all_u, ci) for v, m in rl_meta.items()]


def markdown(c, r: dict, ci: Ci) -> str:
  """The report body. r holds el [G] (mean measured elasticities), tuned {row: theta}, rl_meta,
  table, comparisons, nash_lv, mono_lv, nash_conv, timings, sweep, best_b (the best tuned
  baseline), best_b_rev (its tuning revenue) and bound_line."""
  lines = _header(c) + _calibration(r["el"])
  lines += _baselines(r["tuned"], r["nash_lv"], r["mono_lv"], r["nash_conv"])
  lines += _held_out(c, r["table"])
  lines += _sweep(c, r["rl_meta"], r["sweep"], r["best_b"], r["best_b_rev"], ci)
  lines += ["", "## Upper bound", "", r["bound_line"]]
  lines += ["", "## Comparisons", "", "```", str(r["comparisons"]), "```", "",
            "Timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in r["timings"].items())]
  return "\n".join(lines)


def calibration_note(el) -> str:
  """The calibration claim's note: mean measured elasticities el [G] against the targets."""
  return ("mean over seeds (target; UK range): " + ", ".join(
      f"{s} {e:.2f} ({t:.2f}; {lo}..{hi})" for s, e, t, (lo, hi) in
      zip(SEGMENTS, el, ELASTICITY, calibration.UK_RANGES.values()))
      + "; arc elasticity of bookings, all trains 1.0 -> 1.1 x base fare, capacity "
        "non-binding, common random numbers")
