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

  python -m experiments.rail_pricing [--quick] [--config.x=...]
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app, flags
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from ml_collections import config_flags
from tqdm import tqdm

from experiments import cli
from jaxrl_suite.core import results, stats
from jaxrl_suite.envs.rail import bound, calibration, competition, make_rail
from jaxrl_suite.envs.rail import baselines as B
from jaxrl_suite.envs.rail import evaluate as E
from jaxrl_suite.envs.rail.instance import SEGMENTS, ELASTICITY

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cli.replace_flags(("config", "quick", "workdir"))
_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(_ROOT, "configs", "rail_pricing.py"), "experiment config")
_QUICK = flags.DEFINE_bool("quick", False, "small, fast run (CI)")
_WORKDIR = flags.DEFINE_string("workdir", "workdirs/rail_pricing", "work directory")
NAME = "rail_pricing"
METRICS = ("revenue_total", "load_factor", "spill", "cs", "equity", "volatility")
UK_SOURCES = ("LNER demand-based pricing pilot (DfT, Feb 2023; two-year trial from 5 Feb 2024, "
              "King's Cross-Newcastle/Berwick/Edinburgh; fare types 7 -> 3 incl. '70min Flex'; "
              "The Times 2023-02-07, Transport Focus 2024-01-31): not multi-agent RL. The paper "
              "(arXiv 2607.05179, Kinrre/RelationalRailPricing-RL) and its predecessor "
              "(arXiv 2501.08234, Kinrre/RailPricing-RL) use Spanish Renfe/Adif data on ROBIN "
              "and mention no UK trial.")


def _config():
  sys.path.insert(0, _ROOT)
  import configs.rail_pricing as cfg  # pylint: disable=g-import-not-at-top
  return cli.config_for(cfg, _CONFIG.value, _QUICK.value)


def _variant(name: str):
  """'mappo_rel_delta' -> ('mappo', attention=True, action_mode='delta')."""
  parts = name.split("_")
  return parts[0], parts[1] == "rel", parts[2] if len(parts) > 2 else "bucket"


def rail_agent(env, params, agent_config, centralised: bool):
  """The train-pricing agent for a RailRM env: the env's token layout (plain ints) is passed into
  agents.rail_features here, so that agents/ never imports envs/."""
  from jaxrl_suite.agents import rail_features
  from jaxrl_suite.envs.rail import token_columns
  return rail_features.from_config(env.num_actions, env.observation_space(params).shape[1:],
                                   agent_config, centralised, **token_columns())


def _learner(c, env, params, name):
  from jaxrl_suite.algos import ppo
  mode, att, _ = _variant(name)
  cfg = ppo.default_config()
  for k, v in c.rl.items():
    cfg[k] = v
  cfg.multi_agent = mode
  ac = ml_collections.ConfigDict(dict(c.agent.to_dict(), attention=att))  # --config is locked
  agent = rail_agent(env, params, ac, centralised=mode == "mappo")
  return ppo.make_learner(cfg, env, params, agent=agent), agent


class _PhaseCache:
  """Finished phases (plain JSON of arrays as lists) in the workdir, keyed by the config: a rerun
  with the same config resumes after the last finished phase instead of recomputing it."""

  def __init__(self, workdir: str, c):
    import json
    self.path = os.path.join(workdir, "rail_pricing_phases.json")
    self.key = json.dumps(results._to_jsonable(c), sort_keys=True)
    self.data = {}
    if os.path.exists(self.path):
      with open(self.path) as f:
        d = json.load(f)
      if d.get("config") == self.key:
        self.data = d["phases"]

  def get(self, name):
    return self.data.get(name)

  def put(self, name, value):
    import json
    self.data[name] = results._to_jsonable(value)
    with open(self.path + ".tmp", "w") as f:
      json.dump({"config": self.key, "phases": self.data}, f)
    os.replace(self.path + ".tmp", self.path)


def _arrays(d):
  """JSON lists back to float arrays, nested dicts kept."""
  if isinstance(d, dict):
    return {k: _arrays(v) for k, v in d.items()}
  return np.asarray(d, np.float64)


def _family_evaluator(env, fn):
  """jit(keys [N], theta, params) -> metrics [N] of baseline `fn` (one compile per family)."""
  return jax.jit(lambda ks, th, ps: E.evaluate(env, ps, E.baseline_policy(fn, ps, th), ks))


def _stack_seeds(ms: list) -> dict:
  """Per-seed metric dicts (leading [N]) -> per-seed means [S] (revenue_op -> [S, O])."""
  ms = jax.device_get(ms)
  return {k: np.stack([np.asarray(m[k], np.float64).mean(0) for m in ms]) for k in ms[0]}


def _per_seed(m: dict) -> dict:
  """metrics with leading [S, N] -> per-seed means [S] (revenue_op -> [S, O])."""
  return {k: np.asarray(v, np.float64).mean(1) for k, v in m.items()}


def _ci(x) -> tuple[float, float, float]:
  return stats.mean_ci(np.asarray(x, np.float64))


def _flattening(rev: np.ndarray, updates, c) -> dict:
  """Plateau test of one variant's budget sweep. rev [S, B]: tuning-episode revenue per seed at
  the budgets `updates` [B]. Over the points with updates >= main_updates / 4, per seed s:
    y_s(b) = rev[s, b] / mean_b rev[s, b],   slope_s = OLS slope of y_s against log2(updates)
  (the relative revenue gained per doubling of the budget); mean and Student-t 95% CI over seeds.
  Flattened when the CI's upper end is below flat_tol: one more doubling gains less than
  flat_tol at 95% (a falling curve is flat too: more budget would not help). Also the paired
  revenue ratio of the last budget to main_updates when the sweep runs past it."""
  u = np.asarray(updates, np.float64)
  sel = u >= c.main_updates / 4
  x, y = np.log2(u[sel]), rev[:, sel] / rev[:, sel].mean(1, keepdims=True)
  xc = x - x.mean()
  slopes = (y * xc).sum(1) / (xc ** 2).sum()
  m, lo, hi = _ci(slopes)
  out = {"slope_per_doubling": [m, lo, hi], "per_seed": slopes.tolist(), "tol": c.flat_tol,
         "points": u[sel].tolist(), "flattened": bool(hi < c.flat_tol)}
  im = int(np.flatnonzero(u == c.main_updates)[0])
  if u[-1] > c.main_updates:
    out["last_vs_main"] = list(stats.paired_ratio_ci(rev[:, -1], rev[:, im], n_boot=c.n_boot,
                                                     seed=c.seed))
  return out


def _train_variant(c, name, key, tune_rows, eval_keys, scenarios):
  """Trains `name` on n_seeds seeds (vmapped) through config.budget_updates (relational variants
  up to config.rel_max_updates); returns (held-out per-seed metrics of the policies at
  config.main_updates {scenario: {metric: [S]}}, training curve [S, U], meta, sweep) where sweep
  holds the tuning-episode revenue [S, len(budgets)] of the greedy and the sampled policy."""
  _, att, amode = _variant(name)
  env_v, p_v = make_rail(c.instance, action_mode=amode, pad=c.pad, reward_mode=c.reward_mode,
                         demand_level=c.demand_level, reward_scale=c.reward_scale)
  learner, agent = _learner(c, env_v, p_v, name)
  budgets = [b for b in c.budget_updates if not att or b <= c.rel_max_updates]
  step = int(np.gcd.reduce(np.asarray(budgets)))
  rs = jax.jit(jax.vmap(learner.init))(jax.random.split(jax.random.fold_in(key, 1000),
                                                        c.n_seeds))
  run = jax.jit(jax.vmap(lambda r: learner.run(r, step)))

  def evaluate_rl(ps, keys, pv, greedy):
    def pol(k, obs, st):
      return jnp.where(greedy, agent.policy(ps, obs, k, greedy=True),
                       agent.policy(ps, obs, k, greedy=False))
    return E.evaluate(env_v, pv, pol, keys)

  ev_rl = jax.jit(jax.vmap(evaluate_rl, in_axes=(0, 0, None, None)))
  tune_rev = lambda ps, g: np.asarray(ev_rl(ps, tune_rows, p_v, jnp.asarray(g))
                                      ["revenue_total"], np.float64).mean(1)       # [S]
  curve, sw = [], {"greedy": [], "sampled": []}
  done, out, sel = 0, None, None
  while done < budgets[-1]:
    rs, met = run(rs)
    done += step
    curve.append(np.asarray(met["returned_episode_returns"]))
    if done in budgets:
      for m in sw:
        sw[m].append(tune_rev(rs.train_state.params, m == "greedy"))
    if done == c.main_updates:
      # greedy vs sampled, chosen on the tuning episodes at the main budget (seed-mean revenue);
      # the held-out episodes score the policies of this budget, for every variant
      sel = {m: float(sw[m][-1].mean()) for m in ("greedy", "sampled")}
      greedy = sel["greedy"] >= sel["sampled"]
      out = {}
      for sc, ps_ in scenarios.items():
        pv = p_v.replace(demand_level=ps_.demand_level)
        out[sc] = _per_seed(jax.device_get(ev_rl(rs.train_state.params, eval_keys, pv,
                                                 jnp.asarray(greedy))))
  sweep = {m: np.stack(v, 1) for m, v in sw.items()}                       # [S, B]
  sweep["updates"] = np.asarray(budgets, np.float64)
  sweep["env_steps"] = sweep["updates"] * c.rl.num_envs * c.rl.num_steps
  mode = "greedy" if greedy else "sampled"
  meta = {"selection_revenue": sel, "mode": mode, "updates": c.main_updates,
          "sweep_updates": budgets[-1], "flattening": _flattening(sweep[mode], budgets, c)}
  return out, np.concatenate(curve, 1), meta, sweep


def run(c, quick: bool, workdir: str, results_dir: str | None = None) -> dict:
  import configs.rail_pricing as cfg_mod  # pylint: disable=g-import-not-at-top
  cfg_mod.validate(c)
  t0 = time.time()
  os.makedirs(workdir, exist_ok=True)
  cache = _PhaseCache(workdir, c)
  timings = {}
  env, p_train = make_rail(c.instance, pad=c.pad, reward_mode=c.reward_mode,
                           demand_level=c.demand_level, reward_scale=c.reward_scale)
  p_shift = p_train.replace(demand_level=c.shift_level)
  scenarios = {"train_level": p_train, "shift": p_shift}
  key = jax.random.PRNGKey(c.seed)
  tune_keys = jax.random.split(jax.random.fold_in(key, 1), c.tune_episodes)
  eval_keys = jnp.stack([jax.random.split(jax.random.fold_in(key, 100 + s), c.eval_episodes)
                         for s in range(c.n_seeds)])                    # [S, N, 2]
  real = np.asarray(p_train.agent_mask) > 0
  bar = tqdm(total=5 + len(c.variants), desc="rail_pricing", disable=quick)

  # 1. calibration check by price-perturbation rollouts
  t = time.time()
  el = calibration.arc_elasticities(env, p_train, jax.random.fold_in(key, 2),
                                    c.elasticity_episodes)
  timings["elasticity_s"] = time.time() - t
  bar.update()

  # One compiled evaluator per policy family, shared by tuning, both scenarios and all seeds:
  # params (the scenario), theta and the keys are arguments, and tune_episodes == eval_episodes.
  evals = {name: _family_evaluator(env, B.POLICIES[name]) for name in B.BASELINES}
  evals["fixed"] = jax.jit(lambda ks, lv, ps: E.evaluate(env, ps, lambda k, o, s: lv, ks))

  # 2. baselines tuned on the tuning episodes (same count for every family)
  t = time.time()
  tuned, tuning = {}, {}
  hit = cache.get("tuning")
  if hit is not None:
    tuning = hit
    tuned = {k: v["chosen"] for k, v in tuning.items()}
  for name in [b for b in B.BASELINES if b not in tuning]:
    grid = B.THETA_GRID[name]
    vals = [float(evals[name](tune_keys, jnp.asarray(th, jnp.float32), p_train)
                  ["revenue_total"].mean()) for th in grid]
    tuned[name] = float(grid[int(np.argmax(vals))])
    tuning[name] = {"grid": list(grid), "revenue": vals, "chosen": tuned[name]}
  cache.put("tuning", tuning)
  timings["baseline_tuning_s"] = time.time() - t
  bar.update()

  # 3. competition benchmarks (fluid, at the training demand level)
  t = time.time()
  players = np.where(real, np.asarray(p_train.operator) if c.reward_mode != "agent"
                     else np.arange(real.size), -1)
  nash_lv, nash_conv = competition.nash(env, p_train, players)
  mono_lv = competition.monopoly(env, p_train, real)
  timings["competition_s"] = time.time() - t
  bar.update()

  # 4. RL: every variant trains n_seeds seeds in one jit, in chunks; at every budget of the sweep
  # (config.budget_updates, constant learning rate) the policies are scored on the tuning episodes
  t = time.time()
  rl, curves, rl_meta, sweep = {}, {}, {}, {}
  tune_rows = jnp.broadcast_to(tune_keys[None], eval_keys.shape)
  for name in c.variants:
    hit = cache.get(f"rl/{name}")
    if hit is not None:
      rl[name], curves[name], rl_meta[name], sweep[name] = (
          _arrays(hit["rl"]), np.asarray(hit["curve"]), hit["meta"], _arrays(hit["sweep"]))
      bar.update()
      continue
    tv = time.time()
    rl[name], curves[name], rl_meta[name], sweep[name] = _train_variant(
        c, name, key, tune_rows, eval_keys, scenarios)
    rl_meta[name]["train_s"] = time.time() - tv
    cache.put(f"rl/{name}", {"rl": rl[name], "curve": curves[name], "meta": rl_meta[name],
                             "sweep": sweep[name]})
    bar.update()
  timings["rl_s"] = time.time() - t

  # 5. evaluate the baselines, Nash and monopoly fares on the same held-out episodes
  t = time.time()
  base = {}
  fixed = {"nash": nash_lv, "monopoly": mono_lv}
  hit = cache.get("baselines")
  for sc, ps_ in ({} if hit is not None else scenarios).items():
    for name in B.BASELINES:
      th = jnp.asarray(tuned[name], jnp.float32)
      base.setdefault(name, {})[sc] = _stack_seeds(
          [evals[name](eval_keys[s], th, ps_) for s in range(c.n_seeds)])
    for name, lv in fixed.items():
      lvj = jnp.asarray(lv, jnp.int32)
      base.setdefault(name, {})[sc] = _stack_seeds(
          [evals["fixed"](eval_keys[s], lvj, ps_) for s in range(c.n_seeds)])
  if hit is not None:
    base = _arrays(hit)
  cache.put("baselines", base)
  # the valid upper bound on expected revenue of every policy, on the same episodes (bound.py)
  bound_fn = jax.jit(lambda ks, ps: bound.mean_bound(env, ps, ks))
  ub = {sc: np.asarray([float(bound_fn(eval_keys[s], ps_).mean()) for s in range(c.n_seeds)])
        for sc, ps_ in scenarios.items()}
  timings["evaluation_s"] = time.time() - t
  bar.update()

  # 6. verdicts
  rec = _verdicts(c, el, tuning, rl, rl_meta, base, nash_conv)
  table = _table(rl, base)
  bound_rec, bound_line = _bound_summary(ub, table)
  best_b = rec["comparisons"]["best_rl_vs_best_rm_train_level"]["baseline"]
  best_b_rev = max(tuning[best_b]["revenue"])
  bar.update()
  bar.close()
  wall = time.time() - t0
  timings["total_s"] = wall
  payload = {"elasticity": {s: float(e) for s, e in zip(SEGMENTS, el)},
             "elasticity_targets": {s: float(e) for s, e in zip(SEGMENTS, ELASTICITY)},
             "uk_ranges": calibration.UK_RANGES, "tuning": tuning,
             "nash_levels": nash_lv.tolist(), "nash_converged": nash_conv,
             "monopoly_levels": mono_lv.tolist(), "rl": rl_meta, "table": table,
             "curves": {k: v.tolist() for k, v in curves.items()}, "timings": timings,
             "comparisons": rec["comparisons"], "upper_bound": bound_rec,
             "sweep": {k: {m: np.asarray(x).tolist() for m, x in v.items()}
                       for k, v in sweep.items()}}
  md = _markdown(c, el, tuned, rl_meta, table, rec, nash_lv, mono_lv, nash_conv, timings, sweep,
                 best_b, best_b_rev, bound_line)
  # The library names the folder (results/ full, the quick folder quick, or JAXRL_RESULTS_DIR),
  # so reproduce.py finds the record where it looks.
  rdir = results_dir or results.output_dir("quick" if quick else "full")
  path = results.write_results(NAME, mode="quick" if quick else "full", config=c,
                               seeds=list(range(c.n_seeds)), claims=rec["claims"],
                               wall_time_s=wall, payload=payload, markdown=md,
                               results_dir=rdir)
  _plot(curves, sweep, rl_meta, best_b, best_b_rev, table,
        os.path.join(os.path.dirname(path), f"{NAME}.png"))
  return {"claims": rec["claims"], "path": path, "table": table, "payload": payload}


def _bound_summary(ub: dict, table: dict):
  """({scenario: {ci, max_policy, holds}}, a markdown line): the bound vs every policy's mean."""
  rec, parts = {}, []
  for sc, u in ub.items():
    top = max(table[sc], key=lambda p: table[sc][p]["revenue_total"][0])
    top_rev = table[sc][top]["revenue_total"][0]
    ci = list(_ci(u))
    rec[sc] = {"ci": ci, "per_seed": u.tolist(), "max_policy": top,
               "max_policy_revenue": top_rev, "holds": bool(top_rev <= ci[0])}
    parts.append(f"{sc}: {_fmt(ci, 1, 1e-3)}k, best policy {top} {top_rev / 1e3:.1f}k "
                 f"({top_rev / ci[0]:.0%} of it; bound {'holds' if top_rev <= ci[0] else 'VIOLATED'})")
  line = ("Valid upper bound on the expected revenue of any policy given each episode's demand "
          "shock (envs/rail/bound.py: every would-be passenger pays the top fare, seats pooled "
          "per leg; loose by construction). `cdlp_known` (CDLP told the shock) is an information "
          "benchmark, not a bound. " + "; ".join(parts) + ".")
  return rec, line


def _table(rl, base) -> dict:
  """{scenario: {policy: {metric: [mean, lo, hi]}}} with per-operator revenue."""
  out = {}
  for src in (base, rl):
    for pol, by_sc in src.items():
      for sc, m in by_sc.items():
        row = {k: list(_ci(m[k])) for k in METRICS}
        row["revenue_op"] = [list(_ci(m["revenue_op"][:, o])) for o in range(m["revenue_op"]
                                                                             .shape[1])]
        row["revenue_seeds"] = m["revenue_total"].tolist()
        out.setdefault(sc, {})[pol] = row
  return out


def _verdicts(c, el, tuning, rl, rl_meta, base, nash_conv) -> dict:
  claims, comp = [], {}
  # calibration
  ok = all(lo <= e <= hi for e, (lo, hi) in zip(el, calibration.UK_RANGES.values()))
  claims.append(results.claim(
      "demand calibrated to UK market-level fare elasticities (price-perturbation rollouts)",
      "full/walk-up -0.2..-0.7, leisure -0.65..-1.0, season -0.2..-0.5 (TRRL SR614, TRL LR993, "
      "Wardman 2014)",
      ", ".join(f"{s} {e:.2f}" for s, e in zip(SEGMENTS, el)),
      "reproduced" if ok else "not reproduced",
      detail="arc elasticity of bookings, all trains 1.0 -> 1.1 x base fare, capacity "
             "non-binding, common random numbers"))
  # best RL variant and best tuned baseline, both chosen on the tuning episodes
  rm = [b for b in B.BASELINES if b != "cdlp_known"]   # a revenue manager does not know the shock
  best_b = max(rm, key=lambda b: max(tuning[b]["revenue"]))
  # the claim is about relational MARL: its subject is the best relational variant (by tuning
  # revenue at the main budget); the best variant of any policy is recorded beside it
  pick = lambda vs: max(vs, key=lambda v: max(rl_meta[v]["selection_revenue"].values()))
  rels = [v for v in rl_meta if _variant(v)[1]]
  best_rl = pick(rels or list(rl_meta))
  best_any = pick(list(rl_meta))
  for sc in ("train_level", "shift"):
    b = base[best_b][sc]["revenue_total"]
    for tag, pol in (("best_rl", best_rl), ("best_any_rl", best_any)):
      r, lo, hi = stats.paired_ratio_ci(rl[pol][sc]["revenue_total"], b, n_boot=c.n_boot,
                                        seed=c.seed)
      comp[f"{tag}_vs_best_rm_{sc}"] = {"rl": pol, "baseline": best_b, "ratio": [r, lo, hi]}
  r, lo, hi = comp["best_rl_vs_best_rm_train_level"]["ratio"]
  rs, los, his = comp["best_rl_vs_best_rm_shift"]["ratio"]
  ra, ralo, rahi = comp["best_any_rl_vs_best_rm_train_level"]["ratio"]
  flat = rl_meta[best_rl]["flattening"]
  n_flat = sum(m["flattening"]["flattened"] for m in rl_meta.values())
  v, why = beats_rm_verdict((lo, hi), (los, his), flat)
  claims.append(results.claim(
      "relational MARL beats revenue-management heuristics (best tuned baseline)",
      "the paper compares RL methods only (no RM baseline)",
      f"{best_rl} / {best_b} revenue {r:.3f} (shift {rs:.3f} [{los:.3f}, {his:.3f}])", v,
      ci95=(lo, hi),
      detail=f"{why}. Held-out episodes, training demand level; every RL variant at "
             f"{c.main_updates} updates; best baseline by tuning revenue; {best_rl}'s budget "
             f"sweep: {_flat_text(flat)}; variants flattened: {n_flat}/{len(rl_meta)}; best "
             f"variant of any policy {best_any} / {best_b} x{ra:.3f} [{ralo:.3f}, {rahi:.3f}]"))
  # relational vs MLP ablation, per learner and action form
  for mode in ("mappo", "ippo"):
    for form in ("", "_delta"):
      rel, mlp = f"{mode}_rel{form}", f"{mode}_mlp{form}"
      if rel not in rl or mlp not in rl:
        continue
      a = rl[rel]["train_level"]["revenue_total"]
      b = rl[mlp]["train_level"]["revenue_total"]
      r, lo, hi = stats.paired_ratio_ci(a, b, n_boot=c.n_boot, seed=c.seed)
      comp[f"{rel}_vs_mlp"] = [r, lo, hi]
      v, why = ablation_verdict((lo, hi), rl_meta[rel]["flattening"],
                                rl_meta[mlp]["flattening"])
      what = "fare buckets" if not form else "+-5% delta form"
      claims.append(results.claim(
          f"relational structure helps ({mode}, {what}: attention over train tokens vs MLP on "
          "own features)", "attention (MAAC) helps with heterogeneous demand (arXiv 2501.08234)",
          f"revenue ratio {r:.3f}", v, ci95=(lo, hi),
          detail=f"{why}. Same learner, budget ({c.main_updates} updates) and seeds; held-out "
                 f"episodes; sweeps: {rel} {_flat_text(rl_meta[rel]['flattening'])}, {mlp} "
                 f"{_flat_text(rl_meta[mlp]['flattening'])}"))
  # collusion index of the best RL variant
  pn = base["nash"]["train_level"]["revenue_total"]
  pm = base["monopoly"]["train_level"]["revenue_total"]
  pi = rl[best_rl]["train_level"]["revenue_total"]
  delta = competition.collusion_index(pi, pn, pm)
  d, dlo, dhi = _ci(delta)
  comp["collusion_index"] = {"policy": best_rl, "per_seed": delta.tolist(), "ci": [d, dlo, dhi]}
  comp["collusion_index_by_variant"] = {
      v: list(_ci(competition.collusion_index(rl[v]["train_level"]["revenue_total"], pn, pm)))
      for v in rl}
  v = "reproduced" if dlo > 0 else ("contradicted" if dhi < 0 else "inconclusive")
  claims.append(results.claim(
      "competing RL operators learn supra-competitive prices (collusion index > 0)",
      "Calvano et al. 2020 (Q-learning pricing); not measured in the rail papers",
      f"Delta = {d:.2f}", v, ci95=(dlo, dhi),
      detail=f"(pi - pi_Nash) / (pi_monopoly - pi_Nash), static one-shot Nash "
             f"({'converged' if nash_conv else 'NOT converged'}) and monopoly fares, same "
             "held-out episodes"))
  claims.append(results.claim(
      "relational MARL pricing 'is running in trial on the UK rail network'",
      "blog claim", "no evidence of any UK trial", "not reproduced",
      detail="unsupported. " + UK_SOURCES))
  return {"claims": claims, "comparisons": comp}


def beats_rm_verdict(ci, ci_shift, flat: dict) -> tuple[str, str]:
  """(verdict, reason) of "RL beats the best tuned baseline" from the paired revenue-ratio CIs
  (lo, hi) at the training level and under the shift, and RL's plateau test (_flattening).

  RL must win in both scenarios to reproduce the claim. A loss is "contradicted" only when RL
  had a fair chance, i.e. its budget sweep has flattened; a loss while the sweep may still be
  rising is "inconclusive" (more budget might close the gap)."""
  (lo, hi), (los, _) = ci, ci_shift
  if lo > 1 and los > 1:
    return "reproduced", "RL's revenue is above the best tuned baseline in both scenarios"
  if hi < 1:
    return results.loss_verdict([] if flat["flattened"] else [
        "its budget sweep has not flattened (more budget might close the gap)"])
  return "inconclusive", "the revenue ratio's CI includes 1"


def ablation_verdict(ci, rel_flat: dict, mlp_flat: dict) -> tuple[str, str]:
  """(verdict, reason) of "relational structure helps" from the paired relational / MLP revenue
  ratio's CI (lo, hi) and both variants' plateau tests (_flattening).

  A relational loss is "contradicted" only once the relational sweep has flattened; a relational
  win is "reproduced" only once the MLP sweep has flattened (the loser had its fair chance);
  otherwise "inconclusive", with the reason."""
  lo, hi = ci
  if hi < 1:
    return results.loss_verdict([] if rel_flat["flattened"] else [
        "the MLP wins at this budget, but the relational sweep has not flattened"])
  if lo > 1:
    if mlp_flat["flattened"]:
      return "reproduced", "the relational agent wins and the MLP sweep has flattened"
    return "inconclusive", ("the relational agent wins at this budget, but the MLP sweep has not "
                            "flattened")
  return "inconclusive", "the revenue ratio's CI includes 1"


def _flat_text(f) -> str:
  """One line on a plateau test (_flattening)."""
  m, lo, hi = f["slope_per_doubling"]
  t = (f"slope {m:+.2%} [{lo:+.2%}, {hi:+.2%}] per doubling over {int(f['points'][0])}-"
       f"{int(f['points'][-1])} updates ({'flat' if f['flattened'] else 'not flat'} at "
       f"tol {f['tol']:.0%})")
  if "last_vs_main" in f:
    r, rlo, rhi = f["last_vs_main"]
    t += f", {int(f['points'][-1])} vs main budget x{r:.3f} [{rlo:.3f}, {rhi:.3f}]"
  return t


def _fmt(ci, nd=0, scale=1.0):
  m, lo, hi = (x * scale for x in ci)
  return f"{m:,.{nd}f} [{lo:,.{nd}f}, {hi:,.{nd}f}]"


def _markdown(c, el, tuned, rl_meta, table, rec, nash_lv, mono_lv, nash_conv, timings, sweep,
              best_b, best_b_rev, bound_line) -> str:
  lines = ["RailRM-v0 `ecml` line (5 stations, 9 trains of 3 operators, 400 seats per leg, 12 "
           "weekly periods), reward = operator revenue. Means with 95% CIs over "
           f"{c.n_seeds} seeds (RL training seeds = held-out evaluation groups of "
           f"{c.eval_episodes} episodes each). RL compared at {c.main_updates} updates = "
           f"{c.main_updates * c.rl.num_envs * c.rl.num_steps:,} env steps per seed "
           f"({c.main_updates * c.rl.num_envs:,} episodes; the sweep runs "
           f"{'every variant' if c.rel_max_updates >= c.budget_updates[-1] else 'the MLP variants'}"
           f" to {c.budget_updates[-1]} updates); every baseline family tuned on "
           f"{c.tune_episodes} x 8 = {c.tune_episodes * 8:,} episodes.", ""]
  lines += ["## Calibration", "", "| segment | target | measured (rollouts) | UK range |",
            "|---|---|---|---|"]
  for s, e, t in zip(SEGMENTS, el, ELASTICITY):
    lo, hi = calibration.UK_RANGES[s]
    lines.append(f"| {s} | {t:.2f} | {e:.2f} | {lo} .. {hi} |")
  lines += ["", "## Tuned baselines", "", ", ".join(f"{k}: theta={v}" for k, v in tuned.items()),
            "", f"Nash fare buckets (operators' one-shot game, fluid; "
            f"{'converged' if nash_conv else 'not converged'}): {nash_lv.tolist()}; "
            f"joint monopoly: {mono_lv.tolist()} (bucket k = multiplier 0.8 + 0.1 k).", ""]
  for sc, title in (("train_level", f"training demand level ({c.demand_level})"),
                    ("shift", f"held-out demand shift ({c.shift_level})")):
    lines += [f"## Held-out episodes, {title}", "",
              "| policy | revenue (GBP k) | load factor | spill | consumer surplus (GBP k) | "
              "equity | volatility |", "|---|---|---|---|---|---|---|"]
    for pol, row in sorted(table[sc].items(), key=lambda kv: -kv[1]["revenue_total"][0]):
      lines.append(f"| {pol} | {_fmt(row['revenue_total'], 1, 1e-3)} | "
                   f"{_fmt(row['load_factor'], 3)} | {_fmt(row['spill'], 0)} | "
                   f"{_fmt(row['cs'], 1, 1e-3)} | {_fmt(row['equity'], 3)} | "
                   f"{_fmt(row['volatility'], 3)} |")
    lines.append("")
    lines += ["Revenue per operator (GBP k): " + "; ".join(
        f"{pol}: " + ", ".join(f"op{o} {r[0] / 1e3:.1f}" for o, r in enumerate(row["revenue_op"])
                               if r[0] > 0) for pol, row in table[sc].items()), ""]
  all_u = list(c.budget_updates)
  lines += ["## RL budget sweep", "",
            f"One run per seed at a constant learning rate, scored at each budget on the "
            f"{c.tune_episodes} tuning episodes (the first b updates of the run are a run of "
            f"budget b; one update = {c.rl.num_envs * c.rl.num_steps} env steps = "
            f"{c.rl.num_envs} episodes). "
            + (f"Every variant runs to {all_u[-1]} updates. " if c.rel_max_updates >= all_u[-1]
               else f"MLP variants run to {all_u[-1]} updates, relational ones to "
                    f"{c.rel_max_updates} (cost). ")
            + f"Every variant is compared at "
            f"{c.main_updates} updates. Best tuned baseline on the same episodes: {best_b} "
            f"{best_b_rev / 1e3:.1f}k. Plateau test: per-seed OLS slope of relative revenue "
            f"against log2(updates) from {c.main_updates / 4:g} updates on; flat when its 95% "
            f"CI lies below +{c.flat_tol:.0%} per doubling.", "",
            "| variant | eval mode | " + " | ".join(f"{u} upd" for u in all_u) +
            " | slope per doubling (95% CI) | last / main | train s |",
            "|---|---|" + "---|" * (len(all_u) + 3)]
  for v, m in rl_meta.items():
    f = m["flattening"]
    rev = np.asarray(sweep[v][m["mode"]])
    have = [int(u) for u in np.asarray(sweep[v]["updates"])]
    cells = " | ".join(_fmt(_ci(rev[:, have.index(u)]), 1, 1e-3) if u in have else "-"
                       for u in all_u)
    sl = f["slope_per_doubling"]
    lm = f.get("last_vs_main")
    lines.append(f"| {v} | {m['mode']} | {cells} | {sl[0]:+.2%} [{sl[1]:+.2%}, {sl[2]:+.2%}] "
                 f"({'flat' if f['flattened'] else 'not flat'}) | "
                 + (f"x{lm[0]:.3f} [{lm[1]:.3f}, {lm[2]:.3f}]" if lm else "-")
                 + f" | {m['train_s']:.0f} |")
  lines += ["", "## Upper bound", "", bound_line]
  lines += ["", "## Comparisons", "", "```", str(rec["comparisons"]), "```", "",
            "Timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items())]
  return "\n".join(lines)


def _plot(curves, sweep, rl_meta, best_b, best_b_rev, table, path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(1, 3, figsize=(17, 4))
  for name, cur in curves.items():
    m = cur.mean(0)
    ax[0].plot(m, label=name)
    ax[0].fill_between(np.arange(len(m)), cur.min(0), cur.max(0), alpha=0.2)
  ax[0].set_xlabel("update")
  ax[0].set_ylabel("training return (sum over trains, reward units)")
  ax[0].legend()
  ax[0].set_title("RL training returns (mean, min-max over seeds)")
  for name, sw in sweep.items():
    rev = np.asarray(sw[rl_meta[name]["mode"]]) / 1e3
    ci = np.array([_ci(rev[:, b]) for b in range(rev.shape[1])])
    sl = rl_meta[name]["flattening"]["slope_per_doubling"]
    ax[1].errorbar(sw["updates"], ci[:, 0], yerr=[ci[:, 0] - ci[:, 1], ci[:, 2] - ci[:, 0]],
                   marker="o", capsize=3,
                   label=f"{name} ({rl_meta[name]['mode']}; slope {sl[0]:+.1%} "
                         f"[{sl[1]:+.1%}, {sl[2]:+.1%}]/doubling)")
  ax[1].axhline(best_b_rev / 1e3, color="k", ls="--", label=f"best tuned baseline ({best_b})")
  main = next(iter(rl_meta.values()))["updates"]
  ax[1].axvline(main, color="grey", ls=":", label=f"main comparison ({main} updates)")
  ax[1].set_xscale("log", base=2)
  ax[1].set_xlabel("RL budget, PPO updates per seed (x192 env steps)")
  ax[1].set_ylabel("revenue on tuning episodes, GBP k (95% CI)")
  ax[1].set_title("budget sweep")
  ax[1].legend(fontsize=7)
  rows = sorted(table["train_level"].items(), key=lambda kv: kv[1]["revenue_total"][0])
  names = [r[0] for r in rows]
  m = np.array([r[1]["revenue_total"] for r in rows]) / 1e3
  ax[2].barh(names, m[:, 0], xerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]])
  ax[2].set_xlim(m[:, 1].min() * 0.97, m[:, 2].max() * 1.01)
  ax[2].set_xlabel("revenue per departure day, GBP k (held-out, 95% CI)")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def main(argv):
  del argv
  c = _config()
  res = run(c, _QUICK.value, _WORKDIR.value)
  print(results.verdict_table(res["claims"]))


if __name__ == "__main__":
  app.run(main)
