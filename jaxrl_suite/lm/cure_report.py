"""Descriptive statistics, tables and figure of the CuRe study (no claim is judged here).

Inputs are `cure_study.run_rewards`'s runs ({reward: {"curves": {metric: [S, n_eval]}, ...}},
seed i of every run paired), `cure_noise.noise_check`'s record, `cure_scorers`' quality dict and
steps [n_eval] (`cure_study.eval_steps`). `peak_and_fall` and `summarise` return per-seed
statistics with 95% CIs ((mean, lo, hi) from core.stats.mean_ci), `markdown` the report text,
`plot` writes a PNG. The verdicts on the registered claims come from jaxrl_suite.repro in the
script.
"""

from __future__ import annotations

import numpy as np

from jaxrl_suite.core import plotting
from jaxrl_suite.core import stats
from jaxrl_suite.lm.cure_study import noisy_name


def fall(f1: np.ndarray) -> np.ndarray:
  """Per seed, the fall of true F1 from its peak: max over eval points minus the final value.
  f1 [S, n_eval] -> [S]."""
  return f1.max(1) - f1[:, -1]


def late_index(n_eval: int) -> int:
  """The eval point two thirds of the way in (the start of the late change)."""
  return int(round((n_eval - 1) * 2 / 3))


def peak_and_fall(f1: np.ndarray, steps: np.ndarray) -> dict:
  """f1 [S, n_eval]: per-seed peak value / step and fall (peak - final); mean-curve peak step;
  `late_change`: final minus the value two thirds of the way in (a CI containing 0 or below it
  says the curve had flattened or turned by the end of the budget)."""
  peak = f1.max(1)
  drop = peak - f1[:, -1]
  j = late_index(f1.shape[1])
  return {"peak": stats.mean_ci(peak), "fall": stats.mean_ci(drop),
          "final": stats.mean_ci(f1[:, -1]), "start": stats.mean_ci(f1[:, 0]),
          "peak_step_mean_curve": int(steps[int(np.argmax(f1.mean(0)))]),
          "peak_step_per_seed": [int(steps[i]) for i in f1.argmax(1)],
          "fall_per_seed": drop.tolist(),
          "late_change": stats.mean_ci(f1[:, -1] - f1[:, j]), "late_from_step": int(steps[j])}


def fmt(ci, digits: int = 3) -> str:
  """'m [lo, hi]' of a (mean, lo, hi) triple."""
  m, lo, hi = ci
  return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _change(c: dict, metric: str):
  """Mean [95% CI] over seeds of metric's end minus start."""
  return stats.mean_ci(c[metric][:, -1] - c[metric][:, 0])


def summarise(config, runs: dict, noise: dict, steps: np.ndarray, holistic) -> tuple:
  """(per-reward peak/fall summaries, paired claim-F1 vs each holistic reward in `holistic`
  that was run, noisy-verifier GRPO changes by eps) for the tables and the record's payload.
  "hacked": the holistic run's fall from its peak has a 95% CI above 0."""
  cl = runs["claim_f1"]["curves"]
  summ = {k: peak_and_fall(v["curves"]["f1"], steps) for k, v in runs.items()}
  per = {}
  for h in [h for h in holistic if h in runs]:
    hc = runs[h]["curves"]
    per[h] = {"fall_diff": stats.mean_ci(fall(hc["f1"]) - fall(cl["f1"])),
              "final_diff": stats.mean_ci(cl["f1"][:, -1] - hc["f1"][:, -1]),
              "hacked": stats.mean_ci(fall(hc["f1"]))[1] > 0}
  ngrpo = {}
  for e in config.noise_eps_grpo:
    k = noisy_name(e)
    if k in runs:
      c = runs[k]["curves"]
      ngrpo[float(e)] = {"false_claims_change": _change(c, "false_claims"),
                         "precision_change": _change(c, "precision"),
                         "above_threshold": float(e) > noise["threshold"]}
  return summ, per, ngrpo


def _intro(config, scorer_info: dict) -> list:
  """The setup paragraph and the scorers' held-out quality."""
  s = scorer_info
  return [f"SceneCap: {config.env.num_entities} entities, {config.env.num_frames} frames, "
          f"{config.env.max_claims} claim slots. GRPO: {config.grpo_steps} steps x "
          f"{config.grpo_prompts} scenes x {config.grpo_group} captions, lr {config.grpo_lr}, KL "
          f"coef {config.grpo_kl}, {config.num_seeds} seeds, identical for every reward. "
          f"Evaluation every {config.eval_every} steps on {config.eval_scenes} fixed held-out "
          "scenes (temperature-1 samples). Means [95% CI] over seeds.", "",
          f"Learned scorers, frozen during GRPO (label budget {s['label_budget']} "
          f"labels each, same size {config.scorer.d_model}d x {config.scorer.num_layers} layers "
          f"and {config.scorer_steps} steps each), held out: verifier accuracy "
          f"{s['verifier_accuracy']:.3f} (majority {s['verifier_majority']:.3f},"
          f" visible-evidence ceiling {s['verifier_visible_ceiling']:.3f}); holistic RM "
          f"MAE {s['rm_mae']:.3f}, correlation with true F1 {s['rm_corr']:.3f};"
          f" QA reader accuracy {s['reader_accuracy']:.3f} (majority answer "
          f"{s['reader_majority']:.3f}).", ""]


def _end(c: dict, metric: str, digits: int = 3) -> str:
  return fmt(stats.mean_ci(c[metric][:, -1]), digits)


def _f1_table(runs: dict, summ: dict, steps: np.ndarray) -> list:
  """One row per reward: proxy, true F1 start / peak / final / fall, late change, end state."""
  md = ["### True F1 (exact scene-graph evaluator) per training reward", "",
        "| reward | proxy start -> end | true F1 start | peak | peak step (mean curve) | final "
        f"| fall after peak | change from step {int(steps[late_index(len(steps))])}"
        " to the end | precision end | recall end | claims end | length end | sqrt KL end |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for k, r in runs.items():
    c, s = r["curves"], summ[k]
    px = c["proxy_" + k]
    md.append(f"| {k} | {px[:, 0].mean():.3f} -> {px[:, -1].mean():.3f} | {s['start'][0]:.3f} | "
              f"{fmt(s['peak'])} | {s['peak_step_mean_curve']} | {fmt(s['final'])} | "
              f"{fmt(s['fall'])} | {fmt(s['late_change'])} | {_end(c, 'precision')} | "
              f"{_end(c, 'recall')} | {_end(c, 'claims', 2)} | {_end(c, 'length', 1)} | "
              f"{_end(c, 'sqrt_kl', 2)} |")
  return md


def _curves(runs: dict, steps: np.ndarray) -> list:
  """Mean curves over seeds, every eval point, one bullet per reward."""
  md = ["", "### Curves (mean over seeds, every eval point)", ""]
  for k, r in runs.items():
    c = r["curves"]
    md.append(f"- **{k}** steps {steps.tolist()}: true F1 "
              f"{np.round(c['f1'].mean(0), 3).tolist()}; proxy "
              f"{np.round(c['proxy_' + k].mean(0), 3).tolist()}; claims "
              f"{np.round(c['claims'].mean(0), 2).tolist()}; sqrt KL "
              f"{np.round(c['sqrt_kl'].mean(0), 2).tolist()}")
  return md


def _noise_table(noise: dict) -> list:
  """Analytic vs measured precision change per eps."""
  md = ["", "### Verifier-noise prediction", "",
        f"Exact verifier with false-reject rate r = {noise['reject']}, false-accept rate eps; "
        f"one false claim appended to the base captioner's captions (with a free slot). "
        f"Predicted threshold eps* = 1 - r = {noise['threshold']:.2f}.", "",
        "| eps | analytic E[dP] | measured E[dP] [95% CI] | verified precision before | "
        "captions |", "|---|---|---|---|---|"]
  for r_ in noise["rows"]:
    md.append(f"| {r_['eps']:g} | {r_['analytic']:+.4f} | {r_['measured']:+.4f} "
              f"[{r_['measured_ci'][0]:+.4f}, {r_['measured_ci'][1]:+.4f}] | "
              f"{r_['verified_precision']:.3f} | {r_['captions']} |")
  return md


def bullets(title: str, items) -> list:
  """Markdown lines of a titled bullet list; nothing when `items` is empty."""
  return ["", title, ""] + [f"- {i}" for i in items] if items else []


def markdown(config, runs, summ, per, ngrpo, noise, scorer_info, steps) -> str:
  """The report: setup and scorers, the true-F1 table, curves, the noise prediction, the noisy
  GRPO runs and the paired differences (summ, per, ngrpo from `summarise`)."""
  md = _intro(config, scorer_info) + _f1_table(runs, summ, steps) + _curves(runs, steps)
  md += _noise_table(noise)
  md += bullets("GRPO under claim-F1 with the noisy verifier (start -> end change):",
                [f"eps {e:g} ({'above' if v['above_threshold'] else 'below'} threshold): false "
                 f"claims {fmt(v['false_claims_change'], 2)}, true precision "
                 f"{fmt(v['precision_change'])}" for e, v in ngrpo.items()])
  md += bullets("### Paired differences, claim-F1 minus each holistic proxy",
                [f"{h}: final true F1 {fmt(v['final_diff'])}; fall after peak (holistic - "
                 f"claim) {fmt(v['fall_diff'])}" for h, v in per.items()])
  return "\n".join(md)


_PANELS = [("f1", "true F1 (exact)", "step"), ("proxy", "proxy reward", "step"),
           ("f1", "true F1 vs sqrt KL", "sqrt_kl"), ("claims", "claims per caption", "step"),
           ("recall", "true recall", "step")]


def _curve_panel(a, runs: dict, steps: np.ndarray, metric: str, title: str, xaxis: str):
  """Mean curve and 95% band of `metric` per reward against the step or sqrt KL."""
  for k, r in runs.items():
    c = r["curves"]
    y = c["proxy_" + k] if metric == "proxy" else c[metric]
    m = y.mean(0)
    half = np.array([stats.mean_ci(y[:, j])[2] - m[j] for j in range(y.shape[1])])
    x = steps if xaxis == "step" else c["sqrt_kl"].mean(0)
    a.plot(x, m, marker=".", label=k)
    a.fill_between(x, m - half, m + half, alpha=0.2)
  a.set_title(title)
  a.set_xlabel("GRPO step" if xaxis == "step" else "sqrt KL to the start")


def _noise_panel(a, noise: dict):
  """Analytic line and measured points (95% CI) of the precision change against eps."""
  rows = noise["rows"]
  eps = [r_["eps"] for r_ in rows]
  a.plot(eps, [r_["analytic"] for r_ in rows], "k-", label="analytic")
  a.errorbar(eps, [r_["measured"] for r_ in rows],
             yerr=[[r_["measured"] - r_["measured_ci"][0] for r_ in rows],
                   [r_["measured_ci"][1] - r_["measured"] for r_ in rows]],
             fmt="o", label="measured")
  a.axhline(0, color="grey", lw=0.5)
  a.axvline(noise["threshold"], color="r", ls="--", label="1 - r")
  a.set_title("E[change of verified precision] from one unverifiable claim")
  a.set_xlabel("false-accept rate eps")
  a.legend(fontsize=7)


def plot(runs: dict, noise: dict, steps: np.ndarray, path: str) -> None:
  """2 x 3 figure: five curve panels (_PANELS) and the noise prediction, saved to `path`."""
  plt = plotting.pyplot()
  fig, ax = plt.subplots(2, 3, figsize=(16, 9))
  for a, (metric, title, xaxis) in zip(ax.flat, _PANELS):
    _curve_panel(a, runs, steps, metric, title, xaxis)
  ax[0, 0].legend(fontsize=7)
  _noise_panel(ax[1, 2], noise)
  plotting.save_figure(fig, path, dpi=110)
