"""The BallastNet-v0 study's report: markdown tables and the figure, from scoring.py's rows.

  markdown(c, rows, tol)     results/ballast.md: the per-regime table, RL seeds, failures,
                             diagnosis, the dt sweep, task v2, the generalisation test; c is the
                             experiment config (configs/ballast.py), rows a `Rows`, tol the
                             agents' deviation tolerance (agents/ballast.DEVIATION_TOL)
  sweep_markdown(sweep)      results/ballast_dt_sweep.md
  v2_bank_lines(banks)       where the v2 episodes come from (net_bank reports)
  plot(table, sweep, path)   steps per regime and policy; oracle savings per step length

Text only: no verdicts (the claims are judged by jaxrl_suite.repro in the script), no numbers
computed beyond formatting.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from jaxrl_suite.envs.ballast.scoring import REGIMES


@dataclasses.dataclass(frozen=True)
class Rows:
  """What the v1 report shows: table / diag / failures {row: ...} (scoring.regime_table,
  diagnosis_rows, failure_rows per policy), sweep (scoring.dt_sweep), v2 and gen (None when
  skipped), t_train (s), seed_rows (scoring.seed_rows), mode (headline action mode),
  seed_check (algos.ballast.seed_evidence or None)."""
  table: dict
  diag: dict
  sweep: dict
  v2: dict | None
  gen: dict | None
  t_train: float
  seed_rows: list
  failures: dict
  mode: str = "greedy"
  seed_check: dict | None = None


def fmt(x, nd: int = 2) -> str:
  """x with nd decimals, "nan" for None or a non-finite value."""
  return "nan" if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def pct_ci(s: dict) -> str:
  """A saving record {"saving", "ci": (lo, hi)} as "12.3% [11.0, 13.6]"."""
  return f"{100 * s['saving']:.1f}% [{100 * s['ci'][0]:.1f}, {100 * s['ci'][1]:.1f}]"


def _mean_ci(r: dict) -> str:
  """A steps_row's "mean [lo, hi]"."""
  return f"{fmt(r['steps'])} [{fmt(r['ci'][0])}, {fmt(r['ci'][1])}]"


def _share_ci(gs: dict) -> str:
  """A gap_share record as "share [lo, hi]"."""
  return f"{fmt(gs['share'])} [{fmt(gs['ci'][0])}, {fmt(gs['ci'][1])}]"


def v2_bank_lines(banks: dict) -> list[str]:
  """Markdown lines on where the v2 episodes come from (checked banks {"train", "eval":
  net_bank report, "wall_s"}, or the raw generator when banks is empty)."""
  if not banks:
    return ["Episodes: BallastNet-v0's unchecked v2 generator (config.v2_bank = 0): not every "
            "episode is finishable by oracle-v2.", ""]
  out = [f"Episodes: checked banks (envs/ballast/net_bank.py), {banks['train']['n']} for training "
         f"and {banks['eval']['n']} for evaluation (reset draws a row uniformly; built in "
         f"{banks['wall_s']:.0f} s): every episode is finished by oracle-v2 (true clogs, "
         f"noiseless soundings) within {banks['eval']['max_steps']} steps; #blocked at the "
         "prior's exact quotas. Rejected candidates per #blocked stratum:", ""]
  for name in ("train", "eval"):
    r = banks[name]
    per = ", ".join(f"{st['n_blocked']}: {st['rejected']}/{st['checked']} "
                    f"({100 * st['rejection_rate']:.1f}%)" for st in r["strata"])
    out.append(f"- {name} bank: {per}; all {100 * r['rejection_rate']:.1f}%")
  r = banks["eval"]
  mix = ", ".join(f"{k} {r['regimes_unchecked'][k]:.3f} -> {r['regimes_bank'][k]:.3f}"
                  for k in r["regimes_bank"])
  out += [f"- regime mix without the check -> in the eval bank: {mix}", ""]
  return out


def seed_table(rows: list, ref: str) -> list[str]:
  """Per-seed x action-mode rows (scoring.seed_rows) as a markdown table."""
  out = [f"| seed | mode | selection steps | eval steps (all) | success | saving vs {ref} "
         "(blocked) | off-top share | believed-worse share |", "|---|---|---|---|---|---|---|---|"]
  for r in rows:
    sv = r["saving_vs_replan_blocked"]
    out.append(f"| {r['seed']} | {r['mode']} | {r['selection_steps']:.2f} | {r['steps']:.2f} | "
               f"{r['success']:.3f} | {100 * sv['saving']:+.1f}% [{100 * sv['ci'][0]:+.1f}, "
               f"{100 * sv['ci'][1]:+.1f}] | {r['off_top']:.3f} | {r['believed_worse']:.3f} |")
  return out


def check_lines(chk: dict) -> list[str]:
  """Seed distinctness and the training curve per seed (algos.ballast.seed_evidence)."""
  out = ["", "Max |param - param of seed 0| per seed: " + ", ".join(
      f"{d:.3g}" for d in chk["max_abs_param_diff_vs_seed0"]) + "; learned residual weight "
         "w_resid per head (per seed): " + ", ".join(
             f"{h}: " + " / ".join(f"{w:.2f}" for w in ws) for h, ws in chk["w_resid"].items()) +
         ".", "",
         "Training curve (per seed; update index: value):", "",
         "| metric | " + " | ".join(f"update {u}" for u in chk["curve"]["episode_length"]) + " |",
         "|---|" + "---|" * len(chk["curve"]["episode_length"])]
  for k, pts in chk["curve"].items():
    out.append(f"| {k} | " + " | ".join(" / ".join(f"{v:.3g}" for v in vals)
                                          for vals in pts.values()) + " |")
  return out


def _steps_lines(c: Any, rows: Rows) -> list[str]:
  """Header and the per-regime decision-steps table of the v1 policies."""
  table = rows.table
  names = list(table["all"])
  out = [f"Layout `{c.layout}`, dt = {c.dt_minutes:g} min, {c.n_episodes} paired episodes, "
         f"RL: PPO + route scorer + diagnosis head, {c.rl.total_timesteps} env steps x "
         f"{c.rl_seeds} seed(s), trained in {rows.t_train:.0f} s; RL rows use the {rows.mode} "
         "action mode (chosen on separate selection episodes, not on these).", "",
         "## Decision steps (mean [95% bootstrap CI]), success rate, saving vs B-replan", "",
         "| regime | n | " + " | ".join(names) + " | RL gap share closed |",
         "|---|---|" + "---|" * (len(names) + 1)]
  for rname, row in table.items():
    cells = []
    for n in names:
      r = row[n]
      sv = r.get("saving_vs_replan")
      sv_s = f", {100 * sv['saving']:+.1f}%" if sv and np.isfinite(sv["saving"]) else ""
      cells.append(f"{_mean_ci(r)} ({fmt(r['hours'])} h, succ {fmt(r['success'])}{sv_s})")
    out.append(f"| {rname} | {row[names[0]]['n']} | " + " | ".join(cells) +
               f" | {_share_ci(row['rl']['gap_share'])} |")
  return out


def _seed_lines(rows: Rows, tol: float) -> list[str]:
  """The RL seeds section: per seed x mode rows, then seed distinctness and the curve."""
  out = ["", "Savings are 1 - mean(steps)/mean(steps B-replan) on the same episodes (negative "
         "= more steps). The RL column is the per-episode mean over the RL seeds.", "",
         "## RL seeds (PPO, trained in one jit, vmapped over seeds)", "",
         "Greedy = argmax of the policy, sampled = actions drawn from it. The headline mode is "
         "the one with fewer mean steps on selection episodes (other keys, same distribution). "
         "Off-top share: decision steps whose route differs from B-replan's on the same "
         "observation (a non-top slot; includes tie-breaks among routes B-replan believes "
         "equally good); believed-worse share: the route's believed cost exceeds B-replan's "
         f"by > {tol} (a real departure from B-replan's belief).", ""]
  out += seed_table(rows.seed_rows, "B-replan")
  if rows.seed_check is not None:
    out += check_lines(rows.seed_check)
  return out


def _failure_lines(failures: dict) -> list[str]:
  """Why episodes fail, per policy and regime."""
  out = ["", "## Why episodes fail (share of episodes: success / capsized / step limit)", "",
         "| policy | " + " | ".join(REGIMES) + " |", "|---|" + "---|" * len(REGIMES)]
  for name, rows in failures.items():
    out.append(f"| {name} | " + " | ".join(
        f"{rows[r]['success']:.3f} / {rows[r]['capsized']:.3f} / {rows[r]['step_limit']:.3f}"
        if r in rows else "-" for r in REGIMES) + " |")
  return out


def _diagnosis_lines(diag: dict) -> list[str]:
  """The heel-bound note and the clog diagnosis table."""
  out = ["", "Every v1 plan is generated so that |heel| stays below heel_plan_max = 4.5 deg "
         "(< heel_max = 5 deg) whatever the job order (env.py, any-order heel bound). Before "
         "that bound, about 4% of plans capsized under the baselines' fixed plan order (e.g. "
         "one 800 m3 heeling-tank fill alone is 5.2 deg), which was why success was 0.94-0.97 "
         "even with no clogs; the remaining failures are the step limit (T_limit steps).", "",
         "## Clog diagnosis (micro over episodes)", "",
         "| diagnoser | regime | exact (all) | F1 (all) | bal.acc (all) | exact (exercised) | "
         "F1 (exercised) | bal.acc (exercised) |", "|---|---|---|---|---|---|---|---|"]
  for dname, rows in diag.items():
    for rname, d in rows.items():
      a, e = d["all_edges"], d["exercised"]
      out.append(f"| {dname} | {rname} | {fmt(a['exact'])} | {fmt(a['f1'])} | "
                 f"{fmt(a['bal_acc'])} | {fmt(e['exact'])} | {fmt(e['f1'])} | "
                 f"{fmt(e['bal_acc'])} |")
  return out


def _sweep_lines(sweep: dict) -> list[str]:
  """Oracle savings per step length (the main report's copy of the dt sweep)."""
  out = ["", "## Oracle-vs-replan saving by step length (blocked episodes)", "",
         "| dt (min) | oracle vs B-replan | oracle vs B-tabu | mean steps oracle/replan/tabu |",
         "|---|---|---|---|"]
  for dt_min, s in sorted(sweep.items(), key=lambda kv: float(kv[0])):
    a, b, m = s["oracle_vs_replan_blocked"], s["oracle_vs_tabu_blocked"], s["mean_steps"]
    out.append(f"| {float(dt_min):g} | {pct_ci(a)} | {pct_ci(b)} | {m['oracle']:.2f} / "
               f"{m['replan']:.2f} / {m['tabu']:.2f} |")
  return out


def _v2_lines(c: Any, v2: dict, tol: float) -> list[str]:
  """Task v2: the per-regime table, its RL seeds and their training evidence."""
  out = ["", "## Task v2 (stability target, two pumps, free tank choice)", "",
         f"RL-v2: PPO pump-pair agent (agents/ballast_v2), {c.rl_v2.total_timesteps} env steps x "
         f"{c.rl_v2_seeds} seeds (trained in {v2['train_wall_s']:.0f} s), {v2['mode']} mode "
         "(chosen on selection episodes), per-episode mean over seeds. Steps mean [95% "
         "bootstrap CI] and success; savings vs greedy replan-v2 on the same "
         f"{c.v2_episodes} episodes.", ""] + v2_bank_lines(v2.get("banks", {})) + [
         "| regime | n | oracle-v2 | replan-v2 | rl-v2 | oracle-v2 saving | rl-v2 saving | "
         "rl-v2 gap share closed |", "|---|---|---|---|---|---|---|---|"]
  for rname, r in v2["rows"].items():
    cells = [f"{_mean_ci(r[n])} succ {fmt(r[n]['success'])}"
             for n in ("oracle-v2", "replan-v2", "rl-v2")]
    out.append(f"| {rname} | {r['replan-v2']['n']} | " + " | ".join(cells) +
               f" | {pct_ci(r['oracle_vs_replan'])} | {pct_ci(r['rl_vs_replan'])} | "
               f"{_share_ci(r['rl_gap_share'])} |")
  out += ["", "RL-v2 seeds (off-top: the pair differs from replan-v2's greedy pair; "
          "believed-worse: its predicted error distance after both moves exceeds the greedy "
          f"pair's by > {tol} tolerance units):", ""]
  return out + seed_table(v2["seeds"], "replan-v2") + check_lines(v2["seed_check"])


def _gen_lines(c: Any, gen: dict) -> list[str]:
  """The generalisation test: steps per policy on the unseen layout, the diagnosis head."""
  out = ["", f"## Generalisation: agent trained on {c.layout}, evaluated on "
         f"`{gen['layout']}` (never seen)", "", "| regime | policy | steps | success |",
         "|---|---|---|---|"]
  for rname, rows in gen["rows"].items():
    for n, r in rows.items():
      out.append(f"| {rname} | {n} | {_mean_ci(r)} | {fmt(r['success'])} |")
  if gen["diag_rl_head"]:
    d = gen["diag_rl_head"]
    out.append(f"\nRL diagnosis head on the new layout: F1 all {fmt(d['all_edges']['f1'])}, "
               f"exercised {fmt(d['exercised']['f1'])}; reference diagnoser on B-replan: "
               f"exercised F1 {fmt(gen['diag_reference_replan']['exercised']['f1'])}.")
  return out


def markdown(c: Any, rows: Rows, tol: float) -> str:
  """results/ballast.md (see the module doc)."""
  out = _steps_lines(c, rows) + _seed_lines(rows, tol) + _failure_lines(rows.failures)
  out += _diagnosis_lines(rows.diag) + _sweep_lines(rows.sweep)
  if rows.v2 is not None:
    out += _v2_lines(c, rows.v2, tol)
  if rows.gen is not None:
    out += _gen_lines(c, rows.gen)
  return "\n".join(out)


def sweep_markdown(sweep: dict) -> str:
  """results/ballast_dt_sweep.md: savings, mean steps and success per step length."""
  md = ["| dt (min) | oracle vs B-replan | oracle vs B-tabu | mean steps oracle/replan/tabu | "
        "success oracle/replan/tabu |", "|---|---|---|---|---|"]
  for dt_min, r in sorted(sweep.items(), key=lambda kv: float(kv[0])):
    a, b, m, sc = (r["oracle_vs_replan_blocked"], r["oracle_vs_tabu_blocked"], r["mean_steps"],
                   r["success"])
    md.append(f"| {float(dt_min):g} | {pct_ci(a)} | {pct_ci(b)} | {m['oracle']:.2f} / "
              f"{m['replan']:.2f} / {m['tabu']:.2f} | {sc['oracle']:.2f} / {sc['replan']:.2f} / "
              f"{sc['tabu']:.2f} |")
  return "\n".join(md)


def _sweep_axis(ax, sweep: dict) -> None:
  """Oracle's saving vs B-replan / B-tabu per step length, with the claimed 32%."""
  dts = sorted(sweep, key=float)
  for key, lab in (("oracle_vs_replan_blocked", "oracle vs B-replan"),
                   ("oracle_vs_tabu_blocked", "oracle vs B-tabu")):
    y = [100 * sweep[d][key]["saving"] for d in dts]
    lo = [100 * sweep[d][key]["ci"][0] for d in dts]
    hi = [100 * sweep[d][key]["ci"][1] for d in dts]
    ax.plot([float(d) for d in dts], y, "o-", label=lab)
    ax.fill_between([float(d) for d in dts], lo, hi, alpha=0.2)
  ax.axhline(32, color="k", ls="--", label="claimed 32%")
  ax.set_xlabel("step length dt (min)")
  ax.set_ylabel("% fewer steps (blocked episodes)")
  ax.set_title("Upper bound on any policy's saving")
  ax.legend(fontsize=8)


def plot(table: dict, sweep: dict, path: str) -> None:
  """Writes the figure to path: steps per regime and policy (bars with CIs), and the sweep."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(1, 2, figsize=(12, 4))
  regs = [r for r in REGIMES if r in table]
  names = list(table["all"])
  w = 0.8 / len(names)
  for i, n in enumerate(names):
    m = [table[r][n]["steps"] for r in regs]
    err = np.array([[table[r][n]["steps"] - table[r][n]["ci"][0],
                     table[r][n]["ci"][1] - table[r][n]["steps"]] for r in regs]).T
    ax[0].bar(np.arange(len(regs)) + i * w, m, w, yerr=err, label=n)
  ax[0].set_xticks(np.arange(len(regs)) + 0.4 - w / 2)
  ax[0].set_xticklabels(regs)
  ax[0].set_ylabel("decision steps to finish the plan")
  ax[0].legend(fontsize=8)
  ax[0].set_title("BallastNet v1 (ring14), paired episodes")
  _sweep_axis(ax[1], sweep)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
