"""The batching study's stages (ServingBatch-v0, one GPU): per trace and batching mode, the
evaluation env, the mode's capacity, the tuned heuristics, RL training and the evaluation tables.

  model_of(c, trace) -> (model name, max_model_len)
  load_trace(c, trace, eval_trace) -> Trace(c, train, test, clip)
      the per-trace config (SLO TTFT, replay lengths), the two parts of the trace and the
      clipping of both to the model's context.
  run_mode(c, mode, trace, train_tr, test_tr, workdir, seeds, reuse) -> dict
      table {(policy, load): metrics [S, W]} on the evaluation part, tuned {(family, load):
      params}, tune_score {(family, load): mean training goodput}, capacity (req/s) and how it was
      measured, scales {load: rate scale}, curves {variant: [S, U]}, train_time {algo: s},
      n_evals, families, learned (RL variants), rl_train / rl_half (validation tables at the
      whole and half budget), budget {algo: env steps}, model, max_model_len, trace, replay
      (requests per replay), slo (ttft, tpot).
      Capacity and tuning (the costly part: an hour for static batching on a low-capacity
      trace) are a stage of `workdir`'s cache ("serving_batching/<trace>_<mode>/heuristics",
      keyed by the per-trace config and the library), so a stopped run resumes after them.
  heuristics_record(...) / heuristics_restore(c, grids, h): that stage's JSON value and back.
  summaries(c, out) -> {"trace:mode:policy@load": {metric: [mean, lo, hi]}}
  payload(c, out, summary, ratios, clip, names, eval_trace, plot) -> the record's payload

`out` is {(trace, mode): run_mode's dict} after the script's choice of both sides of each
comparison (o["best_rl"], o["best_h"]: {load: Selection}). Choices and claims are the script's
(experiments/serving_batching.py, jaxrl_suite.repro); this module measures.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from jaxrl_suite.envs.serving import (batching, cost_model, harness, heuristics, protocol,
                                      replay, traces)
from jaxrl_suite.core import stage_cache
from jaxrl_suite.train.serving import training


def baselines(mode, template):
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


class Trace(NamedTuple):
  """One trace's config (c with trace, slo_ttft, train_table, eval_table set), its training and
  evaluation parts, and its clipping entry of the record."""
  c: object
  train: object
  test: object
  clip: dict


def load_trace(c, trace: str, eval_trace: str | None) -> Trace:
  """The trace's parts (eval_trace: the given file as the evaluation part), its SLO TTFT
  (config.slo_ttft_by_trace) and replay lengths (replay.replay_length), and the clipping of
  both parts to the serving model's context."""
  ct = c.copy_and_resolve_references()
  ct.trace = trace
  ct.slo_ttft = float(c.slo_ttft_by_trace.get(trace, c.slo_ttft))
  train_tr, test_tr = replay.load_traces(ct, eval_trace)
  model, mml = model_of(c, trace)
  clip = {"model": model, "max_model_len": mml, "slo_ttft": ct.slo_ttft,
          "train part": traces.clip_stats(train_tr, mml),
          "evaluation part": traces.clip_stats(test_tr, mml)}
  fit, ct.train_table = replay.replay_length(c, len(test_tr), trace)
  ct.eval_table = fit
  clip["replay"] = int(fit)
  return Trace(ct, train_tr, test_tr, clip)


def _slo_capacity(c, mode, ev, grids, p_train, starts, key, slo, train_tr):
  """(capacity, scale, how) of the best tuned heuristic at the SLO, or (lowest probed rate,
  None, why not) when no grid point meets it (see `capacity`)."""
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
  return cap, None, (f"no tuned {mode} heuristic meets the SLO for {float(c.capacity_target):.0%}"
                     f" of requests even at {cap:.3f} req/s (2^({lo}/4) x the trace rate), so ")


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
    cap, scale, how = _slo_capacity(c, mode, ev, grids, p_train, starts, key, slo, train_tr)
    if scale is not None:
      return cap, scale, how
    why = how
  sat = ([harness.with_net(heuristics.static_params("idle_only", {"b_idx": i}), template)
          for i in (8, 11)] if mode == "static" else grids["fixed_cap"][-3:])
  g = ev.grid(sat, p_train, starts, [8.0], key, slo)
  cap = max(m["completion_rate"] for m in g[:, 0])
  return cap, cap / train_tr.rate, why + ("saturation capacity: best completion rate (finished / "
                                          "makespan) of the max-batch baselines at 8x the trace "
                                          "rate")


def _env_kwargs(c, mode, model, mml, train_tr) -> dict:
  """make_batching's keyword arguments shared by the evaluation and the RL env."""
  kw = dict(gpu=c.gpu, model=model, max_model_len=mml, train_frac=None,
            max_batched_tokens=c.max_batched_tokens, pred_acc=c.pred_acc, slo_ttft=c.slo_ttft,
            slo_tpot=c.slo_tpot, wait_dt=c.wait_dt, decision_dt=c.decision_dt,
            iteration_cost=c.get("iteration_cost", "analytic"))
  if c.rate_per_window:
    # every replay (train and evaluation part) offers the mean rate scale x the training part's
    # rate, so capacity and loads are in the req/s the replays offer (workload.py)
    kw.update(rate_per_window=True, rate_ref=float(train_tr.rate))
  if mode == "continuous":
    kw.update(max_events=c.max_events, window=replay.window_of(c))
  return kw


def _train(c, mode, trace, train_tr, kw, base_scale, workdir, seeds, reuse, tag):
  """RL across loads (load drawn per episode): (checkpoints {algo: [params] per budget},
  curves, train time, budget {algo: env steps})."""
  env_rl, p_rl = batching.make_batching(mode, table_size=c.train_table, trace=train_tr,
                                        rate_scale=base_scale,
                                        rate_mults=tuple(float(x) for x in c.loads), **kw)
  budget = {a: (int(c.continuous_timesteps) if mode == "continuous"
                else int(c[a].total_timesteps)) for a in c.algos}
  ckpts, curves, train_time = training.learned_sweep(
      c, env_rl, p_rl, seeds, os.path.join(workdir, f"policies_{trace}_{mode}.npz"), budget,
      reuse, tag)
  return ckpts, curves, train_time, budget


def heuristics_record(c, grids, cap, base_scale, cap_how, tuned, score, n_evals) -> dict:
  """The heuristics stage's value as plain JSON: capacity, its rate scale and how it was set,
  the index of each tuned grid point and its training score per "family@load", #evaluations."""
  return {"capacity": float(cap), "base_scale": float(base_scale), "capacity_how": cap_how,
          "tuned_index": protocol.tuned_index(grids, tuned, c.loads),
          "tune_score": {f"{f}@{ld}": float(score[(f, ld)]) for f in grids for ld in c.loads},
          "n_evals": int(n_evals)}


def heuristics_restore(c, grids, h: dict) -> tuple[dict, dict]:
  """(tuned {(family, load): grid point}, score {(family, load): training goodput}) from
  `heuristics_record`'s value."""
  return (protocol.tuned_from_index(grids, h["tuned_index"], c.loads),
          {(f, ld): float(h["tune_score"][f"{f}@{ld}"]) for f in grids for ld in c.loads})


def run_mode(c, mode, trace, train_tr, test_tr, workdir, seeds, reuse=False) -> dict:
  """One (trace, mode) of the study: capacity, tuning, RL and the tables (module docstring)."""
  t0 = time.time()
  tag = f"[{trace} {mode}]"
  slo = (c.slo_ttft, c.slo_tpot)
  model, mml = model_of(c, trace)
  kw = _env_kwargs(c, mode, model, mml, train_tr)
  env_e, p_train, p_test, key, tune_starts, test_starts = replay.eval_setup(
      c, lambda **k: batching.make_batching(mode, **k), train_tr, test_tr, **kw)
  net_fn, template = training.net_policy(c, env_e, p_train)
  grids, heur, n_heur = baselines(mode, template)
  steps = int(c.max_eval_steps if mode == "continuous" else c.max_static_steps)
  ev = harness.Evaluator(env_e, harness.universal_policy(heur, n_heur, net_fn), steps,
                         c.eval_lanes, replay.warmup_of(c))
  rl_pp = lambda net: harness.with_net(next(iter(grids.values()))[0], template, net,
                                       which=n_heur)

  # 1-2. Capacity of this mode on the training part (see `capacity`), then every family tuned
  # at every load on training windows (one batched call): one stage of the workdir's cache.
  def heuristics_stage() -> dict:
    cap, base_scale, cap_how = capacity(c, mode, ev, grids, template, p_train,
                                        tune_starts[:int(c.n_capacity_windows)], key, slo,
                                        train_tr)
    print(f"{tag} capacity {cap:.3f} req/s ({cap_how}); trace rate {train_tr.rate:.2f} "
          f"({time.time() - t0:.0f} s)", flush=True)
    tuned, score, n = protocol.tune(ev, grids, p_train, tune_starts,
                                    {ld: ld * base_scale for ld in c.loads}, key, slo)
    print(f"{tag} tuned {n} window evaluations ({time.time() - t0:.0f} s)", flush=True)
    return heuristics_record(c, grids, cap, base_scale, cap_how, tuned, score, n)

  h = stage_cache.optional_stage(f"serving_batching/{trace}_{mode}/heuristics",
                                 {"config": c.to_dict(), "trace": trace, "mode": mode},
                                 heuristics_stage, workdir)
  cap, base_scale, cap_how, n_evals = (h["capacity"], h["base_scale"], h["capacity_how"],
                                       h["n_evals"])
  tuned, tune_score = heuristics_restore(c, grids, h)
  scales = {ld: ld * base_scale for ld in c.loads}

  # 3. RL across loads.
  ckpts, curves, train_time, budget = _train(c, mode, trace, train_tr, kw, base_scale, workdir,
                                             seeds, reuse, tag)
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
          "rl_train": rl_train, "rl_half": rl_half, "budget": budget, "model": model,
          "max_model_len": mml, "trace": trace, "replay": int(c.eval_table), "slo": slo}


def summaries(c, out) -> dict:
  """{"trace:mode:policy@load": harness.summarize of its evaluation cells} over every mode's
  families and learned variants."""
  summary = {}
  for (trace, mode), o in out.items():
    for p in o["families"] + o["learned"]:
      for ld in c.loads:
        summary[f"{trace}:{mode}:{p}@{ld}"] = harness.summarize(o["table"][(p, ld)])
  return summary


def payload(c, out, summary, ratios, clip, names, eval_trace, plot) -> dict:
  """The record's payload (keys "trace:mode" per condition; the first trace's clipping under
  "clipping", the shape of earlier records, and every trace's under "clipping_per_trace")."""
  k = lambda t, m: f"{t}:{m}"
  per = lambda f: {k(*kk): f(o) for kk, o in out.items()}
  return {"summary": summary, "ratios": {kk: list(v) for kk, v in ratios.items()},
          "traces": names,
          "models": {t: clip[t]["model"] for t in names},
          "capacity_rps": per(lambda o: o["capacity"]),
          "capacity_how": per(lambda o: o["capacity_how"]),
          "rate_scales": per(lambda o: {str(ld): v for ld, v in o["scales"].items()}),
          "tuned": {kt: v for kk, o in out.items()
                    for kt, v in protocol.tuned_payload(o["tuned"], f"{k(*kk)}:").items()},
          "best_rl_by_training": per(lambda o: {str(ld): v.choice
                                                for ld, v in o["best_rl"].items()}),
          "best_heuristic_by_training": per(lambda o: {str(ld): v.choice
                                                       for ld, v in o["best_h"].items()}),
          "learning_curves": per(lambda o: o["curves"]),
          "train_time_s": per(lambda o: o["train_time"]),
          "baseline_tuning_evals": per(lambda o: o["n_evals"]),
          "clipping": {p: clip[names[0]][p] for p in ("train part", "evaluation part")},
          "clipping_per_trace": clip,
          "eval_trace": eval_trace or ", ".join(f"{t}[late {1 - c.train_frac:.0%}]"
                                                for t in names),
          "plot": plot}
