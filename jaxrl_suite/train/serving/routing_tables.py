"""The routing study's tables after training: the budget sweep, display ratios and gains, and
the record's payload.

  sweep_tables(c, ev, main, learned_ck, final, rl_pp, seeds, slo) -> (sweep, rl_train, base_train)
      {(policy, load): harness.Cells [S][W]} on the claims' cluster's selection windows (the
      first n_select_windows TRAINING windows): every budget checkpoint, every final RL variant,
      the baselines the claims compare with
  ratios(c, table, table_h, final, main, held, best_rl) -> ({key: (ratio, lo, hi)}, held-out)
  gains(c, variants, curves, sweep, n_ck) -> {variant: late_gain_return, sweep_gain_goodput}
  payload(c, su, main, held, others, **parts) -> the record's payload (plain JSON values)

Display only: ratios and gains are the report's intervals (protocol.paired_ratio / budget_gain /
late_gain); the claims' choices and verdicts are made by the script through jaxrl_suite.repro.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrl_suite.envs.serving import heuristics, protocol
from jaxrl_suite.train.serving.routing_setup import Setup, checkpoint_steps, extrapolation


def sweep_tables(c, ev, main, learned_ck, final, rl_pp, seeds, slo):
  """Budget sweep on the claims' cluster's TRAINING windows (sampled actions): goodput of every
  checkpoint (the fair-chance input), every final variant (the last checkpoint, or its greedy
  mode) as rl_train (the RL variant per load is chosen there), and the baselines on the same
  windows (the claims' loads are chosen there). Returns (sweep, rl_train, base_train)."""
  sel = main.tune_starts[:c.n_select_windows]
  sweep_nets = {f"{v}@{i + 1}": {"params": p, "greedy": jnp.zeros((len(seeds),), bool)}
                for v, ck in learned_ck.items() for i, p in enumerate(ck)}
  sweep_nets.update({k: v for k, v in final.items() if k.endswith("-greedy")})
  sweep = protocol.evaluate_table(ev, main.tuned, [], sweep_nets, rl_pp, main.p_train, sel,
                                  main.scales, seeds, slo, main.type_id)
  n_ck = int(c.budget_chunks)
  rl_train = {}
  for k in final:
    src = f"{k}@{n_ck}" if not k.endswith("-greedy") else k
    for ld in c.loads:
      rl_train[(k, ld)] = sweep[(src, ld)]
  base_train = protocol.evaluate_table(
      ev, main.tuned, list(dict.fromkeys(["jsq", "round_robin", *main.best_heur.values()])), {},
      rl_pp, main.p_train, sel, main.scales, seeds, slo, main.type_id)
  return sweep, rl_train, base_train


def ratios(c, table, table_h, final, main, held, best_rl):
  """Display ratios (RL / baseline, paired by seed and window; the verdicts are the layer's):
  on the claims' cluster the chosen RL against JSQ, round-robin and the best heuristic, and
  every RL variant against the best heuristic; on the held-out cluster every RL variant
  against its best heuristic. Returns ({key: (ratio, lo, hi)}, same for the held-out)."""
  out = {}
  key_of = lambda ld, base, m="goodput", rl=None: f"{rl or best_rl[ld]}/{base}@{ld}:{m}"
  for ld in c.loads:
    for base in dict.fromkeys(("jsq", "round_robin", main.best_heur[ld])):
      for metric in ("goodput", "throughput"):
        out[key_of(ld, base, metric)] = protocol.paired_ratio(table, best_rl[ld], base, ld,
                                                              metric)
    for v in final:    # every RL variant against the best heuristic: scratch and BC both shown
      out.setdefault(key_of(ld, main.best_heur[ld], rl=v),
                     protocol.paired_ratio(table, v, main.best_heur[ld], ld))
  out_h = {}
  for ld in c.loads:
    for v in final:
      out_h[key_of(ld, held.best_heur[ld], rl=v)] = protocol.paired_ratio(
          table_h, v, held.best_heur[ld], ld)
  return out, out_h


def gains(c, variants, curves, sweep, n_ck: int) -> dict:
  """Display only (the report's sweep table): the training return's late gain and each
  checkpoint's gain over the one before; the verdicts' fair chance is the layer's rule."""
  out = {}
  for v in variants:
    out[v] = {"late_gain_return": protocol.late_gain(curves[v]),
              "sweep_gain_goodput": {str(ld): (protocol.budget_gain(
                  sweep, f"{v}@{n_ck}", f"{v}@{n_ck - 1}", ld) if n_ck > 1
                  else (float("nan"),) * 3) for ld in c.loads}}
  return out


def _cluster_payload(cl) -> dict:
  return {"cluster": list(cl.cluster), "gpu_specs": list(cl.specs), "capacity_rps": cl.capacity,
          "capacity_set_by": cl.cap_by, "rate_scales": {str(k): v for k, v in cl.scales.items()}}


def _learning_payload(c, variants, gains_, teacher, bc_acc, sweep_summary) -> dict:
  """The payload's budget sweep, fair-chance gains and behaviour-cloning fields."""
  teacher_fam, teacher_ld, teacher_pp = teacher
  return {"budget_sweep_goodput": sweep_summary,
          "budget_steps": {v: {str(i + 1): s for i, s in enumerate(checkpoint_steps(c, v))}
                           for v in variants},
          "fair_chance_gains": {v: {"late_gain_return": list(x["late_gain_return"]),
                                    "sweep_gain_goodput": {k: list(y) for k, y in
                                                           x["sweep_gain_goodput"].items()}}
                                for v, x in gains_.items()},
          "bc": {"teacher": f"{teacher_fam}@{teacher_ld}",
                 "teacher_knobs": heuristics.describe(teacher_fam, teacher_pp),
                 "accuracy_per_seed": [float(a) for a in bc_acc]}}


def _trace_payload(c, su: Setup, clusters, eval_trace) -> dict:
  """The payload's trace, model, replay, rate and prefix-cache fields."""
  return {"eval_trace": eval_trace or f"{c.trace}[late {1 - c.train_frac:.0%}]",
          "trace": c.trace, "model": su.model, "max_model_len": su.max_model_len,
          "slo_ttft": c.slo_ttft, "replay": {"eval_table": int(c.eval_table),
                                             "train_table": int(c.train_table)},
          "rate_per_window": su.rate_ref is not None, "rate_ref_rps": su.rate_ref,
          "prefix_cache": {"on": su.cache, "env_blocks_per_slot": su.cache_blocks,
                           "blocks_per_slot": {x.name: list(su.cache_caps(x.cluster))
                                               for x in clusters}
                           if su.cache else None}}


def payload(c, su: Setup, main, held, others, *, summary, summary_h, ratios, ratios_h,
            best_rl, caps, caps_h, clone, sweep_summary, variants, gains, teacher, bc_acc,
            curves, train_time, resumed_stages, n_tune_evals, clip, eval_trace, plot) -> dict:
  """The record's payload (everything but claims and provenance), plain JSON values."""
  out = {"summary": summary, "heldout_summary": summary_h,
         "ratios": {k: list(v) for k, v in ratios.items()},
         "heldout_ratios": {k: list(v) for k, v in ratios_h.items()},
         "capacity_rps": main.capacity, "capacity_set_by": main.cap_by,
         "rate_scales": {str(k): v for k, v in main.scales.items()},
         "clusters": {"claims": _cluster_payload(main), "heldout": _cluster_payload(held),
                      "family": [_cluster_payload(x) for x in [main] + others]},
         "tuned": protocol.tuned_payload(main.tuned),
         "heldout_tuned": protocol.tuned_payload(held.tuned),
         "best_rl_by_training": best_rl,
         "best_heuristic_by_training": main.best_heur,
         "heldout_best_heuristic_by_training": held.best_heur,
         "slo_capacity": caps, "heldout_slo_capacity": caps_h,
         "heldout_extrapolates": extrapolation(c),
         "bc_clone_of_heldout_winner_at_loads": clone}
  out.update(_learning_payload(c, variants, gains, teacher, bc_acc, sweep_summary))
  out.update({"learning_curves": curves, "train_time_s": train_time,
              # stages taken from the workdir's caches (same code and settings; their time is
              # in train_time_s, not in this process's wall time)
              "resumed_stages": resumed_stages,
              "baseline_tuning_evals": n_tune_evals, "clipping": clip})
  out.update(_trace_payload(c, su, [main] + others + [held], eval_trace))
  out["plot"] = plot
  return out
