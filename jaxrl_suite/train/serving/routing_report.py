"""The routing study's markdown report.

  markdown(c, main, held, others, summary, summary_h, policies, ratios, ratios_h, best_rl,
           n_tune_evals, train_time, bc_acc, teacher, sweep_summary, gains, variants,
           eval_trace, test_tr, clip, su, rec, caps, caps_h, clone) -> str

The setup paragraphs (trace, engine, protocol, prefix cache, clusters, clipping, RL), the
results table on the claims' cluster, the display ratios, the cross-cluster table, each
policy's SLO capacity and the budget sweep. Inputs: summaries {"policy@load": {metric: [mean,
lo, hi]}} (routing_setup.summary), ratios {key: (ratio, lo, hi)} and gains (routing_tables),
capacities (protocol.policy_capacities), clusters (routing_setup.Cluster after the heuristic
stage). The verdict table is the script's (jaxrl_suite.repro), not part of this text.
"""

from __future__ import annotations

from jaxrl_suite.envs.serving import harness, heuristics, protocol, replay, routing
from jaxrl_suite.train.serving.routing_setup import Setup, checkpoint_steps, extrapolation


def markdown(c, main, held, others, summary, summary_h, policies, ratios, ratios_h, best_rl,
              n_tune_evals, train_time, bc_acc, teacher, sweep_summary, gains, variants,
              eval_trace, test_tr, clip, su, rec, caps, caps_h, clone):
  fam = [main] + others
  specs = sorted({g for x in fam + [held] for g in x.specs})
  return "\n".join([
      f"Trace `{c.trace}`, served by {su.model} on every GPU (cost_model.TRACE_MODELS; GPU specs "
      f"{', '.join(specs)}), max_model_len {su.max_model_len:,} (the model's context capped at "
      "the smallest KV capacity of the clusters' GPUs).",
      "",
      "Heterogeneous routing on a token-level LLM serving simulator (ServingRoute-v0), "
      f"continuous batching ({_engine_line(c, specs)}), "
      f"SLO TTFT <= {c.slo_ttft} s and TPOT <= {c.slo_tpot} s, output-length predictor "
      f"accuracy {c.pred_acc}. " + protocol.iteration_cost_line(c),
      "",
      _protocol_line(c) + (
          f" Every replay is rescaled to offer the same mean rate (rate scale x the training "
          f"part's {su.rate_ref:.3f} req/s; the trace's burst shape inside it kept), so a load "
          "offers the same rate in every window." if su.rate_ref is not None else ""),
      "",
      _cache_line(su, fam + [held]),
      "",
      "Clusters (capacity = largest rate at which the BEST tuned heuristic, every grid point of "
      "every family a candidate at every probed rate, meets the SLO for 90% of requests on "
      f"{c.n_capacity_windows} training windows; load = fraction of the cluster's own capacity): "
      + "; ".join(f"{x.name}{' (claims)' if x is main else ''} {x.capacity:.2f} req/s (set by "
                  f"{x.cap_by})" for x in fam)
      + f"; held out (never trained on): {held.name} {held.capacity:.2f} req/s (set by "
      f"{held.cap_by}).",
      "",
      f"Trained/tuned on the early {c.train_frac:.0%} of `{c.trace}`; evaluated on "
      f"{'`' + eval_trace + '`' if eval_trace else 'the later part (unseen)'} "
      f"({len(test_tr)} requests), {c.n_eval_windows} disjoint windows of {c.eval_table} "
      f"requests x {c.num_seeds} seeds (RL: training seeds; baselines: evaluation keys). Means "
      "with 95% CIs from a two-way bootstrap over seeds AND windows (both resampled, so a "
      "deterministic heuristic's interval reflects the traffic); ratios paired by (seed, "
      "window). Goodput = SLO-met requests per second of the offered window; throughput = "
      "completions inside it per second (DistServe basis, evaluate.metrics).",
      "",
      _clip_line(su, clip),
      "",
      _rl_line(c, main, fam, teacher, bc_acc, train_time, n_tune_evals),
      "", f"## Results on {main.name} (the claims' cluster)", "",
      *_results_rows(summary, policies, c.loads, su.cache),
      "", "## Ratios", "", *protocol.ratio_rows(ratios), "",
      "Best RL per load (training windows): " + ", ".join(
          f"{ld}: {v}" for ld, v in best_rl.items()),
      "", "Best heuristic per load (training windows): " + ", ".join(
          f"{ld}: {h}" for ld, h in main.best_heur.items()),
      "", f"## Cross-cluster generalisation ({held.name} never trained on)", "",
      *_cross_rows(c, summary, summary_h, ratios, ratios_h, policies, main, held, best_rl,
                   clone), "",
      f"Best heuristic on {held.name} per load (its training windows): " + ", ".join(
          f"{ld}: {h}" for ld, h in held.best_heur.items()),
      "", _extrapolation_line(c, clone), "",
      *_capacity_lines(main, held, caps, caps_h),
      "", "## Budget sweep", "",
      f"Goodput (req/s) of the checkpoints of each run on {main.name}'s training windows "
      f"({c.n_select_windows} windows x {c.num_seeds} seeds, sampled actions; the last column "
      "is the fair-chance check: a CI above 0 means the curve had not flattened). Late gain of "
      "the training return (last eighth of updates minus the eighth before): " + "; ".join(
          f"{v} {g['late_gain_return'][0]:+.3g} [{g['late_gain_return'][1]:+.3g}, "
          f"{g['late_gain_return'][2]:+.3g}]" for v, g in gains.items()) + ".", "",
      *_sweep_rows(c, sweep_summary, variants, gains), "",
      "Tuned baseline knobs: " + protocol.knob_line(
          {k: v for k, v in main.tuned.items() if k[0] in ("lot", "sita", "idle_first",
                                                           "least_work", "cache_aware")}), "",
      f"![routing]({rec}.png)"])


def _engine_line(c, cluster) -> str:
  """The engine limits the run used (uniform or each GPU type's own)."""
  s = routing.engine_settings(tuple(cluster), c.engine_settings, c.cap, c.max_batched_tokens,
                              c.slo_tpot, c.get("iteration_cost", "analytic"))  # spec names
  if c.engine_settings == "uniform":
    return f"max_num_seqs {c.cap}, max_num_batched_tokens {c.max_batched_tokens} on every GPU"
  return ("per GPU type, vLLM defaults with the token budget cut so that the worst iteration "
          f"({c.get('iteration_cost', 'analytic')} cost) fits the TPOT SLO: "
          + ", ".join(f"{g} max_num_seqs {cap} / max_num_batched_tokens {m}"
                      for g, cap, m in dict.fromkeys(zip(cluster, s["cap"],
                                                         s["max_batched_tokens"]))))


def _protocol_line(c) -> str:
  """Episode protocol: bursts at an empty cluster, or long steady-state replays."""
  if int(c.window) <= 0 and float(c.warmup_frac) == 0:
    return (f"Episodes: windows of {c.eval_table} consecutive requests arriving at an empty "
            "cluster (no warm-up excluded).")
  return (f"Steady-state protocol: episodes of {c.eval_table} consecutive requests (RL trains "
          f"on {c.train_table}); at most {replay.window_of(c) or c.eval_table} requests in "
          "flight in the engine (an arrival beyond that is rejected and counts as an SLO miss; "
          "`rejected` in the JSON summary); the first "
          f"{replay.warmup_of(c)} requests of each episode ({c.warmup_frac:.0%}) are excluded "
          "from its metrics. Capacity and loads are measured on these long replays.")


def _rl_line(c, main, fam, teacher, bc_acc, train_time, n_tune_evals) -> str:
  """The report's paragraph on the RL policy, its two starts, budgets and selection."""
  teacher_fam, teacher_ld, teacher_pp = teacher
  a = c.algos[0]
  return (
      f"RL: one entity-attention policy ({a.upper()}, agents/entities.py: GPU tokens with the "
      f"request's features, embed {c[a].entities.embed_dim}, {c[a].entities.num_heads} heads, "
      f"{c[a].entities.num_layers} layer(s), padded to {c.max_gpus} GPU slots) trained on the "
      f"family {', '.join(x.name for x in fam)} (a cluster and a load in {tuple(c.loads)} drawn "
      f"per episode inside the jitted program), {c.num_seeds} seeds, from scratch ({a}, "
      f"{checkpoint_steps(c, a)[-1]:,} env steps) and warm-started by behaviour "
      f"cloning ({a}_bc, {checkpoint_steps(c, a + '_bc')[-1]:,} env steps) of the best "
      f"tuned heuristic on {main.name} at load {teacher_ld} "
      f"({teacher_fam}, {heuristics.describe(teacher_fam, teacher_pp) or 'no knobs'}; "
      f"{int(c.bc.num_envs) * int(c.bc.num_steps):,} demonstration steps on the family, "
      f"{c.bc.steps} Adam steps; accuracy on the demonstrations per seed "
      f"{', '.join(f'{x:.3f}' for x in bc_acc) or 'n/a'}). Training time: "
      + ", ".join(f"{k} {v:.0f} s" for k, v in train_time.items())
      + ". Each variant is evaluated with sampled actions and greedily ('-greedy'); the variant "
      "per load is chosen on the claims' cluster's training windows (never on evaluation "
      "windows, never on the held-out cluster). Baselines tuned by grid search on "
      f"{c.n_tune_windows} training windows per load and cluster ({n_tune_evals} window "
      "evaluations). Segregation = P(fast GPU | long) - P(fast GPU | short), long = output > "
      "256 tokens.")


def _cache_line(su: Setup, clusters) -> str:
  if not su.cache:
    return ("No prefix cache (the trace has no prompt block ids)." if su.trace != "mooncake_conv"
            else "Prefix cache off (config.prefix_cache).")
  return ("Prefix caching on (per-GPU LRU of 512-token prompt blocks keyed by the trace's "
          "hash_ids; entries per GPU = its KV capacity in 512-token blocks: "
          + "; ".join(f"{x.name} {list(su.cache_caps(x.cluster))[:len(x.cluster)]}"
                      for x in clusters)
          + "); the cache-aware router (SGLang's, heuristics.cache_aware, thr / bal_abs tuned "
          "on heuristics.cache_grid) is one of the tuned families and the observation carries "
          "each GPU's prefix match. `cache hit` = prompt tokens served from the cache / prompt "
          "tokens admitted.")


def _clip_line(su: Setup, clip) -> str:
  return (f"Context clipping ({su.model}, {su.max_model_len:,}-token context: output <= 2048, "
          "prompt left-truncated to the context - output): " + "; ".join(
              f"{k}: {v['clipped_share']:.1%} of {v['requests']} requests clipped "
              f"({v['prompt_tokens_removed_share']:.1%} of prompt tokens removed)"
              for k, v in clip.items()) + ".")


def _results_rows(summary, policies, loads, cache: bool) -> list[str]:
  """`serving_protocol.results_rows` (with segregation), plus the prefix-cache hit rate (prompt
  tokens served from the cache / prompt tokens admitted) where the cache is on."""
  rows = protocol.results_rows(summary, policies, loads, segregation=True)
  if not cache:
    return rows
  cells = [summary[f"{p}@{ld}"].get("cache_hit_rate", [float("nan")] * 3)
           for ld in loads for p in policies]
  return ([rows[0] + " cache hit |", rows[1] + "---|"]
          + [r + f" {h[0]:.3f} |" for r, h in zip(rows[2:], cells)])


def _cross_rows(c, summary, summary_h, ratios, ratios_h, policies, main, held, best_rl,
                clone=()):
  """Cross-cluster table: goodput on the trained-on cluster and on the held-out one; a
  BC-started variant is marked "clone of the winner" at the loads of `clone`."""
  key_of = lambda ld, base, rl: f"{rl}/{base}@{ld}:goodput"
  rows = [f"| policy | load | goodput on {main.name} (trained on / tuned on) | goodput on "
          f"{held.name} (never trained on; heuristics tuned on it) | RL / best heuristic on "
          f"{held.name} |", "|---|---|---|---|---|"]
  for ld in c.loads:
    for p in policies:
      rl = p not in heuristics.CACHE_ROUTERS
      r = ratios_h.get(key_of(ld, held.best_heur[ld], p)) if rl else None
      mark = " (best)" if (not rl and p == held.best_heur[ld]) or p == best_rl[ld] else ""
      if rl and "_bc" in p and ld in clone:
        mark += " (clone of the held-out winner)"
      rows.append(f"| {p}{mark} | {ld} | {harness.fmt(summary[f'{p}@{ld}']['goodput'])} | "
                  f"{harness.fmt(summary_h[f'{p}@{ld}']['goodput'])} | "
                  + (f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]" if r else "") + " |")
  return rows


def _extrapolation_line(c, clone) -> str:
  x = extrapolation(c)
  bc = [v for v in c.variants if v == "bc"]
  return (f"The held-out cluster extrapolates: GPU type(s) {', '.join(x['new_gpu_types'])} in no "
          f"training cluster, {x['gpus']} GPUs against at most {x['max_training_gpus']} in "
          "training. " + (
              (f"At load(s) {', '.join(str(ld) for ld in clone)} its best tuned heuristic IS "
               "the behaviour-cloning teacher (same family and knobs): there the BC-started "
               "variants are a clone measured against its own teacher, and the from-scratch "
               "variants are the test of learning." if clone else
               "Its best tuned heuristic is never the behaviour-cloning teacher (family and "
               "knobs), so the BC-started variants are not measured against their teacher.")
              if bc else ""))


def _sweep_rows(c, sweep_summary, variants, gains):
  n_ck = int(c.budget_chunks)
  rows = ["| variant | env steps at checkpoints | load | " + " | ".join(
      f"checkpoint {i + 1}" for i in range(n_ck)) + " | last - previous checkpoint |",
          "|---" * (n_ck + 4) + "|"]
  for v in variants:
    steps = ", ".join(f"{s:,}" for s in checkpoint_steps(c, v))
    for ld in c.loads:
      g = gains[v]["sweep_gain_goodput"][str(ld)]
      rows.append(f"| {v} | {steps} | {ld} | " + " | ".join(
          harness.fmt(sweep_summary[f"{v}@{i + 1}@{ld}"]) for i in range(n_ck))
          + f" | {g[0]:+.3f} [{g[1]:+.3f}, {g[2]:+.3f}] |")
  return rows


def _capacity_lines(main, held, caps, caps_h) -> list[str]:
  """The report's section on each policy's own SLO capacity, on both clusters."""
  return ["## SLO capacity per policy", "",
          "Each policy's highest load with >= 90% SLO attainment (mean over seeds x evaluation "
          "windows), linearly interpolated between the evaluated loads "
          "(protocol.capacity_on_loads); req/s = load x the cluster's capacity.", "",
          f"On {main.name}:", "", *protocol.capacity_rows(caps), "",
          f"On {held.name} (never trained on):", "", *protocol.capacity_rows(caps_h)]