"""Reproduction: RL batching on one GPU vs tuned static batching (ServingBatch-v0).

Claim tested (arXiv:2607.05272 abstract): on a single GPU a tuned static batch size is
near-optimal and RL (REINFORCE, PPO) gains only +0.1% to +1.0%. Our simulator is token-level
(Llama-2-7B on an A100, cost_model.py); static mode reserves max-length KV per slot and pads
decode to the longest member; continuous mode is vLLM-like and the agent sets max_num_seqs.
Baselines (static B, timeout, idle-only, constant cap) are grid-tuned on the early 60% of the
Azure conv trace; RL trains on the same part; everything is evaluated on the later 40%.
The pipeline is `experiments/serving_common.py`.

  python -m experiments.serving_batching [--quick] [--eval_trace PATH] [--config.x=...]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app

from experiments import serving_common as common
from jaxrl_suite.core import results
from jaxrl_suite.envs.serving import batching, harness, heuristics

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


def run_mode(c, mode, train_tr, test_tr, workdir, seeds, reuse=False):
  t0 = time.time()
  slo = (c.slo_ttft, c.slo_tpot)
  kw = dict(gpu=c.gpu, train_frac=None, max_batched_tokens=c.max_batched_tokens,
            pred_acc=c.pred_acc, slo_ttft=c.slo_ttft, slo_tpot=c.slo_tpot, wait_dt=c.wait_dt,
            decision_dt=c.decision_dt)
  if mode == "continuous":
    kw.update(max_events=c.max_events, window=common.window_of(c))
  env_e, p_train, p_test, key, tune_starts, test_starts = common.eval_setup(
      c, lambda **k: batching.make_batching(mode, **k), train_tr, test_tr, **kw)
  net_fn, template = common.net_policy(c, env_e, p_train)
  grids, heur, n_heur = _baselines(mode, template)
  ev = harness.Evaluator(env_e, harness.universal_policy(heur, n_heur, net_fn), c.max_eval_steps,
                         c.eval_lanes, common.warmup_of(c))
  rl_pp = lambda net: harness.with_net(next(iter(grids.values()))[0], template, net,
                                       which=n_heur)

  # 1. Saturation capacity of this mode: best completion rate (requests / makespan) of the
  # max-batch baselines when the window arrives at 8x the trace rate. (An SLO capacity is not
  # usable here: request-level static batching misses the TPOT/TTFT SLO for >10% of requests
  # even at 0.1 req/s on this trace, so loads are set by throughput.)
  cands = ([harness.with_net(heuristics.static_params("idle_only", {"b_idx": i}), template)
            for i in (8, 11)] if mode == "static" else grids["fixed_cap"][-3:])
  g = ev.grid(cands, p_train, tune_starts, [8.0], key, slo)
  capacity = max(m["throughput"] for m in g[:, 0])
  base_scale = capacity / train_tr.rate
  scales = {ld: ld * base_scale for ld in c.loads}
  print(f"[{mode}] capacity {capacity:.3f} req/s; trace rate {train_tr.rate:.2f} "
        f"({time.time() - t0:.0f} s)", flush=True)

  # 2. Tune every family at every load on training windows (one batched call).
  tuned, tune_score, n_evals = common.tune(ev, grids, p_train, tune_starts, scales, key, slo)
  print(f"[{mode}] tuned {n_evals} window evaluations ({time.time() - t0:.0f} s)", flush=True)

  # 3. RL across loads (load drawn per episode).
  env_rl, p_rl = batching.make_batching(mode, table_size=c.train_table, trace=train_tr,
                                        rate_scale=base_scale,
                                        rate_mults=tuple(float(x) for x in c.loads), **kw)
  budget = {a: (int(c.continuous_timesteps) if mode == "continuous"
                else int(c[a].total_timesteps)) for a in c.algos}
  learned, curves, train_time = common.learned_policies(
      c, env_rl, p_rl, seeds, os.path.join(workdir, f"policies_{mode}.pkl"), budget, reuse,
      f"[{mode}]")
  learned = common.with_modes(c, learned)

  # 4. RL variant chosen on training windows; everything evaluated on the unseen part.
  rl_train = None if len(learned) < 2 else common.evaluate_table(
      ev, tuned, [], learned, rl_pp, p_train, tune_starts[:c.n_select_windows], scales, seeds, slo)
  table = common.evaluate_table(ev, tuned, list(grids), learned, rl_pp, p_test, test_starts,
                                scales, seeds, slo)
  print(f"[{mode}] evaluated ({time.time() - t0:.0f} s)", flush=True)
  return {"table": table, "tuned": tuned, "tune_score": tune_score, "capacity": capacity,
          "scales": scales, "curves": curves, "train_time": train_time, "n_evals": n_evals,
          "families": list(grids), "learned": list(learned), "rl_train": rl_train}


def run(c, quick: bool, workdir: str, eval_trace: str | None = None,
        reuse: bool = False) -> dict:
  t0 = time.time()
  common.config_module(NAME).validate(c)
  os.makedirs(workdir, exist_ok=True)
  train_tr, test_tr = common.load_traces(c, eval_trace)
  clip = {"train part": common.clip_stats(train_tr), "evaluation part": common.clip_stats(test_tr)}
  seeds = list(range(c.seed, c.seed + c.num_seeds))
  out = {m: run_mode(c, m, train_tr, test_tr, workdir, seeds, bool(eval_trace or reuse))
         for m in c.modes}

  claims, ratios, summary = [], {}, {}
  for mode, o in out.items():
    tab = o["table"]
    for p in o["families"] + o["learned"]:
      for ld in c.loads:
        summary[f"{mode}:{p}@{ld}"] = harness.summarize(tab[(p, ld)])
    o["best_h"], o["best_rl"] = {}, {}
    for ld in c.loads:
      # Both sides of every comparison are chosen on TRAINING windows: the RL algorithm by its
      # goodput there, the baseline family by its tuning score.
      best_rl = common.pick_rl(o["rl_train"], o["learned"], ld)
      best_h = max(o["families"], key=lambda f: o["tune_score"][(f, ld)])
      o["best_h"][ld], o["best_rl"][ld] = best_h, best_rl
      for base in o["families"]:
        for metric in ("goodput", "throughput"):
          ratios[f"{mode}:{best_rl}/{base}@{ld}:{metric}"] = common.paired_ratio(
              tab, best_rl, base, ld, metric)
  for mode, o in out.items():
    rs = {ld: ratios[f"{mode}:{o['best_rl'][ld]}/{o['best_h'][ld]}@{ld}:goodput"]
          for ld in c.loads}
    worst = max(c.loads, key=lambda ld: abs(rs[ld][0] - 1.0))
    r = rs[worst]
    verdicts = [common.within_verdict(v) for v in rs.values()]
    verdict = ("reproduced" if all(v == "reproduced" for v in verdicts) else
               "contradicted" if "contradicted" in verdicts else "partly reproduced")
    # Context, not the verdict: against the family that is best on the EVALUATION windows (an
    # upper bound for the heuristic side, which no practitioner could pick in advance).
    hind = {ld: ratios[f"{mode}:{o['best_rl'][ld]}/"
                       f"{max(o['families'], key=lambda f: common.mean_of(o['table'], f, ld))}"
                       f"@{ld}:goodput"] for ld in c.loads}
    o["hindsight"] = hind
    worst_h = max(c.loads, key=lambda ld: abs(hind[ld][0] - 1.0))
    what = ("tuned static batching (best of static B / timeout / idle-only per load)"
            if mode == "static" else "a tuned constant max_num_seqs (continuous batching)")
    claims.append(results.claim(
        f"1 GPU, {mode} batching: RL within ~1% of {what}; RL and family chosen on training "
        "windows; goodput at SLO", "+0.1% to +1.0%" if mode == "static" else
        "(no paper figure; RL ~ tuned heuristic expected)",
        f"vs the family best on evaluation windows (hindsight, context): "
        f"{(hind[worst_h][0] - 1) * 100:+.1f}% [{(hind[worst_h][1] - 1) * 100:+.1f}, "
        f"{(hind[worst_h][2] - 1) * 100:+.1f}] (load {worst_h}); vs the family chosen on training "
        f"windows: {(r[0] - 1) * 100:+.1f}% (load {worst}, largest deviation)", verdict,
        ci95=[(r[1] - 1) * 100, (r[2] - 1) * 100],
        detail="; ".join(f"load {ld}: {o['best_rl'][ld]} vs {o['best_h'][ld]} "
                         f"{(v[0] - 1) * 100:+.1f}% [{(v[1] - 1) * 100:+.1f}, "
                         f"{(v[2] - 1) * 100:+.1f}]" for ld, v in rs.items())
        + ". Against the family best on the evaluation windows (hindsight, context only): "
        + "; ".join(f"load {ld}: {(v[0] - 1) * 100:+.1f}% [{(v[1] - 1) * 100:+.1f}, "
                    f"{(v[2] - 1) * 100:+.1f}]" for ld, v in hind.items())
        + ". 'partly reproduced' = the heuristic is not beaten but RL falls more than 1% short "
        "at some load; 'contradicted' = RL better by more than 1% (CI above) at some load."))
  md = _markdown(c, out, summary, ratios, clip) + "\n\n## Verdict details\n\n" + "\n".join(
      f"- {cl['claim']}: {cl['detail']}" for cl in claims) + "\n"
  plot = _plot(c, out, summary, results.figure_path(NAME, "quick" if quick else "full"))
  payload = {"summary": summary, "ratios": {k: list(v) for k, v in ratios.items()},
             "capacity_rps": {m: o["capacity"] for m, o in out.items()},
             "rate_scales": {m: {str(k): v for k, v in o["scales"].items()}
                             for m, o in out.items()},
             "tuned": {k: v for m, o in out.items()
                       for k, v in common.tuned_payload(o["tuned"], f"{m}:").items()},
             "best_rl_by_training": {m: o["best_rl"] for m, o in out.items()},
             "best_heuristic_by_training": {m: o["best_h"] for m, o in out.items()},
             "learning_curves": {m: o["curves"] for m, o in out.items()},
             "train_time_s": {m: o["train_time"] for m, o in out.items()},
             "baseline_tuning_evals": {m: o["n_evals"] for m, o in out.items()},
             "clipping": clip,
             "eval_trace": eval_trace or f"{c.trace}[late {1 - c.train_frac:.0%}]",
             "plot": plot}
  name = NAME if not eval_trace else f"{NAME}_eval"
  results.write_results(name, mode="quick" if quick else "full", config=c, seeds=seeds,
                        claims=claims, wall_time_s=time.time() - t0, payload=payload,
                        markdown=md)
  print(results.verdict_table(claims))
  return {"claims": claims, "summary": summary}


def _markdown(c, out, summary, ratios, clip):
  lines = [
      f"One GPU ({c.gpu}, Llama-2-7B), SLO TTFT <= {c.slo_ttft} s and TPOT <= {c.slo_tpot} s. "
      f"Tuned/trained on the early {c.train_frac:.0%} of `{c.trace}`, evaluated on the later "
      f"part: {c.n_eval_windows} windows of {c.eval_table} requests, {c.num_seeds} seeds. Load = "
      "fraction of each mode's saturation capacity (best completion rate of the max-batch "
      "baselines with arrivals at 8x the trace rate). Throughput = completed requests / "
      "makespan; goodput = SLO-met requests / arrival window. Static mode: request-level "
      "batches, max-length KV per slot, padded decode; continuous mode: vLLM-like "
      "iteration-level batching, the action is max_num_seqs. RL policies are evaluated "
      + " and ".join({"sampled": "with sampled actions (as trained)",
                      "greedy": "greedily (argmax; '-greedy' rows)"}[m] for m in c.rl_modes)
      + ". The best RL variant (algorithm and action mode) and the best baseline family "
      "per load are chosen on the training windows. B is the dispatch size "
      "(batch size) of each static family: idle-only dispatches up to B queued requests "
      "whenever the GPU is idle.", "", common.clip_line(clip), ""]
  for mode, o in out.items():
    steps = lambda a: int(c.continuous_timesteps if mode == "continuous" else c[a].total_timesteps)
    lines += [f"## {mode} batching (capacity {o['capacity']:.3f} req/s; baseline grid "
              f"evaluations {o['n_evals']}; RL "
              + ", ".join(f"{a} {steps(a)} env steps x {c.num_seeds} seeds ({t:.0f} s)"
                          for a, t in o["train_time"].items()) + ")", "",
              *common.results_rows(summary, o["families"] + o["learned"], c.loads, f"{mode}:"),
              "", "Best per load (training windows): " + ", ".join(
                  f"{ld}: {o['best_rl'][ld]} / {o['best_h'][ld]}" for ld in c.loads), "",
              "Tuned knobs: " + common.knob_line(o["tuned"]), ""]
  lines += ["## Ratios (best RL / baseline, paired over seeds)", "",
            *common.ratio_rows(ratios), "", f"![batching]({NAME}.png)"]
  return "\n".join(lines)


def _plot(c, out, summary, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, len(out) + 1, figsize=(5 * (len(out) + 1), 4))
  for ax, (mode, o) in zip(axes, out.items()):
    for p in o["families"] + o["learned"]:
      y = [summary[f"{mode}:{p}@{ld}"]["goodput"] for ld in c.loads]
      ax.plot(c.loads, [v[0] for v in y], "-o" if p in common.ALGOS else "--.", label=p)
      ax.fill_between(c.loads, [v[1] for v in y], [v[2] for v in y], alpha=0.15)
    ax.set_title(f"{mode} batching")
    ax.set_xlabel("load (fraction of capacity)")
    ax.set_ylabel("goodput at SLO (req/s)")
    ax.legend(fontsize=7)
  for mode, o in out.items():
    common.plot_curves(axes[-1], o["curves"], f"{mode}:")
  fig.tight_layout()
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fig.savefig(path, dpi=90)
  plt.close(fig)
  return os.path.basename(path)


def main(argv):
  del argv
  common.main(NAME, run, FLAGS)


if __name__ == "__main__":
  app.run(main)
