"""Reproduction: RL batching on one GPU vs tuned static batching (ServingBatch-v0).

Claim tested (arXiv:2607.05272 abstract): on a single GPU a tuned static batch size is
near-optimal and RL (REINFORCE, PPO) gains only +0.1% to +1.0%. Our simulator is token-level
(cost_model.py); static mode reserves max-length KV per slot, pads decode to the longest member
and streams each member's tokens as they are generated; continuous mode is vLLM-like and the
agent sets max_num_seqs. Each trace in `config.traces` is served by a model whose context holds
it (`cost_model.TRACE_MODELS`: Llama-2-7B for Azure conv / code, Llama-3.1-8B with 128k context
for Mooncake) on one A100; clipping is reported per trace. Baselines (static B, timeout,
idle-only, constant cap) are grid-tuned on the early 60% of each trace; RL trains on the same
part; everything is evaluated on the later 40%. Full mode runs the steady-state protocol
(configs/serving_batching.py: long replays, engine window, warm-up excluded, loads as fractions
of the SLO capacity of the best tuned heuristic). The pipeline is the library's
(envs/serving/protocol.py, envs/serving/replay.py, jaxrl_suite/train/serving/training.py).

  python -m experiments.serving_batching [--quick] [--eval_trace PATH] [--config.x=...]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app
import numpy as np

from experiments import serving_common as common
from jaxrl_suite.core import plotting, results
from jaxrl_suite.envs.serving import (batching, cost_model, harness, heuristics, protocol,
                                      replay, traces)
from jaxrl_suite.repro import Claim, claim_record, selection
from jaxrl_suite.train.serving import figures, training

NAME = "serving_batching"
FLAGS = common.define_flags(NAME)


def _baselines(mode, template):
  """({family: [universal params]}, heuristic policy, number of heuristic branches)."""
  wrap = lambda d: harness.with_net(d, template)
  if mode == "static":
    grids = heuristics.batching_grids()
    return ({f: [wrap(heuristics.static_params(f, g)) for g in grid] for f, grid in grids.items()},
            heuristics.static_switch, len(heuristics.STATIC_FAMILIES))
  grid = heuristics.cap_grid()["fixed_cap"]
  return {"fixed_cap": [wrap(heuristics.cap_params(g)) for g in grid]}, heuristics.fixed_cap, 1


def model_of(c, trace: str) -> tuple[str, int]:
  """(model name, max_model_len) serving `trace` on config.gpu: cost_model.TRACE_MODELS (a
  context that holds the trace), capped at the GPU's KV capacity."""
  model = cost_model.TRACE_MODELS.get(trace, cost_model.LLAMA2_7B.name)
  return model, cost_model.max_model_len_of(cost_model.spec_for(c.gpu, model))


def capacity(c, mode, ev, grids, template, p_train, starts, key, slo, train_tr):
  """(capacity req/s, its rate scale, how it was measured).

  config.capacity == "slo" (steady-state protocol): the SLO capacity of the best tuned
  heuristic, the largest rate 2^(i/4) x the trace rate at which the best point of the mode's
  whole tuning grid (so every family tuned at that rate) meets the SLO for
  config.capacity_target of the requests on long training replays (`harness.slo_capacity_best`,
  as `protocol.best_heuristic_capacity`, with this config's probe range). If no grid point
  meets it even at the lowest probed rate, the saturation capacity is used and the record says
  so. "saturation" (the burst protocol): the best completion rate (finished / makespan) of the
  max-batch baselines with arrivals at 8x the trace rate."""
  why = ""
  if c.capacity == "slo":
    flat = [(f, g) for f, gs in grids.items() for g in gs]
    lo = int(c.capacity_lo)
    cap, scale, i = harness.slo_capacity_best(ev, [g for _, g in flat], p_train, starts, key,
                                              slo, train_tr.rate, float(c.capacity_target),
                                              lo=lo, hi=int(c.capacity_hi))
    if i >= 0:
      f, g = flat[i]
      who = f"{f} ({heuristics.describe(f, g)})" if heuristics.FAMILY_KNOBS.get(f) else f
      return cap, scale, (f"SLO capacity: largest rate 2^(i/4) x the trace rate at which the best "
                          f"tuned {mode} heuristic ({who}) meets the SLO for "
                          f"{float(c.capacity_target):.0%} of requests on {len(starts)} training "
                          "replays" + (" (each replay offering that mean rate)"
                                       if c.rate_per_window else ""))
    why = (f"no tuned {mode} heuristic meets the SLO for {float(c.capacity_target):.0%} of "
           f"requests even at {cap:.3f} req/s (2^({lo}/4) x the trace rate), so ")
  sat = ([harness.with_net(heuristics.static_params("idle_only", {"b_idx": i}), template)
          for i in (8, 11)] if mode == "static" else grids["fixed_cap"][-3:])
  g = ev.grid(sat, p_train, starts, [8.0], key, slo)
  cap = max(m["completion_rate"] for m in g[:, 0])
  return cap, cap / train_tr.rate, why + ("saturation capacity: best completion rate (finished / "
                                          "makespan) of the max-batch baselines at 8x the trace "
                                          "rate")


def run_mode(c, mode, trace, train_tr, test_tr, workdir, seeds, reuse=False):
  t0 = time.time()
  tag = f"[{trace} {mode}]"
  slo = (c.slo_ttft, c.slo_tpot)
  model, mml = model_of(c, trace)
  kw = dict(gpu=c.gpu, model=model, max_model_len=mml, train_frac=None,
            max_batched_tokens=c.max_batched_tokens, pred_acc=c.pred_acc, slo_ttft=c.slo_ttft,
            slo_tpot=c.slo_tpot, wait_dt=c.wait_dt, decision_dt=c.decision_dt)
  if c.rate_per_window:
    # every replay (train and evaluation part) offers the mean rate scale x the training part's
    # rate, so capacity and loads are in the req/s the replays offer (workload.py)
    kw.update(rate_per_window=True, rate_ref=float(train_tr.rate))
  if mode == "continuous":
    kw.update(max_events=c.max_events, window=replay.window_of(c))
  env_e, p_train, p_test, key, tune_starts, test_starts = replay.eval_setup(
      c, lambda **k: batching.make_batching(mode, **k), train_tr, test_tr, **kw)
  net_fn, template = training.net_policy(c, env_e, p_train)
  grids, heur, n_heur = _baselines(mode, template)
  steps = int(c.max_eval_steps if mode == "continuous" else c.max_static_steps)
  ev = harness.Evaluator(env_e, harness.universal_policy(heur, n_heur, net_fn), steps,
                         c.eval_lanes, replay.warmup_of(c))
  rl_pp = lambda net: harness.with_net(next(iter(grids.values()))[0], template, net,
                                       which=n_heur)

  # 1. Capacity of this mode on the training part (see `capacity`).
  cap, base_scale, cap_how = capacity(c, mode, ev, grids, template, p_train,
                                      tune_starts[:int(c.n_capacity_windows)], key, slo, train_tr)
  scales = {ld: ld * base_scale for ld in c.loads}
  print(f"{tag} capacity {cap:.3f} req/s ({cap_how}); trace rate {train_tr.rate:.2f} "
        f"({time.time() - t0:.0f} s)", flush=True)

  # 2. Tune every family at every load on training windows (one batched call).
  tuned, tune_score, n_evals = protocol.tune(ev, grids, p_train, tune_starts, scales, key, slo)
  print(f"{tag} tuned {n_evals} window evaluations ({time.time() - t0:.0f} s)", flush=True)

  # 3. RL across loads (load drawn per episode).
  env_rl, p_rl = batching.make_batching(mode, table_size=c.train_table, trace=train_tr,
                                        rate_scale=base_scale,
                                        rate_mults=tuple(float(x) for x in c.loads), **kw)
  budget = {a: (int(c.continuous_timesteps) if mode == "continuous"
                else int(c[a].total_timesteps)) for a in c.algos}
  ckpts, curves, train_time = training.learned_sweep(
      c, env_rl, p_rl, seeds, os.path.join(workdir, f"policies_{trace}_{mode}.npz"), budget,
      reuse, tag)
  learned = training.with_modes(c, {a: v[-1] for a, v in ckpts.items()})
  half = training.with_modes(c, {a: v[0] for a, v in ckpts.items()})

  # 4. On the validation windows (training part): the RL variant is chosen at the whole budget,
  # and the half-budget params give the last doubling (fair chance). The evaluation part is
  # used once, below.
  val = tune_starts[:c.n_select_windows]
  rl_train = protocol.evaluate_table(ev, tuned, [], learned, rl_pp, p_train, val, scales, seeds,
                                   slo)
  rl_half = protocol.evaluate_table(ev, tuned, [], half, rl_pp, p_train, val, scales, seeds, slo)
  table = protocol.evaluate_table(ev, tuned, list(grids), learned, rl_pp, p_test, test_starts,
                                scales, seeds, slo)
  print(f"{tag} evaluated ({time.time() - t0:.0f} s)", flush=True)
  return {"table": table, "tuned": tuned, "tune_score": tune_score, "capacity": cap,
          "capacity_how": cap_how, "scales": scales, "curves": curves, "train_time": train_time,
          "n_evals": n_evals, "families": list(grids), "learned": list(learned),
          "rl_train": rl_train, "rl_half": rl_half, "budget": budget, "model": model, "max_model_len": mml, "trace": trace,
          "replay": int(c.eval_table), "slo": slo}


def _claims(c, key, o, registered) -> list[dict]:
  """One row per load: the registered claim judged by jaxrl_suite.repro from the per-(seed,
  window) relative goodput differences, with both choices (training windows) and RL's last
  budget doubling (validation windows) in the record."""
  trace, mode = key
  rows = []
  for ld in c.loads:
    rl, h = o["best_rl"][ld], o["best_h"][ld]
    cid = f"serving_batching.{trace}.{mode}.within_1pct@{float(ld):g}.v1"
    rows.append(within_row(registered[cid], protocol.cells(o["table"], rl.choice, ld),
                           protocol.cells(o["table"], h.choice, ld),
                           [protocol.cells(o["rl_half"], rl.choice, ld),
                            protocol.cells(o["rl_train"], rl.choice, ld)],
                           budget_of(o, rl.choice), [rl, h]))
    ratio = protocol.paired_ratio(o["table"], rl.choice, h.choice, ld)
    rows[-1]["note"] = f"{rl.choice} vs {h.choice}; paired goodput ratio {harness.fmt(ratio)}"
  return rows


def budget_of(o, variant: str) -> int:
  """Env steps per seed of an RL variant's whole budget ("ppo-greedy" -> ppo's)."""
  return int(o["budget"][variant.split("-")[0]])


def within_row(claim, rl_cells, h_cells, sweep_cells, budget: int, selections) -> dict:
  """The claim row for "RL within the margin of the heuristic" from [S, W] goodput cells.

  rl_cells, h_cells: evaluation goodput, paired by (seed, window); sweep_cells: RL's validation
  goodput [S, W] at budget/2 and budget. Effects are in % of the heuristic's mean goodput (a
  window where either side has zero goodput is a finite cell, unlike a log-ratio), the sweep's
  scores in % of the half-budget mean, so the margin and flat_delta are % of goodput."""
  rl, h = np.asarray(rl_cells, np.float64), np.asarray(h_cells, np.float64)
  ref = float(h.mean())
  ref = ref if ref > 0 else 1.0       # no goodput at all: differences in req/s (both are 0)
  half = float(np.mean(sweep_cells[0]))
  half = half if half > 0 else 1.0
  sweep = {"scores": 100 * np.stack([np.asarray(x, np.float64) for x in sweep_cells]) / half,
           "budgets": [budget / 2, budget], "scale": "difference"}
  return claim_record(claim, 100 * (rl - h) / ref, selection=selections, sweep=sweep)


def _choose(c, o, n_seeds: int, pre: str) -> dict:
  """Per load, both sides of the comparison chosen before evaluation: the RL variant by its
  goodput on the validation windows (training part), the family by its tuning score (training
  windows); sets o["best_rl"], o["best_h"] (Selections) and returns the display ratios."""
  o["best_h"], o["best_rl"], ratios = {}, {}, {}
  for ld in c.loads:
    o["best_rl"][ld] = selection.pick_best(
        "RL variant", {v: protocol.cells(o["rl_train"], v, ld) for v in o["learned"]},
        data=f"goodput on {c.n_select_windows} training-part windows x {n_seeds} seeds, "
             f"load {ld}", split="validation")
    o["best_h"][ld] = selection.pick_best(
        "heuristic family", {f: o["tune_score"][(f, ld)] for f in o["families"]},
        data=f"tuned goodput on {c.n_tune_windows} training windows, load {ld}")
    for base in o["families"]:
      for metric in ("goodput", "throughput"):
        ratios[f"{pre}{o['best_rl'][ld].choice}/{base}@{ld}:{metric}"] = protocol.paired_ratio(
            o["table"], o["best_rl"][ld].choice, base, ld, metric)
  return ratios


def pooled_row(claim, pairs) -> dict:
  """The descriptive summary over conditions: pairs = [(RL cells [S, W], heuristic cells
  [S, W])] per (trace, mode, load). Per seed, a_s = mean_c mean_w RL / m_c and b_s = mean_c
  mean_w H / m_c with m_c the heuristic's mean goodput in condition c (a condition where it is 0
  is left out: no scale), so every condition weighs the same whatever its goodput level."""
  a, b = [], []
  for rl, h in pairs:
    m = float(np.mean(h))
    if m > 0:
      a.append(np.asarray(rl, np.float64).mean(-1) / m)
      b.append(np.asarray(h, np.float64).mean(-1) / m)
  row = claim_record(claim, np.mean(a, 0), np.mean(b, 0), method="fieller")
  row["note"] = f"{len(a)} of {len(pairs)} conditions (a heuristic with zero goodput has no scale)"
  return row


def run(c, quick: bool, workdir: str | None = None, eval_trace: str | None = None,
        reuse: bool = False) -> dict:
  t0 = time.time()
  common.config_module(NAME).validate(c)
  workdir = workdir or f"workdirs/{NAME}"
  os.makedirs(workdir, exist_ok=True)
  seeds = list(range(c.seed, c.seed + c.num_seeds))
  # --eval_trace: the policies trained on the first trace, evaluated on the given file
  names = list(c.traces[:1] if eval_trace else c.traces)
  out, clip = {}, {}
  for trace in names:
    ct = c.copy_and_resolve_references()
    ct.trace = trace
    ct.slo_ttft = float(c.slo_ttft_by_trace.get(trace, c.slo_ttft))
    train_tr, test_tr = replay.load_traces(ct, eval_trace)
    model, mml = model_of(c, trace)
    clip[trace] = {"model": model, "max_model_len": mml, "slo_ttft": ct.slo_ttft,
                   "train part": traces.clip_stats(train_tr, mml),
                   "evaluation part": traces.clip_stats(test_tr, mml)}
    fit, ct.train_table = replay.replay_length(c, len(test_tr), trace)
    ct.eval_table = fit
    clip[trace]["replay"] = int(fit)
    for m in c.modes:
      out[(trace, m)] = run_mode(ct, m, trace, train_tr, test_tr, workdir, seeds,
                                 bool(eval_trace or reuse))

  claims, ratios, summary = [], {}, {}
  for (trace, mode), o in out.items():
    tab, pre = o["table"], f"{trace}:{mode}:"
    for p in o["families"] + o["learned"]:
      for ld in c.loads:
        summary[f"{pre}{p}@{ld}"] = harness.summarize(tab[(p, ld)])
    ratios.update(_choose(c, o, len(seeds), pre))
  registered = {d["id"]: Claim.from_dict(d) for d in common.config_module(NAME).claims(c)}
  for key, o in out.items():
    claims.extend(_claims(c, key, o, registered))
  claims.append(pooled_row(registered["serving_batching.rl_vs_heuristic.pooled.v1"],
                           [(protocol.cells(o["table"], o["best_rl"][ld].choice, ld),
                             protocol.cells(o["table"], o["best_h"][ld].choice, ld))
                            for o in out.values() for ld in c.loads]))
  md = _markdown(c, out, summary, ratios, clip) + "\n\n## Verdict details\n\n" + "\n".join(
      f"- {cl['claim']}: {cl['note']}; {cl['detail']}" for cl in claims) + "\n"
  plot = _plot(c, out, summary, results.figure_path(NAME, "quick" if quick else "full"))
  k = lambda t, m: f"{t}:{m}"
  payload = {"summary": summary, "ratios": {kk: list(v) for kk, v in ratios.items()},
             "traces": names,
             "models": {t: clip[t]["model"] for t in names},
             "capacity_rps": {k(*kk): o["capacity"] for kk, o in out.items()},
             "capacity_how": {k(*kk): o["capacity_how"] for kk, o in out.items()},
             "rate_scales": {k(*kk): {str(l): v for l, v in o["scales"].items()}
                             for kk, o in out.items()},
             "tuned": {kt: v for kk, o in out.items()
                       for kt, v in protocol.tuned_payload(o["tuned"], f"{k(*kk)}:").items()},
             "best_rl_by_training": {k(*kk): {str(l): v.choice for l, v in o["best_rl"].items()}
                                     for kk, o in out.items()},
             "best_heuristic_by_training": {k(*kk): {str(l): v.choice
                                                     for l, v in o["best_h"].items()}
                                            for kk, o in out.items()},
             "learning_curves": {k(*kk): o["curves"] for kk, o in out.items()},
             "train_time_s": {k(*kk): o["train_time"] for kk, o in out.items()},
             "baseline_tuning_evals": {k(*kk): o["n_evals"] for kk, o in out.items()},
             # the first trace's (the shape of earlier records), then every trace's
             "clipping": {p: clip[names[0]][p] for p in ("train part", "evaluation part")},
             "clipping_per_trace": clip,
             "eval_trace": eval_trace or ", ".join(f"{t}[late {1 - c.train_frac:.0%}]"
                                                   for t in names),
             "plot": plot}
  name = NAME if not eval_trace else f"{NAME}_eval"
  results.write_results(name, mode="quick" if quick else "full", config=c, seeds=seeds,
                        claims=claims, wall_time_s=time.time() - t0, payload=payload,
                        markdown=md)
  print(results.verdict_table(claims))
  return {"claims": claims, "summary": summary}


def clip_line(clip) -> str:
  """Per-trace clipping to the serving model's context (prompt left-truncated to fit)."""
  return "Context clipping (output <= 2048, prompt left-truncated to the model's context - output): " + "; ".join(
      f"{t} ({v['model']}, {v['max_model_len']:,} tokens): " + ", ".join(
          f"{part} {v[part]['clipped_share']:.1%} of {v[part]['requests']} requests clipped "
          f"({v[part]['prompt_tokens_removed_share']:.1%} of prompt tokens removed)"
          for part in ("train part", "evaluation part")) for t, v in clip.items()) + "."


def _markdown(c, out, summary, ratios, clip):
  w = replay.window_of(c)
  episodes = (f"steady-state replays of {c.eval_table} consecutive requests (continuous mode: "
              f"an engine window of {w} requests in flight), the first {c.warmup_frac:.0%} "
              "excluded from the metrics"
              + (", each replay rescaled to offer the same mean rate (load x capacity; the "
                 "trace's burst shape inside it kept)" if c.rate_per_window else "")
              if w or c.warmup_frac > 0 else
              f"windows of {c.eval_table} requests arriving at an empty GPU")
  lines = [
      f"One GPU ({c.gpu.split('-')[0]}), SLO TTFT <= {c.slo_ttft} s (per trace where set: "
      + ", ".join(f"{t} {v['slo_ttft']} s" for t, v in clip.items()) +
      f") and TPOT <= {c.slo_tpot} s. Each trace is "
      "served by a model whose context holds it (cost_model.TRACE_MODELS). Tuned/trained on the "
      f"early {c.train_frac:.0%} of each trace, evaluated on the later part: "
      f"{c.n_eval_windows} windows, {episodes} (fewer where the evaluation part holds fewer "
      f"disjoint windows: see each section); {c.num_seeds} seeds. Load = fraction of each "
      "mode's capacity (how it was measured is given per section). Goodput = requests meeting "
      "both SLOs / offered window (first measured to last arrival, DistServe); throughput = "
      "completions inside that window / the same window (the departure rate under load). Static mode: request-level batches, max-length KV per slot, "
      "padded decode, tokens streamed as generated (a member is complete when its last token "
      "leaves, not at the batch end); continuous mode: vLLM-like iteration-level batching, the "
      "action is max_num_seqs. RL policies are evaluated "
      + " and ".join({"sampled": "with sampled actions (as trained)",
                      "greedy": "greedily (argmax; '-greedy' rows)"}[m] for m in c.rl_modes)
      + ". The best RL variant (algorithm and action mode) and the best baseline family "
      "per load are chosen on the training windows. B is the dispatch size "
      "(batch size) of each static family: idle-only dispatches up to B queued requests "
      "whenever the GPU is idle.", "", clip_line(clip), ""]
  for (trace, mode), o in out.items():
    steps = lambda a: int(c.continuous_timesteps if mode == "continuous" else c[a].total_timesteps)
    lines += [f"## {trace}, {mode} batching ({o['model']}; replays of {o['replay']} requests; "
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
  lines += ["## Ratios (best RL / baseline, paired over seeds)", "",
            *protocol.ratio_rows(ratios), "", f"![batching]({NAME}.png)"]
  return "\n".join(lines)


def _plot(c, out, summary, path):
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


def main(argv):
  del argv
  common.main(NAME, run, FLAGS)


if __name__ == "__main__":
  app.run(main)
