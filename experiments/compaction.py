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

Run from the repo root:  python -m experiments.compaction [--quick] [--workdir=DIR]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time  # noqa: E402
import warnings  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from configs import compaction as cfg_mod  # noqa: E402
from jaxrl_suite.core import plotting  # noqa: E402
from jaxrl_suite.core import results as results_lib  # noqa: E402
from jaxrl_suite.core import stats  # noqa: E402
from jaxrl_suite.envs.text import stream_ledger as sl  # noqa: E402
from jaxrl_suite.lm import compaction as comp  # noqa: E402
from jaxrl_suite.lm import model as lm_model  # noqa: E402
from jaxrl_suite.lm import pretrain as lm_pretrain  # noqa: E402
from jaxrl_suite.lm import rollout as lm_rollout  # noqa: E402
from jaxrl_suite.lm import token_ppo  # noqa: E402
from jaxrl_suite.lm import value as lm_value  # noqa: E402
from jaxrl_suite.repro import Claim, claim_record, entry, flatness, stage_cache  # noqa: E402

NAME = "compaction"
CONFIG_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "configs", "compaction.py")
FLAGS = entry.define_flags(NAME, CONFIG_PATH)
# Key streams per seed (jax.random.fold_in of the seed's key): RL sampling is shared by every
# variant; evaluation and validation episodes have their own keys, used for nothing else.
K_VALUE, K_EVAL, K_VAL, K_MASS = 1, 3, 4, 77


def setup(config):
  env = sl.StreamLedger(max_events=config.env.max_events,
                        max_events_per_obs=config.env.events_per_obs)
  p = sl.EnvParams(num_events=min(config.train_events), num_items=config.env.num_items,
                   events_per_obs=config.env.events_per_obs, max_amount=config.env.max_amount,
                   mid_query_prob=config.env.mid_query_prob, mid_reward=config.env.mid_reward,
                   final_reward=config.env.final_reward,
                   max_steps_in_episode=4 * config.env.max_events)
  sl.validate_params(p, env)
  m = config.model
  cfg = lm_model.LMConfig("compaction", vocab_size=sl.V.size, d_model=m.d_model,
                          num_layers=m.num_layers, num_heads=m.num_heads, d_ff=m.d_ff,
                          max_len=m.max_len, tokenizer_version=2)
  return env, p, cfg


def seed_keys(config):
  """[S] keys, one per seed (seed s: PRNGKey(config.seed + s))."""
  return jnp.stack([jax.random.PRNGKey(config.seed + s) for s in range(config.num_seeds)])


def _stage_config(config, **extra) -> dict:
  """What a stage's value depends on: the config without the run lists, plus `extra`."""
  d = {k: v for k, v in config.to_dict().items()
       if k not in ("variants", "grad_mass_variants", "quick")}
  return {**d, **extra}


def warm_starts(config, env, p, cfg, workdir, progress=True):
  """Each seed's own warm start (a stage each): params stacked [S, ...] and per-seed info."""
  keyed = {k: config[k] for k in ("warm_steps", "warm_batch", "warm_lr", "warm_turns",
                                   "warm_row_len")}
  keyed.update(model=config.model.to_dict(), corpus=config.corpus.to_dict(),
               env=config.env.to_dict())
  params, info = [], []
  for s in range(config.num_seeds):
    def make(s=s):
      pp, loss = comp.warm_start(
          cfg, env, p, jax.random.fold_in(jax.random.PRNGKey(config.seed + s), 7),
          config.warm_steps, config.warm_batch, config.warm_lr, max_turns=config.warm_turns,
          mix=comp.CorpusMix(**config.corpus), progress=progress, row_len=config.warm_row_len)
      return {"params": pp, "loss_last": float(np.mean(np.asarray(loss)[-20:]))}
    res = stage_cache.run_stage(f"warm/seed{config.seed + s}",
                                dict(keyed, seed=config.seed + s), make, workdir)
    params.append(res.value["params"])
    info.append({"loss_last": float(res.value["loss_last"]), "wall_s": res.wall_s,
                 "cached": res.hit})
  stacked = jax.tree.map(lambda *x: jnp.stack([jnp.asarray(a) for a in x]), *params)
  return stacked, info


def ppo_config(config, variant):
  harness, norm, adv, across = cfg_mod.VARIANTS[variant]
  return harness, token_ppo.TokenPPOConfig(
      epochs=config.epochs, num_minibatches=config.num_minibatches, lr=config.lr,
      critic_lr=config.critic_lr, clip_eps=config.clip_eps, gamma=config.gamma, lam=config.lam,
      gae_across_segments=across, advantage=adv,
      group_size=config.group_size if adv == "grpo" else 1,
      normalize_advantages=adv == "gae", norm=norm, critic_warmup_steps=config.critic_warmup)


CURVE_NAMES = ("return", "windows", "invalid", "clip_frac", "approx_kl", "segment_bias",
               "vf_loss")


def make_trainer(config, env, p, cfg, variant, num_seeds):
  """(init over seeds, vstep over seeds, vcfg) of one variant: one compiled program for every
  training horizon (the rollout has the turns of the longest one)."""
  harness, pcfg = ppo_config(config, variant)
  rcfg = comp.rollout_config(harness, env, p.replace(num_events=max(config.train_events)),
                             config.window, config.temperature)
  vcfg = lm_value.ValueConfig("shared")
  init, step = comp.make_mixed_train_step(cfg, vcfg, pcfg, env, p, rcfg, config.num_envs,
                                          config.train_events)
  names = CURVE_NAMES + tuple(f"{q}_H{h}" for q in ("return", "windows")
                              for h in config.train_events)

  def vstep(st, k):
    st, m = jax.vmap(step)(st, jax.random.split(k, num_seeds))
    return st, {n: m[n] for n in names}

  return jax.vmap(init), vstep, vcfg


def sweep_budgets(config):
  """The budget sweep: config.budgets, then doublings up to config.max_budget."""
  b = list(config.budgets)
  while b[-1] < config.max_budget:
    b.append(2 * b[-1])
  return b


def train_variant(config, env, p, cfg, params0, variant, keys, progress=True):
  """Critic warm-up, then RL over the budget sweep until flat on validation episodes.

  params0: the warm starts stacked [S, ...]; keys [S] the seeds' keys. Returns (params [S],
  vparams [S], {"curves": {metric: [S, T]}, "critic": {metric: [S, warm-up]}, "sweep":
  {"budgets": [K], "scores": [K, S]}, "wall": s}).
  """
  s = config.num_seeds
  init, vstep, vcfg = make_trainer(config, env, p, cfg, variant, s)
  vparams = jax.vmap(lambda k: lm_value.init_value_params(
      vcfg, cfg, jax.random.fold_in(k, K_VALUE)))(keys)
  state = init(params0, vparams, params0)
  rl_key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 5)   # every variant: same keys
  t0 = time.time()
  critic = {}
  if config.critic_warmup:   # the policy does not move: these are warm-start rollouts
    state, critic = lm_pretrain.run_chunked(
        vstep, state, jax.random.fold_in(rl_key, 0), config.critic_warmup, config.chunk,
        f"critic warm-up {variant}", progress)
    critic = {k: np.asarray(critic[k]).T for k in ("vf_loss", "return")}
  harness = cfg_mod.VARIANTS[variant][0]
  val_keys = jax.vmap(lambda k: jax.random.fold_in(k, K_VAL))(keys)
  done, budgets, scores, parts = 0, [], [], []
  for b in sweep_budgets(config):
    state, cur = lm_pretrain.run_chunked(vstep, state, jax.random.fold_in(rl_key, b),
                                         b - done, config.chunk, f"RL {variant} to {b}",
                                         progress)
    parts.append(cur)
    done = b
    val = evaluate(config, env, p, cfg, state[0].params, harness, config.eval_horizon,
                   val_keys, config.val_episodes)
    budgets.append(b)
    scores.append(val["final_acc"])
    if len(budgets) >= len(config.budgets) and flatness.last_doubling(
        np.asarray(scores), budgets, config.flat_delta).fair:
      break   # flat (or degrading) on validation: more budget would not change the answer
  curves = {k: np.concatenate([np.asarray(c[k]) for c in parts]).T for k in parts[0]}
  out = {"curves": curves, "critic": critic, "wall": time.time() - t0,
         "sweep": {"budgets": np.asarray(budgets, np.float64),
                   "scores": np.asarray(scores, np.float64)}}
  return state[0].params, state[0].vparams, out


_EVAL_FNS: dict = {}


def _eval_fn(config, env, p, cfg, harness):
  """The jitted batch evaluation of a harness: sums and counts of finite per-episode metrics.

  One compiled program per harness serves every horizon, variant and seed (H and the params
  are arguments; the rollout has the turns of the longest horizon of that harness)."""
  h = "compaction" if harness == "frozen" else harness   # same rollout at evaluation
  horizons = config.full_context_events if h == "full" else config.eval_events
  key = (h, config.eval_batch, config.window, config.temperature, tuple(horizons))
  if key not in _EVAL_FNS:
    rcfg = comp.rollout_config(h, env, p.replace(num_events=max(horizons)), config.window,
                               config.temperature, max_len=config.model.max_len)

    def one(pp, pe, k):
      ro = lm_rollout.multi_turn_rollout(cfg, pp, env, pe, k, config.eval_batch, rcfg)
      m = comp.episode_metrics(ro, h == "agent", config.env.num_items)
      return {n: (jnp.nansum(v), jnp.isfinite(v).sum()) for n, v in m.items()}

    _EVAL_FNS[key] = jax.jit(one)
  return _EVAL_FNS[key]


def evaluate(config, env, p, cfg, params, harness, events, keys, episodes):
  """Per-seed means [S] of each episode metric over `episodes` episodes at horizon `events`.

  params: stacked over seeds [S, ...]; keys [S]: seed s's episodes are drawn from
  fold_in(keys[s], events) in batches of config.eval_batch. Seeds run one after the other: vmap
  would turn the rollout's compaction `lax.cond` into a select computing both branches.
  A metric with no finite value in a seed (fidelity without summaries) is NaN there."""
  fn = _eval_fn(config, env, p, cfg, harness)
  pe = jax.tree.map(jnp.asarray, p.replace(num_events=events))
  out = []
  for s in range(keys.shape[0]):
    pp = jax.tree.map(lambda x: x[s], params)
    k = jax.random.fold_in(keys[s], events)
    parts = [fn(pp, pe, jax.random.fold_in(k, i)) for i in range(episodes // config.eval_batch)]
    tot = {n: (sum(float(q[n][0]) for q in parts), sum(int(q[n][1]) for q in parts))
           for n in parts[0]}
    out.append({n: t / c if c else float("nan") for n, (t, c) in tot.items()})
  return {n: np.asarray([o[n] for o in out], np.float64) for n in out[0]}


def grad_mass(config, env, p, cfg, params, vparams, variant, keys):
  """Per-seed gradient-mass shares (comp.gradient_mass) on one fresh batch per seed."""
  harness, pcfg = ppo_config(config, variant)
  rcfg = comp.rollout_config(harness, env, p, config.window, config.temperature)
  vcfg = lm_value.ValueConfig("shared")

  def one(pp, vp, k):
    ro = lm_rollout.multi_turn_rollout(cfg, pp, env, p, jax.random.fold_in(k, K_MASS),
                                       config.num_envs, rcfg, group_size=pcfg.group_size)
    return comp.gradient_mass(pcfg, cfg, vcfg, pp, vp, ro)

  return {k: np.asarray(v) for k, v in jax.jit(jax.vmap(one))(params, vparams, keys).items()}


def _rows_of(config, env, p, cfg, params, harness, horizons, keys) -> dict:
  """{str(H): per-seed metrics} on the evaluation episodes (stage values need str keys)."""
  eval_keys = jax.vmap(lambda k: jax.random.fold_in(k, K_EVAL))(keys)
  return {str(h): evaluate(config, env, p, cfg, params, harness, h, eval_keys,
                           config.eval_episodes) for h in horizons}


def baseline_stages(config, env, p, cfg, params0, keys, workdir) -> dict:
  """Evaluation of each warm start under each baseline harness (one stage each)."""
  rows = {}
  for name, harness in cfg_mod.BASELINES.items():
    hs = config.full_context_events if harness == "full" else config.eval_events
    rows[name] = stage_cache.cached_stage(
        f"baseline/{name}", _stage_config(config, stage=name),
        lambda: _rows_of(config, env, p, cfg, params0, harness, hs, keys), workdir)
  return rows


def variant_stage(config, env, p, cfg, params0, v, keys, workdir, progress=True) -> dict:
  """Training (critic warm-up + sweep) and evaluation of one variant, as one cached stage."""
  def make():
    pp, vp, out = train_variant(config, env, p, cfg, params0, v, keys, progress)
    out["rows"] = _rows_of(config, env, p, cfg, pp, cfg_mod.VARIANTS[v][0],
                           config.eval_events, keys)
    if v in config.grad_mass_variants:   # gradient mass on summaries: warm start vs after RL
      out["mass"] = {"start": grad_mass(config, env, p, cfg, params0, vp, v, keys),
                     "end": grad_mass(config, env, p, cfg, pp, vp, v, keys)}
    return out
  return stage_cache.cached_stage(f"variant/{v}", _stage_config(
      config, stage=v, grad_mass=v in config.grad_mass_variants), make, workdir)


def resplit_gaps(config) -> dict:
  """Per-seed max |dL| over random re-splits (comp.resegmentation_gap), token and segment."""
  gaps = [comp.resegmentation_gap(jax.random.fold_in(jax.random.PRNGKey(config.seed + s), 9))
          for s in range(config.num_seeds)]
  return {n: {q: np.asarray([g[n][q] for g in gaps]) for q in ("loss", "grad")}
          for n in ("token", "segment")}


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
  env, p, cfg = setup(config)
  keys = seed_keys(config)
  params0, warm_info = warm_starts(config, env, p, cfg, workdir, progress)
  rows = baseline_stages(config, env, p, cfg, params0, keys, workdir)
  stages = {v: variant_stage(config, env, p, cfg, params0, v, keys, workdir, progress)
            for v in config.variants}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    rows.update({v: st["rows"] for v, st in stages.items()})
  rows = {n: {int(h): {m: np.asarray(x, np.float64) for m, x in r.items()}
              for h, r in rr.items()} for n, rr in rows.items()}
  n_params = lm_model.num_params(lm_model.init_params(cfg, jax.random.PRNGKey(0)))
  return {"rows": rows, "stages": stages, "warm_start": warm_info, "gaps": resplit_gaps(config),
          "n_params": n_params, "compute_s": time.time() - t0}


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
  plot(config, m["rows"], m["stages"], os.path.join(results_dir, f"{NAME}.png"))
  md = markdown(config, m, sweeps)
  payload = {"rows": m["rows"], "warm_start": m["warm_start"], "resplit_gaps": m["gaps"],
             "sweeps": sweeps, "eval_horizon": config.eval_horizon,
             **{k: {v: st[k] for v, st in m["stages"].items()} for k in ("critic", "wall")},
             "grad_mass": {v: st["mass"] for v, st in m["stages"].items() if "mass" in st},
             "curves_mean": {v: {k: np.asarray(c).mean(0) for k, c in st["curves"].items()}
                             for v, st in m["stages"].items()}}
  results_lib.write_results(
      NAME, mode="quick" if quick else "full", config=config,
      seeds=[config.seed + i for i in range(config.num_seeds)], claims=claims,
      wall_time_s=m["compute_s"] + time.time() - t0, payload=payload,
      markdown=md + f"\n\n![plot]({NAME}.png)\n", results_dir=results_dir)
  print(results_lib.verdict_table(claims))
  return {"claims": claims, **m, "sweeps": sweeps}


# ---- report: tables and plot (descriptive; every verdict is in judge_claims) -----------------

def ci(x):
  """(mean, lo, hi) over seeds of the finite entries of x (NaN when none)."""
  x = np.asarray(x, np.float64)
  x = x[np.isfinite(x)]
  if x.size == 0:
    return float("nan"), float("nan"), float("nan")
  return stats.mean_ci(x)


def fmt(x, digits=3):
  m, lo, hi = ci(x)
  return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _names(config, rows):
  return [n for n in (*cfg_mod.BASELINES, *config.variants) if n in rows]


def accuracy_tables(config, rows) -> list[str]:
  """Final and mid-stream accuracy at every H (the verdict horizon and unseen ones marked)."""
  hs, seen = list(config.eval_events), max(config.train_events)
  head = "| run | " + " | ".join(
      f"H={h}" + (" (unseen)" if h > seen else "") + (" **verdicts**" if h ==
                                                        config.eval_horizon else "")
      for h in hs) + " |"
  md = []
  for metric, title in (("final_acc", "Final-answer accuracy"),
                        ("mid_acc", "Mid-stream answer accuracy")):
    md += ["", f"### {title} vs H (mean [95% CI] over seeds, {config.eval_episodes} "
           "evaluation episodes per seed)", "", head, "|---|" + "---|" * len(hs)]
    for n in _names(config, rows):
      md.append(f"| {n} | " + " | ".join(fmt(rows[n][h][metric]) if h in rows[n] else "n/a"
                                         for h in hs) + " |")
  return md


def fidelity_table(config, rows) -> list[str]:
  sh = sorted({*config.train_events, config.eval_horizon, max(config.eval_events)})
  md = ["", "### Summary fidelity and compactions per episode", "",
        "Fidelity: share of the written summaries that decode to the true totals.", "",
        "| run | " + " | ".join(f"fidelity H={h}" for h in sh) + " | "
        + " | ".join(f"compactions H={h}" for h in sh) + " |",
        "|---|" + "---|" * (2 * len(sh))]
  for n in _names(config, rows):
    r = rows[n]
    if all(h in r for h in sh):
      md.append(f"| {n} | " + " | ".join(fmt(r[h]["fidelity"]) for h in sh) + " | "
                + " | ".join(fmt(r[h]["compactions"], 2) for h in sh) + " |")
  return md


def grid_table(config, rows) -> list[str]:
  """The 2x3 grid (normalisation x advantage) at the verdict horizon and the longest one."""
  advs = (("cross", "GAE across boundaries"), ("indep", "independent GAE per window"),
          ("grpo", "group advantage broadcast"))
  grid = [[f"{nm}_{a}" for a, _ in advs] for nm in ("token", "segment")]
  if not all(v in rows for row in grid for v in row):
    return []
  md = ["", "### The 2x3 grid: final-answer accuracy (same budget rule and seeds)", "",
        "| H | normalisation | " + " | ".join(d for _, d in advs) + " |", "|---|---|---|---|---|"]
  for h in sorted({config.eval_horizon, max(config.eval_events)}):
    for nm, row in zip(("token", "segment"), grid):
      md.append(f"| {h} | {nm} | " + " | ".join(fmt(rows[v][h]["final_acc"]) for v in row)
                + " |")
    md.append(f"| {h} | token - segment (paired) | " + " | ".join(
        fmt(rows[a][h]["final_acc"] - rows[b][h]["final_acc"]) for a, b in zip(*grid)) + " |")
  return md


def training_tables(config, stages, sweeps) -> list[str]:
  """Critic warm-up, the budget sweep with its flatness, and training return per horizon."""
  md = ["", f"### Critic warm-up ({config.critic_warmup} value-only iterations on warm-start "
        "rollouts) and the budget sweep (validation final accuracy at "
        f"H={config.eval_horizon}, {config.val_episodes} episodes per seed, own keys)", "",
        "| variant | value loss first -> last warm-up iteration | budgets (iterations) | "
        "validation accuracy per budget | last doubling | RL wall (s) |",
        "|---|---|---|---|---|---|"]
  for v, st in stages.items():
    vf = st["critic"].get("vf_loss") if st["critic"] else None
    warm = f"{fmt(vf[:, 0])} -> {fmt(vf[:, -1])}" if vf is not None else "n/a"
    sw = sweeps[v]
    fl = flatness.last_doubling(sw["scores"], sw["budgets"], config.flat_delta)
    md.append(f"| {v} | {warm} | {', '.join(f'{b:g}' for b in sw['budgets'])} | "
              + "; ".join(fmt(s) for s in np.asarray(sw["scores"])) + f" | {fl.reason} | "
              f"{float(st['wall']):.0f} |")
  trains = tuple(config.train_events)
  md += ["", "### Training return per training horizon (first and last fifth of iterations)",
         "", "| variant | H | return first | return last |", "|---|---|---|---|"]
  for v, st in stages.items():
    for h in trains:
      y = np.asarray(st["curves"][f"return_H{h}"])
      n = max(1, y.shape[1] // 5)
      md.append(f"| {v} | {h} | {fmt(y[:, :n].mean(1))} | {fmt(y[:, -n:].mean(1))} |")
  return md


def markdown(config, m, sweeps) -> str:
  gaps, warm = m["gaps"], m["warm_start"]
  scale = (f"Scale: one {m['n_params']}-parameter decoder per seed ({config.num_seeds} seeds, "
           f"each its own warm start of {config.warm_steps} steps x {config.warm_batch} rows; "
           "final loss " + ", ".join(f"{w['loss_last']:.3f}" for w in warm) + "), window "
           f"W={config.window}, RL at H in {tuple(config.train_events)} mixed in every batch of "
           f"{config.num_envs} trajectories, critic warm-up {config.critic_warmup} iterations, "
           f"budget sweep {tuple(config.budgets)} doubled up to {config.max_budget} until flat "
           f"(delta {config.flat_delta}); verdicts at the registered H={config.eval_horizon} "
           f"from {config.eval_episodes} evaluation episodes per seed. Compute "
           f"{m['compute_s']:.0f} s (cached stages count 0).")
  exact = (f"Exact re-split invariance (max |dL| over random re-splits, per seed max): token "
           f"{np.max(gaps['token']['loss']):.1e} (grad {np.max(gaps['token']['grad']):.1e}), "
           f"segment {np.max(gaps['segment']['loss']):.2e} (grad "
           f"{np.max(gaps['segment']['grad']):.2e}).")
  mass = ["", "### Gradient mass on summary tokens, warm start -> after RL", "",
          "| variant | start | end |", "|---|---|---|"]
  for v, st in m["stages"].items():
    if "mass" in st:
      mass.append(f"| {v} | {fmt(st['mass']['start']['summary_mass_share'])} | "
                  f"{fmt(st['mass']['end']['summary_mass_share'])} |")
  return "\n".join([scale, "", exact, *accuracy_tables(config, m["rows"]),
                    *fidelity_table(config, m["rows"]), *grid_table(config, m["rows"]), *mass,
                    *training_tables(config, m["stages"], sweeps)])


def plot(config, rows, stages, path):
  plt = plotting.pyplot()
  fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
  hs = list(config.eval_events)
  for i, metric in enumerate(("final_acc", "mid_acc")):
    for n, r in rows.items():
      xs = [h for h in hs if h in r]
      if not xs:
        continue
      c = np.array([ci(r[h][metric]) for h in xs])
      ax[i].errorbar(xs, c[:, 0], yerr=[c[:, 0] - c[:, 1], c[:, 2] - c[:, 0]], label=n,
                     capsize=2, marker="o", ms=3)
    ax[i].axvline(config.eval_horizon, ls=":", c="k", lw=0.8)
    ax[i].set_xscale("log", base=2)
    ax[i].set(xlabel="H (events)", title=metric.replace("_", " ") + " (95% CI over seeds)")
  ax[0].legend(fontsize=6)
  for v, st in stages.items():
    ax[2].plot(np.asarray(st["curves"]["return"]).mean(0), label=v,
               lw=2.0 if v == "token_cross" else 0.8)
  ax[2].set(title="training return (mean over seeds)", xlabel="RL iteration")
  plotting.save_figure(fig, path, dpi=110)


def run(e: entry.Entry) -> dict:
  jax.config.update("jax_compilation_cache_dir", os.environ.get(
      "JAX_COMPILATION_CACHE_DIR", os.path.join(results_lib.REPO_ROOT, ".jax_cache")))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  return run_config(e.config, e.workdir, e.results_dir, e.quick)


if __name__ == "__main__":
  entry.main(FLAGS, run, validate=cfg_mod.validate)
