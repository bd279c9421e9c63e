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
cluster never trained on (heuristics tuned on that cluster). The pipeline is
`experiments/serving_common.py`.

Any shipped trace (`--config.trace`, one run each; `record_name`): each GPU type of the clusters
serves the trace's model (cost_model.TRACE_MODELS: Llama-3.1-8B for Mooncake), prompts clipped
to the smallest KV capacity of the clusters' GPUs, the trace's TTFT SLO (slo_ttft_by_trace),
the prefix cache (per-GPU capacity = its KV in 512-token blocks) and the cache-aware router
among the tuned families where the trace has hash_ids, every replay offering the same mean
rate (rate_per_window), replays shortened to fit n_eval_windows disjoint windows of the
evaluation part (serving_common.replay_length, as serving_batching).

  python -m experiments.serving_routing [--quick] [--eval_trace PATH] [--config.x=...]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dataclasses
import json
import time

from absl import app
import jax
import jax.numpy as jnp
import numpy as np

from experiments import serving_common as common
from jaxrl_suite.core import plotting, results
from jaxrl_suite.envs.serving import cost_model, harness, heuristics, protocol, routing, traces
from jaxrl_suite.repro import Claim, claim_record, selection

NAME = "serving_routing"
DEFAULT_TRACE = "azure_conv"
FLAGS = common.define_flags(NAME)


def record_name(trace: str) -> str:
  """Results record, figure and default workdir name of a run on `trace`: NAME for azure_conv
  (the record's name since the first runs), NAME_<trace> for any other trace."""
  return NAME if trace == DEFAULT_TRACE else f"{NAME}_{trace}"


def _clusters(c) -> list[tuple[str, ...]]:
  """Every cluster of the run (generic GPU types): claims', family, held-out."""
  return ([tuple(c.cluster)] + [tuple(x) for x in c.family_clusters]
          + [tuple(c.heldout_cluster)])


def _pad(x, g: int) -> tuple:
  return tuple(x) + (tuple(x)[-1],) * (g - len(x))


@dataclasses.dataclass(frozen=True)
class Setup:
  """What the trace fixes for every cluster of a run (`trace_setup`)."""
  trace: str
  model: str                      # cost_model.TRACE_MODELS[trace]
  max_model_len: int              # model context, capped at the smallest KV of any cluster GPU
  cache: bool                     # prefix cache + cache-aware router (the trace has hash_ids)
  cache_blocks: tuple | None      # env cache row per GPU slot: max over the clusters
  rate_ref: float | None          # rate_per_window: the training part's mean rate (req/s)
  max_gpus: int

  def specs(self, cluster) -> tuple[str, ...]:
    """The cluster's GPU specs serving the trace's model ("H100-8B", ...)."""
    return routing.cluster_specs(tuple(cluster), self.model)

  def cache_caps(self, cluster) -> tuple[int, ...]:
    """Prefix-cache entries per GPU slot of this cluster: each GPU's KV capacity in 512-token
    blocks (routing.default_cache_blocks), padding slots (never routed to) as the last GPU."""
    return _pad(routing.default_cache_blocks(self.specs(cluster)), self.max_gpus)


def trace_setup(c, train_tr, test_tr):
  """(config for this trace, Setup): the trace's TTFT SLO and replay lengths in the config;
  model, context, prefix cache and rate reference in the Setup."""
  ct = c.copy_and_resolve_references()
  ct.slo_ttft = float(c.slo_ttft_by_trace.get(c.trace, c.slo_ttft))
  ct.eval_table, ct.train_table = common.replay_length(c, len(test_tr), c.trace)
  model = cost_model.TRACE_MODELS.get(c.trace, cost_model.LLAMA2_7B.name)
  specs = [routing.cluster_specs(cl, model) for cl in _clusters(c)]
  mml = routing.context_of([s for sp in specs for s in sp])
  cache = bool(c.prefix_cache) and train_tr.hash_ids is not None and test_tr.hash_ids is not None
  g = int(c.max_gpus)
  blocks = (tuple(max(x) for x in zip(*[_pad(routing.default_cache_blocks(sp), g)
                                        for sp in specs])) if cache else None)
  return ct, Setup(c.trace, model, mml, cache, blocks,
                   float(train_tr.rate) if c.rate_per_window else None, g)


def _kw(c, cluster, su: Setup):
  specs = su.specs(cluster)
  kw = dict(max_events=c.max_events, cluster=specs, train_frac=None,
            pred_acc=c.pred_acc, slo_ttft=c.slo_ttft, slo_tpot=c.slo_tpot,
            drain_dt=c.drain_dt, window=common.window_of(c), entity_obs=True,
            max_gpus=int(c.max_gpus), max_model_len=su.max_model_len,
            cache_blocks=su.cache_blocks,
            **routing.engine_settings(specs, c.engine_settings, c.cap,
                                      c.max_batched_tokens, c.slo_tpot))
  if su.cache:
    kw["cache_caps"] = jnp.asarray(su.cache_caps(cluster), jnp.int32)
  if su.rate_ref is not None:
    # every replay (train and evaluation part) offers scale x the training part's mean rate
    kw.update(rate_per_window=True, rate_ref=su.rate_ref)
  return kw


def _cluster_name(cl) -> str:
  """"H100+A100+2xL4"-style label."""
  names = [g.split("-")[0] for g in cl]
  return "+".join(f"{names.count(n)}x{n}" if names.count(n) > 1 else n
                  for n in dict.fromkeys(names))


class Cluster:
  """One cluster's evaluation setup on the shared entity env: params on the train / test
  traces, window starts, capacity (best tuned heuristic), rate scales and tuned baselines."""

  def __init__(self, c, cluster, train_tr, test_tr, su: Setup):
    self.cluster = tuple(cluster)
    self.specs = su.specs(cluster)
    self.name = _cluster_name(cluster)
    (self.env, self.p_train, self.p_test, self.key, self.tune_starts,
     self.test_starts) = common.eval_setup(c, routing.make_routing, train_tr, test_tr,
                                           **_kw(c, cluster, su))
    self.type_id = np.asarray(self.p_train.hw.type_id)


def _grids(hp, cache: bool, points: int = 0):
  """Tuning grids of every router family; `points` > 0 keeps that many evenly spaced points of
  each family (ends included: quick mode's smoke test, not a tuning)."""
  def thin(grid):
    if not points or len(grid) <= points:
      return grid
    return [grid[i] for i in sorted({round(k * (len(grid) - 1) / max(points - 1, 1))
                                     for k in range(points)})]
  return {name: [hp(name, g) for g in thin(grid)]
          for name, grid in heuristics.router_grids(cache).items()}


def run(c, quick: bool, workdir: str | None = None, eval_trace: str | None = None,
        reuse: bool = False) -> dict:
  t0 = time.time()
  common.config_module(NAME).validate(c)
  rec = record_name(c.trace)
  workdir = workdir or f"workdirs/{rec}"      # default: one per trace (its cached policies)
  os.makedirs(workdir, exist_ok=True)
  train_tr, test_tr = common.load_traces(c, eval_trace)
  c, su = trace_setup(c, train_tr, test_tr)
  slo = (c.slo_ttft, c.slo_tpot)
  clip = {part: common.clip_stats(tr, su.max_model_len)
          for part, tr in (("train part", train_tr), ("evaluation part", test_tr))}
  main, *others, held = [Cluster(c, cl, train_tr, test_tr, su) for cl in _clusters(c)]
  seeds = list(range(c.seed, c.seed + c.num_seeds))
  log = lambda msg: print(f"{msg} ({time.time() - t0:.0f} s)", flush=True)

  ev, rl_pp, grids = _evaluator(c, main, su)
  fams = list(grids)

  # 1-2. Every cluster's capacity (best tuned heuristic), every family tuned per load on
  #      training windows (claims' and held-out clusters); cached in the workdir.
  n_tune_evals, resumed = _heuristic_stage(c, su, ev, main, others, held, grids, train_tr.rate,
                                           slo, workdir, eval_trace, log)
  log(f"tuned {n_tune_evals} window evaluations" + (" (from the workdir)" if resumed else ""))

  # 3. RL on the family (scratch and BC-started), budget checkpoints kept.
  learned_ck, curves, train_time, bc_acc, loaded, teacher = _rl_stage(
      c, su, main, others, train_tr, seeds, workdir, bool(eval_trace or reuse), log)
  resumed_stages = (["heuristics"] if resumed else []) + loaded
  variants = list(learned_ck)
  final = common.with_modes(c, {v: ck[-1] for v, ck in learned_ck.items()})
  log("trained")

  # 4. Budget sweep on the claims' cluster's TRAINING windows; RL variant and claims' loads
  #    are chosen there.
  n_ck = int(c.budget_chunks)
  sweep, rl_train, rl_sel, base_train = _select(c, ev, main, learned_ck, final, rl_pp, seeds,
                                                slo)
  best_rl = {ld: rl_sel[ld].choice for ld in c.loads}
  log("budget sweep and selection")

  # 5. Everything on unseen windows: the claims' cluster and the held-out cluster.
  table = common.evaluate_table(ev, main.tuned, fams, final, rl_pp, main.p_test,
                                main.test_starts, main.scales, seeds, slo, main.type_id)
  table_h = common.evaluate_table(ev, held.tuned, fams, final, rl_pp, held.p_test,
                                  held.test_starts, held.scales, seeds, slo, held.type_id)
  log("evaluated")

  # 6. Ratios, verdicts, report.
  policies = fams + list(final)
  summary, summary_h = (_summary(c, tab, policies) for tab in (table, table_h))
  sweep_summary = {f"{v}@{i + 1}@{ld}": harness.summarize(sweep[(f"{v}@{i + 1}", ld)])["goodput"]
                   for v in variants for i in range(n_ck) for ld in c.loads}
  ratios, ratios_h = _ratios(c, table, table_h, final, main, held, best_rl)
  gains = _gains(c, variants, curves, sweep, n_ck)
  claims = _claims(c, main, held, table, table_h, base_train, rl_train, rl_sel, sweep, seeds)
  # Each policy's own SLO capacity (>= 90% attainment), interpolated on the load grid: the
  # headline metric beside goodput at fixed loads.
  caps, caps_h = (protocol.policy_capacities(tab, policies, c.loads, cl.capacity)
                  for tab, cl in ((table, main), (table_h, held)))
  clone = _bc_clone_loads(c, held, teacher)

  md = _markdown(c, main, held, others, summary, summary_h, policies, ratios, ratios_h, best_rl,
                 n_tune_evals, train_time, bc_acc, teacher, sweep_summary, gains, variants,
                 eval_trace, test_tr, clip, su, rec, caps, caps_h, clone)
  plot = _plot(c, summary, summary_h, policies, curves, sweep_summary, variants, main, held,
               results.figure_path(rec, "quick" if quick else "full"))
  payload = _payload(c, su, main, held, others, summary=summary, summary_h=summary_h,
                     ratios=ratios, ratios_h=ratios_h, best_rl=best_rl, caps=caps,
                     caps_h=caps_h, clone=clone, sweep_summary=sweep_summary,
                     variants=variants, gains=gains, teacher=teacher,
                     bc_acc=bc_acc, curves=curves, train_time=train_time,
                     resumed_stages=resumed_stages, n_tune_evals=n_tune_evals, clip=clip,
                     eval_trace=eval_trace, plot=plot)
  name = rec if not eval_trace else f"{rec}_eval"
  results.write_results(name, mode="quick" if quick else "full", config=c, seeds=seeds,
                        claims=claims, wall_time_s=time.time() - t0, payload=payload,
                        markdown=md)
  print(results.verdict_table(claims))
  return {"claims": claims, "summary": summary, "heldout_summary": summary_h}


# Config fields that only the learned policies depend on: the heuristic stage's cache key
# leaves them out, so changing an RL setting (a budget, the seeds) keeps the tuned baselines.
_RL_ONLY = ("ppo", "reinforce", "bc", "budget_scale", "variants", "budget_chunks", "algos",
            "num_seeds")


def _evaluator(c, main, su: Setup):
  """One evaluator (one compile) for every router, every learned policy and every cluster:
  (evaluator, rl_pp: net params -> policy params of the learned branch, tuning grids)."""
  net_fn, template = common.net_policy(c, main.env, main.p_train)
  n_routers = len(heuristics.routers(su.cache))
  ev = harness.Evaluator(main.env, harness.universal_policy(
      heuristics.router_switch(int(c.max_gpus), entity=True, cache=su.cache), n_routers,
      net_fn), c.max_eval_steps, c.eval_lanes, common.warmup_of(c))
  hp = lambda name, knobs: harness.with_net(heuristics.router_params(name, knobs, su.cache),
                                            template)
  rl_pp = lambda net: harness.with_net(heuristics.router_params("jsq", {}, su.cache), template,
                                       net, which=n_routers)
  return ev, rl_pp, _grids(hp, su.cache, int(c.grid_points))


def _rl_stage(c, su: Setup, main, others, train_tr, seeds, workdir, reuse: bool, log):
  """RL on the family: a cluster (with its own capacity as rate scale) and a load per episode;
  BC's teacher is the best tuned heuristic on the claims' cluster at the highest load. Returns
  (checkpoints per variant, curves, train times, BC accuracy, stages loaded, teacher
  (family, load, params))."""
  env_rl, _ = routing.make_routing(table_size=c.train_table, trace=train_tr,
                                   **_kw(c, c.cluster, su))
  fam_params = routing.stack_family(
      [cl.p_train.replace(rate_mults=tuple(float(x) for x in c.loads))
       for cl in [main] + others], [cl.base_scale for cl in [main] + others])
  teacher_ld = max(c.loads)
  teacher_fam = main.best_heur[teacher_ld]
  teacher_pp = main.tuned[(teacher_fam, teacher_ld)]
  out = _learned(c, routing.FamilyRoute(env_rl), fam_params, seeds, teacher_pp, workdir, reuse,
                 log, su)
  return (*out, (teacher_fam, teacher_ld, teacher_pp))


def _summary(c, table, policies) -> dict:
  """{"policy@load": {metric: [mean, lo, hi]}} of an evaluation table."""
  return {f"{p}@{ld}": harness.summarize(table[(p, ld)]) for p in policies for ld in c.loads}


def _select(c, ev, main, learned_ck, final, rl_pp, seeds, slo):
  """Budget sweep and selection on the claims' cluster's TRAINING windows (sampled actions):
  goodput of every checkpoint (the fair-chance input), the RL variant per load (algorithm x
  start x action mode, on the last checkpoints) and the baselines on the same windows (the
  claims' loads are chosen there). Returns (sweep, rl_train, rl_sel, base_train): tables
  {(policy, load): Cells}, except rl_sel {load: repro.selection.Selection}."""
  #    checkpoint; the last one also picks the RL variant (algorithm x start x action mode).
  sel = main.tune_starts[:c.n_select_windows]
  sweep_nets = {f"{v}@{i + 1}": {"params": p, "greedy": jnp.zeros((len(seeds),), bool)}
                for v, ck in learned_ck.items() for i, p in enumerate(ck)}
  sweep_nets.update({k: v for k, v in final.items() if k.endswith("-greedy")})
  sweep = common.evaluate_table(ev, main.tuned, [], sweep_nets, rl_pp, main.p_train, sel,
                                main.scales, seeds, slo, main.type_id)
  n_ck = int(c.budget_chunks)
  rl_train = {}
  for k, v in final.items():
    src = f"{k}@{n_ck}" if not k.endswith("-greedy") else k
    for ld in c.loads:
      rl_train[(k, ld)] = sweep[(src, ld)]
  rl_sel = {ld: selection.pick_best(
      "RL variant", {k: common.cells(rl_train, k, ld) for k in final},
      data=f"goodput on {main.name}'s {len(sel)} training windows x {len(seeds)} seeds, load "
           f"{ld}") for ld in c.loads}
  # The baselines on the same training windows: the claims' load is chosen there.
  base_train = common.evaluate_table(
      ev, main.tuned, list(dict.fromkeys(["jsq", "round_robin", *main.best_heur.values()])), {},
      rl_pp, main.p_train, sel, main.scales, seeds, slo, main.type_id)
  return sweep, rl_train, rl_sel, base_train


def _ratios(c, table, table_h, final, main, held, best_rl):
  """Display ratios (RL / baseline, paired by seed and window; the verdicts are the layer's):
  on the claims' cluster the chosen RL against JSQ, round-robin and the best heuristic, and
  every RL variant against the best heuristic; on the held-out cluster every RL variant
  against its best heuristic. Returns ({key: (ratio, lo, hi)}, same for the held-out)."""
  ratios = {}
  key_of = lambda ld, base, m="goodput", rl=None: f"{rl or best_rl[ld]}/{base}@{ld}:{m}"
  for ld in c.loads:
    for base in dict.fromkeys(("jsq", "round_robin", main.best_heur[ld])):
      for metric in ("goodput", "throughput"):
        ratios[key_of(ld, base, metric)] = common.paired_ratio(table, best_rl[ld], base, ld,
                                                               metric)
    for v in final:    # every RL variant against the best heuristic: scratch and BC both shown
      ratios.setdefault(key_of(ld, main.best_heur[ld], rl=v),
                        common.paired_ratio(table, v, main.best_heur[ld], ld))
  ratios_h = {}
  for ld in c.loads:
    for v in final:
      ratios_h[key_of(ld, held.best_heur[ld], rl=v)] = common.paired_ratio(
          table_h, v, held.best_heur[ld], ld)
  return ratios, ratios_h


def _gains(c, variants, curves, sweep, n_ck: int) -> dict:
  """Display only (the report's sweep table): the training return's late gain and each
  checkpoint's gain over the one before; the verdicts' fair chance is the layer's rule."""
  gains = {}
  for v in variants:
    gains[v] = {"late_gain_return": common.late_gain(curves[v]),
                "sweep_gain_goodput": {str(ld): (common.budget_gain(
                    sweep, f"{v}@{n_ck}", f"{v}@{n_ck - 1}", ld) if n_ck > 1
                    else (float("nan"),) * 3) for ld in c.loads}}
  return gains


def _payload(c, su: Setup, main, held, others, *, summary, summary_h, ratios, ratios_h,
             best_rl, caps, caps_h, clone, sweep_summary, variants, gains, teacher, bc_acc,
             curves, train_time, resumed_stages, n_tune_evals, clip, eval_trace, plot) -> dict:
  """The record's payload (everything but claims and provenance), plain JSON values."""
  teacher_fam, teacher_ld, teacher_pp = teacher
  cl_payload = lambda cl: {"cluster": list(cl.cluster), "gpu_specs": list(cl.specs),
                           "capacity_rps": cl.capacity,
                           "capacity_set_by": cl.cap_by,
                           "rate_scales": {str(k): v for k, v in cl.scales.items()}}
  return {"summary": summary, "heldout_summary": summary_h,
             "ratios": {k: list(v) for k, v in ratios.items()},
             "heldout_ratios": {k: list(v) for k, v in ratios_h.items()},
             "capacity_rps": main.capacity, "capacity_set_by": main.cap_by,
             "rate_scales": {str(k): v for k, v in main.scales.items()},
             "clusters": {"claims": cl_payload(main), "heldout": cl_payload(held),
                          "family": [cl_payload(x) for x in [main] + others]},
             "tuned": common.tuned_payload(main.tuned),
             "heldout_tuned": common.tuned_payload(held.tuned),
             "best_rl_by_training": best_rl,
             "best_heuristic_by_training": main.best_heur,
             "heldout_best_heuristic_by_training": held.best_heur,
             "slo_capacity": caps, "heldout_slo_capacity": caps_h,
             "heldout_extrapolates": _extrapolation(c),
             "bc_clone_of_heldout_winner_at_loads": clone,
             "budget_sweep_goodput": sweep_summary,
             "budget_steps": {v: {str(i + 1): s for i, s in enumerate(_checkpoint_steps(c, v))}
                              for v in variants},
             "fair_chance_gains": {v: {"late_gain_return": list(x["late_gain_return"]),
                                       "sweep_gain_goodput": {k: list(y) for k, y in
                                                              x["sweep_gain_goodput"].items()}}
                                   for v, x in gains.items()},
             "bc": {"teacher": f"{teacher_fam}@{teacher_ld}",
                    "teacher_knobs": heuristics.describe(teacher_fam, teacher_pp),
                    "accuracy_per_seed": [float(a) for a in bc_acc]},
             "learning_curves": curves, "train_time_s": train_time,
             # stages taken from the workdir's caches (same code and settings; their time is
             # in train_time_s, not in this process's wall time)
             "resumed_stages": resumed_stages,
             "baseline_tuning_evals": n_tune_evals, "clipping": clip,
             "eval_trace": eval_trace or f"{c.trace}[late {1 - c.train_frac:.0%}]",
             "trace": c.trace, "model": su.model, "max_model_len": su.max_model_len,
             "slo_ttft": c.slo_ttft, "replay": {"eval_table": int(c.eval_table),
                                                "train_table": int(c.train_table)},
             "rate_per_window": su.rate_ref is not None, "rate_ref_rps": su.rate_ref,
             "prefix_cache": {"on": su.cache, "env_blocks_per_slot": su.cache_blocks,
                              "blocks_per_slot": {x.name: list(su.cache_caps(x.cluster))
                                                  for x in [main] + others + [held]}
                              if su.cache else None},
             "plot": plot}


def _per_seed(cells) -> np.ndarray:
  """[S, W] cells -> [S] per-seed means over the windows (the claims' unit is the seed)."""
  return np.asarray(cells, np.float64).mean(-1)


def _ratio_of_means(a, b) -> float:
  """mean(a) / mean(b) on training windows (NaN where b's mean is 0: that load cannot win)."""
  mb = float(np.mean(b))
  return float(np.mean(a)) / mb if mb > 0 else float("nan")


def _claims(c, main, held, table, table_h, base_train, rl_train, rl_sel, sweep, seeds):
  """The registered claims (configs/serving_routing.claims) judged by jaxrl_suite.repro.

  Per claim, the load is chosen on the training windows (RL's ratio of mean goodput over the
  claim's baseline there, highest wins; the held-out cluster's claim takes the load chosen on
  the claims' cluster), the RL variant by its goodput there (rl_sel); the interval is Fieller's
  on per-seed mean goodput over the evaluation windows; the fair chance is the chosen variant's
  last budget doubling on the training windows (sampled-action checkpoints)."""
  reg = {d["id"]: Claim.from_dict(d) for d in common.config_module(NAME).claims(c)}
  n_ck, t = int(c.budget_chunks), c.trace

  def load_for(base_of) -> selection.Selection:
    return selection.pick_load(
        c.loads, [_ratio_of_means(common.cells(rl_train, rl_sel[ld].choice, ld),
                                  common.cells(base_train, base_of(ld), ld)) for ld in c.loads],
        data=f"RL / baseline mean goodput on {main.name}'s {c.n_select_windows} training "
             f"windows x {len(seeds)} seeds")

  def row(cid, tab, base, ld_sel, note):
    ld = c.loads[ld_sel.candidates.index(ld_sel.choice)] if ld_sel.ok else max(c.loads)
    rl = rl_sel[ld].choice
    v = rl.split("-")[0]
    cells = [common.cells(sweep, f"{v}@{n_ck // 2}", ld), common.cells(sweep, f"{v}@{n_ck}", ld)]
    half = float(np.mean(cells[0])) or 1.0
    fair = {"scores": 100 * np.stack(cells) / half, "scale": "difference",
            "budgets": [float(x) for x in _checkpoint_steps(c, v)[n_ck // 2 - 1::n_ck // 2]]}
    r = claim_record(reg[cid], _per_seed(common.cells(tab, rl, ld)),
                     _per_seed(common.cells(tab, base(ld), ld)), method="fieller",
                     selection=[rl_sel[ld], ld_sel], sweep=fair)
    r["note"] = f"{note}; load {ld}; RL = {rl} vs {base(ld)}"
    return r

  best = lambda cl: (lambda ld: cl.best_heur[ld])
  ld_best = load_for(best(main))
  return [
      row(f"serving_routing.{t}.vs_jsq_48pct.v1", table, lambda ld: "jsq",
          load_for(lambda ld: "jsq"), f"on {main.name}"),
      row(f"serving_routing.{t}.vs_rr_3_5x.v1", table, lambda ld: "round_robin",
          load_for(lambda ld: "round_robin"), f"on {main.name}"),
      row(f"serving_routing.{t}.rl_vs_heuristic.claims_cluster.v1", table, best(main),
          ld_best, f"on {main.name} (trained on)"),
      row(f"serving_routing.{t}.beats_best_heuristic.heldout_cluster.v1", table_h, best(held),
          ld_best, f"on {held.name}, never trained on (heuristics tuned on it; load chosen on "
                   f"{main.name})"),
  ]


def _heuristic_stage(c, su: Setup, ev, main, others, held, grids, trace_rate, slo, workdir,
                     eval_trace, log) -> tuple[int, bool]:
  """Sets capacity, base_scale, cap_by, scales on every cluster and tuned, tune_score,
  best_heur on `main` and `held`. Cached in `workdir/heuristics.json` (plain JSON: capacities
  and the index of each tuned grid point), reused when its key (every config field but
  `_RL_ONLY`, the trace setup, the evaluation trace, the library's code) matches. Returns (#tuning window
  evaluations, whether the cache was used)."""
  path = os.path.join(workdir, "heuristics.json")
  key = json.dumps([{k: v for k, v in c.to_dict().items() if k not in _RL_ONLY},
                    dataclasses.asdict(su), eval_trace, common.library_fingerprint()],
                   sort_keys=True, default=str)
  clusters = [main] + others + [held]
  fams = list(grids)
  saved = None
  if os.path.exists(path):
    try:
      with open(path) as f:
        saved = json.load(f)
    except (OSError, ValueError) as e:     # a truncated cache: recompute, never trust it
      print(f"{path}: unreadable ({e}); recomputing the heuristic stage", flush=True)
  if saved is not None and saved.get("key") == key:
    for cl in clusters:
      cl.capacity, cl.base_scale, cl.cap_by = saved["capacity"][cl.name]
    for cl in (main, held):
      idx = saved["tuned_index"][cl.name]
      cl.tuned = {(f, ld): grids[f][idx[f"{f}@{ld}"]] for f in fams for ld in c.loads}
      cl.tune_score = {(f, ld): saved["tune_score"][cl.name][f"{f}@{ld}"] for f in fams
                       for ld in c.loads}
    n_tune_evals, resumed = int(saved["n_tune_evals"]), True
  else:
    for cl in clusters:
      cl.capacity, cl.base_scale, cl.cap_by = common.best_heuristic_capacity(
          ev, grids, cl.p_train, cl.tune_starts[:c.n_capacity_windows], cl.key, slo,
          trace_rate, cl.type_id)
      log(f"{cl.name}: capacity {cl.capacity:.2f} req/s (set by {cl.cap_by})")
    n_tune_evals = 0
    for cl in (main, held):
      scales = {ld: ld * cl.base_scale for ld in c.loads}
      cl.tuned, cl.tune_score, n = common.tune(ev, grids, cl.p_train, cl.tune_starts,
                                               scales, cl.key, slo, cl.type_id)
      n_tune_evals += n
    index = lambda g, f: next(i for i, x in enumerate(grids[f]) if x is g)
    with open(path + ".tmp", "w") as f:
      json.dump({"key": key, "n_tune_evals": n_tune_evals,
                 "capacity": {cl.name: [cl.capacity, cl.base_scale, cl.cap_by]
                              for cl in clusters},
                 "tuned_index": {cl.name: {f"{f}@{ld}": index(cl.tuned[(f, ld)], f)
                                           for f in fams for ld in c.loads}
                                 for cl in (main, held)},
                 "tune_score": {cl.name: {f"{f}@{ld}": cl.tune_score[(f, ld)] for f in fams
                                          for ld in c.loads} for cl in (main, held)}}, f)
    os.replace(path + ".tmp", path)        # never a half-written cache
    resumed = False
  for cl in clusters:
    cl.scales = {ld: ld * cl.base_scale for ld in c.loads}
  for cl in (main, held):
    cl.best_heur = {ld: max(fams, key=lambda f: cl.tune_score[(f, ld)]) for ld in c.loads}
  return n_tune_evals, resumed


def _learned(c, env, params, seeds, teacher_pp, workdir, reuse, log, su: Setup):
  """PPO from scratch and PPO warm-started by BC, with budget checkpoints. Each variant is
  cached in workdir as soon as it is trained (`policies_<name>.npz`), so an interrupted run
  keeps the variants it finished, and a variant interrupted mid-training resumes after its
  last budget checkpoint (`training_<name>.npz`, train_checkpoints); reused when the variant's run key matches, or always with
  --reuse_policies / --eval_trace. Returns ({variant: [params stacked over seeds] per
  checkpoint}, curves, seconds, BC accuracy, [variants loaded from the workdir])."""
  a = c.algos[0]
  acfg = c[a].copy_and_resolve_references()
  mod = common.ALGOS[a]
  pol = heuristics.router_switch(int(c.max_gpus), entity=True, cache=su.cache)
  teacher = lambda obs, key: jax.vmap(pol, in_axes=(None, 0, 0))(
      teacher_pp, obs, jax.random.split(key, obs.shape[0]))
  # The teacher (the heuristic stage's pick) enters the BC variant's key by its knobs.
  teacher_key = jax.tree.map(lambda x: np.asarray(x).tolist(),
                             {k: x for k, x in teacher_pp.items() if k != "net"})
  ck, curves, train_time, bc_acc, loaded = {}, {}, {}, np.zeros(0), []
  for v in c.variants:
    name = a if v == "scratch" else f"{a}_bc"
    vcfg = acfg.copy_and_resolve_references()
    vcfg.total_timesteps = _checkpoint_steps(c, name)[-1]     # budget_scale[v] x the base
    path = os.path.join(workdir, f"policies_{name}.npz")
    run_key = json.dumps([v, vcfg.to_dict(), list(seeds), int(c.train_table), list(c.loads),
                          [list(x) for x in [c.cluster] + list(c.family_clusters)],
                          int(c.max_gpus), int(c.budget_chunks),
                          c.bc.to_dict() if v == "bc" else None,
                          teacher_key if v == "bc" else None,
                          dataclasses.asdict(su), float(c.slo_ttft), int(c.eval_table),
                          common.library_fingerprint()], sort_keys=True, default=str)
    saved = harness.load_policy(path) if os.path.exists(path) else None
    if saved is not None and (reuse or str(saved.get("key", "")) == run_key):
      ck[name] = [jax.tree.map(jnp.asarray, p) for p in saved["params"]]
      curves[name] = saved["curves"]
      train_time.update(saved["train_time"])
      if v == "bc":
        bc_acc = np.asarray(saved["bc_acc"])
      log(f"{name}: trained policy from {path}")
      loaded.append(name)
      continue
    init, times = None, {}
    if v == "bc":
      init, bc_acc, times[f"{name}_cloning"] = common.bc_warm_params(mod, vcfg, env, params,
                                                                     teacher, seeds, c.bc)
      log(f"behaviour cloning: accuracy {np.round(bc_acc, 3).tolist()}")
    partial = os.path.join(workdir, f"training_{name}.npz")   # resume file, per checkpoint
    ck[name], cv, times[name] = common.train_checkpoints(
        mod, vcfg, env, params, seeds, int(c.budget_chunks), f"route train {name}", init,
        resume_path=partial, resume_key=run_key)
    curves[name] = cv.tolist()
    train_time.update(times)
    harness.save_policy(path, {"params": ck[name], "curves": curves[name], "key": run_key,
                               "train_time": times,
                               "bc_acc": bc_acc if v == "bc" else np.zeros(0)})
    os.remove(partial)
  return ck, curves, train_time, bc_acc, loaded


def _engine_line(c, cluster) -> str:
  """The engine limits the run used (uniform or each GPU type's own)."""
  s = routing.engine_settings(tuple(cluster), c.engine_settings, c.cap, c.max_batched_tokens,
                              c.slo_tpot)    # cluster: GPU spec names
  if c.engine_settings == "uniform":
    return f"max_num_seqs {c.cap}, max_num_batched_tokens {c.max_batched_tokens} on every GPU"
  return ("per GPU type, vLLM defaults with the token budget cut to fit the TPOT SLO: "
          + ", ".join(f"{g} max_num_seqs {cap} / max_num_batched_tokens {m}"
                      for g, cap, m in dict.fromkeys(zip(cluster, s["cap"],
                                                         s["max_batched_tokens"]))))


def _protocol_line(c) -> str:
  """Episode protocol: bursts at an empty cluster, or long steady-state replays."""
  if int(c.window) <= 0 and float(c.warmup_frac) == 0:
    return (f"Episodes: windows of {c.eval_table} consecutive requests arriving at an empty "
            "cluster (no warm-up excluded).")
  return (f"Steady-state protocol: episodes of {c.eval_table} consecutive requests (RL trains "
          f"on {c.train_table}); at most {common.window_of(c) or c.eval_table} requests in "
          "flight in the engine (an arrival beyond that is rejected and counts as an SLO miss; "
          "`rejected` in the JSON summary); the first "
          f"{common.warmup_of(c)} requests of each episode ({c.warmup_frac:.0%}) are excluded "
          "from its metrics. Capacity and loads are measured on these long replays.")


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


def _extrapolation(c) -> dict:
  """How the held-out cluster lies outside the training family: its GPU types no training
  cluster has, and its size against the largest training cluster."""
  train = [tuple(c.cluster)] + [tuple(x) for x in c.family_clusters]
  seen = {g for cl in train for g in cl}
  return {"new_gpu_types": sorted(set(c.heldout_cluster) - seen),
          "gpus": len(c.heldout_cluster), "max_training_gpus": max(len(cl) for cl in train)}


def _bc_clone_loads(c, held, teacher) -> list:
  """Loads at which the held-out cluster's best tuned heuristic (chosen on its training
  windows) is the behaviour-cloning teacher itself, same family and knobs: there BC-PPO's
  held-out ratio measures a clone against its own teacher."""
  teacher_fam, _, teacher_pp = teacher
  want = (teacher_fam, heuristics.describe(teacher_fam, teacher_pp))
  return [ld for ld in c.loads
          if (held.best_heur[ld], heuristics.describe(
              held.best_heur[ld], held.tuned[(held.best_heur[ld], ld)])) == want]


def _extrapolation_line(c, clone) -> str:
  x = _extrapolation(c)
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


def _checkpoint_steps(c, name: str) -> list[int]:
  """Env steps per seed at each budget checkpoint of learned variant `name` ("ppo" = from
  scratch, "ppo_bc" = BC-started): budget_scale[variant] x total_timesteps in budget_chunks."""
  n_ck = int(c.budget_chunks)
  total = int(c[c.algos[0]].total_timesteps) * int(
      c.budget_scale["bc" if name.endswith("_bc") else "scratch"])
  return [total * (i + 1) // n_ck for i in range(n_ck)]


def _sweep_rows(c, sweep_summary, variants, gains):
  n_ck = int(c.budget_chunks)
  rows = ["| variant | env steps at checkpoints | load | " + " | ".join(
      f"checkpoint {i + 1}" for i in range(n_ck)) + " | last - previous checkpoint |",
          "|---" * (n_ck + 4) + "|"]
  for v in variants:
    steps = ", ".join(f"{s:,}" for s in _checkpoint_steps(c, v))
    for ld in c.loads:
      g = gains[v]["sweep_gain_goodput"][str(ld)]
      rows.append(f"| {v} | {steps} | {ld} | " + " | ".join(
          harness.fmt(sweep_summary[f"{v}@{i + 1}@{ld}"]) for i in range(n_ck))
          + f" | {g[0]:+.3f} [{g[1]:+.3f}, {g[2]:+.3f}] |")
  return rows


def _markdown(c, main, held, others, summary, summary_h, policies, ratios, ratios_h, best_rl,
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
      f"accuracy {c.pred_acc}.",
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
      "", "## Ratios", "", *common.ratio_rows(ratios), "",
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
      "Tuned baseline knobs: " + common.knob_line(
          {k: v for k, v in main.tuned.items() if k[0] in ("lot", "sita", "idle_first",
                                                           "least_work", "cache_aware")}), "",
      f"![routing]({rec}.png)"])


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
      f"{_checkpoint_steps(c, a)[-1]:,} env steps) and warm-started by behaviour "
      f"cloning ({a}_bc, {_checkpoint_steps(c, a + '_bc')[-1]:,} env steps) of the best "
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


def _capacity_lines(main, held, caps, caps_h) -> list[str]:
  """The report's section on each policy's own SLO capacity, on both clusters."""
  return ["## SLO capacity per policy", "",
          "Each policy's highest load with >= 90% SLO attainment (mean over seeds x evaluation "
          "windows), linearly interpolated between the evaluated loads "
          "(protocol.capacity_on_loads); req/s = load x the cluster's capacity.", "",
          f"On {main.name}:", "", *protocol.capacity_rows(caps), "",
          f"On {held.name} (never trained on):", "", *protocol.capacity_rows(caps_h)]


def _results_rows(summary, policies, loads, cache: bool) -> list[str]:
  """`serving_common.results_rows` (with segregation), plus the prefix-cache hit rate (prompt
  tokens served from the cache / prompt tokens admitted) where the cache is on."""
  rows = common.results_rows(summary, policies, loads, segregation=True)
  if not cache:
    return rows
  cells = [summary[f"{p}@{ld}"].get("cache_hit_rate", [float("nan")] * 3)
           for ld in loads for p in policies]
  return ([rows[0] + " cache hit |", rows[1] + "---|"]
          + [r + f" {h[0]:.3f} |" for r, h in zip(rows[2:], cells)])


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


def _plot(c, summary, summary_h, policies, curves, sweep_summary, variants, main, held, path):
  """Four panels in a 2 x 2 grid: goodput vs load on the claims' cluster and on the held-out
  one (top; one legend for both, right of the row, since they show the same policies), the
  budget sweep and the training curves (bottom; legends under their panels). Every legend
  sits outside the data, which at ~15 policies would otherwise hide the curves."""
  plt = plotting.pyplot()
  fig, axes = plt.subplots(2, 2, figsize=(13, 9.5))
  for ax, summ, cl in ((axes[0, 0], summary, main), (axes[0, 1], summary_h, held)):
    for p in policies:
      rl = p not in heuristics.CACHE_ROUTERS
      plotting.errorbar_ci(ax, list(c.loads), [summ[f"{p}@{ld}"]["goodput"] for ld in c.loads],
                           fmt="-o" if rl else "--.", label=p, lw=2 if rl else 1)
    ax.set_xlabel("load (fraction of the cluster's capacity)")
    ax.set_ylabel("goodput (req/s)")
    ax.set_title(f"{cl.name}" + (" (never trained on)" if cl is held else ""), fontsize=9)
  axes[0, 1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="policy",
                    title_fontsize=8)
  n_ck = int(c.budget_chunks)
  for v in variants:
    for ld in c.loads:
      plotting.errorbar_ci(axes[1, 0], _checkpoint_steps(c, v),
                           [sweep_summary[f"{v}@{i + 1}@{ld}"] for i in range(n_ck)], fmt="-o",
                           label=f"{v} @ load {ld}")
  axes[1, 0].set_xlabel("env steps (budget checkpoint)")
  axes[1, 0].set_ylabel(f"goodput on {main.name} training windows")
  axes[1, 0].set_title("budget sweep", fontsize=9)
  common.plot_curves(axes[1, 1], curves)
  axes[1, 1].set_title("training curves (mean, 95% band over seeds)", fontsize=9)
  for ax in (axes[1, 0], axes[1, 1]):   # under the panel: outside the data, below its x label
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  plotting.save_figure(fig, path, dpi=90)
  return os.path.basename(path)


def main(argv):
  del argv
  common.main(NAME, run, FLAGS)


if __name__ == "__main__":
  app.run(main)
