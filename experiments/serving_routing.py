"""Reproduction: RL routing on heterogeneous GPUs vs tuned routers (ServingRoute-v0), with RL
given a fair chance and a cross-cluster generalisation table.

Claim tested (arXiv:2607.05272 abstract, via the blog): on heterogeneous multi-GPU serving, RL
learns to segregate long and short requests and beats shortest-queue by +48% and round-robin by
3.5x. Here the simulator is a token-level LLM one (cost_model.py), the GPUs really differ, every
engine runs the same continuous batcher, and the baselines include tuned size-based (SITA) and
heterogeneity-aware routers. RL sees the cluster as a SET of GPU entities (routing.py,
`entity_obs`) through the entity-attention agent (agents/entities.py), so ONE policy, trained
on a family of clusters (a cluster and a load drawn per episode inside the jitted program), runs
on any cluster of up to `max_gpus` GPUs; PPO from scratch and PPO warm-started by behaviour
cloning of the best tuned heuristic (algos/behaviour_cloning.py) are both trained, with
checkpoints along the budget (the budget sweep). Everything is tuned/trained on the early 60% of
the Azure conv trace and evaluated on the later 40% (unseen), on the claims' cluster and on a
cluster never trained on (heuristics tuned on that cluster). The stages, tables, report and
figure are the library's (jaxrl_suite/train/serving: routing_setup, routing_stages,
routing_tables, routing_report, figures); this script wires them, chooses the RL variant and
judges the claims through jaxrl_suite.repro, and writes the record.

Any shipped trace (`--config.trace`, one run each; `record_name`): each GPU type of the clusters
serves the trace's model (cost_model.TRACE_MODELS: Llama-3.1-8B for Mooncake), prompts clipped
to the smallest KV capacity of the clusters' GPUs, the trace's TTFT SLO (slo_ttft_by_trace),
the prefix cache (per-GPU capacity = its KV in 512-token blocks) and the cache-aware router
among the tuned families where the trace has hash_ids, every replay offering the same mean
rate (rate_per_window), replays shortened to fit n_eval_windows disjoint windows of the
evaluation part (envs/serving/replay.replay_length, as serving_batching).

  python -m experiments.serving_routing [--quick] [--eval_trace PATH] [--config.x=...]
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
from jaxrl_suite.core import results
from jaxrl_suite.envs.serving import harness, protocol, replay, traces
from jaxrl_suite.repro import Claim, claim_record, selection
from jaxrl_suite.train.serving import figures, training
from jaxrl_suite.train.serving import routing_report as report
from jaxrl_suite.train.serving import routing_setup as rsetup
from jaxrl_suite.train.serving import routing_stages as stages
from jaxrl_suite.train.serving import routing_tables as tables

NAME = "serving_routing"
DEFAULT_TRACE = "azure_conv"
FLAGS = common.define_flags(NAME)


def record_name(trace: str) -> str:
  """Results record, figure and default workdir name of a run on `trace`: NAME for azure_conv
  (the record's name since the first runs), NAME_<trace> for any other trace."""
  return NAME if trace == DEFAULT_TRACE else f"{NAME}_{trace}"


def default_workdir(c) -> str:
  """workdirs/<record name>: one per trace (its tuning and trained policies)."""
  return f"workdirs/{record_name(c.trace)}"


def run(c, quick: bool, workdir: str | None = None, eval_trace: str | None = None,
        reuse: bool = False) -> dict:
  """The reproduction on config `c`: stages 1-4 (`_train`), 5-6 (`_evaluate`), claims, report,
  record. `r` carries the run's state between the stages (clusters, tables, selections);
  returns {"claims", "summary", "heldout_summary"}."""
  t0 = time.time()
  common.config_module(NAME).validate(c)
  rec = record_name(c.trace)
  workdir = workdir or default_workdir(c)     # default: one per trace (its cached policies)
  os.makedirs(workdir, exist_ok=True)
  train_tr, test_tr = replay.load_traces(c, eval_trace)
  c, su = rsetup.trace_setup(c, train_tr, test_tr)
  r = {"su": su, "rec": rec, "eval_trace": eval_trace, "test_tr": test_tr,
       "slo": (c.slo_ttft, c.slo_tpot),
       "seeds": list(range(c.seed, c.seed + c.num_seeds)),
       "clip": {part: traces.clip_stats(tr, su.max_model_len, 2048)
                for part, tr in (("train part", train_tr), ("evaluation part", test_tr))},
       "log": lambda msg: print(f"{msg} ({time.time() - t0:.0f} s)", flush=True)}
  main, *others, held = [rsetup.Cluster(c, cl, train_tr, test_tr, su)
                         for cl in rsetup.clusters(c)]
  r.update(main=main, others=others, held=held)
  _train(c, r, train_tr, bool(eval_trace or reuse), workdir)
  _evaluate(c, r)
  claims = _claims(c, main, held, r["table"], r["table_h"], r["base_train"], r["rl_train"],
                   r["rl_sel"], r["sweep"], r["seeds"])
  md, payload = _report(c, r, results.figure_path(rec, "quick" if quick else "full"))
  name = rec if not eval_trace else f"{rec}_eval"
  results.write_results(name, mode="quick" if quick else "full", config=c, seeds=r["seeds"],
                        claims=claims, wall_time_s=time.time() - t0, payload=payload,
                        markdown=md)
  print(results.verdict_table(claims))
  return {"claims": claims, "summary": r["summary"], "heldout_summary": r["summary_h"]}


def _train(c, r: dict, train_tr, reuse: bool, workdir: str) -> None:
  """Stages 1-4 into `r`: the evaluator, every cluster's capacity and tuned baselines (cached),
  RL on the family (cached per variant), the budget sweep and the RL variant per load."""
  su, main, others, held, log = r["su"], r["main"], r["others"], r["held"], r["log"]
  ev, rl_pp, grids = rsetup.evaluator(c, main, su)
  # 1-2. Every cluster's capacity (best tuned heuristic), every family tuned per load on
  #      training windows (claims' and held-out clusters); cached in the workdir.
  n_tune_evals, resumed = stages.heuristic_stage(c, su, ev, main, others, held, grids,
                                                 train_tr.rate, r["slo"], workdir,
                                                 r["eval_trace"], log)
  log(f"tuned {n_tune_evals} window evaluations" + (" (from the workdir)" if resumed else ""))
  # 3. RL on the family (scratch and BC-started), budget checkpoints kept.
  learned_ck, curves, train_time, bc_acc, loaded, teacher = stages.rl_stage(
      c, su, main, others, train_tr, r["seeds"], workdir, reuse, log)
  final = training.with_modes(c, {v: ck[-1] for v, ck in learned_ck.items()})
  log("trained")
  # 4. Budget sweep on the claims' cluster's TRAINING windows; RL variant and claims' loads
  #    are chosen there.
  sweep, rl_train, base_train = tables.sweep_tables(c, ev, main, learned_ck, final, rl_pp,
                                                    r["seeds"], r["slo"])
  rl_sel = _select_rl(c, main, rl_train, final, r["seeds"])
  log("budget sweep and selection")
  r.update(ev=ev, rl_pp=rl_pp, fams=list(grids), n_tune_evals=n_tune_evals,
           resumed_stages=(["heuristics"] if resumed else []) + loaded,
           variants=list(learned_ck), final=final, curves=curves, train_time=train_time,
           bc_acc=bc_acc, teacher=teacher, sweep=sweep, rl_train=rl_train,
           base_train=base_train, rl_sel=rl_sel,
           best_rl={ld: rl_sel[ld].choice for ld in c.loads})


def _select_rl(c, main, rl_train, final, seeds) -> dict:
  """{load: repro.selection.Selection}: the RL variant per load (algorithm x start x action
  mode, last checkpoints) by goodput on the claims' cluster's training windows."""
  n_sel = len(main.tune_starts[:c.n_select_windows])
  return {ld: selection.pick_best(
      "RL variant", {k: protocol.cells(rl_train, k, ld) for k in final},
      data=f"goodput on {main.name}'s {n_sel} training windows x {len(seeds)} seeds, load "
           f"{ld}") for ld in c.loads}


def _evaluate(c, r: dict) -> None:
  """Stage 5-6 into `r`: everything on unseen windows of the claims' and the held-out cluster,
  summaries, display ratios and gains, each policy's SLO capacity."""
  main, held, final = r["main"], r["held"], r["final"]
  tab = lambda cl: protocol.evaluate_table(r["ev"], cl.tuned, r["fams"], final, r["rl_pp"],
                                           cl.p_test, cl.test_starts, cl.scales, r["seeds"],
                                           r["slo"], cl.type_id)
  r["table"], r["table_h"] = tab(main), tab(held)
  r["log"]("evaluated")
  policies = r["policies"] = r["fams"] + list(final)
  r["summary"], r["summary_h"] = (rsetup.summary(c, t, policies)
                                  for t in (r["table"], r["table_h"]))
  n_ck = int(c.budget_chunks)
  r["sweep_summary"] = {
      f"{v}@{i + 1}@{ld}": harness.summarize(r["sweep"][(f"{v}@{i + 1}", ld)])["goodput"]
      for v in r["variants"] for i in range(n_ck) for ld in c.loads}
  r["ratios"], r["ratios_h"] = tables.ratios(c, r["table"], r["table_h"], final, main, held,
                                             r["best_rl"])
  r["gains"] = tables.gains(c, r["variants"], r["curves"], r["sweep"], n_ck)
  # Each policy's own SLO capacity (>= 90% attainment), interpolated on the load grid: the
  # headline metric beside goodput at fixed loads.
  r["caps"], r["caps_h"] = (protocol.policy_capacities(t, policies, c.loads, cl.capacity)
                            for t, cl in ((r["table"], main), (r["table_h"], held)))
  r["clone"] = stages.bc_clone_loads(c, held, r["teacher"])


def _report(c, r: dict, figure: str) -> tuple[str, dict]:
  """(markdown, payload) of the record; writes the figure."""
  main, held, others = r["main"], r["held"], r["others"]
  md = report.markdown(c, main, held, others, r["summary"], r["summary_h"], r["policies"],
                       r["ratios"], r["ratios_h"], r["best_rl"], r["n_tune_evals"],
                       r["train_time"], r["bc_acc"], r["teacher"], r["sweep_summary"],
                       r["gains"], r["variants"], r["eval_trace"], r["test_tr"], r["clip"],
                       r["su"], r["rec"], r["caps"], r["caps_h"], r["clone"])
  plot = figures.routing_figure(c, r["summary"], r["summary_h"], r["policies"], r["curves"],
                                r["sweep_summary"], r["variants"], main, held, figure)
  keys = ("summary", "summary_h", "ratios", "ratios_h", "best_rl", "caps", "caps_h", "clone",
          "sweep_summary", "variants", "gains", "teacher", "bc_acc", "curves", "train_time",
          "resumed_stages", "n_tune_evals", "clip", "eval_trace")
  payload = tables.payload(c, r["su"], main, held, others, plot=plot,
                           **{k: r[k] for k in keys})
  return md, payload


def _ratio_of_means(a, b) -> float:
  """mean(a) / mean(b) on training windows (NaN where b's mean is 0: that load cannot win)."""
  mb = float(np.mean(b))
  return float(np.mean(a)) / mb if mb > 0 else float("nan")


def _claims(c, main, held, table, table_h, base_train, rl_train, rl_sel, sweep, seeds):
  """The registered claims (configs/serving_routing.claims) judged by jaxrl_suite.repro.

  Per claim, the load is chosen on the training windows (RL's ratio of mean goodput over the
  claim's baseline there, highest wins; the held-out cluster's claim takes the load chosen on
  the claims' cluster), the RL variant by its goodput there (rl_sel); the interval is Fieller's
  over the crossed seeds x evaluation windows (`crossed_fieller`); the fair chance is the chosen
  variant's last budget doubling on the training windows (sampled-action checkpoints)."""
  # The registry keyed by the claim's name, "serving_routing.<trace>.<name>.v<k>" -> "<name>":
  # the trace and the version are the config's alone.
  reg = {d["id"].split(".", 2)[2].rsplit(".", 1)[0]: Claim.from_dict(d)
         for d in common.config_module(NAME).claims(c)}
  n_ck = int(c.budget_chunks)

  def load_for(base_of) -> selection.Selection:
    return selection.pick_load(
        c.loads, [_ratio_of_means(protocol.cells(rl_train, rl_sel[ld].choice, ld),
                                  protocol.cells(base_train, base_of(ld), ld)) for ld in c.loads],
        data=f"RL / baseline mean goodput on {main.name}'s {c.n_select_windows} training "
             f"windows x {len(seeds)} seeds")

  def row(name, tab, base, ld_sel, note):
    ld = c.loads[ld_sel.candidates.index(ld_sel.choice)] if ld_sel.ok else max(c.loads)
    rl = rl_sel[ld].choice
    v = rl.split("-")[0]
    cells = [protocol.cells(sweep, f"{v}@{n_ck // 2}", ld),
             protocol.cells(sweep, f"{v}@{n_ck}", ld)]
    half = float(np.mean(cells[0])) or 1.0
    fair = {"scores": 100 * np.stack(cells) / half, "scale": "difference",
            "budgets": [float(x) for x in rsetup.checkpoint_steps(c, v)[n_ck // 2 - 1::n_ck // 2]]}
    r = claim_record(reg[name], protocol.cells(tab, rl, ld), protocol.cells(tab, base(ld), ld),
                     method="crossed_fieller",
                     selection=[rl_sel[ld], ld_sel], sweep=fair)
    r["note"] = f"{note}; load {ld}; RL = {rl} vs {base(ld)}"
    return r

  best = lambda cl: (lambda ld: cl.best_heur[ld])
  ld_best = load_for(best(main))
  return [
      row("vs_jsq_48pct", table, lambda ld: "jsq",
          load_for(lambda ld: "jsq"), f"on {main.name}"),
      row("vs_rr_3_5x", table, lambda ld: "round_robin",
          load_for(lambda ld: "round_robin"), f"on {main.name}"),
      row("rl_vs_heuristic.claims_cluster", table, best(main),
          ld_best, f"on {main.name} (trained on)"),
      row("beats_best_heuristic.heldout_cluster", table_h, best(held),
          ld_best, f"on {held.name}, never trained on (heuristics tuned on it; load chosen on "
                   f"{main.name})"),
  ]


def main(argv):
  del argv
  common.main(NAME, run, FLAGS, workdir_of=default_workdir)


if __name__ == "__main__":
  app.run(main)
