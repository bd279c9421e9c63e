r"""Reproduction: CompactionRL, "joint RL on acting and summarising, token-level loss
normalisation and GAE across compaction boundaries remove the compression bias".

Pipeline (StreamLedger-v0, a ledger stream longer than the policy's window W), every stage
cached in --workdir by `repro.stage_cache`:
  1. warm start, one per seed: pretrain a tiny decoder on a corpus of windows whose summaries
     are imperfect (`lm.compaction.CorpusMix`), from that seed's key;
  2. baselines of each seed's warm start, evaluated only: truncation, its own summaries (no RL),
     oracle summaries, full context where it fits;
  3. RL variants through one learner (`lm.token_ppo` on `lm.rollout` records, horizons mixed in
     every batch), identical budgets and keys: token- vs segment-level normalisation x {GAE
     across boundaries, independent GAE, GRPO broadcast}, a frozen summariser, agent-triggered
     COMPACT, and truncation trained by the same RL. Each starts with `critic_warmup`
     value-only iterations on warm-start rollouts, then trains in a doubling budget sweep,
     doubled until its last doubling is flat on validation episodes (`repro.flatness`);
  4. answer accuracy (mid-stream, final) at every H incl. unseen ones, summary fidelity,
     compactions, gradient mass on summaries; claims registered in configs/compaction.py,
     judged at the registered horizon config.eval_horizon by `repro.records.claim_record` from
     per-seed samples (evaluation episodes: own keys, used for nothing else).

The stages are `lm.compaction_study`, the tables and figure `lm.compaction_report`; this script
holds the stage cache, the registered variants and rules they are given, and the claims.

Run from the repo root:  python -m experiments.compaction [--quick] [--workdir=DIR] [--workers=N]
(--workers=2 on a 2-core machine: a helper process takes half of each list of independent
stages, seeds' warm starts, baselines and variants; `repro.workers`).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time  # noqa: E402
import warnings  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from configs import compaction as cfg_mod  # noqa: E402
from jaxrl_suite.core import results as results_lib  # noqa: E402
from jaxrl_suite.lm import compaction_report as report  # noqa: E402
from jaxrl_suite.lm import compaction_study as study  # noqa: E402
from jaxrl_suite.lm import model as lm_model  # noqa: E402
from jaxrl_suite.repro import Claim, claim_record, entry, flatness, stage_cache  # noqa: E402

NAME = "compaction"
CONFIG_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "configs", "compaction.py")
FLAGS = entry.define_flags(NAME, CONFIG_PATH, splits_stages=True)


def _stage_config(config, **extra) -> dict:
  """What a stage's value depends on: the config without the run lists, plus `extra`."""
  d = {k: v for k, v in config.to_dict().items()
       if k not in ("variants", "grad_mass_variants", "quick")}
  return {**d, **extra}


def _last_doubling(config):
  """repro.flatness at the registered delta: (scores [K, S], budgets [K]) -> Flatness."""
  return lambda scores, budgets: flatness.last_doubling(scores, budgets, config.flat_delta)


def warm_starts(config, env, p, cfg, workdir, progress=True):
  """Each seed's own warm start (a stage each): params stacked [S, ...] and per-seed info."""
  keyed = {k: config[k] for k in ("warm_steps", "warm_batch", "warm_lr", "warm_turns",
                                   "warm_row_len")}
  keyed.update(model=config.model.to_dict(), corpus=config.corpus.to_dict(),
               env=config.env.to_dict())
  seeds = range(config.num_seeds)
  results = stage_cache.run_stages(
      [stage_cache.Stage(f"warm/seed{config.seed + s}", dict(keyed, seed=config.seed + s),
                         lambda s=s: study.warm_start_seed(config, env, p, cfg, s, progress))
       for s in seeds], workdir)
  info = [{"loss_last": float(r.value["loss_last"]), "wall_s": r.wall_s, "cached": r.hit}
          for r in results]
  return study.stack_seeds([r.value["params"] for r in results]), info


def baseline_stages(config, env, p, cfg, params0, keys, workdir) -> dict:
  """Evaluation of each warm start under each baseline harness (one stage each)."""
  def stage(name, harness):
    hs = config.full_context_events if harness == "full" else config.eval_events
    return stage_cache.Stage(
        f"baseline/{name}", _stage_config(config, stage=name),
        lambda: study.eval_rows(config, env, p, cfg, params0, harness, hs, keys))
  results = stage_cache.run_stages([stage(n, h) for n, h in cfg_mod.BASELINES.items()], workdir)
  return {n: r.value for n, r in zip(cfg_mod.BASELINES, results)}


def variant_stage(config, env, p, cfg, params0, v, keys, progress=True) -> stage_cache.Stage:
  """Training (critic warm-up + sweep) and evaluation of one variant, as one stage."""
  spec = cfg_mod.VARIANTS[v]
  flat = _last_doubling(config)

  def make():
    pp, vp, out = study.train_variant(config, env, p, cfg, params0, v, spec, keys,
                                      lambda sc, b: flat(sc, b).fair, progress)
    out["rows"] = study.eval_rows(config, env, p, cfg, pp, spec[0], config.eval_events, keys,
                                  warm=params0)
    if v in config.grad_mass_variants:   # gradient mass on summaries: warm start vs after RL
      out["mass"] = {"start": study.grad_mass(config, env, p, cfg, params0, vp, spec, keys),
                     "end": study.grad_mass(config, env, p, cfg, pp, vp, spec, keys)}
    return out
  return stage_cache.Stage(f"variant/{v}", _stage_config(
      config, stage=v, grad_mass=v in config.grad_mass_variants), make)


def judge_claims(config, rows, sweeps, gaps) -> list:
  """One row per registered claim (configs/compaction.py), judged by the reproduction layer
  from the per-seed samples at config.eval_horizon; RL's validation sweep is the fair chance."""
  h = int(config.eval_horizon)
  out = []
  for d in cfg_mod.claims(config):
    cl = Claim.from_dict(d)
    ours, ref = cfg_mod.CLAIM_ROWS[cl.id]
    out.append(claim_record(cl, rows[ours][h]["final_acc"], rows[ref][h]["final_acc"],
                            sweep=sweeps[ours]))
  out.append(claim_record(Claim.from_dict(cfg_mod.exact_claim()), gaps["segment"]["loss"],
                          gaps["token"]["loss"]))
  return out


def measure(config, workdir, progress=True) -> dict:
  """Every stage (cached in `workdir`); returns the measurements `report` reads."""
  t0 = time.time()
  env, p, cfg = study.setup(config)
  keys = study.seed_keys(config)
  params0, warm_info = warm_starts(config, env, p, cfg, workdir, progress)
  rows = baseline_stages(config, env, p, cfg, params0, keys, workdir)
  done = stage_cache.run_stages(
      [variant_stage(config, env, p, cfg, params0, v, keys, progress) for v in config.variants],
      workdir)
  stages = {v: r.value for v, r in zip(config.variants, done)}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    rows.update({v: st["rows"] for v, st in stages.items()})
  rows = {n: {int(h): {m: np.asarray(x, np.float64) for m, x in r.items()}
              for h, r in rr.items()} for n, rr in rows.items()}
  n_params = lm_model.num_params(lm_model.init_params(cfg, jax.random.PRNGKey(0)))
  return {"rows": rows, "stages": stages, "warm_start": warm_info,
          "gaps": study.resplit_gaps(config), "n_params": n_params,
          "compute_s": time.time() - t0}


def run_config(config, workdir, results_dir=None, quick=False, progress=True) -> dict:
  """Measures, judges and writes the record; returns {"claims", "rows", "stages", ...}."""
  cfg_mod.validate(config)
  m = measure(config, workdir, progress)
  t0 = time.time()
  sweeps = {v: {"budgets": list(st["sweep"]["budgets"]), "scores": st["sweep"]["scores"]}
            for v, st in m["stages"].items()}
  claims = judge_claims(config, m["rows"], sweeps, m["gaps"])
  results_dir = results_dir or results_lib.output_dir("quick" if quick else "full")
  os.makedirs(results_dir, exist_ok=True)
  report.plot(config, m["rows"], m["stages"], os.path.join(results_dir, f"{NAME}.png"))
  md = report.markdown(config, m, sweeps, (*cfg_mod.BASELINES, *config.variants),
                       _last_doubling(config))
  payload = report.payload(config, m, sweeps)
  results_lib.write_results(
      NAME, mode="quick" if quick else "full", config=config,
      seeds=[config.seed + i for i in range(config.num_seeds)], claims=claims,
      wall_time_s=m["compute_s"] + time.time() - t0, payload=payload,
      markdown=md + f"\n\n![plot]({NAME}.png)\n", results_dir=results_dir)
  print(results_lib.verdict_table(claims))
  return {"claims": claims, **m, "sweeps": sweeps}


def run(e: entry.Entry) -> dict:
  jax.config.update("jax_compilation_cache_dir", os.environ.get(
      "JAX_COMPILATION_CACHE_DIR", os.path.join(results_lib.REPO_ROOT, ".jax_cache")))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  return run_config(e.config, e.workdir, e.results_dir, e.quick)


if __name__ == "__main__":
  entry.main(FLAGS, run, validate=cfg_mod.validate)
