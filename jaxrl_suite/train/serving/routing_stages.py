"""The routing study's two expensive stages, each cached in the workdir so that a rerun resumes.

  heuristic_stage(c, su, ev, main, others, held, grids, trace_rate, slo, workdir, eval_trace,
                  log) -> (#tuning window evaluations, whether the cache was used)
      every cluster's capacity (best tuned heuristic) and rate scales; every router family
      tuned per load on the claims' and the held-out cluster. Cache: workdir/heuristics.json.
  rl_stage(c, su, main, others, train_tr, seeds, workdir, reuse, log)
      -> ({variant: [params stacked over seeds [S, ...]] per budget checkpoint},
          {variant: curves [S, U]}, {name: seconds}, BC accuracy [S], [variants loaded],
          teacher (family, load, params))
      PPO from scratch and warm-started by behaviour cloning of the best tuned heuristic, on
      the cluster family. Caches: workdir/policies_<variant>.npz, and training_<variant>.npz
      while a variant trains (resume after its last budget checkpoint).
  bc_clone_loads(c, held, teacher) -> loads where the held-out winner IS the BC teacher

Cache keys hold the config (less the fields a stage does not depend on), the trace Setup and
training.library_fingerprint(), so a cache made by other code or settings is never reused.
`log(msg)` prints progress; the clusters are routing_setup.Cluster objects.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import stage_cache
from jaxrl_suite.envs.serving import harness, heuristics, protocol, routing
from jaxrl_suite.train.serving import training
from jaxrl_suite.train.serving.routing_setup import Setup, checkpoint_steps, env_kwargs

# Config fields that only the learned policies depend on: the heuristic stage's cache key
# leaves them out, so changing an RL setting (a budget, the seeds) keeps the tuned baselines.
RL_ONLY = ("ppo", "reinforce", "bc", "budget_scale", "variants", "budget_chunks", "algos",
           "num_seeds")


def _read_json(path: str):
  """The cache file's JSON, or None when absent or unreadable (a truncated cache is never
  trusted: the stage is recomputed)."""
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    print(f"{path}: unreadable ({e}); recomputing the heuristic stage", flush=True)
    return None


def _restore(c, saved, grids, clusters, main, held) -> int:
  """Capacities and tuned grid points from the cache; returns #tuning window evaluations."""
  fams = list(grids)
  for cl in clusters:
    cl.capacity, cl.base_scale, cl.cap_by = saved["capacity"][cl.name]
  for cl in (main, held):
    cl.tuned = protocol.tuned_from_index(grids, saved["tuned_index"][cl.name], c.loads)
    cl.tune_score = {(f, ld): saved["tune_score"][cl.name][f"{f}@{ld}"] for f in fams
                     for ld in c.loads}
  return int(saved["n_tune_evals"])


def _compute(c, ev, grids, clusters, main, held, trace_rate, slo, log) -> int:
  """Capacities of every cluster, tuning on the claims' and held-out clusters; #evaluations."""
  for cl in clusters:
    cl.capacity, cl.base_scale, cl.cap_by = protocol.best_heuristic_capacity(
        ev, grids, cl.p_train, cl.tune_starts[:c.n_capacity_windows], cl.key, slo,
        trace_rate, cl.type_id)
    log(f"{cl.name}: capacity {cl.capacity:.2f} req/s (set by {cl.cap_by})")
  n_tune_evals = 0
  for cl in (main, held):
    scales = {ld: ld * cl.base_scale for ld in c.loads}
    cl.tuned, cl.tune_score, n = protocol.tune(ev, grids, cl.p_train, cl.tune_starts,
                                               scales, cl.key, slo, cl.type_id)
    n_tune_evals += n
  return n_tune_evals


def _save(path, key, c, grids, clusters, main, held, n_tune_evals) -> None:
  """Plain JSON: capacities and the index of each tuned grid point; atomic (tmp + replace)."""
  fams = list(grids)
  with open(path + ".tmp", "w") as f:
    json.dump({"key": key, "n_tune_evals": n_tune_evals,
               "capacity": {cl.name: [cl.capacity, cl.base_scale, cl.cap_by]
                            for cl in clusters},
               "tuned_index": {cl.name: protocol.tuned_index(grids, cl.tuned, c.loads)
                               for cl in (main, held)},
               "tune_score": {cl.name: {f"{f}@{ld}": cl.tune_score[(f, ld)] for f in fams
                                        for ld in c.loads} for cl in (main, held)}}, f)
  os.replace(path + ".tmp", path)        # never a half-written cache


def heuristic_stage(c, su: Setup, ev, main, others, held, grids, trace_rate, slo, workdir,
                    eval_trace, log) -> tuple[int, bool]:
  """Sets capacity, base_scale, cap_by, scales on every cluster and tuned, tune_score,
  best_heur on `main` and `held`. Cached in `workdir/heuristics.json` (plain JSON: capacities
  and the index of each tuned grid point), reused when its key (every config field but
  `RL_ONLY`, the trace setup, the evaluation trace, the library's code) matches. Returns
  (#tuning window evaluations, whether the cache was used)."""
  path = os.path.join(workdir, "heuristics.json")
  key = json.dumps([{k: v for k, v in c.to_dict().items() if k not in RL_ONLY},
                    dataclasses.asdict(su), eval_trace, training.library_fingerprint()],
                   sort_keys=True, default=str)
  clusters = [main] + others + [held]
  # Under the workdir's lock: a second process on the workdir (--workers) waits, then reads it.
  with stage_cache.file_lock(os.path.join(workdir, "locks", "heuristics.lock")):
    saved = _read_json(path)
    resumed = saved is not None and saved.get("key") == key
    if resumed:
      n_tune_evals = _restore(c, saved, grids, clusters, main, held)
    else:
      n_tune_evals = _compute(c, ev, grids, clusters, main, held, trace_rate, slo, log)
      _save(path, key, c, grids, clusters, main, held, n_tune_evals)
  fams = list(grids)
  for cl in clusters:
    cl.scales = {ld: ld * cl.base_scale for ld in c.loads}
  for cl in (main, held):
    cl.best_heur = {ld: max(fams, key=lambda f: cl.tune_score[(f, ld)]) for ld in c.loads}
  return n_tune_evals, resumed


def rl_stage(c, su: Setup, main, others, train_tr, seeds, workdir, reuse: bool, log):
  """RL on the family: a cluster (with its own capacity as rate scale) and a load per episode;
  BC's teacher is the best tuned heuristic on the claims' cluster at the highest load. Returns
  (checkpoints per variant, curves, train times, BC accuracy, stages loaded, teacher
  (family, load, params))."""
  env_rl, _ = routing.make_routing(table_size=c.train_table, trace=train_tr,
                                   **env_kwargs(c, c.cluster, su))
  fam_params = routing.stack_family(
      [cl.p_train.replace(rate_mults=tuple(float(x) for x in c.loads))
       for cl in [main] + others], [cl.base_scale for cl in [main] + others])
  teacher_ld = max(c.loads)
  teacher_fam = main.best_heur[teacher_ld]
  teacher_pp = main.tuned[(teacher_fam, teacher_ld)]
  out = _learned(c, routing.FamilyRoute(env_rl), fam_params, seeds, teacher_pp, workdir, reuse,
                 log, su)
  return (*out, (teacher_fam, teacher_ld, teacher_pp))


def _run_key(c, v, vcfg, seeds, teacher_key, su: Setup) -> str:
  """A variant's cache key: everything its trained params depend on."""
  return json.dumps([v, vcfg.to_dict(), list(seeds), int(c.train_table), list(c.loads),
                     [list(x) for x in [c.cluster] + list(c.family_clusters)],
                     int(c.max_gpus), int(c.budget_chunks),
                     c.bc.to_dict() if v == "bc" else None,
                     teacher_key if v == "bc" else None,
                     dataclasses.asdict(su), float(c.slo_ttft), int(c.eval_table),
                     training.library_fingerprint()], sort_keys=True, default=str)


def _learned(c, env, params, seeds, teacher_pp, workdir, reuse, log, su: Setup):
  """PPO from scratch and PPO warm-started by BC, with budget checkpoints. Each variant is
  cached in workdir as soon as it is trained (`policies_<name>.npz`), so an interrupted run
  keeps the variants it finished, and a variant interrupted mid-training resumes after its
  last budget checkpoint (`training_<name>.npz`, train_checkpoints); reused when the variant's
  run key matches, or always with --reuse_policies / --eval_trace. Each variant is trained
  under a lock in `workdir/locks/`, so processes sharing the workdir (--workers) train different
  variants and read each other's. Returns ({variant: [params
  stacked over seeds] per checkpoint}, curves, seconds, BC accuracy, [variants loaded from the
  workdir])."""
  a = c.algos[0]
  acfg = c[a].copy_and_resolve_references()
  mod = training.ALGOS[a]
  pol = heuristics.router_switch(int(c.max_gpus), entity=True, cache=su.cache)
  teacher = lambda obs, key: jax.vmap(pol, in_axes=(None, 0, 0))(
      teacher_pp, obs, jax.random.split(key, obs.shape[0]))
  # The teacher (the heuristic stage's pick) enters the BC variant's key by its knobs.
  teacher_key = jax.tree.map(lambda x: np.asarray(x).tolist(),
                             {k: x for k, x in teacher_pp.items() if k != "net"})
  ck, curves, train_time, bc_acc, loaded = {}, {}, {}, [np.zeros(0)], []
  # A policy file written after this point was trained beside this run by another process
  # sharing the workdir (--workers), not resumed from an earlier run.
  t_start = time.time()

  def variant(v):
    name = a if v == "scratch" else f"{a}_bc"
    vcfg = acfg.copy_and_resolve_references()
    vcfg.total_timesteps = checkpoint_steps(c, name)[-1]     # budget_scale[v] x the base
    path = os.path.join(workdir, f"policies_{name}.npz")
    run_key = _run_key(c, v, vcfg, seeds, teacher_key, su)
    saved = harness.load_policy(path) if os.path.exists(path) else None
    if saved is not None and (reuse or str(saved.get("key", "")) == run_key):
      ck[name] = [jax.tree.map(jnp.asarray, p) for p in saved["params"]]
      curves[name] = saved["curves"]
      train_time.update(saved["train_time"])
      if v == "bc":
        bc_acc[0] = np.asarray(saved["bc_acc"])
      here = os.path.getmtime(path) >= t_start
      log(f"{name}: trained policy from {path}"
          + (" (trained during this run by another process on the workdir)" if here else ""))
      loaded.append(f"{name} (other process)" if here else name)
      return
    init, times = None, {}
    if v == "bc":
      init, bc_acc[0], times[f"{name}_cloning"] = training.bc_warm_params(
          mod, vcfg, env, params, teacher, seeds, c.bc)
      log(f"behaviour cloning: accuracy {np.round(bc_acc[0], 3).tolist()}")
    partial = os.path.join(workdir, f"training_{name}.npz")   # resume file, per checkpoint
    ck[name], cv, times[name] = training.train_checkpoints(
        mod, vcfg, env, params, seeds, int(c.budget_chunks), f"route train {name}", init,
        resume_path=partial, resume_key=run_key)
    curves[name] = cv.tolist()
    train_time.update(times)
    harness.save_policy(path, {"params": ck[name], "curves": curves[name], "key": run_key,
                               "train_time": times,
                               "bc_acc": bc_acc[0] if v == "bc" else np.zeros(0)})
    os.remove(partial)

  # Each variant under its lock in the workdir: processes sharing the workdir (--workers) train
  # different variants, then read each other's saved policies.
  stage_cache.each_under_lock(
      c.variants, lambda v: os.path.join(workdir, "locks", f"policies_{v}.lock"), variant,
      on_wait=lambda v: log(f"{v}: another process is training it; waiting"))
  names = [a if v == "scratch" else f"{a}_bc" for v in c.variants]
  ck, curves = {n: ck[n] for n in names}, {n: curves[n] for n in names}
  bc_acc = bc_acc[0]
  return ck, curves, train_time, bc_acc, loaded


def bc_clone_loads(c, held, teacher) -> list:
  """Loads at which the held-out cluster's best tuned heuristic (chosen on its training
  windows) is the behaviour-cloning teacher itself, same family and knobs: there BC-PPO's
  held-out ratio measures a clone against its own teacher."""
  teacher_fam, _, teacher_pp = teacher
  want = (teacher_fam, heuristics.describe(teacher_fam, teacher_pp))
  return [ld for ld in c.loads
          if (held.best_heur[ld], heuristics.describe(
              held.best_heur[ld], held.tuned[(held.best_heur[ld], ld)])) == want]
