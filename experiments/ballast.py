"""Reproduction: "RL-Ballast beats Dijkstra by 32% on decision steps when pipes get blocked and
diagnoses clogs with no extra flow sensors" (blog claim; no public paper, repo or deployment).

BallastNet-v0 (jaxrl_suite/envs/ballast), ring14 layout, dt = 5 min, the documented clog prior.
Every policy runs on the same paired episode keys (same clogs, plan and sounding noise). Reported
per clog regime (none / 1 blocked / >=2 blocked / partial only): decision steps and hours with
bootstrap 95% CIs, success rate, savings vs B-replan (paired ratio CI), the share of the
B-replan -> B-oracle gap the RL agent closes, and clog diagnosis (exact set, F1, balanced
accuracy) over all edges and over exercised edges. The v1 PPO agent (agent.py; 3 seeds vmapped in
one jit) is evaluated with greedy (argmax) and sampled actions; the headline mode is chosen on
separate selection episodes; per seed and mode we report the share of steps off B-replan's route
(non-top slot) and believed worse than it, parameter distances between seeds and the training
curve. Also: the oracle-vs-replan gap at other step lengths, task v2 (stability target, two pumps,
free tank choice) with a PPO pump-pair agent (agent_v2.py) vs greedy oracle-v2 / replan-v2 on the
same paired episodes, and a generalisation test of the trained agent on a layout it never saw
(`--layout PATH`, default direct10). Quick mode skips v2 and the generalisation test.

  python -m experiments.ballast [--quick] [--workdir=DIR] [--layout PATH] [--config.x=...]
  (start-up through jaxrl_suite.repro.entry)
"""


from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dataclasses
import time
from typing import Any

from absl import flags
import jax
import numpy as np
from tqdm import tqdm

from experiments import cli
from jaxrl_suite.agents import ballast as A
from jaxrl_suite.agents import ballast_v2 as A2
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.core import results
from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import make_ballast
from jaxrl_suite.envs.ballast import report
from jaxrl_suite.envs.ballast import scoring
from jaxrl_suite.envs.ballast.net_bank import with_v2_bank
from jaxrl_suite.envs.ballast.rollout import make_baseline_evaluate, make_switch_evaluate
from jaxrl_suite.repro import Claim, claim_record, entry, grid, selection

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "ballast"
FLAGS = entry.define_flags(NAME, os.path.join(_ROOT, "configs", "ballast.py"))
cli.replace_flags(("layout",))
_LAYOUT = flags.DEFINE_string("layout", None, "layout JSON for the generalisation test")
# The RL agent's two action modes are the evaluator's branches after the baselines (v1) and
# after the greedy v2 controller (v2).
_MODE_PID = {"greedy": len(B.BASELINES), "sampled": len(B.BASELINES) + 1}
_V2_PID = {"greedy": 1, "sampled": 2}
# training-curve metrics kept in the record (v1 also keeps the diagnosis head's aux loss)
_CURVE_V2 = ("returned_episode_returns", "episode_length", "success_rate", "off_top_share")
_CURVE = _CURVE_V2 + ("aux",)


def _registered() -> dict[str, Claim]:
  """{claim id: Claim} of configs/ballast.py's registered claims."""
  import configs.ballast as cfg_mod  # pylint: disable=g-import-not-at-top
  return {d["id"]: Claim.from_dict(d) for d in cfg_mod.claims()}


def _curve(metrics: dict, names) -> dict:
  """The training curves [S][U] of the named metrics, as lists for the record."""
  return {k: np.asarray(v).tolist() for k, v in metrics.items() if k in names}


@dataclasses.dataclass
class _V1:
  """The one compiled v1 evaluator (baselines, then the RL agent greedy / sampled as branches,
  pid selects; every call uses the same number of keys, so the env compiles once per layout)
  and what its calls share: env params p, baseline params bp, per-seed agent params xps."""
  ev: Any
  p: Any
  bp: Any
  graph: Any
  seed_params: list
  xps: list
  extra: list


def _evaluator(c, env, p, rl_params) -> _V1:
  """The v1 evaluator with the trained agent's seeds (rl_params [S, ...]) as its extra params."""
  policy, diagnose = A.make_policy(c.rl.ballast.hidden, greedy=True)
  policy_s, _ = A.make_policy(c.rl.ballast.hidden, greedy=False)
  extra = [(policy, diagnose, A.deviation_flags), (policy_s, diagnose, A.deviation_flags)]
  graph = A.make_graph(p, env.agent_api)
  sps = [AB.seed_params(rl_params, s) for s in range(c.rl_seeds)]
  return _V1(make_baseline_evaluate(env, c.t_limit, extra=extra), p,
             B.make_params(p, bayes="bayes" in c.baselines), graph, sps,
             [((sp, graph), (sp, graph)) for sp in sps], extra)


def _pick_comparator(c, v: _V1, sel_keys, data: str) -> selection.Selection:
  """The strongest Dijkstra-family replanner (fewest mean steps on the blocked selection
  episodes), chosen on the selection episodes only: a baseline is never tuned down."""
  names = [n for n in c.baselines if n != "oracle"]
  outs = {n: scoring.score_baseline(v.ev, v.p, v.bp, n, sel_keys, v.xps[0]) for n in names}
  blk = scoring.is_blocked(scoring.regime_of(outs[names[0]]["clog"]))
  return selection.pick_best("comparator (Dijkstra-family replanner)",
                             {n: o["steps"][blk] for n, o in outs.items()},
                             data=data + ", blocked episodes", better="lower")


def _select(c, env, v: _V1) -> dict:
  """Headline action mode (greedy or sampled), comparator and the fair-chance sweep, all on
  selection episodes from the training distribution (other keys), never the evaluation ones."""
  sel_keys = jax.random.split(jax.random.PRNGKey(c.seed + 4242), c.n_episodes)
  # the mean of the device array (jnp, float32), as the record has always held
  sel_steps = {m: [float(v.ev(v.p, v.bp, pid, sel_keys, xp)["steps"].mean()) for xp in v.xps]
               for m, pid in _MODE_PID.items()}
  data = f"selection episodes ({c.n_episodes}, training distribution, other keys)"
  mode_sel = selection.pick_mode(sel_steps, data=data, better="lower")
  comp_sel = _pick_comparator(c, v, sel_keys, data)
  fc = None
  if c.fair_chance_sweep:
    pid = _MODE_PID[mode_sel.choice]
    train = lambda cfg: AB.train_seeds(cfg, env, v.p, jax.random.split(
        jax.random.PRNGKey(c.seed), c.rl_seeds))[0]
    score = lambda sp: v.ev(v.p, v.bp, pid, sel_keys, ((sp, v.graph), (sp, v.graph)))[
        "steps"].mean()
    fc = AB.half_budget_sweep(c.rl, train, score, sel_steps[mode_sel.choice])
  return {"sel_steps": sel_steps, "mode_sel": mode_sel, "comp_sel": comp_sel, "fc_sweep": fc}


def _v1_stage(c, env, p, keys, bar) -> dict:
  """RL training (seeds vmapped), every baseline and the RL seeds in both modes on the paired
  evaluation keys, and the v1 tables. Returns the pieces the record and the claims use."""
  bar.set_postfix_str("rl-train")
  t_train = time.time()
  rl_params, metrics = AB.train_seeds(c.rl, env, p, jax.random.split(jax.random.PRNGKey(c.seed),
                                                                     c.rl_seeds))
  t_train = time.time() - t_train
  bar.update()
  v = _evaluator(c, env, p, rl_params)
  outs = {}
  for name in c.baselines:
    bar.set_postfix_str(name)
    outs[name] = scoring.score_baseline(v.ev, p, v.bp, name, keys, v.xps[0])
    bar.update()
  bar.set_postfix_str("rl-eval")
  sel = _select(c, env, v)
  mode = sel["mode_sel"].choice
  by_mode = {m: [jax.device_get(v.ev(p, v.bp, pid, keys, xp)) for xp in v.xps]
             for m, pid in _MODE_PID.items()}
  outs["rl"] = scoring.seed_mean(by_mode[mode])
  bar.update()
  reg = scoring.regime_of(outs["oracle"]["clog"])
  for name in outs:  # same keys -> same clogs
    assert np.array_equal(outs[name]["clog"], outs["oracle"]["clog"]), name
  summary = scoring.v1_summary(outs, by_mode, mode, sel["sel_steps"], reg, np.asarray(p.edge_mask),
                               c.dt_minutes / 60.0, c.n_boot, c.seed)
  return dict(sel, **summary, v=v, outs=outs, rl_outs=by_mode[mode], reg=reg, mode=mode,
              t_train=t_train, metrics=metrics, seed_check=AB.seed_evidence(rl_params, metrics))


def _sweep(c, s: dict, keys) -> dict:
  """Oracle vs B-replan / B-tabu at every step length of c.dt_sweep on the evaluation keys (the
  run's own step length reuses the baselines' episodes)."""
  v, outs = s["v"], s["outs"]
  score = lambda dt_min, n: scoring.score_baseline(v.ev, v.p.replace(dt_h=dt_min / 60.0), v.bp,
                                                   n, keys, v.xps[0])
  return scoring.dt_sweep(score, sorted(set(list(c.dt_sweep) + [c.dt_minutes])), c.n_boot,
                          c.seed, c.eval_groups,
                          known={c.dt_minutes: {n: outs[n] for n in scoring.SWEEP_POLICIES}})


def _v2_episodes(c, dt_h, bar):
  """(env2, eval params, training params, bank reports): checked banks (every episode
  finishable by the true-clog v2 controller) unless c.v2_bank is 0."""
  env2, p2 = make_ballast(layout=c.layout, task="v2", dt_h=dt_h, max_steps_in_episode=c.t_limit,
                          sigma_level=c.sigma_level)
  banks, p2_train = {}, p2
  if c.v2_bank:
    bar.set_postfix_str("v2-banks")
    t_bank = time.time()
    p2_train, banks["train"] = with_v2_bank(env2, p2, n=c.v2_bank, seed=c.seed + 2, batch=512)
    p2, banks["eval"] = with_v2_bank(env2, p2, n=c.v2_bank, seed=c.seed + 3, batch=512)
    banks["wall_s"] = time.time() - t_bank
  return env2, p2, p2_train, banks


def _v2_evaluator(c, env2, p2):
  """run(branch params, seed params, pid, keys, reveal=False) -> host out: one compiled v2
  evaluator, branch 0 the greedy controller (replan-v2, or oracle-v2 with the clogs revealed),
  then the RL agent greedy and sampled."""
  gr2 = A2.make_graph2(p2, env2.agent_api)
  branches = [(B.v2_greedy_policy, None)]
  branches += [(A2.make_policy(c.rl_v2.ballast.hidden, c.rl_v2.ballast.w_init, greedy=g),
                A2.deviation_flags) for g in (True, False)]
  ev2 = make_switch_evaluate(env2, branches, c.t_limit)

  def run_ev(vp, sp, pid, keys, reveal=False):
    return jax.device_get(ev2(p2.replace(reveal_clog=reveal), (vp, (sp, gr2), (sp, gr2)), pid,
                              keys))
  return run_ev


def _run_v2(c, dt_h, bar) -> dict:
  """Task v2: PPO pump-pair agent (agent_v2, seeds vmapped) vs greedy replan-v2 / oracle-v2 on
  the same paired episodes; headline action mode chosen on selection episodes."""
  env2, p2, p2_train, banks = _v2_episodes(c, dt_h, bar)
  bar.set_postfix_str("v2-train")
  train = lambda cfg: AB.train_seeds(cfg, env2, p2_train, jax.random.split(
      jax.random.PRNGKey(c.seed + 1), c.rl_v2_seeds))
  t_train = time.time()
  params2, m2 = train(c.rl_v2)
  t_train = time.time() - t_train
  bar.update()
  bar.set_postfix_str("v2-eval")
  run_ev = _v2_evaluator(c, env2, p2)
  sps = [AB.seed_params(params2, s) for s in range(c.rl_v2_seeds)]
  vp_or, vp_rp = B.make_v2_params(p2, True), B.make_v2_params(p2, False)
  keys2 = jax.random.split(jax.random.PRNGKey(c.seed + 777), c.v2_episodes)
  sel2 = jax.random.split(jax.random.PRNGKey(c.seed + 4243), c.v2_episodes)
  o2 = {"oracle-v2": run_ev(vp_or, sps[0], 0, keys2, True),
        "replan-v2": run_ev(vp_rp, sps[0], 0, keys2)}
  sel_steps = {m: [float(run_ev(vp_rp, sp, pid, sel2)["steps"].mean()) for sp in sps]
               for m, pid in _V2_PID.items()}
  mode_sel = selection.pick_mode(sel_steps, better="lower",
                                 data=f"v2 selection episodes ({c.v2_episodes}, other keys)")
  mode = mode_sel.choice
  fc_sweep = None
  if c.fair_chance_sweep:   # v2's half-budget run, scored on the v2 selection episodes
    bar.set_postfix_str("v2-fair-chance")
    fc_sweep = AB.half_budget_sweep(
        c.rl_v2, lambda cfg: train(cfg)[0],
        lambda sp: run_ev(vp_rp, sp, _V2_PID[mode], sel2)["steps"].mean(), sel_steps[mode])
  by_mode = {m: [run_ev(vp_rp, sp, pid, keys2) for sp in sps] for m, pid in _V2_PID.items()}
  o2["rl-v2"] = scoring.seed_mean(by_mode[mode])
  for n, o in o2.items():
    assert np.array_equal(o["clog"], o2["oracle-v2"]["clog"]), n
  sm = scoring.v2_summary(o2, by_mode, mode, sel_steps, dt_h, c.n_boot, c.seed)
  return {"rows": sm["rows"], "mode": mode, "train_wall_s": t_train, "banks": banks,
          "mode_selection": mode_sel.to_dict(), "fair_chance_sweep": fc_sweep,
          "blocked_steps": sm["blocked_steps"], "seeds": sm["seeds"],
          "seed_check": AB.seed_evidence(params2, m2), "train_curve": _curve(m2, _CURVE_V2)}


def _generalisation(c, v: _V1, mode, lay, keys, bar) -> dict:
  """The trained agent (seed 0, headline mode) and the oracle / B-replan on a layout it never
  saw. The env code depends on the layout only through its params (padded shapes), so the same
  evaluator runs the new ship; B-Bayes tables differ in size per layout, so it is skipped."""
  bar.set_postfix_str("generalisation")
  env_g, p_g = make_ballast(layout=lay, dt_h=c.dt_minutes / 60.0, max_steps_in_episode=c.t_limit,
                            sigma_level=c.sigma_level)
  bp_g = B.make_params(p_g, bayes=False)
  xp_g = ((v.seed_params[0], A.make_graph(p_g, env_g.agent_api)),) * 2
  ev_g = v.ev if "bayes" not in c.baselines else make_baseline_evaluate(env_g, c.t_limit,
                                                                        extra=v.extra)
  og = {n: scoring.score_baseline(ev_g, p_g, bp_g, n, keys, xp_g) for n in ("oracle", "replan")}
  rl = "rl (trained on %s)" % c.layout
  og[rl] = jax.device_get(ev_g(p_g, bp_g, _MODE_PID[mode], keys, xp_g))
  bar.update()
  return {"layout": env_g.layout_name, **scoring.generalisation_summary(
      og, rl, np.asarray(p_g.edge_mask), c.dt_minutes / 60.0, c.n_boot, c.seed)}


def _coarse_dt_claim(sweep) -> dict:
  """Oracle vs B-replan at the coarsest step of the dt sweep, per evaluation group."""
  big = max(sweep, key=float)
  g = sweep[big]["groups_blocked"]
  row = claim_record(_registered()["ballast.oracle_coarse_dt_32_blocked.v1"], g["oracle"],
                     g["replan"])
  row["note"] = (f"dt = {float(big):g} min; the design doc's prototype found 21-22% at 15-30 "
                 "min and 37-46% only against a forgetful baseline")
  return row


def _grid_claim(c, sweep) -> dict:
  """B-oracle vs B-replan and B-tabu at every step length of the dt sweep as one grid claim
  (repro.grid): the cells expected to reach 32% are registered in configs/ballast.py
  (grid_expected), per evaluation group on blocked episodes."""
  import configs.ballast as cfg  # pylint: disable=g-import-not-at-top
  cells, expected = {}, {}
  for dt in sorted(sweep, key=float):
    g = sweep[dt]["groups_blocked"]
    for base in ("replan", "tabu"):
      name = f"B-{base} dt={float(dt):g} min"
      cells[name] = (g["oracle"], g[base])
      expected[name] = cfg.grid_expected(base, float(dt), c.dt_minutes)
  row = grid.grid_record(_registered()["ballast.oracle_32_only_weak_or_coarse_grid.v1"], cells,
                         expected)
  row["note"] = (f"fine step = dt <= {c.dt_minutes:g} min (config.dt_minutes); cells expected "
                 f"to reach 32%: {[k for k, v in expected.items() if v]}")
  return row


def _dt_note(c) -> str:
  """The baseline definition every oracle / replanner claim carries."""
  return (f"B-replan = optimistic CTP replanner, k_fail=1, believed-time metric "
          f"(-log prod chat), shared evidence from soundings; dt={c.dt_minutes:g} min; "
          f"clog prior P(#blocked=0..3)=.3/.4/.2/.1 (strainers 3x), P(#partial=0..2)="
          f".6/.3/.1, c~U[.15,.5] (DB branches 2x); sigma={c.sigma_level*100:g}% cap")


def _claims(c, s: dict, sweep, v2, edge_mask) -> list[dict]:
  """Every registered claim (configs/ballast.py) judged by jaxrl_suite.repro from its per-unit
  samples; the comparator and the action mode were chosen on the selection episodes."""
  reg_c, outs, rl_outs, dt_note = _registered(), s["outs"], s["rl_outs"], _dt_note(c)
  blk = scoring.is_blocked(s["reg"])
  comp_sel, mode_sel = s["comp_sel"], s["mode_sel"]
  comp = comp_sel.choice or "replan"
  rows = []

  def add(cid, a, b=None, note="", **kw):
    row = claim_record(reg_c[cid], a, b, **kw)
    row["note"] = note
    rows.append(row)

  ref = outs[comp]["steps"][blk]
  add("ballast.rl_vs_dijkstra_32_blocked.v1", [o["steps"][blk].tolist() for o in rl_outs],
      [ref.tolist()] * len(rl_outs), selection=[comp_sel, mode_sel], sweep=s["fc_sweep"],
      note=f"comparator {comp}; {dt_note}")
  add("ballast.oracle_ceiling_32_blocked.v1",
      scoring.group_means(outs["oracle"]["steps"], blk, c.eval_groups),
      scoring.group_means(outs[comp]["steps"], blk, c.eval_groups), selection=comp_sel,
      note=f"comparator {comp}; {dt_note}")
  if "tabu" in outs:
    g = sweep[str(float(c.dt_minutes))]["groups_blocked"]
    add("ballast.oracle_vs_tabu_32_blocked.v1", g["oracle"], g["tabu"], note=dt_note)
  rows.append(_coarse_dt_claim(sweep))
  rows.append(_grid_claim(c, sweep))
  if v2 is not None:
    bs = v2["blocked_steps"]
    add("ballast.v2_rl_vs_replan_32_blocked.v1", bs["rl_per_seed"],
        [bs["replan"]] * len(bs["rl_per_seed"]),
        selection=selection.Selection.from_dict(v2["mode_selection"]),
        sweep=v2.get("fair_chance_sweep"),
        note="oracle-v2 (greedy with true conductances) is not a bound in v2")
  f1 = [scoring.diagnosis_rows(o, edge_mask, s["reg"])["all"]["exercised"]["f1"] for o in rl_outs]
  f1_ref = scoring.diagnosis_rows(outs["replan"], edge_mask, s["reg"])["all"]["exercised"]["f1"]
  add("ballast.diagnosis_level_only.v1", f1, [f1_ref] * len(f1), selection=mode_sel,
      note=f"RL head F1 per seed {', '.join(f'{x:.2f}' for x in f1)}; reference on B-replan "
           f"{f1_ref:.2f} (exercised edges)")
  add("ballast.deployed.v1", [0.0], note="no public paper, repository or deployment found; "
      "see the design doc section 1")
  return rows


def _write_sweep(c, sweep, quick, t0, results_dir):
  """Writes results/ballast_dt_sweep.* (also from the main run, so both files agree)."""
  claims = [_coarse_dt_claim(sweep), _grid_claim(c, sweep)]
  results.write_results(NAME + "_dt_sweep", mode="quick" if quick else "full", config=c,
                        seeds=[c.seed], claims=claims, wall_time_s=time.time() - t0,
                        payload={"dt_sweep": sweep}, markdown=report.sweep_markdown(sweep),
                        results_dir=results_dir)
  return {"claims": claims, "dt_sweep": sweep}


def _run_sweep_only(c, env, p, keys, quick, t0, results_dir):
  """Oracle vs B-replan / B-tabu at several step lengths only (results/ballast_dt_sweep.*)."""
  ev, bp = make_baseline_evaluate(env, c.t_limit), B.make_params(p, bayes=False)
  score = lambda dt_min, n: scoring.score_baseline(ev, p.replace(dt_h=dt_min / 60.0), bp, n, keys)
  dts = tqdm(sorted(set(list(c.dt_sweep) + [c.dt_minutes])), desc="dt", disable=None)
  sweep = scoring.dt_sweep(score, dts, c.n_boot, c.seed, c.eval_groups, with_all=False)
  return _write_sweep(c, sweep, quick, t0, results_dir)


def _check_inputs(c, workdir, layout_path) -> None:
  """Validates the config and reads every user-supplied layout before any training (a bad
  --layout used to fail after ~100 s, at the generalisation stage)."""
  sys.path.insert(0, _ROOT)
  import configs.ballast as cfg_mod  # pylint: disable=g-import-not-at-top
  cfg_mod.validate(c)
  from jaxrl_suite.envs.ballast.layout import load_layout  # pylint: disable=g-import-not-at-top
  for lay in filter(None, (c.layout, layout_path, c.eval_layout)):
    load_layout(lay)
  os.makedirs(workdir, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", os.path.join(_ROOT, ".jax_cache"))


def _write(c, s, sweep, v2, gen, claims, quick, t0, results_dir) -> None:
  """results/ballast.{json,md,png} and results/ballast_dt_sweep.*."""
  payload = {"table": s["table"], "diagnosis": s["diag"], "dt_sweep": sweep, "v2": v2,
             "generalisation": gen, "train_wall_s": s["t_train"], "rl_seeds": s["seed_rows"],
             "rl_mode": s["mode"], "rl_seed_check": s["seed_check"], "failures": s["failures"],
             "train_curve": _curve(s["metrics"], _CURVE),
             "layout": c.layout, "dt_minutes": c.dt_minutes,
             "baseline_definition": _dt_note(c), "comparator_selection": s["comp_sel"].to_dict(),
             "mode_selection": s["mode_sel"].to_dict(), "fair_chance_sweep": s["fc_sweep"]}
  rows = report.Rows(s["table"], s["diag"], sweep, v2, gen, s["t_train"], s["seed_rows"],
                     s["failures"], s["mode"], s["seed_check"])
  mode = "quick" if quick else "full"
  results.write_results(NAME, mode=mode, config=c, seeds=list(range(c.rl_seeds)), claims=claims,
                        wall_time_s=time.time() - t0, payload=payload,
                        markdown=report.markdown(c, rows, A.DEVIATION_TOL),
                        results_dir=results_dir)
  report.plot(s["table"], sweep, os.path.join(results_dir or results.output_dir(mode),
                                              f"{NAME}.png"))
  _write_sweep(c, sweep, quick, t0, results_dir)


def run(c, quick: bool, workdir: str, layout_path: str | None = None,
        results_dir: str | None = None) -> dict:
  """The reproduction (or, with c.sweep_only, the dt sweep alone); writes the results files and
  returns {"claims", "table", "diagnosis", "dt_sweep", "v2", "generalisation"}."""
  t0 = time.time()
  _check_inputs(c, workdir, layout_path)
  dt_h = c.dt_minutes / 60.0
  env, p = make_ballast(layout=c.layout, dt_h=dt_h, max_steps_in_episode=c.t_limit,
                        sigma_level=c.sigma_level)
  keys = jax.random.split(jax.random.PRNGKey(c.seed + 12345), c.n_episodes)
  if c.sweep_only:
    return _run_sweep_only(c, env, p, keys, quick, t0, results_dir)
  lay = layout_path or c.eval_layout
  stages = (["rl-train"] + list(c.baselines) + ["rl-eval", "dt-sweep"] +
            (["v2-train", "v2-eval"] if c.v2 else []) + (["generalisation"] if lay else []))
  bar = tqdm(stages, desc="ballast", disable=None)
  s = _v1_stage(c, env, p, keys, bar)
  bar.set_postfix_str("dt-sweep")
  sweep = _sweep(c, s, keys)
  bar.update()
  v2 = _run_v2(c, dt_h, bar) if c.v2 else None
  gen = _generalisation(c, s["v"], s["mode"], lay, keys, bar) if lay else None
  bar.close()
  claims = _claims(c, s, sweep, v2, np.asarray(p.edge_mask))
  _write(c, s, sweep, v2, gen, claims, quick, t0, results_dir)
  return {"claims": claims, "table": s["table"], "diagnosis": s["diag"], "dt_sweep": sweep,
          "v2": v2, "generalisation": gen}


def main(e: entry.Entry) -> dict:
  """The run on the resolved command line (config validated, folders chosen by the library:
  a --layout run writes the ad-hoc folder)."""
  res = run(e.config, e.quick, e.workdir, _LAYOUT.value, e.results_dir)
  print(results.verdict_table(res["claims"]))
  return res


if __name__ == "__main__":
  import configs.ballast as _cfg_mod  # pylint: disable=g-import-not-at-top
  entry.main(FLAGS, main, validate=_cfg_mod.validate)
