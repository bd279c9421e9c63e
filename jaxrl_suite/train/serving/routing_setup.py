"""The routing study's setup: what a trace fixes, each cluster's env, one evaluator for all.

  clusters(c)                       -> [claims' cluster, *family clusters, held-out cluster],
                                       each a tuple of generic GPU types
  trace_setup(c, train_tr, test_tr) -> (config for this trace, Setup)
  Setup                             model, context, prefix cache, rate reference, GPU slots
  env_kwargs(c, cluster, su)        -> routing.make_routing keyword arguments for one cluster
  Cluster(c, cluster, train_tr, test_tr, su)
                                    one cluster's entity env, params on both trace parts,
                                    window starts; the heuristic stage (routing_stages) adds
                                    capacity, rate scales and tuned baselines
  evaluator(c, main, su)            -> (harness.Evaluator over every router and the learned
                                       net, rl_pp(net) -> policy params, tuning grids)
  checkpoint_steps(c, name)         -> env steps per seed at each budget checkpoint
  extrapolation(c)                  -> how the held-out cluster lies outside the family
  summary(c, table, policies)       -> {"policy@load": {metric: [mean, lo, hi]}}

`c` is configs/serving_routing's config. Used by experiments/serving_routing.py; nothing here
writes files or judges claims.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import cost_model, harness, heuristics, replay, routing
from jaxrl_suite.train.serving import training


def clusters(c) -> list[tuple[str, ...]]:
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
  ct.eval_table, ct.train_table = replay.replay_length(c, len(test_tr), c.trace)
  model = cost_model.TRACE_MODELS.get(c.trace, cost_model.LLAMA2_7B.name)
  specs = [routing.cluster_specs(cl, model) for cl in clusters(c)]
  mml = routing.context_of([s for sp in specs for s in sp])
  cache = bool(c.prefix_cache) and train_tr.hash_ids is not None and test_tr.hash_ids is not None
  g = int(c.max_gpus)
  blocks = (tuple(max(x) for x in zip(*[_pad(routing.default_cache_blocks(sp), g)
                                        for sp in specs])) if cache else None)
  return ct, Setup(c.trace, model, mml, cache, blocks,
                   float(train_tr.rate) if c.rate_per_window else None, g)


def env_kwargs(c, cluster, su: Setup) -> dict:
  """routing.make_routing keyword arguments (all but table_size and trace) for one cluster."""
  specs = su.specs(cluster)
  kw = dict(max_events=c.max_events, cluster=specs, train_frac=None,
            pred_acc=c.pred_acc, slo_ttft=c.slo_ttft, slo_tpot=c.slo_tpot,
            drain_dt=c.drain_dt, window=replay.window_of(c), entity_obs=True,
            max_gpus=int(c.max_gpus), max_model_len=su.max_model_len,
            cache_blocks=su.cache_blocks, iteration_cost=c.get("iteration_cost", "analytic"),
            **routing.engine_settings(specs, c.engine_settings, c.cap,
                                      c.max_batched_tokens, c.slo_tpot,
                                      c.get("iteration_cost", "analytic")))
  if su.cache:
    kw["cache_caps"] = jnp.asarray(su.cache_caps(cluster), jnp.int32)
  if su.rate_ref is not None:
    # every replay (train and evaluation part) offers scale x the training part's mean rate
    kw.update(rate_per_window=True, rate_ref=su.rate_ref)
  return kw


def cluster_name(cl) -> str:
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
    self.name = cluster_name(cluster)
    (self.env, self.p_train, self.p_test, self.key, self.tune_starts,
     self.test_starts) = replay.eval_setup(c, routing.make_routing, train_tr, test_tr,
                                           **env_kwargs(c, cluster, su))
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


def evaluator(c, main: Cluster, su: Setup):
  """One evaluator (one compile) for every router, every learned policy and every cluster:
  (evaluator, rl_pp: net params -> policy params of the learned branch, tuning grids)."""
  net_fn, template = training.net_policy(c, main.env, main.p_train)
  n_routers = len(heuristics.routers(su.cache))
  ev = harness.Evaluator(main.env, harness.universal_policy(
      heuristics.router_switch(int(c.max_gpus), entity=True, cache=su.cache), n_routers,
      net_fn), c.max_eval_steps, c.eval_lanes, replay.warmup_of(c))
  hp = lambda name, knobs: harness.with_net(heuristics.router_params(name, knobs, su.cache),
                                            template)
  rl_pp = lambda net: harness.with_net(heuristics.router_params("jsq", {}, su.cache), template,
                                       net, which=n_routers)
  return ev, rl_pp, _grids(hp, su.cache, int(c.grid_points))


def checkpoint_steps(c, name: str) -> list[int]:
  """Env steps per seed at each budget checkpoint of learned variant `name` ("ppo" = from
  scratch, "ppo_bc" = BC-started): budget_scale[variant] x total_timesteps in budget_chunks."""
  n_ck = int(c.budget_chunks)
  total = int(c[c.algos[0]].total_timesteps) * int(
      c.budget_scale["bc" if name.endswith("_bc") else "scratch"])
  return [total * (i + 1) // n_ck for i in range(n_ck)]


def extrapolation(c) -> dict:
  """How the held-out cluster lies outside the training family: its GPU types no training
  cluster has, and its size against the largest training cluster."""
  train = [tuple(c.cluster)] + [tuple(x) for x in c.family_clusters]
  seen = {g for cl in train for g in cl}
  return {"new_gpu_types": sorted(set(c.heldout_cluster) - seen),
          "gpus": len(c.heldout_cluster), "max_training_gpus": max(len(cl) for cl in train)}


def summary(c, table, policies) -> dict:
  """{"policy@load": {metric: [mean, lo, hi]}} of an evaluation table."""
  return {f"{p}@{ld}": harness.summarize(table[(p, ld)]) for p in policies for ld in c.loads}
