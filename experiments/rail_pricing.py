"""Reproduction: "relational multi-agent RL prices trains ... running in trial on the UK rail
network" (blog). Paper: arXiv 2607.05179, code Kinrre/RelationalRailPricing-RL (Spanish
high-speed market, R-GCN + MATD3 on ROBIN, RL baselines only).

RailRM-v0 (jaxrl_suite/envs/rail), the east-coast-like `ecml` line: 9 trains of 3 operators,
Poisson-MNL demand calibrated to UK fare elasticities (checked here by price-perturbation
rollouts), leg capacities, 12 weekly booking periods, operator revenue as reward.

  * RL through the one on-policy learner (PPO; MAPPO and IPPO over the train axis) with the
    relational train-token agent (agents/rail_features.py) and its MLP-on-own-features ablation;
    seeds vmapped in one jit; greedy vs sampled actions chosen on the tuning episodes.
  * RM baselines tuned on the same number of episodes as one RL seed trains on: static fares,
    myopic, EMSR-b, EMSR-b-MR (fare adjustment), choice-based DLP bid prices; a demand-known
    CDLP oracle; one-shot Nash and joint-monopoly static fares (fluid model) and the collusion
    index.
  * Everything measured on held-out episodes (keys never used in training or tuning) at the
    training demand level and at a held-out demand-level shift; 95% CIs over seeds.

The stages are library code: envs/rail (calibration.per_seed, rm_scoring,
competition.benchmark_fares, bound.seed_bounds), algos/budget_sweep.py, and train/rail
(variants, rl_stage, sweep_inputs, report, figure); this file holds the stages' order, the
claims (judged by jaxrl_suite.repro, whose rules and intervals it hands to the library) and the
record. The tuning, every RL variant and the held-out evaluation are stages of the workdir's
stage cache (core.stage_cache, keyed by the config and the library), so a rerun resumes.

  python -m experiments.rail_pricing [--quick] [--workdir=DIR] [--config.x=...]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from jaxrl_suite.core import results, stage_cache
from jaxrl_suite.envs.rail import bound, calibration, competition, make_rail, rm_scoring
from jaxrl_suite.envs.rail import baselines as B
from jaxrl_suite.envs.rail.instance import SEGMENTS, ELASTICITY
from jaxrl_suite.repro import Claim, claim_record, entry, flatness, intervals, selection
from jaxrl_suite.train.rail import figure, report, rl_stage, sweep_inputs, variants

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "rail_pricing"
FLAGS = entry.define_flags(NAME, os.path.join(_ROOT, "configs", "rail_pricing.py"))
UK_SOURCES = ("LNER demand-based pricing pilot (DfT, Feb 2023; two-year trial from 5 Feb 2024, "
              "King's Cross-Newcastle/Berwick/Edinburgh; fare types 7 -> 3 incl. '70min Flex'; "
              "The Times 2023-02-07, Transport Focus 2024-01-31): not multi-agent RL. The paper "
              "(arXiv 2607.05179, Kinrre/RelationalRailPricing-RL) and its predecessor "
              "(arXiv 2501.08234, Kinrre/RailPricing-RL) use Spanish Renfe/Adif data on ROBIN "
              "and mention no UK trial.")


# ---- repro's intervals and rules, handed to the library stages ----------------------------------
def _ci(x) -> tuple[float, float, float]:
  """Mean and Student-t 95% CI over seeds (jaxrl_suite.repro.intervals.t_mean)."""
  iv = intervals.t_mean(np.asarray(x, np.float64).ravel())
  return iv.estimate, iv.lo, iv.hi


def _ratio_ci(a, b) -> list[float]:
  """[ratio, lo, hi]: geometric-mean per-seed ratio a / b with the t CI of the log-ratios."""
  e = intervals.log_ratio(a, b).extra
  return [e["ratio"], e["ratio_lo"], e["ratio_hi"]]


def _flattening(rev: np.ndarray, updates) -> dict:
  """"RL had a fair chance" for one variant's budget sweep (jaxrl_suite.repro.flatness):
  rev [S, B] is tuning-episode revenue per seed at the doubling budgets `updates` [B]. The
  per-seed log gain of the last doubling, with its t CI, is flat / rising / degrading / unknown
  against FLAT_DELTA (a falling curve is "degrading", not flat)."""
  import configs.rail_pricing as cfg_mod  # pylint: disable=g-import-not-at-top
  u = [float(x) for x in updates]
  f = flatness.last_doubling(np.asarray(rev, np.float64).T, u, cfg_mod.FLAT_DELTA,
                             scale="log_ratio")
  out = f.to_dict()
  out["gain_ci"] = [f.gain.estimate, f.gain.lo, f.gain.hi]
  return out


RULES = rl_stage.Rules(pick_mode=selection.pick_mode, last_doubling=_flattening, ratio=_ratio_ci)


# ---- stages -------------------------------------------------------------------------------------
class _Setup(NamedTuple):
  env: object
  p_train: object
  scenarios: dict        # {"train_level" | "shift": env params}
  key: jax.Array
  tune_keys: jax.Array   # [N, 2], shared by every baseline and seed
  eval_keys: jax.Array   # [S, N, 2], held out


def _setup(c) -> _Setup:
  """The env at the training level (RM information as configured), both scenarios, the keys."""
  env, p_train = make_rail(c.instance, pad=c.pad, reward_mode=c.reward_mode,
                           demand_level=c.demand_level, reward_scale=c.reward_scale,
                           information=c.information)
  key = jax.random.PRNGKey(c.seed)
  return _Setup(env, p_train, {"train_level": p_train,
                               "shift": p_train.replace(demand_level=c.shift_level)}, key,
                jax.random.split(jax.random.fold_in(key, 1), c.tune_episodes),
                jnp.stack([jax.random.split(jax.random.fold_in(key, 100 + s), c.eval_episodes)
                           for s in range(c.n_seeds)]))


def _timed(timings: dict, name: str, bar, fn):
  """fn()'s value; its wall seconds in timings[name]; one step of the progress bar."""
  t = time.time()
  out = fn()
  timings[name] = time.time() - t
  if bar is not None:
    bar.update()
  return out


def _tuning(c, workdir, evals, rm_rows, s: _Setup) -> dict:
  """Every RM row tuned on the tuning episodes (the same count for every family): a stage."""
  return stage_cache.cached_stage("rail/tuning", c, lambda: rm_scoring.tune(
      evals, rm_rows, s.tune_keys, s.p_train), workdir)


def _evaluation(c, workdir, evals, rm_rows, s: _Setup, tuning, fixed):
  """(baselines and fixed fares on the held-out episodes, a stage; the upper bound per seed)."""
  tuned = {k: v["chosen"] for k, v in tuning.items()}
  base = stage_cache.cached_stage("rail/baselines", c, lambda: rm_scoring.score(
      evals, rm_rows, tuned, fixed, s.eval_keys, s.scenarios), workdir)
  return base, bound.seed_bounds(s.env, s.eval_keys, s.scenarios)


def run(c, quick: bool, workdir: str, results_dir: str | None = None) -> dict:
  import configs.rail_pricing as cfg_mod  # pylint: disable=g-import-not-at-top
  cfg_mod.validate(c)
  t0 = time.time()
  os.makedirs(workdir, exist_ok=True)
  timings, s = {}, _setup(c)
  bar = tqdm(total=5 + len(c.variants), desc="rail_pricing", disable=quick)
  r = {"el_seeds": _timed(timings, "elasticity_s", bar, lambda: calibration.per_seed(  # [S, G]
      s.env, s.p_train, jax.random.fold_in(s.key, 2), c.n_seeds, c.elasticity_episodes))}
  evals, rm_rows = rm_scoring.evaluators(s.env), rm_scoring.rows(c.information,
                                                                  c.pooled_reference)
  r["tuning"] = _timed(timings, "baseline_tuning_s", bar,
                       lambda: _tuning(c, workdir, evals, rm_rows, s))
  r["nash_lv"], r["nash_conv"], r["mono_lv"] = _timed(
      timings, "competition_s", bar,
      lambda: competition.benchmark_fares(s.env, s.p_train, c.reward_mode))
  # RL: every variant's seeds in one jit, scored at every budget on the tuning episodes
  r["rl"], r["curves"], r["rl_meta"], r["sweep"] = _timed(
      timings, "rl_s", None, lambda: rl_stage.train_variants(
          c, s.key, s.tune_keys, s.eval_keys, s.scenarios, RULES, workdir, bar.update))
  fixed = {"nash": r["nash_lv"], "monopoly": r["mono_lv"]}
  r["base"], r["ub"] = _timed(timings, "evaluation_s", bar,
                              lambda: _evaluation(c, workdir, evals, rm_rows, s, r["tuning"],
                                                  fixed))
  rec = _verdicts(c, r)
  bar.update()
  bar.close()
  timings["total_s"] = time.time() - t0
  return _write(c, quick, results_dir, r, rec, timings)


def _write(c, quick: bool, results_dir, r: dict, rec: dict, timings: dict) -> dict:
  """The record (json, md) and the figure, where the library says a run writes."""
  table = report.table(r["rl"], r["base"], _ci)
  bound_rec, bound_line = report.bound_summary(r["ub"], table, _ci)
  best_b = rec["comparisons"]["best_rl_vs_best_rm_train_level"]["baseline"]
  best_b_rev = max(r["tuning"][best_b]["revenue"])
  el = r["el_seeds"].mean(0)
  payload = {"elasticity": {s: float(e) for s, e in zip(SEGMENTS, el)},
             "elasticity_targets": {s: float(e) for s, e in zip(SEGMENTS, ELASTICITY)},
             "uk_ranges": calibration.UK_RANGES, "tuning": r["tuning"],
             "nash_levels": r["nash_lv"].tolist(), "nash_converged": r["nash_conv"],
             "monopoly_levels": r["mono_lv"].tolist(), "rl": r["rl_meta"], "table": table,
             "curves": {k: v.tolist() for k, v in r["curves"].items()}, "timings": timings,
             "comparisons": rec["comparisons"], "upper_bound": bound_rec,
             "sweep": {k: {m: np.asarray(x).tolist() for m, x in v.items()}
                       for k, v in r["sweep"].items()}}
  md = report.details_md(rec["claims"]) + report.markdown(c, dict(
      r, el=el, tuned={k: v["chosen"] for k, v in r["tuning"].items()}, table=table,
      comparisons=rec["comparisons"], timings=timings, best_b=best_b, best_b_rev=best_b_rev,
      bound_line=bound_line), _ci)
  # The library names the folder (results/ full, the quick folder quick, or JAXRL_RESULTS_DIR),
  # so reproduce.py finds the record where it looks.
  rdir = results_dir or results.output_dir("quick" if quick else "full")
  path = results.write_results(NAME, mode="quick" if quick else "full", config=c,
                               seeds=list(range(c.n_seeds)), claims=rec["claims"],
                               wall_time_s=timings["total_s"], payload=payload, markdown=md,
                               results_dir=rdir)
  figure.plot(r["curves"], r["sweep"], r["rl_meta"], best_b, best_b_rev, table,
              os.path.join(os.path.dirname(path), f"{NAME}.png"), _ci)
  return {"claims": rec["claims"], "path": path, "table": table, "payload": payload}


# ---- claims: one row per registered claim, judged by jaxrl_suite.repro --------------------------
class _Rows:
  """The claim rows of configs/rail_pricing.py's registry, in the order added, and the
  comparisons beside them (context the verdicts do not use)."""

  def __init__(self):
    import configs.rail_pricing as cfg_mod  # pylint: disable=g-import-not-at-top
    self.reg = {d["id"]: Claim.from_dict(d) for d in cfg_mod.claims()}
    self.claims, self.comp = [], {}

  def add(self, cid, a, b=None, note="", **kw):
    row = claim_record(self.reg[cid], np.asarray(a, np.float64),
                       None if b is None else np.asarray(b, np.float64), **kw)
    row["note"] = note
    self.claims.append(row)


def _rev_sweep(r, v) -> dict:
  """v's tuning-episode revenue sweep in its chosen mode, as the layer's fair-chance input."""
  return sweep_inputs.revenue(r["sweep"][v], r["rl_meta"][v]["mode"])


def _calibration_row(rows: _Rows, el_seeds) -> None:
  """Descriptive: a check of the simulator, not a claim of the paper."""
  rows.add("rail.elasticity_calibration.v1",
           np.abs(el_seeds - np.asarray(ELASTICITY)[None]).max(1),
           note=report.calibration_note(el_seeds.mean(0)))


def _picks(c, r) -> dict:
  """The best tuned baseline and the best RL variants, all chosen on the tuning episodes. A
  revenue manager knows neither the shock (cdlp_known) nor its rivals' bookings (*_pooled). The
  claim is about relational MARL: its subject is the best relational variant (tuning revenue at
  the main budget, in its chosen mode); the best variant of any policy is recorded beside it."""
  rm = [b for b in B.BASELINES if b != "cdlp_known"]
  data = f"tuning episodes ({c.tune_episodes}, training demand level)"
  sel_b = selection.pick_heuristic(
      {b: dict(zip(r["tuning"][b]["grid"], r["tuning"][b]["revenue"])) for b in rm}, data=data)
  meta = r["rl_meta"]
  score = lambda v: [max(meta[v]["selection_revenue"].values())]
  rels = [v for v in meta if variants.parse(v)[1]] or list(meta)
  sel_rl = selection.pick_best("relational RL variant", {v: score(v) for v in rels},
                               data=f"{data}, at {c.main_updates} updates")
  best_any = selection.pick_best("RL variant", {v: score(v) for v in meta}, data=data).choice
  return {"sel_b": sel_b, "best_b": sel_b.choice.rsplit("(", 1)[0], "sel_rl": sel_rl,
          "best_rl": sel_rl.choice, "best_any": best_any,
          "mode_sel": {v: selection.Selection.from_dict(m["mode_selection"])
                       for v, m in meta.items()}}


def _rl_vs_rm_rows(c, rows: _Rows, r, p) -> None:
  """Best relational variant vs best tuned baseline, at the training level and the shift."""
  rl, base, meta, best_rl, best_b = r["rl"], r["base"], r["rl_meta"], p["best_rl"], p["best_b"]
  for sc in ("train_level", "shift"):
    b = base[best_b][sc]["revenue_total"]
    for tag, pol in (("best_rl", best_rl), ("best_any_rl", p["best_any"])):
      rows.comp[f"{tag}_vs_best_rm_{sc}"] = {"rl": pol, "baseline": best_b,
                                             "ratio": _ratio_ci(rl[pol][sc]["revenue_total"], b)}
  ra, ralo, rahi = rows.comp["best_any_rl_vs_best_rm_train_level"]["ratio"]
  n_flat = sum(m["flattening"]["state"] == "flat" for m in meta.values())
  for sc, cid in (("train_level", "rail.rl_beats_rm.v1"), ("shift", "rail.rl_beats_rm_shift.v1")):
    rows.add(cid, rl[best_rl][sc]["revenue_total"], base[best_b][sc]["revenue_total"],
             selection=[p["sel_rl"], p["mode_sel"][best_rl], p["sel_b"]],
             sweep=_rev_sweep(r, best_rl),
             note=f"{best_rl} ({meta[best_rl]['mode']}) vs {p['sel_b'].choice}, held-out "
                  f"episodes; every RL variant at {c.main_updates} updates; {best_rl}'s budget "
                  f"sweep: {report.flat_text(meta[best_rl]['flattening'])}; variants flat: "
                  f"{n_flat}/{len(meta)}; best variant of any policy {p['best_any']} / {best_b} "
                  f"x{ra:.3f} [{ralo:.3f}, {rahi:.3f}] (training demand level)")


def _ablation_rows(c, rows: _Rows, r, p) -> None:
  """Relational vs MLP, per learner and action form, where the run trains both."""
  rl, sweep, meta = r["rl"], r["sweep"], r["rl_meta"]
  for mode in ("mappo", "ippo"):
    for form in ("", "_delta"):
      rel, mlp = f"{mode}_rel{form}", f"{mode}_mlp{form}"
      if rel not in rl or mlp not in rl:
        continue
      a = rl[rel]["train_level"]["revenue_total"]
      b = rl[mlp]["train_level"]["revenue_total"]
      rows.comp[f"{rel}_vs_mlp"] = _ratio_ci(a, b)
      # the effect's own sweep: per-seed relational / MLP tuning revenue
      eff = sweep_inputs.relative(sweep[rel], meta[rel]["mode"], sweep[mlp], meta[mlp]["mode"])
      rows.add(f"rail.relational_helps_{mode}{form}.v1", a, b, sweep=eff,
               selection=[p["mode_sel"][rel], p["mode_sel"][mlp]],
               note=f"same learner, budget ({c.main_updates} updates) and seeds; held-out "
                    f"episodes; sweeps: {rel} {report.flat_text(meta[rel]['flattening'])}, "
                    f"{mlp} {report.flat_text(meta[mlp]['flattening'])}")


def _collusion_rows(rows: _Rows, r, p) -> None:
  """Collusion index of the best relational variant (claim) and of every variant."""
  rl, base, best_rl = r["rl"], r["base"], p["best_rl"]
  pn = base["nash"]["train_level"]["revenue_total"]
  pm = base["monopoly"]["train_level"]["revenue_total"]
  delta = competition.collusion_index(rl[best_rl]["train_level"]["revenue_total"], pn, pm)
  rows.comp["collusion_index"] = {"policy": best_rl, "per_seed": np.asarray(delta).tolist(),
                                  "ci": list(_ci(delta))}
  rows.comp["collusion_index_by_variant"] = {
      v: list(_ci(competition.collusion_index(rl[v]["train_level"]["revenue_total"], pn, pm)))
      for v in rl}
  rows.add("rail.collusion.v1", delta, selection=[p["sel_rl"], p["mode_sel"][best_rl]],
           sweep=_rev_sweep(r, best_rl),
           note=f"policy {best_rl}; (pi - pi_Nash) / (pi_monopoly - pi_Nash), static one-shot "
                f"Nash ({'converged' if r['nash_conv'] else 'NOT converged'}) and monopoly "
                "fares, same held-out episodes")


def _verdicts(c, r: dict) -> dict:
  """The claim rows: each registered claim (configs/rail_pricing.py) judged by jaxrl_suite.repro
  from per-seed samples, with its selections (made on the tuning episodes) and RL's budget sweep
  (tuning episodes) in the record; `note` holds context the verdict does not use."""
  rows, p = _Rows(), _picks(c, r)
  _calibration_row(rows, r["el_seeds"])
  _rl_vs_rm_rows(c, rows, r, p)
  _ablation_rows(c, rows, r, p)
  _collusion_rows(rows, r, p)
  rows.add("rail.uk_trial.v1", [0.0], note="no evidence of any UK trial. " + UK_SOURCES)
  missing = set(rows.reg) - {row["repro"]["rule"]["id"] for row in rows.claims}
  # the ablation rows exist only for the learner / form pairs this run trains
  rl = r["rl"]
  skipped = {f"rail.relational_helps_{m}{f}.v1" for m in ("mappo", "ippo")
             for f in ("", "_delta") if f"{m}_rel{f}" not in rl or f"{m}_mlp{f}" not in rl}
  if missing - skipped:
    raise RuntimeError(f"registered claims without a row: {sorted(missing - skipped)}")
  return {"claims": rows.claims, "comparisons": rows.comp}


def main(e: entry.Entry) -> dict:
  """The run on the resolved command line (config validated, folders chosen by the library)."""
  res = run(e.config, e.quick, e.workdir, e.results_dir)
  print(results.verdict_table(res["claims"]))
  return res


if __name__ == "__main__":
  import configs.rail_pricing as _cfg_mod  # pylint: disable=g-import-not-at-top
  entry.main(FLAGS, main, validate=_cfg_mod.validate)
