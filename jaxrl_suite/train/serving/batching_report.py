"""The batching study's markdown report and figure.

  clip_line(clip) -> str        per-trace clipping to the serving model's context
  markdown(c, out, summary, ratios, clip, name) -> str
      the setup paragraph, then per (trace, mode) the results table, the choices per load and
      the tuned knobs, then the display ratios and the figure link (name.png).
  plot(c, out, summary, path) -> the figure's file name
      goodput vs load per (trace, mode) with CIs, and every mode's learning curves.

Inputs: out {(trace, mode): batching_study.run_mode's dict with "best_rl"/"best_h" {load:
Selection}}, summary {"trace:mode:policy@load": {metric: [mean, lo, hi]}}, ratios {key: (ratio,
lo, hi)}, clip {trace: batching_study.load_trace's clip entry}. The verdict table and details
are the script's (jaxrl_suite.repro), not part of this text.
"""

from __future__ import annotations

import os

from jaxrl_suite.core import plotting
from jaxrl_suite.envs.serving import protocol, replay
from jaxrl_suite.train.serving import figures, training


def clip_line(clip) -> str:
  """Per-trace clipping to the serving model's context (prompt left-truncated to fit)."""
  return ("Context clipping (output <= 2048, prompt left-truncated to the model's context - "
          "output): " + "; ".join(
              f"{t} ({v['model']}, {v['max_model_len']:,} tokens): " + ", ".join(
                  f"{part} {v[part]['clipped_share']:.1%} of {v[part]['requests']} requests "
                  f"clipped ({v[part]['prompt_tokens_removed_share']:.1%} of prompt tokens "
                  "removed)" for part in ("train part", "evaluation part"))
              for t, v in clip.items()) + ".")


def _episodes(c) -> str:
  """What one evaluation episode is (steady-state replay or a burst on an empty GPU)."""
  w = replay.window_of(c)
  if w or c.warmup_frac > 0:
    return (f"steady-state replays of {c.eval_table} consecutive requests (continuous mode: "
            f"an engine window of {w} requests in flight), the first {c.warmup_frac:.0%} "
            "excluded from the metrics"
            + (", each replay rescaled to offer the same mean rate (load x capacity; the "
               "trace's burst shape inside it kept)" if c.rate_per_window else ""))
  return f"windows of {c.eval_table} requests arriving at an empty GPU"


def _setup(c, clip) -> str:
  """The setup paragraph: GPU, SLOs, split, loads, metrics, batching modes, RL evaluation."""
  return (
      f"One GPU ({c.gpu.split('-')[0]}), SLO TTFT <= {c.slo_ttft} s (per trace where set: "
      + ", ".join(f"{t} {v['slo_ttft']} s" for t, v in clip.items()) +
      f") and TPOT <= {c.slo_tpot} s. Each trace is "
      "served by a model whose context holds it (cost_model.TRACE_MODELS). Tuned/trained on the "
      f"early {c.train_frac:.0%} of each trace, evaluated on the later part: "
      f"{c.n_eval_windows} windows, {_episodes(c)} (fewer where the evaluation part holds fewer "
      f"disjoint windows: see each section); {c.num_seeds} seeds. Load = fraction of each "
      "mode's capacity (how it was measured is given per section). Goodput = requests meeting "
      "both SLOs / offered window (first measured to last arrival, DistServe); throughput = "
      "completions inside that window / the same window (the departure rate under load). "
      "Static mode: request-level batches, max-length KV per slot, "
      "padded decode, tokens streamed as generated (a member is complete when its last token "
      "leaves, not at the batch end); continuous mode: vLLM-like iteration-level batching, the "
      "action is max_num_seqs. RL policies are evaluated "
      + " and ".join({"sampled": "with sampled actions (as trained)",
                      "greedy": "greedily (argmax; '-greedy' rows)"}[m] for m in c.rl_modes)
      + ". The best RL variant (algorithm and action mode) and the best baseline family "
      "per load are chosen on the training windows. B is the dispatch size "
      "(batch size) of each static family: idle-only dispatches up to B queued requests "
      "whenever the GPU is idle.")


def _section(c, trace, mode, o, summary) -> list[str]:
  """One (trace, mode): heading with budgets, SLO and capacity, table, choices, knobs."""
  steps = lambda a: int(c.continuous_timesteps if mode == "continuous" else c[a].total_timesteps)
  return [f"## {trace}, {mode} batching ({o['model']}; replays of {o['replay']} requests; "
          f"capacity {o['capacity']:.3f} req/s; "
          f"baseline grid evaluations {o['n_evals']}; RL "
          + ", ".join(f"{a} {steps(a)} env steps x {c.num_seeds} seeds ({t:.0f} s)"
                      for a, t in o["train_time"].items()) + ")", "",
          f"SLO: TTFT <= {o['slo'][0]} s, TPOT <= {o['slo'][1]} s. Capacity: "
          f"{o['capacity_how']}.", "",
          *protocol.results_rows(summary, o["families"] + o["learned"], c.loads,
                                 f"{trace}:{mode}:"),
          "", "Best per load (training windows): " + ", ".join(
              f"{ld}: {o['best_rl'][ld].choice} / {o['best_h'][ld].choice}"
              for ld in c.loads), "",
          "Tuned knobs: " + protocol.knob_line(o["tuned"]), ""]


def markdown(c, out, summary, ratios, clip, name: str) -> str:
  """The report (module docstring), without the verdicts."""
  lines = [_setup(c, clip), "", protocol.iteration_cost_line(c), "", clip_line(clip), ""]
  for (trace, mode), o in out.items():
    lines += _section(c, trace, mode, o, summary)
  lines += ["## Ratios (best RL / baseline, paired over seeds)", "",
            *protocol.ratio_rows(ratios), "", f"![batching]({name}.png)"]
  return "\n".join(lines)


def plot(c, out, summary, path: str) -> str:
  """Goodput vs load per (trace, mode) and the learning curves; saves `path`, returns its
  file name."""
  plt = plotting.pyplot()
  n = len(out)
  fig, axes = plt.subplots(1, n + 1, figsize=(4.5 * (n + 1), 4), squeeze=False)
  axes = axes[0]
  for ax, ((trace, mode), o) in zip(axes, out.items()):
    for p in o["families"] + o["learned"]:
      y = [summary[f"{trace}:{mode}:{p}@{ld}"]["goodput"] for ld in c.loads]
      plotting.errorbar_ci(ax, c.loads, y, fmt="-o" if p in training.ALGOS else "--.", label=p)
    ax.set_title(f"{trace}, {mode}", fontsize=9)
    ax.set_xlabel("load (fraction of capacity)")
    ax.set_ylabel("goodput at SLO (req/s)")
    ax.legend(fontsize=6)
  for (trace, mode), o in out.items():
    figures.plot_curves(axes[-1], o["curves"], f"{trace}:{mode}:")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  plotting.save_figure(fig, path, dpi=80)
  return os.path.basename(path)
