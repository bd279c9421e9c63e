"""BallastHydro-v0: a recurrent RL agent trained across generated layouts vs the replanners.

  python -m experiments.ballast_hydro [--quick] [--config.x=...]

1. Layouts: generated layouts (generator.py) from two disjoint seed ranges, the first
   `n_train` / `n_heldout` whose route library fits `max_routes`: the training family and the
   held-out family (never trained on); plus the shipped layouts. All are padded to the family's
   sizes (routes.layout_sizes), so one compiled program trains and scores every layout.
2. Episode banks (episodes.make_bank: per-layout clog prior, every episode oracle-finishable):
   `train_bank` per training layout (seed 0), `eval_episodes` per evaluation layout (seed 1).
3. RL (agents/ballast_hydro.py, the one PPO learner): `n_seeds` vmapped seeds per variant,
   without the replanner residual (rl_gru) and with it (rl_gru_resid, the ablation), cycling
   through the training layouts `chunk_updates` PPO updates at a time, lr constant; at every
   `budget_updates` checkpoint the greedy policy is scored on `sweep_episodes` held-out
   episodes per held-out layout (`sweep_episodes_last` at a variant's last two checkpoints,
   whose paired difference is the flattening test) (the budget sweep; rl_gru_resid stops at `resid_max_updates`).
   The agent's diagnosis head is trained by the learner's auxiliary loss on the true clog mask
   (weight `ppo.aux_coef`).
4. Final scoring on every evaluation bank with paired (bank index, key): oracle (true clogs),
   plain replanner (today's B-replan, heel ignored), heel-aware replanner with one command and
   with a command per pump (the better of the two per layout, by mean decision steps, is the
   comparator: a baseline is never tuned down), and the final RL policies (greedy, every seed).

Decision steps: an episode that fails (heel limit crossed, or plan not done in the step limit)
counts at the step limit (`steps_eff`); raw steps are reported too. CIs: percentile bootstrap
over episodes (and, for RL, seeds x episodes, resampled jointly; comparisons paired by episode).

Diagnosis (after each RL episode, on the edges that episode exercised): the RL head's predicted
clogged set (d_e > 0 after one GRU step on the final observation) and the reference
consistency diagnoser's (diagnosis.reference_diagnosis_hydro) on the SAME final observation,
against the true clog mask 1[clog_e < 1]; micro F1 = 2 TP / (2 TP + FP + FN) over seeds x
episodes, bootstrap CIs resampling both, the difference paired. For context, the reference
diagnoser on the heel-aware replanner's own episodes (its exercised edges).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time
from typing import Any

from absl import app, flags
import jax
import jax.numpy as jnp
from ml_collections import config_flags
import numpy as np

from experiments import cli
from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.core import plotting, results
from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast import oracle as OR
from jaxrl_suite.envs.ballast.diagnosis import confusion
from jaxrl_suite.envs.ballast import episodes as EP
from jaxrl_suite.envs.ballast import load_layout, make_hydro
from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.hydro_rollout import (make_hydro_evaluate,
                                                    make_hydro_evaluate_recurrent)
from jaxrl_suite.envs.ballast.routes import build_routes, enumerate_routes, layout_sizes
from jaxrl_suite.repro import Claim, claim_record, selection

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cli.replace_flags(("config", "quick", "workdir"))
_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(_ROOT, "configs", "ballast_hydro.py"), "experiment config")
_QUICK = flags.DEFINE_bool("quick", False, "small, fast run (CI)")
_WORKDIR = flags.DEFINE_string("workdir", "workdirs/ballast_hydro", "work directory")
NAME = "ballast_hydro"
BASELINES = ("oracle", "replan", "heel_replan_1", "heel_replan_multi")


def _config():
  sys.path.insert(0, _ROOT)
  import configs.ballast_hydro as cfg  # pylint: disable=g-import-not-at-top
  return cli.config_for(cfg, _CONFIG.value, _QUICK.value)


def n_pumps(lay) -> int:
  return sum(1 for nd in lay["nodes"] if nd.get("type") == "pump")


def pick_layouts(seed0: int, n: int, max_routes: int, pumps=()) -> list[dict[str, Any]]:
  """The first n generated layouts from seed0 on whose route library fits max_routes, that have
  at least 3 blockable pipes (the clog prior places up to 3 blockages) and whose plans can start
  within half the heel limit often enough (`_plannable`). With `pumps` (n pump counts, a
  multiset), a layout is taken only while its pump count is still wanted: the family's pump mix
  is then fixed instead of drawn (the default family's training layouts have 1 pump in 5 of 6,
  its held-out and shipped layouts 2-3)."""
  want = list(pumps)
  if want and len(want) != n:
    raise ValueError(f"pumps={tuple(pumps)} must name one pump count per layout (n={n})")
  out, s = [], seed0
  while len(out) < n:
    lay = generate_layout(s, name=f"gen{s}")
    if want and n_pumps(lay) not in want:
      s += 1
      if s - seed0 > 200 * n:
        raise ValueError(f"too few generated layouts with pump counts {tuple(pumps)}")
      continue
    if (len(enumerate_routes(lay)) <= max_routes and
        int((build_routes(lay, "auto")["block_w"] > 0).sum()) >= 3 and _plannable(lay)):
      out.append(lay)
      if want:
        want.remove(n_pumps(lay))
    s += 1
    if s - seed0 > 200 * n:
      raise ValueError(f"config.max_routes={max_routes}: too few generated layouts fit")
  return out


def _plannable(lay, heel_init_max: float = 1.0, n: int = 500, min_rate: float = 0.08) -> bool:
  """Whether >= min_rate of single plan draws start within heel_init_max: make_bank draws
  thousands of plans with 200 tries each, which a layout at 3% per try fails now and then."""
  g = build_routes(lay, "auto")
  rng = np.random.default_rng(0)
  ok = 0
  for _ in range(n):
    try:
      EP.draw_plan(rng, g, lay["hydrostatics"], heel_init_max, tries=1)
      ok += 1
    except ValueError:
      pass
  return ok >= min_rate * n


def host_info() -> dict[str, Any]:
  """What the numbers depend on beyond code, config and seeds: XLA:CPU splits large reductions
  over an intra-op thread pool sized by the CPUs this process may use, so the same commit and
  seeds round differently on a different CPU count (and PPO then diverges: docs/ballast.md,
  "Determinism"); two runs are bitwise comparable only when these fields agree."""
  cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  return {"cpus": int(cpus or 0), "xla_flags": os.environ.get("XLA_FLAGS", ""),
          "backend": jax.default_backend()}


def _boot(rng, n_boot, n):
  return rng.integers(0, n, (n_boot, n))


def rl_stat_ci(x: np.ndarray, n_boot: int, seed: int = 0):
  """mean [lo, hi] of x [S, N] (seeds x paired episodes), seeds and episodes resampled."""
  x = np.asarray(x, np.float64)
  rng = np.random.default_rng(seed)
  si, ei = _boot(rng, n_boot, x.shape[0]), _boot(rng, n_boot, x.shape[1])
  b = np.array([x[si[i]][:, ei[i]].mean() for i in range(n_boot)])
  return float(x.mean()), float(np.quantile(b, 0.025)), float(np.quantile(b, 0.975))


def reduction_ci(rl: np.ndarray, base: np.ndarray, n_boot: int, seed: int = 0):
  """1 - mean(rl) / mean(base) with rl [S, N], base [N] paired by episode; bootstrap over seeds
  and episodes jointly."""
  rl, base = np.asarray(rl, np.float64), np.asarray(base, np.float64)
  rng = np.random.default_rng(seed)
  si, ei = _boot(rng, n_boot, rl.shape[0]), _boot(rng, n_boot, rl.shape[1])
  b = np.array([1.0 - rl[si[i]][:, ei[i]].mean() / base[ei[i]].mean() for i in range(n_boot)])
  return (float(1.0 - rl.mean() / base.mean()), float(np.quantile(b, 0.025)),
          float(np.quantile(b, 0.975)))


def _eff_steps(out, max_steps: int) -> np.ndarray:
  return np.where(np.asarray(out["success"]), np.asarray(out["steps"]), max_steps)


def _metrics(out, max_steps: int, dt_h: float) -> dict[str, np.ndarray]:
  """Per-episode metrics (arrays with the episode axis last)."""
  return {"steps": np.asarray(out["steps"], np.float64),
          "steps_eff": _eff_steps(out, max_steps).astype(np.float64),
          "hours": np.asarray(out["steps"], np.float64) * dt_h,
          "success": np.asarray(out["success"], np.float64),
          "violated": np.asarray(out["violated"], np.float64),
          "max_heel": np.asarray(out["max_heel"], np.float64),
          "energy_kwh": np.asarray(out["energy_kwh"], np.float64)}


def train_variant(c, env, trainer, train_tabs, sweep_fn, name: str, key, log,
                  budgets=None):
  """Trains one variant across the training layouts up to the last of `budgets` (default
  c.budget_updates); returns (final params [S], sweep, training curve)."""
  init, chunk = trainer
  keys = jax.random.split(key, c.n_seeds)
  state = init(keys, train_tabs[0])
  sweep, done, i = [], 0, 0
  curve = []
  budgets = list(budgets or c.budget_updates)
  for bi, b in enumerate(budgets):
    while done < b:
      tabs = train_tabs[i % len(train_tabs)]
      keys = jax.vmap(lambda k: jax.random.fold_in(k, i))(keys)
      state, m = chunk(state, tabs, keys)
      curve.append({k: np.asarray(v).mean(-1).tolist() for k, v in m.items()
                    if k in ("episode_length", "success_rate", "violated_rate",
                             "episode_return", "entropy", "approx_kl", "aux_loss")})
      done += c.chunk_updates
      i += 1
    # the last two checkpoints (the last doubling, the flattening test) on more episodes
    n_ep = c.sweep_episodes_last if bi >= len(budgets) - 2 else c.sweep_episodes
    sweep.append({"updates": b, **sweep_fn(state.params, n_ep)})
    log(f"{name}: {b} updates, held-out steps_eff "
        f"{np.mean(sweep[-1]['steps_eff']):.2f} success {np.mean(sweep[-1]['success']):.3f}")
  return state.params, sweep, curve


def run(c, quick: bool, workdir: str, results_dir: str | None = None) -> dict:
  import configs.ballast_hydro as cfg_mod  # pylint: disable=g-import-not-at-top
  cfg_mod.validate(c)
  t0 = time.time()
  log = (lambda s: None) if quick else (lambda s: print(f"[{time.time() - t0:6.0f}s] {s}",
                                                        flush=True))
  timings: dict[str, float] = {}
  train_lays = pick_layouts(c.train_seed0, c.n_train, c.max_routes, tuple(c.train_pumps))
  held_lays = pick_layouts(c.heldout_seed0, c.n_heldout, c.max_routes)
  val_lays = pick_layouts(c.val_seed0, c.n_val, c.max_routes)
  ship_lays = [load_layout(n) for n in c.shipped]
  sizes = layout_sizes(train_lays + val_lays + held_lays + ship_lays)
  log(f"sizes {sizes}; train {[l['name'] for l in train_lays]}; held-out "
      f"{[l['name'] for l in held_lays]}")
  t = time.time()
  train_envs = [make_hydro(l, n_bank=c.train_bank, seed=0, sizes=sizes,
                           reward_scale=c.reward_scale) for l in train_lays]
  evals = {}
  for group, lays in (("shipped", ship_lays), ("held_out", held_lays)):
    for l in lays:
      evals[l["name"]] = (group,) + make_hydro(l, n_bank=c.eval_episodes, seed=1, sizes=sizes,
                                                   reward_scale=c.reward_scale)
  vals = {l["name"]: make_hydro(l, n_bank=c.sweep_episodes_last, seed=2, sizes=sizes,
                                reward_scale=c.reward_scale)[1] for l in val_lays}
  timings["banks_s"] = time.time() - t
  log(f"banks in {timings['banks_s']:.0f} s")
  env = train_envs[0][0]
  api = env.agent_api          # the env-side functions the agent needs (injected)
  bank_reports = {**{e[2]["layout"]: e[2] for e in train_envs},
                  **{k: v[3] for k, v in evals.items()}}
  max_steps = int(train_envs[0][1].max_steps_in_episode)
  dt_h = float(train_envs[0][1].dt_h)

  step_pol = A.make_policy(c.agent, greedy=True)
  # diagnosis: the head per (seed, episode); the reference on any batch of final observations
  diag_seeds = jax.jit(jax.vmap(jax.vmap(A.make_diagnose(c.agent), in_axes=((None, None), 0, 0)),
                                in_axes=((0, None), 0, 0)))
  ref_rows = jax.jit(jax.vmap(api.reference_diagnosis, in_axes=(0, None)))
  ev_rl = make_hydro_evaluate_recurrent(env, step_pol, jnp.zeros(c.agent.gru), max_steps)
  ev_rl_seeds = jax.jit(jax.vmap(ev_rl, in_axes=(None, (0, None), None, None)))
  ev_base = make_hydro_evaluate(env, HB.hydro_policy, max_steps)
  key = jax.random.PRNGKey(c.seed)
  ep_keys = {n: jax.random.split(jax.random.fold_in(key, 7 + j), c.eval_episodes)
             for j, n in enumerate(evals)}
  held_names = [l["name"] for l in held_lays]
  val_keys = {n: jax.random.split(jax.random.fold_in(key, 3000 + j), c.sweep_episodes_last)
              for j, n in enumerate(vals)}

  def sweep_fn_for(resid: bool):
    def fn(params, n_ep):
      """Greedy validation metrics [S, L, n] on the first n episodes of each validation
      layout's bank (the same episodes at every checkpoint: differences are paired; never the
      held-out evaluation layouts)."""
      n_sw = min(n_ep, c.sweep_episodes_last)
      outs = []
      for n, p in vals.items():
        out = ev_rl_seeds(p, (params, A.make_tables(p, resid, api)), jnp.arange(n_sw),
                          val_keys[n][:n_sw])
        outs.append(_metrics(jax.device_get(out), max_steps, dt_h))
      return {k: np.stack([o[k] for o in outs], 1) for k in ("steps_eff", "success",
                                                             "violated")}
    return fn

  # ---- RL training (one program for every layout and both variants)
  total = int(c.budget_updates[-1])
  trainer = AB.make_trainer(c, env, total, int(c.chunk_updates))
  rl_params, sweeps, curves = {}, {}, {}
  for vi, var in enumerate(c.variants):
    resid = var == "rl_gru_resid"
    tabs = [A.make_tables(p, resid, api) for _, p, _ in train_envs]
    budgets = [b for b in c.budget_updates if not resid or b <= c.resid_max_updates]
    t = time.time()
    rl_params[var], sweeps[var], curves[var] = train_variant(
        c, env, trainer, tabs, sweep_fn_for(resid), var, jax.random.fold_in(key, 100 + vi), log,
        budgets)
    timings[f"train_{var}_s"] = time.time() - t

  # ---- the heel-aware comparator, chosen on the training layouts' banks (training data)
  t = time.time()
  comp_sel = _pick_heel_aware(c, train_envs, ev_base, max_steps)
  heel_aware = comp_sel.choice or "heel_replan_1"
  timings["select_s"] = time.time() - t
  # ---- final scoring, paired episodes
  t = time.time()
  scores: dict[str, dict[str, dict]] = {}
  diag: dict[str, dict[str, dict]] = {}
  for n, (group, _, p, _) in evals.items():
    idx, ks = jnp.arange(c.eval_episodes), ep_keys[n]
    P = int(p.pump_mask.sum())
    label = np.asarray(p.bank.clog[idx] < 1.0)[None]                       # [1, N, E]
    edge_mask = np.asarray(p.edge_mask, bool)

    def counts(pred, out):
      """Confusion counts [S, N] of pred [S, N, E] on the edges each episode exercised."""
      mask = (np.asarray(out["exercised"]) > 0.5) & edge_mask
      return confusion(pred, np.broadcast_to(label, mask.shape), mask)

    def reference(out):
      obs = np.asarray(out["final_obs"])
      return np.asarray(ref_rows(obs.reshape(-1, obs.shape[-1]), p)).reshape(
          obs.shape[:-1] + (-1,))

    sc, outs, dg = {}, {}, {}
    for b in BASELINES:
      name = {"heel_replan_1": "heel_replan", "heel_replan_multi": "heel_replan"}.get(b, b)
      if b == "oracle":   # every pump, best of its 1..P-command forms (envs/ballast/oracle.py)
        outs[b] = OR.run_oracle(ev_base, p, idx, ks, max_steps)
      else:
        hb = HB.make_hydro_baseline(p, name, n_cmds=P if b == "heel_replan_multi" else 1)
        outs[b] = jax.device_get(ev_base(p, hb, idx, ks))
      sc[b] = _metrics(outs[b], max_steps, dt_h)
    for var in c.variants:
      tb = A.make_tables(p, var == "rl_gru_resid", api)
      out = jax.device_get(ev_rl_seeds(p, (rl_params[var], tb), idx, ks))
      sc[var] = _metrics(out, max_steps, dt_h)
      head = np.asarray(diag_seeds((rl_params[var], tb), out["final_carry"], out["final_obs"]))
      dg[var] = {"head": counts(head, out), "reference": counts(reference(out), out)}
    sc["_n_blocked"] = np.asarray(p.bank.n_blocked)
    best = heel_aware
    sc["heel_aware"] = sc[best]
    sc["_heel_aware_is"] = best
    ha = {k: outs[best][k][None] for k in ("exercised", "final_obs")}
    dg["heel_aware"] = {"reference": counts(reference(ha), ha)}
    scores[n] = sc
    diag[n] = dg
    log(f"scored {n}")
  timings["score_s"] = time.time() - t

  flattening = {var: _flattening(sweeps[var], c) for var in c.variants}
  table, comparisons = _tables(c, scores, evals)
  diag_table = _diagnosis(c, diag, scores, evals)
  claims = _claims(c, scores, diag, evals, sweeps["rl_gru"] if "rl_gru" in sweeps else None,
                   comp_sel)
  wall = time.time() - t0
  payload = {
      "layouts": {"train": [l["name"] for l in train_lays], "held_out": held_names,
                  "validation": list(vals),
                  "shipped": list(c.shipped), "sizes": sizes},
      "bank_reports": bank_reports, "table": table, "comparisons": comparisons,
      "heel_aware_comparator": {n: scores[n]["_heel_aware_is"] for n in scores},
      "heel_aware_selection": comp_sel.to_dict(),
      "sweep": {v: [{"updates": s["updates"], "episodes": int(np.shape(s["steps_eff"])[-1]
                                                             * len(held_names)),
                     **{k: float(np.mean(s[k])) for k in ("steps_eff", "success", "violated")}}
                    for s in sweeps[v]] for v in sweeps},
      "flattening": flattening, "training_curves": curves, "timings": timings,
      "decision_step_h": dt_h, "max_steps": max_steps,
      "diagnosis_f1": diag_table, "host": host_info()}
  md = _markdown(c, payload, table, comparisons)
  # The library names the folder (results/ full, the quick folder quick, or JAXRL_RESULTS_DIR),
  # so reproduce.py finds the record where it looks.
  rdir = results_dir or results.output_dir("quick" if quick else "full")
  path = results.write_results(NAME, mode="quick" if quick else "full", config=c,
                               seeds=list(range(c.n_seeds)), claims=claims, wall_time_s=wall,
                               payload=payload, markdown=md, results_dir=rdir)
  _plot(table, sweeps, diag_table, os.path.join(os.path.dirname(path), f"{NAME}.png"), c)
  return {"claims": claims, "path": path, "table": table, "payload": payload}


REGIME_ROWS = (("0 blocked", lambda nb: nb == 0), ("1 blocked", lambda nb: nb == 1),
               ("2 blocked", lambda nb: nb == 2), ("3 blocked", lambda nb: nb == 3),
               (">=1 blocked", lambda nb: nb >= 1), ("all", lambda nb: nb >= 0))
METRICS = ("steps_eff", "steps", "hours", "success", "violated", "energy_kwh")


def _stat(x: np.ndarray, n_boot: int):
  if x.ndim == 1:
    x = x[None]
  if x.shape[-1] == 0:
    return None
  return rl_stat_ci(x, n_boot)


def _tables(c, scores, evals):
  """Per group (shipped / held_out) x regime x policy x metric: [mean, lo, hi] (bootstrap, for
  the report); the paired comparisons. Verdicts come from _claims (the reproduction layer)."""
  policies = ("oracle", "replan", "heel_replan_1", "heel_replan_multi", "heel_aware") + tuple(
      c.variants)
  table: dict = {}
  pooled: dict = {}
  for group in ("shipped", "held_out"):
    names = [n for n in scores if evals[n][0] == group]
    if not names:
      continue
    nb = np.concatenate([scores[n]["_n_blocked"] for n in names])
    pooled[group] = {"_n_blocked": nb}
    for pol in policies:
      pooled[group][pol] = {m: np.concatenate([np.atleast_2d(scores[n][pol][m]) for n in names],
                                              -1) for m in METRICS}
    table[group] = {}
    for reg, sel in REGIME_ROWS:
      mask = sel(nb)
      row = {"episodes": int(mask.sum())}
      for pol in policies:
        row[pol] = {m: _stat(pooled[group][pol][m][..., mask], c.n_boot) for m in METRICS}
      table[group][reg] = row
  comparisons = {}
  for group, pg in pooled.items():
    mask = pg["_n_blocked"] >= 1
    comparisons[group] = {}
    for var in c.variants:
      rl = pg[var]["steps_eff"][:, mask]
      for base in ("heel_aware", "replan"):
        comparisons[group][f"{var}_vs_{base}"] = reduction_ci(rl, pg[base]["steps_eff"][0, mask],
                                                             c.n_boot)
    if "rl_gru" in pg:   # where RL could help: heel-limit violations vs the heel-aware replanner
      d = pg["rl_gru"]["violated"] - pg["heel_aware"]["violated"][0][None]
      comparisons[group]["violation_rate_diff_rl_minus_heel_aware"] = rl_stat_ci(d, c.n_boot)
  return table, comparisons


def f1_ci(tp, fp, fn, n_boot: int, seed: int = 0, base=None):
  """Micro F1 = 2 TP / (2 TP + FP + FN) of counts [S, N] (seeds x paired episodes) with a
  bootstrap CI resampling seeds and episodes; with base = (tp, fp, fn) of a second diagnoser on
  the same rows, the paired difference F1 - F1_base instead."""
  def f1(a, b, c):
    return 2.0 * a / max(2.0 * a + b + c, 1.0)

  def stat(si, ei):
    pick = lambda x: np.asarray(x, np.float64)[si][:, ei].sum()
    v = f1(pick(tp), pick(fp), pick(fn))
    return v if base is None else v - f1(*(pick(x) for x in base))

  S, N = np.shape(tp)
  rng = np.random.default_rng(seed)
  si, ei = _boot(rng, n_boot, S), _boot(rng, n_boot, N)
  b = np.array([stat(si[i], ei[i]) for i in range(n_boot)])
  return (float(stat(np.arange(S), np.arange(N))), float(np.quantile(b, 0.025)),
          float(np.quantile(b, 0.975)))


DIAG_ROWS = ((">=1 blocked", lambda nb: nb >= 1), ("all", lambda nb: nb >= 0))


def _diagnosis(c, diag, scores, evals):
  """Per group x regime: F1 [mean, lo, hi] of each RL head, of the reference on the same
  episodes, their paired difference, and the reference on the heel-aware replanner's episodes
  (the report; the verdict comes from _claims)."""
  table = {}
  for group in ("shipped", "held_out"):
    names = [n for n in diag if evals[n][0] == group]
    if not names:
      continue
    nb = np.concatenate([scores[n]["_n_blocked"] for n in names])
    cat = lambda who, src: {k: np.concatenate([diag[n][who][src][k] for n in names], -1)
                            for k in ("tp", "fp", "fn")}
    table[group] = {}
    for reg, sel in DIAG_ROWS:
      m = sel(nb)
      sub = lambda d: tuple(d[k][:, m] for k in ("tp", "fp", "fn"))
      row = {"episodes": int(m.sum())}
      for var in c.variants:
        h, r = sub(cat(var, "head")), sub(cat(var, "reference"))
        row[var] = {"head_f1": f1_ci(*h, c.n_boot), "reference_f1": f1_ci(*r, c.n_boot),
                    "head_minus_reference": f1_ci(*h, c.n_boot, base=r),
                    "clogged_exercised_edges": int(h[0].sum() + h[2].sum())}
      row["heel_aware_reference_f1"] = f1_ci(*sub(cat("heel_aware", "reference")), c.n_boot)
      table[group][reg] = row
  return table


def _pick_heel_aware(c, train_envs, ev_base, max_steps: int) -> selection.Selection:
  """The heel-aware comparator: heel_replan with one command or with a command per pump,
  whichever has fewer mean steps_eff on the training layouts' banks (training data only; the
  choice is then fixed for every evaluation layout)."""
  scores: dict[str, list[float]] = {"heel_replan_1": [], "heel_replan_multi": []}
  for _, p, _ in train_envs:
    n = int(p.bank.vol0.shape[0])
    idx, ks = jnp.arange(n), jax.random.split(jax.random.PRNGKey(c.seed + 99), n)
    for b in scores:
      hb = HB.make_hydro_baseline(p, "heel_replan",
                                  n_cmds=int(p.pump_mask.sum()) if b.endswith("multi") else 1)
      scores[b].append(float(_eff_steps(jax.device_get(ev_base(p, hb, idx, ks)),
                                        max_steps).mean()))
  return selection.pick_best("heel-aware comparator", scores, better="lower",
                             data=f"training layouts' banks ({c.n_train} x {c.train_bank} "
                                  "episodes)")


def _f1(tp, fp, fn) -> np.ndarray:
  """Micro F1 per seed of counts [S, N] (pooled over episodes); NaN with no positives."""
  tp, fp, fn = (np.asarray(x, np.float64).sum(-1) for x in (tp, fp, fn))
  den = 2 * tp + fp + fn
  return np.where(den > 0, 2 * tp / np.maximum(den, 1e-12), np.nan)


def _claims(c, scores, diag, evals, sweep_rl, comp_sel) -> list[dict]:
  """Every registered claim (configs/ballast_hydro.py) judged by jaxrl_suite.repro from per-seed
  samples; rl_gru's validation-layout budget sweep is the fair-chance input (flatness)."""
  import configs.ballast_hydro as cfg_mod  # pylint: disable=g-import-not-at-top
  reg = {d["id"]: Claim.from_dict(d) for d in cfg_mod.claims()}
  if "rl_gru" not in c.variants:
    return []
  sweep = None
  if sweep_rl and len(sweep_rl) >= 2:
    sweep = {"scores": [np.asarray(s["steps_eff"], np.float64).reshape(
        np.shape(s["steps_eff"])[0], -1).mean(-1).tolist() for s in sweep_rl],
             "budgets": [int(s["updates"]) for s in sweep_rl], "scale": "log_ratio",
             "better": "lower"}
  rows = []
  for group in ("held_out", "shipped"):
    names = [n for n in scores if evals[n][0] == group]
    if not names:
      continue
    cat = lambda pol, m: np.concatenate([np.atleast_2d(scores[n][pol][m]) for n in names], -1)
    blk = np.concatenate([scores[n]["_n_blocked"] for n in names]) >= 1
    rl = cat("rl_gru", "steps_eff")[:, blk]
    for base in ("heel_aware", "replan"):
      ref = cat(base, "steps_eff")[0, blk]
      rows.append(claim_record(reg[f"ballast_hydro.rl_vs_{base}_32_{group}.v1"], rl.tolist(),
                               [ref.tolist()] * rl.shape[0], sweep=sweep,
                               selection=comp_sel if base == "heel_aware" else None))
    v_rl, v_ha = cat("rl_gru", "violated"), cat("heel_aware", "violated")[0]
    rows.append(claim_record(reg[f"ballast_hydro.rl_fewer_heel_violations_{group}.v1"],
                             v_rl.tolist(), [v_ha.tolist()] * v_rl.shape[0], sweep=sweep,
                             selection=comp_sel))
    dcat = lambda src: [np.concatenate([diag[n]["rl_gru"][src][k] for n in names], -1)[:, blk]
                        for k in ("tp", "fp", "fn")]
    rows.append(claim_record(reg[f"ballast_hydro.diagnosis_noninferior_{group}.v1"],
                             _f1(*dcat("head")), _f1(*dcat("reference")), sweep=sweep))
    rows[-1]["note"] = f"layouts {names}; episodes with >= 1 blocked pipe: {int(blk.sum())}"
  return rows


def _paired_delta(a, b) -> np.ndarray:
  """b - a [S, L * n] on the episodes both checkpoints scored: a, b are [S, L, n_a] / [S, L,
  n_b] (seeds x held-out layouts x the first n paired episodes of each layout; [S, N] is read
  as one layout), n = min(n_a, n_b)."""
  a, b = (np.asarray(x, np.float64) for x in (a, b))
  a, b = (x[:, None] if x.ndim == 2 else x for x in (a, b))
  n = min(a.shape[-1], b.shape[-1])
  d = b[..., :n] - a[..., :n]
  return d.reshape(d.shape[0], -1)


def _flattening(sweep, c) -> dict:
  """Change in held-out steps_eff per budget doubling (seeds x episodes bootstrap), and
  whether the last one is flat (CI within +/- flat_tol, or no improvement beyond flat_tol)."""
  steps = []
  for a, b in zip(sweep[:-1], sweep[1:]):
    m, lo, hi = rl_stat_ci(_paired_delta(a["steps_eff"], b["steps_eff"]), c.n_boot)
    steps.append({"from": a["updates"], "to": b["updates"], "delta_steps": [m, lo, hi],
                  "episodes": int(_paired_delta(a["steps_eff"], b["steps_eff"]).shape[-1])})
  if not steps:
    return {"steps": [], "flattened": False}
  last = steps[-1]["delta_steps"]
  return {"steps": steps, "flattened": bool(last[1] > -c.flat_tol),
          "last_delta": last}


def _fmt(s, pct=False):
  if s is None:
    return "-"
  m, lo, hi = s
  if pct:
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
  return f"{m:.1f} [{lo:.1f}, {hi:.1f}]"


def _markdown(c, payload, table, comparisons) -> str:
  lines = [
      "BallastHydro-v0: recurrent RL trained across generated layouts vs the replanners.",
      "",
      f"Training layouts {payload['layouts']['train']}; held-out generated layouts (never "
      f"trained on) {payload['layouts']['held_out']}; shipped {payload['layouts']['shipped']}. "
      f"Budget: {c.n_seeds} seeds x {c.budget_updates[-1]} PPO updates (rl_gru_resid: "
      f"{c.resid_max_updates}) x {c.ppo.num_envs} envs x {c.ppo.num_steps} steps; diagnosis "
      f"head aux_coef {c.ppo.aux_coef}; decision step {payload['decision_step_h']:.3f} h; "
      f"{c.eval_episodes} paired episodes per evaluation layout. Decision steps `steps_eff`: a "
      "failed episode counts at the step limit. Heel-aware comparator per layout (fewer mean "
      f"steps of one command / a command per pump): {payload['heel_aware_comparator']}. "
      f"Host: {payload['host']['cpus']} CPUs ({payload['host']['backend']}); the numbers are "
      "bitwise reproducible on the same CPU count only (docs/ballast.md, Determinism).",
      "Diagnosis: F1 on the edges each episode exercised, RL head vs the reference diagnoser on "
      "the same final observations (section below).", ""]
  for group, rows in table.items():
    lines += [f"## {group.replace('_', '-')} layouts", "",
              "| regime | episodes | policy | steps_eff | steps | hours | success | heel limit "
              "crossed | energy kWh |", "|---|---|---|---|---|---|---|---|---|"]
    for reg, row in rows.items():
      for pol, st in row.items():
        if pol == "episodes":
          continue
        lines.append(f"| {reg} | {row['episodes']} | {pol} | {_fmt(st['steps_eff'])} | "
                     f"{_fmt(st['steps'])} | {_fmt(st['hours'], True)} | "
                     f"{_fmt(st['success'], True)} | {_fmt(st['violated'], True)} | "
                     f"{_fmt(st['energy_kwh'])} |")
    lines.append("")
  lines += ["## Budget sweep (held-out layouts, greedy policy)", "",
            "| variant | updates | episodes | steps_eff | success | heel limit crossed |",
            "|---|---|---|---|---|---|"]
  for var, sw in payload["sweep"].items():
    for s in sw:
      lines.append(f"| {var} | {s['updates']} | {s.get('episodes', '-')} | "
                   f"{s['steps_eff']:.2f} | {s['success']:.3f} | {s['violated']:.3f} |")
  lines += ["", "Change per doubling (held-out steps_eff, 95% CI over seeds x episodes, on the "
            "episodes both checkpoints scored):", ""]
  for var, f in payload["flattening"].items():
    for s in f["steps"]:
      m, lo, hi = s["delta_steps"]
      lines.append(f"- {var} {s['from']} -> {s['to']}: {m:+.2f} [{lo:+.2f}, {hi:+.2f}] "
                   f"({s.get('episodes', '-')} episodes x {c.n_seeds} seeds)")
    lines.append(f"- {var} flattened: {f['flattened']}")
  lines += ["", "Reductions in steps_eff (1 - RL / baseline, >=1 blocked):", ""]
  for group, comp in comparisons.items():
    for k, v in comp.items():
      lines.append(f"- {group} {k}: {v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]")
  lines += ["", "## Diagnosis F1 on exercised edges (clogged = clog < 1)", "",
            "| group | regime | episodes | policy | head F1 | reference F1 (same episodes) | "
            "head - reference | clogged exercised edges |", "|---|---|---|---|---|---|---|---|"]
  for group, rows in payload["diagnosis_f1"].items():
    for reg, row in rows.items():
      for var in c.variants:
        r = row[var]
        lines.append(f"| {group} | {reg} | {row['episodes']} | {var} | "
                     f"{_fmt(r['head_f1'], True)} | {_fmt(r['reference_f1'], True)} | "
                     f"{_fmt(r['head_minus_reference'], True)} | "
                     f"{r['clogged_exercised_edges']} |")
      lines.append(f"| {group} | {reg} | {row['episodes']} | heel_aware (reference only, its "
                   f"own episodes) | - | {_fmt(row['heel_aware_reference_f1'], True)} | - | - |")
  lines += ["", f"![trade-off and sweep]({NAME}.png)", ""]
  return "\n".join(lines)


def _plot(table, sweeps, diag_table, path, c):
  """Stability / steps trade-off per group, the budget sweep, diagnosis F1 (head vs reference)."""
  plt = plotting.pyplot()
  groups = list(table)
  fig, axes = plt.subplots(1, len(groups) + 2, figsize=(5 * (len(groups) + 2), 4))
  for ax, group in zip(axes, groups):
    row = table[group]["all"]
    for pol, st in row.items():
      if pol in ("episodes", "heel_aware"):
        continue
      x = st["violated"]
      plotting.errorbar_ci(ax, [x[0]], [st["steps_eff"]], xerr=[[x[0] - x[1]], [x[2] - x[0]]],
                           fmt="o", label=pol)
    ax.set_xlabel("share of episodes crossing the heel limit")
    ax.set_ylabel("decision steps (failure = step limit)")
    ax.set_title(f"stability / steps, {group.replace('_', '-')} layouts")
    ax.legend(fontsize=7)
  ax = axes[len(groups)]
  for var, sw in sweeps.items():
    plotting.errorbar_ci(ax, [s["updates"] for s in sw],
                         [rl_stat_ci(np.reshape(s["steps_eff"], (c.n_seeds, -1)),
                                     min(c.n_boot, 500)) for s in sw],
                         marker="o", label=var)
  ax.set_xscale("log", base=2)
  ax.set_xlabel("PPO updates")
  ax.set_ylabel("held-out decision steps")
  ax.set_title("budget sweep")
  ax.legend(fontsize=7)
  ax = axes[-1]
  labels, xs = [], []
  for gi, group in enumerate(diag_table):
    row = diag_table[group][">=1 blocked"]
    for vi, var in enumerate(c.variants):
      x = gi * (len(c.variants) + 1) + vi
      plotting.errorbar_ci(ax, [x - 0.15], [row[var]["head_f1"]], fmt="o", color="C0",
                           label="RL head" if gi == vi == 0 else None)
      plotting.errorbar_ci(ax, [x + 0.15], [row[var]["reference_f1"]], fmt="s", color="C1",
                           label="reference, same episodes" if gi == vi == 0 else None)
      labels.append(f"{group.replace('_', '-')}\n{var}")
      xs.append(x)
  ax.set_xticks(xs)
  ax.set_xticklabels(labels, fontsize=7)
  ax.set_ylabel("F1 on exercised edges (>=1 blocked)")
  ax.set_title("clog diagnosis")
  ax.legend(fontsize=7)
  plotting.save_figure(fig, path, dpi=100)


def main(argv):
  del argv
  cli.run_and_report(run, _config(), _QUICK.value, _WORKDIR.value)


if __name__ == "__main__":
  app.run(main)
