"""The BallastHydro-v0 study's report: results/ballast_hydro.md and the figure.

  markdown(c, payload, table, comparisons, figure) -> str
  plot(table, sweeps, diag_table, path, c)             writes the png at path

c is the study config (configs/ballast_hydro.py; read: n_seeds, budget_updates,
resid_max_updates, ppo.{num_envs, num_steps, aux_coef}, eval_episodes, variants, n_boot);
payload the record's payload (layouts, decision_step_h, heel_aware_comparator, host, sweep,
flattening, diagnosis_f1); table and comparisons from hydro_tables.regime_tables; sweeps
{variant: [{"updates", "steps_eff" [S, L, n]}]}. Text and figure only: no verdicts, no numbers
computed beyond formatting (and the sweep's plotted intervals).
"""

from __future__ import annotations

import numpy as np

from jaxrl_suite.core import plotting
from jaxrl_suite.envs.ballast.hydro_stats import rl_stat_ci


def fmt(s, pct=False) -> str:
  """(mean, lo, hi) as "m [lo, hi]": 3 decimals for rates, 1 otherwise; "-" for None."""
  if s is None:
    return "-"
  m, lo, hi = s
  if pct:
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
  return f"{m:.1f} [{lo:.1f}, {hi:.1f}]"


def _intro(c, payload) -> list[str]:
  lay = payload["layouts"]
  return [
      "BallastHydro-v0: recurrent RL trained across generated layouts vs the replanners.",
      "",
      f"Training layouts {lay['train']}; held-out generated layouts (never "
      f"trained on) {lay['held_out']}; shipped {lay['shipped']}. "
      f"Budget: {c.n_seeds} seeds x {c.budget_updates[-1]} PPO updates (rl_gru_resid: "
      f"{c.resid_max_updates}) x {c.ppo.num_envs} envs x {c.ppo.num_steps} steps; diagnosis "
      f"head aux_coef {c.ppo.aux_coef}; decision step {payload['decision_step_h']:.3f} h; "
      f"{c.eval_episodes} paired episodes per evaluation layout. Decision steps `steps_eff`: a "
      "failed episode counts at the step limit. Heel-aware comparator per layout (fewer mean "
      f"steps of one command / a command per pump): {payload['heel_aware_comparator']}. "
      f"Host: {payload['host']['cpus']} CPUs ({payload['host']['backend']}); the numbers are "
      "bitwise reproducible on the same CPU count only (docs/ballast.md, Determinism).",
      "Diagnosis: F1 on the edges each episode exercised, RL head vs the reference diagnoser on "
      "the same final observations (section below).", ""]


def _regime_lines(table) -> list[str]:
  lines = []
  for group, rows in table.items():
    lines += [f"## {group.replace('_', '-')} layouts", "",
              "| regime | episodes | policy | steps_eff | steps | hours | success | a limit "
              "crossed (heel / GM / trim / draught) | energy kWh |",
              "|---|---|---|---|---|---|---|---|---|"]
    for reg, row in rows.items():
      for pol, st in row.items():
        if pol == "episodes":
          continue
        kinds = " / ".join(f"{st[f'broke_{k}'][0]:.3f}" if st.get(f"broke_{k}") else "-"
                           for k in ("heel", "gm", "trim", "draught"))
        lines.append(f"| {reg} | {row['episodes']} | {pol} | {fmt(st['steps_eff'])} | "
                     f"{fmt(st['steps'])} | {fmt(st['hours'], True)} | "
                     f"{fmt(st['success'], True)} | {fmt(st['violated'], True)} ({kinds}) | "
                     f"{fmt(st['energy_kwh'])} |")
    lines.append("")
  return lines


def _sweep_lines(c, payload) -> list[str]:
  lines = ["## Budget sweep (validation layouts, greedy policy)", "",
           "| variant | updates | episodes | steps_eff | success | a limit crossed |",
           "|---|---|---|---|---|---|"]
  for var, sw in payload["sweep"].items():
    for s in sw:
      lines.append(f"| {var} | {s['updates']} | {s.get('episodes', '-')} | "
                   f"{s['steps_eff']:.2f} | {s['success']:.3f} | {s['violated']:.3f} |")
  lines += ["", "Change per doubling (validation steps_eff, 95% CI over seeds x episodes, on the "
            "episodes both checkpoints scored). A description only: the verdicts' fair-chance "
            "test is the layer's (repro.flatness: a t interval over seeds of the last "
            "doubling's per-seed log change, in each claim row), which treats the seed, not the "
            "episode, as the unit; \"within flat_tol\" below is this bootstrap's reading:", ""]
  for var, f in payload["flattening"].items():
    for s in f["steps"]:
      m, lo, hi = s["delta_steps"]
      lines.append(f"- {var} {s['from']} -> {s['to']}: {m:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                   f"({s.get('episodes', '-')} episodes x {c.n_seeds} seeds)")
    lines.append(f"- {var} within flat_tol ({c.flat_tol:g} steps, bootstrap): {f['flattened']}")
  return lines


def _comparison_lines(comparisons) -> list[str]:
  lines = ["", "Reductions in steps_eff (1 - RL / baseline, >=1 blocked):", ""]
  for group, comp in comparisons.items():
    for k, v in comp.items():
      lines.append(f"- {group} {k}: {v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]")
  return lines


def _diagnosis_lines(c, diag_table) -> list[str]:
  lines = ["", "## Diagnosis F1 on exercised edges (clogged = clog < 1)", "",
           "| group | regime | episodes | policy | head F1 | reference F1 (same episodes) | "
           "head - reference | clogged exercised edges |", "|---|---|---|---|---|---|---|---|"]
  for group, rows in diag_table.items():
    for reg, row in rows.items():
      for var in c.variants:
        r = row[var]
        lines.append(f"| {group} | {reg} | {row['episodes']} | {var} | "
                     f"{fmt(r['head_f1'], True)} | {fmt(r['reference_f1'], True)} | "
                     f"{fmt(r['head_minus_reference'], True)} | "
                     f"{r['clogged_exercised_edges']} |")
      lines.append(f"| {group} | {reg} | {row['episodes']} | heel_aware (reference only, its "
                   f"own episodes) | - | {fmt(row['heel_aware_reference_f1'], True)} | - | - |")
  return lines


def markdown(c, payload, table, comparisons, figure: str = "ballast_hydro.png") -> str:
  """The report: intro, per-group regime tables, the budget sweep and its doublings, the
  reductions, the diagnosis table, and the figure's link."""
  lines = (_intro(c, payload) + _regime_lines(table) + _sweep_lines(c, payload)
           + _comparison_lines(comparisons) + _diagnosis_lines(c, payload["diagnosis_f1"]))
  lines += ["", f"![trade-off and sweep]({figure})", ""]
  return "\n".join(lines)


def _tradeoff_axis(ax, group, table) -> None:
  """Heel-limit crossings vs decision steps of each policy (all episodes of the group)."""
  for pol, st in table[group]["all"].items():
    if pol in ("episodes", "heel_aware"):
      continue
    x = st["violated"]
    plotting.errorbar_ci(ax, [x[0]], [st["steps_eff"]], xerr=[[x[0] - x[1]], [x[2] - x[0]]],
                         fmt="o", label=pol)
  ax.set_xlabel("share of episodes crossing a limit (heel, GM, trim, draught)")
  ax.set_ylabel("decision steps (failure = step limit)")
  ax.set_title(f"stability / steps, {group.replace('_', '-')} layouts")
  ax.legend(fontsize=7)


def _sweep_axis(ax, sweeps, c) -> None:
  """Validation steps_eff per budget (seeds x episodes intervals, at most 500 resamples)."""
  for var, sw in sweeps.items():
    plotting.errorbar_ci(ax, [s["updates"] for s in sw],
                         [rl_stat_ci(np.reshape(s["steps_eff"], (c.n_seeds, -1)),
                                     min(c.n_boot, 500)) for s in sw],
                         marker="o", label=var)
  ax.set_xscale("log", base=2)
  ax.set_xlabel("PPO updates")
  ax.set_ylabel("validation decision steps")
  ax.set_title("budget sweep")
  ax.legend(fontsize=7)


def _diagnosis_axis(ax, diag_table, c) -> None:
  """Head vs reference F1 (>= 1 blocked) per group and variant."""
  labels, xs = [], []
  for gi, group in enumerate(diag_table):
    row = diag_table[group][">=1 blocked"]
    for vi, var in enumerate(c.variants):
      x = gi * (len(c.variants) + 1) + vi
      plotting.errorbar_ci(ax, [x - 0.15], [row[var]["head_f1"]], fmt="o", color="C0",
                           label="RL head" if gi == vi == 0 else None)
      plotting.errorbar_ci(ax, [x + 0.15], [row[var]["reference_f1"]], fmt="s", color="C1",
                           label="reference, same episodes" if gi == vi == 0 else None)
      labels.append(f"{group.replace('_', '-')}\n{var}")
      xs.append(x)
  ax.set_xticks(xs)
  ax.set_xticklabels(labels, fontsize=7)
  ax.set_ylabel("F1 on exercised edges (>=1 blocked)")
  ax.set_title("clog diagnosis")
  ax.legend(fontsize=7)


def plot(table, sweeps, diag_table, path: str, c) -> None:
  """Stability / steps trade-off per group, the budget sweep, diagnosis F1 (head vs reference)."""
  plt = plotting.pyplot()
  groups = list(table)
  fig, axes = plt.subplots(1, len(groups) + 2, figsize=(5 * (len(groups) + 2), 4))
  for ax, group in zip(axes, groups):
    _tradeoff_axis(ax, group, table)
  _sweep_axis(axes[len(groups)], sweeps, c)
  _diagnosis_axis(axes[-1], diag_table, c)
  plotting.save_figure(fig, path, dpi=100)
