r"""Claim-level verified rewards (CuRe-style) vs holistic rewards for captions: reward hacking.

Pipeline (SceneCap, `jaxrl_suite.envs.text.scene_cap`):
  1. pretrain a tiny captioner on a noisy-caption corpus (drops, hallucinations, duplicates);
  2. one label pool -> a learned claim verifier (label_budget claim labels) and a learned
     holistic reward model (label_budget caption-F1 labels): same budget, same architecture;
  3. identical GRPO runs (`lm.grpo.make_step`: same steps, prompts, group, lr, KL coefficient,
     seeds) under each reward: claim-F1 (learned verifier), precision-only, token recall,
     holistic RM, QA utility; plus claim-F1 with a noisy exact verifier (false-accept eps,
     false-reject r) for the noise prediction;
  4. every `eval_every` steps, on fixed held-out scenes: every proxy, the exact scene-graph
     precision / recall / F1 (never a training reward), caption length, claim count and
     sqrt(KL) to the start; 95% CIs over seeds; peak step of true F1 and the fall after it;
  5. the verifier-noise prediction: adding an unverifiable claim raises expected verified
     precision iff eps > current verified precision (= 1 - r for true claims): analytic vs
     measured on the base captioner's captions, and GRPO runs on both sides of the threshold.
Verdicts: the claims registered in configs/cure.py (`claims(config)`), each judged by
jaxrl_suite.repro (`claim_record`) from per-seed samples in `judge_claims`.

Run from the repo root:  python -m experiments.cure [--quick] [--config.grpo_steps=...]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dataclasses  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

from absl import app  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from configs import cure as cure_config  # noqa: E402
from experiments import cli  # noqa: E402
from jaxrl_suite.core import plotting  # noqa: E402
from jaxrl_suite.core import results as results_lib  # noqa: E402
from jaxrl_suite.core import stats  # noqa: E402
from jaxrl_suite.envs.text import scene_cap as sc  # noqa: E402
from jaxrl_suite.envs.text import claims  # noqa: E402
from jaxrl_suite.lm import grpo as lm_grpo  # noqa: E402
from jaxrl_suite.lm import model as lm_model  # noqa: E402
from jaxrl_suite.lm import pretrain as lm_pretrain  # noqa: E402
from jaxrl_suite.lm import reward_models as rmod  # noqa: E402
from jaxrl_suite.lm import sampling  # noqa: E402
from jaxrl_suite.repro import Claim, claim_record  # noqa: E402

try:
  from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
  def tqdm(x, **_):
    return x

NAME = "cure"
_FLAGS = cli.ScriptFlags(NAME, cli.config_path(NAME))

HOLISTIC = cure_config.HOLISTIC
EXACT = ("precision", "recall", "f1", "claims", "false_claims", "duplicates", "malformed",
         "length")


def _hash(*parts) -> str:
  return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


# ---- setup --------------------------------------------------------------------------------------
def build(config):
  env = sc.SceneCap(**config.env.to_dict())
  params = sc.SceneCapParams(**config.env_params.to_dict())
  c = config.captioner
  cap_cfg = rmod.v2_config("captioner", d_model=c.d_model, num_layers=c.num_layers,
                           num_heads=c.num_heads, d_ff=4 * c.d_model,
                           max_len=env.prompt_len + env.response_len)
  s = config.scorer
  scorer_cfg = rmod.scorer_config(env, s.d_model, s.num_layers, s.num_heads)
  return env, params, cap_cfg, scorer_cfg


def pretrain_captioner(config, env, params, cap_cfg, workdir, progress=True):
  task = rmod.CaptionTask(env, params, rmod.make_reward("exact_f1", env))
  tag = _hash(config.env.to_dict(), config.env_params.to_dict(), dataclasses.asdict(cap_cfg),
              config.pretrain_steps, config.pretrain_batch, config.pretrain_lr, config.seed)
  like = lm_model.init_params(cap_cfg, jax.random.PRNGKey(0))

  def make():
    p, loss = lm_pretrain.pretrain(cap_cfg, [task], [1.0],
                                   jax.random.fold_in(jax.random.PRNGKey(config.seed), 1),
                                   config.pretrain_steps, config.pretrain_batch,
                                   config.pretrain_lr, chunk=max(config.pretrain_steps // 10, 1),
                                   progress=progress)
    return p

  return lm_pretrain.cached(os.path.join(workdir, f"captioner_{tag}"), like, make)[0]


def train_scorers(config, env, params, scorer_cfg, workdir, progress=True):
  """{verifier, holistic_rm, qa_reader: (cfg, params)} and their held-out quality.

  All three are trained once, on one label pool, with the same label budget (`label_budget`
  labels each: claims, caption F1s, answered questions), the same architecture size
  (`config.scorer`) and the same optimiser steps; then frozen."""
  pool_params = params.replace(drop_prob=config.pool_drop_prob,
                               halluc_prob=config.pool_halluc_prob)
  task = rmod.CaptionTask(env, params, rmod.make_reward("exact_f1", env))
  tag = _hash(config.env.to_dict(), config.env_params.to_dict(), config.pool_drop_prob,
              config.pool_halluc_prob, dataclasses.asdict(scorer_cfg), config.label_budget,
              config.scorer_steps, config.scorer_batch, config.scorer_lr, config.seed)
  key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 2)
  pool = rmod.label_pool(task, key, config.label_budget, pool_params)
  s = config.scorer
  reader_cfg = rmod.reader_config(env, s.d_model, s.num_layers, s.num_heads)
  ext_cfg = rmod.extractor_config(env, s.d_model, s.num_layers, s.num_heads)
  fit = dict(steps=config.scorer_steps, batch=config.scorer_batch, lr=config.scorer_lr,
             progress=progress)
  makers = {
      "verifier": (scorer_cfg, lambda k: rmod.train_scorer(
          scorer_cfg, pool["ver_x"], pool["ver_y"], k, desc="verifier", **fit)),
      "holistic_rm": (scorer_cfg, lambda k: rmod.train_scorer(
          scorer_cfg, pool["rm_x"], pool["rm_y"], k, desc="holistic_rm", **fit)),
      "qa_reader": (reader_cfg, lambda k: rmod.train_reader(
          env, reader_cfg, pool["qa_x"], pool["qa_y"], k, desc="qa_reader", **fit)),
      # the learned salience extractor: the claim reward's recall side (never the true masks)
      "salience": (ext_cfg, lambda k: rmod.train_extractor(
          env, ext_cfg, pool["sal_x"], pool["sal_y"], k, desc="salience", **fit))}
  out = {}
  for i, (name, (cfg, make)) in enumerate(makers.items()):
    like = lm_model.init_params(cfg, jax.random.PRNGKey(0))
    k = jax.random.fold_in(key, 10 + i)
    out[name] = (cfg, lm_pretrain.cached(os.path.join(workdir, f"{name}_{tag}"), like,
                                         lambda make=make, k=k: make(k)[0])[0])
  return out, scorer_quality(task, jax.random.fold_in(key, 99), pool_params, out,
                             config.label_budget)


def scorer_quality(task, key, pool_params, scorers, budget, n: int = 512) -> dict:
  """Held-out quality of the frozen scorers on `n` fresh pool scenes: verifier accuracy (with
  the majority rate and the ceiling of a verifier that can only check visible events: occluded
  true events are not in its prompt), RM MAE / correlation with the exact F1, QA-reader
  accuracy (with the majority answer rate)."""
  test = rmod.label_pool(task, key, n, pool_params)
  env = task.env
  ver_y = np.asarray(test["ver_y"]) > 0.5
  acc = np.asarray(rmod.score(*scorers["verifier"], test["ver_x"]) > 0) == ver_y
  rm_pred = np.asarray(jax.nn.sigmoid(rmod.score(*scorers["holistic_rm"], test["rm_x"])))
  rm_y = np.asarray(test["rm_y"])
  qa = np.asarray(jnp.argmax(rmod.reader_logits(env, *scorers["qa_reader"], test["qa_x"]), -1))
  qa_y = np.asarray(test["qa_y"])
  sal = np.asarray(jnp.argmax(rmod.extractor_logits(env, *scorers["salience"],
                                                     test["sal_x"]), -1))
  sal_y = np.asarray(test["sal_y"])
  return {"salience_accuracy": float((sal == sal_y).mean()),
          "salience_majority": float(np.bincount(sal_y, minlength=env.A + 1).max()
                                     / len(sal_y)),
          "verifier_accuracy": float(acc.mean()),
          "verifier_true_rate": float(ver_y.mean()),
          "verifier_majority": float(max(ver_y.mean(), 1 - ver_y.mean())),
          "verifier_visible_ceiling": float((np.asarray(test["ver_visible"]) == ver_y).mean()),
          "rm_mae": float(np.abs(rm_pred - rm_y).mean()),
          "rm_corr": float(np.corrcoef(rm_pred, rm_y)[0, 1]),
          "reader_accuracy": float((qa == qa_y).mean()),
          "reader_majority": float(np.bincount(qa_y, minlength=env.A).max() / len(qa_y)),
          "label_budget": int(budget)}


def reward_fns(config, env, scorers) -> dict:
  """Every reward by name (the training rewards, the noisy-verifier ones, the exact F1)."""
  kw = dict(verifier=scorers["verifier"], rm=scorers["holistic_rm"],
            reader=scorers["qa_reader"], extractor=scorers["salience"], fluency=config.fluency, beta=config.beta)
  out = {k: rmod.make_reward(k, env, **kw) for k in cure_config.REWARDS}
  for e in config.noise_eps_grpo:
    out[noisy_name(e)] = rmod.make_reward("claim_f1_noisy", env, eps=float(e),
                                          reject=config.noise_reject, noise_seed=config.seed)
  return out


def noisy_name(eps) -> str:
  return f"claim_f1_noisy_eps{float(eps):g}"


# ---- evaluation ---------------------------------------------------------------------------------
def make_evaluator(config, env, params, cap_cfg, fns):
  """jit f(params [S,...], ref, key) -> {metric: [S]} on fixed held-out scenes."""
  task = rmod.CaptionTask(env, params, fns["claim_f1"])
  ops = task.sample_train(jax.random.PRNGKey(10_000 + config.seed), config.eval_scenes)
  prompts = task.prompts(ops)

  def one(p, ref, key):
    s = sampling.sample(sampling.lm_stepper(cap_cfg, p), prompts, key, env.response_len)
    ref_lp = lm_model.token_log_probs(
        sampling.response_logits(cap_cfg, ref, prompts, s.tokens), s.tokens)
    kl = ((s.log_probs - ref_lp) * s.mask).sum(1).mean()
    out = {"kl": kl, "sqrt_kl": jnp.sqrt(jnp.maximum(kl, 0.0))}
    for name, fn in fns.items():
      out["proxy_" + name] = jax.vmap(fn)(ops, s.tokens).mean()
    ex = jax.vmap(lambda x, c: claims.exact_scores(env, c, *env.fact_masks(env.unpack(x))))(
        ops, s.tokens)
    ex["false_claims"] = ex["claims"] * (1.0 - ex["precision"])
    out.update({k: ex[k].mean() for k in EXACT})
    return out

  return jax.jit(jax.vmap(one, in_axes=(0, None, 0)))


# ---- GRPO under one reward ---------------------------------------------------------------------
def run_grpo(config, env, params, cap_cfg, start, reward_fn, evaluator, name, progress=True):
  """Identical GRPO (lm.grpo.make_step) for num_seeds seeds; evaluates every eval_every steps.
  Returns ({metric: [S, n_eval]}, {train metric: [S, steps]}, wall seconds)."""
  task = rmod.CaptionTask(env, params, reward_fn, name=name)
  gcfg = lm_grpo.GRPOConfig(steps=config.grpo_steps, prompts_per_step=config.grpo_prompts,
                            group_size=config.grpo_group, lr=config.grpo_lr,
                            kl_coef=config.grpo_kl)
  init, step = lm_grpo.make_step(cap_cfg, task, gcfg)
  S, E = config.num_seeds, config.eval_every
  base_key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 1000)
  keys = jax.random.split(base_key, S)   # the same seeds for every reward
  eval_keys = jax.random.split(jax.random.fold_in(base_key, 1), S)
  stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (S,) + x.shape), start)
  state = jax.vmap(init)(stacked, stacked)

  @jax.jit
  def segment(state, t0):
    def body(st, t):
      ks = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
      return jax.vmap(step)(st, ks)
    return jax.lax.scan(body, state, t0 + jnp.arange(E))

  t0 = time.time()
  curves, train = [evaluator(state[0], start, eval_keys)], []
  for i in tqdm(range(config.grpo_steps // E), desc=f"grpo {name}", disable=not progress,
                leave=False):
    state, m = segment(state, jnp.int32(i * E))
    train.append(jax.tree.map(np.asarray, m))
    curves.append(evaluator(state[0], start,
                            jax.vmap(lambda k: jax.random.fold_in(k, i + 1))(eval_keys)))
  curves = {k: np.stack([np.asarray(c[k]) for c in curves], 1) for k in curves[0]}
  train = {k: np.concatenate([t[k] for t in train], 0).T for k in train[0]}
  return curves, train, time.time() - t0


# ---- the verifier-noise prediction --------------------------------------------------------------
def noise_check(config, env, params, cap_cfg, start):
  """Analytic vs measured change of expected verified precision when one unverifiable (false)
  claim is appended to the base captioner's captions, over config.noise_eps_grid.

  Measured: the implementation itself (`claims.noisy_verified` + `claims.precision_recall` on
  the token caption with the claim appended, `noise_draws` verifier draws per caption).
  Analytic: mean over captions of (E[k] + eps)/(n + 1) - E[k]/n, with E[k] = t (1-r) + f eps
  (t true and f false distinct well-formed claims, n claims) -- no sampling of the verifier.
  """
  task = rmod.CaptionTask(env, params, rmod.make_reward("exact_f1", env))
  ops = task.sample_train(jax.random.PRNGKey(20_000 + config.seed), config.eval_scenes)
  prompts = task.prompts(ops)
  s = sampling.sample(sampling.lm_stepper(cap_cfg, start), prompts, jax.random.PRNGKey(7),
                      env.response_len)
  r = config.noise_reject

  def appended(x, cap, key):
    """The caption with one false claim (a random well-formed absent fact) in its first free
    slot (the last slot is overwritten when the caption is full)."""
    scn = env.unpack(x)
    true, _ = env.fact_masks(scn)
    p = claims.parse(env, cap)
    n = p["present"].sum()
    fact = jax.random.categorical(key, jnp.where(true, -1e9, 0.0))
    f = fact
    fields = []
    for size in (env.F, env.A, env.S, env.C, env.E):
      fields.append(f % size)
      f = f // size
    fr, a, sh, co, e = fields
    claim = env.claim_tokens(e, co, sh, a, fr)
    slot = jnp.minimum(n, env.K - 1)
    keep = jnp.arange(env.K) < slot
    cl = cap[:env.K * 6].reshape(env.K, 6)
    cl = jnp.where(keep[:, None], cl, 0).at[slot].set(claim)
    return env.caption_from_claims(cl, jnp.arange(env.K) <= slot), true

  def per(x, cap, key, eps):
    true, sal = env.fact_masks(env.unpack(x))
    cap2, _ = appended(x, cap, key)
    p1, p2 = claims.parse(env, cap), claims.parse(env, cap2)
    n1 = p1["present"].sum()
    n2 = p2["present"].sum()

    def draw(k):
      v1 = claims.noisy_verified(p1, true, eps, r, k)
      v2 = claims.noisy_verified(p2, true, eps, r, k)
      return (claims.precision_recall(p2, v2, sal)[0] - claims.precision_recall(p1, v1, sal)[0])

    measured = jax.vmap(draw)(jax.random.split(jax.random.fold_in(key, 1),
                                               config.noise_draws)).mean()
    good = p1["first"]
    t = (good & true[jnp.maximum(p1["fact"], 0)]).sum()
    f = (good & ~true[jnp.maximum(p1["fact"], 0)]).sum()
    ek = t * (1 - r) + f * eps
    analytic = (ek + eps) / (n1 + 1) - ek / jnp.maximum(n1, 1)
    valid = (n1 >= 1) & (n2 == n1 + 1)   # only captions with a free slot (exact n -> n + 1)
    return measured, analytic, valid, ek / jnp.maximum(n1, 1)

  rows = []
  for eps in config.noise_eps_grid:
    m, a, ok, pv = jax.vmap(per, in_axes=(0, 0, 0, None))(
        ops, s.tokens, jax.random.split(jax.random.PRNGKey(3), ops.shape[0]), float(eps))
    ok = np.asarray(ok)
    m, a, pv = np.asarray(m)[ok], np.asarray(a)[ok], np.asarray(pv)[ok]
    mm, lo, hi = stats.mean_ci(m)
    rows.append({"eps": float(eps), "measured": mm, "measured_ci": [lo, hi],
                 "analytic": float(a.mean()), "captions": int(ok.sum()),
                 "verified_precision": float(pv.mean())})
  return {"rows": rows, "reject": r, "threshold": 1.0 - r}


# ---- summaries ----------------------------------------------------------------------------------
def peak_and_fall(f1: np.ndarray, steps: np.ndarray) -> dict:
  """f1 [S, n_eval]: per-seed peak value / step and fall (peak - final); mean-curve peak step;
  `late_change`: final minus the value two thirds of the way in (a CI containing 0 or below it
  says the curve had flattened or turned by the end of the budget)."""
  peak = f1.max(1)
  fall = peak - f1[:, -1]
  mean_curve = f1.mean(0)
  j = int(round((f1.shape[1] - 1) * 2 / 3))
  return {"peak": stats.mean_ci(peak), "fall": stats.mean_ci(fall), "final": stats.mean_ci(
      f1[:, -1]), "start": stats.mean_ci(f1[:, 0]), "peak_step_mean_curve":
      int(steps[int(np.argmax(mean_curve))]), "peak_step_per_seed":
      [int(steps[i]) for i in f1.argmax(1)], "fall_per_seed": fall.tolist(),
      "late_change": stats.mean_ci(f1[:, -1] - f1[:, j]), "late_from_step": int(steps[j])}


def _fmt(ci, digits=3):
  m, lo, hi = ci
  return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def summarise(config, runs, noise, steps):
  """(per-reward peak/fall summaries, paired claim-F1 vs holistic differences, noisy-verifier
  GRPO changes) for the tables and the record's payload (no verdicts: see judge_claims)."""
  cl = runs["claim_f1"]["curves"]
  summ = {k: peak_and_fall(v["curves"]["f1"], steps) for k, v in runs.items()}
  per = {}
  for h in [h for h in HOLISTIC if h in runs]:
    hc = runs[h]["curves"]
    per[h] = {"fall_diff": stats.mean_ci(_fall(hc["f1"]) - _fall(cl["f1"])),
              "final_diff": stats.mean_ci(cl["f1"][:, -1] - hc["f1"][:, -1]),
              "hacked": stats.mean_ci(_fall(hc["f1"]))[1] > 0}
  ngrpo = {}
  for e in config.noise_eps_grpo:
    k = noisy_name(e)
    if k in runs:
      c = runs[k]["curves"]
      ngrpo[float(e)] = {"false_claims_change": stats.mean_ci(c["false_claims"][:, -1]
                                                              - c["false_claims"][:, 0]),
                         "precision_change": stats.mean_ci(c["precision"][:, -1]
                                                           - c["precision"][:, 0]),
                         "above_threshold": float(e) > noise["threshold"]}
  return summ, per, ngrpo


def _fall(f1: np.ndarray) -> np.ndarray:
  """Per seed, the fall of true F1 from its peak: max over eval points minus the final value."""
  return f1.max(1) - f1[:, -1]


def _registered(config) -> dict[str, Claim]:
  return {d["id"]: Claim.from_dict(d) for d in cure_config.claims(config)}


def judge_claims(config, runs, noise) -> list[dict]:
  """Every registered claim (configs/cure.py) judged by jaxrl_suite.repro from per-seed samples.

  runs: {reward name: {"curves": {metric: [S, n_eval]}}} (seed i of every run shares its seed);
  noise: noise_check's record. A claim whose run was not made gets its row all the same, as
  "testbed cannot express the claim" with the reason."""
  reg = _registered(config)
  rows = []

  def add(cid, a, b, note, missing=None):
    row = claim_record(reg[cid], [] if missing else a, None if missing else b,
                       cannot_express=missing)
    row["note"] = "" if missing else note
    rows.append(row)

  cl = runs["claim_f1"]["curves"]
  for h in HOLISTIC:
    hc = runs.get(h, {}).get("curves")
    missing = None if hc else f"the {h} run was not made (config.rewards)"
    fin = [cl["f1"][:, -1], hc["f1"][:, -1]] if hc else [None, None]
    fall = [_fall(cl["f1"]), _fall(hc["f1"])] if hc else [None, None]
    add(f"cure.final_f1_vs_{h}.v1", *fin, missing=missing,
        note=missing or f"final true F1 claim_f1 {fin[0].mean():.3f}, {h} {fin[1].mean():.3f}")
    add(f"cure.fall_vs_{h}.v1", *fall, missing=missing,
        note=missing or f"fall from peak claim_f1 {fall[0].mean():.3f}, {h} "
                        f"{fall[1].mean():.3f}")
  pc = runs.get("precision_only", {}).get("curves")
  missing = None if pc else "the precision_only run was not made (config.rewards)"
  vs = "" if missing else _fmt(stats.mean_ci(pc["recall"][:, -1] - cl["recall"][:, -1]))
  for cid, m in (("cure.precision_only_recall_falls.v1", "recall"),
                 ("cure.precision_only_claims_fall.v1", "claims")):
    start_end = [pc[m][:, 0], pc[m][:, -1]] if pc else [None, None]
    add(cid, *start_end, missing=missing,
        note=missing or f"{m} start {start_end[0].mean():.3f} -> end "
                        f"{start_end[1].mean():.3f}; final recall precision_only minus "
                        f"claim_f1 {vs}")
  for above, eps_list in zip((True, False), cure_config.noise_sides(config)):
    for e in eps_list or [None]:
      c = runs.get(noisy_name(e), {}).get("curves") if e is not None else None
      missing = None if c else (
          f"no GRPO run with the noisy verifier {'above' if above else 'at or below'} the "
          f"threshold 1 - r = {noise['threshold']:.2f} (config.noise_eps_grpo = "
          f"{tuple(config.noise_eps_grpo)})")
      fc = [c["false_claims"][:, -1], c["false_claims"][:, 0]] if c else [None, None]
      dp = "" if missing else _fmt(stats.mean_ci(c["precision"][:, -1] - c["precision"][:, 0]))
      add(cure_config.noise_claim_id(e, above), *fc, missing=missing,
          note=missing or f"eps {e:g}; true precision change {dp}")
  rows.append(_agreement_row(reg["cure.noise_analytic_agreement.v1"], noise))
  return rows


def _agreement_row(claim: Claim, noise) -> dict:
  """The descriptive row: measured vs analytic precision change over the eps grid."""
  r = noise["rows"]
  pos = [x["eps"] for x in r if x["measured"] > 0]
  err = max(abs(x["measured"] - x["analytic"]) for x in r)
  inside = sum(x["measured_ci"][0] <= x["analytic"] <= x["measured_ci"][1] for x in r)
  row = claim_record(claim, [x["measured"] for x in r], [x["analytic"] for x in r])
  row["note"] = (f"measured change first positive at eps = {min(pos) if pos else None} "
                 f"(threshold 1 - r = {noise['threshold']:.2f}); max |measured - analytic| = "
                 f"{err:.4f}; analytic inside the measured CI at {inside}/{len(r)} eps")
  return row


def markdown(config, runs, summ, per, ngrpo, noise, scorer_info, steps) -> str:
  md = [f"SceneCap: {config.env.num_entities} entities, {config.env.num_frames} frames, "
        f"{config.env.max_claims} claim slots. GRPO: {config.grpo_steps} steps x "
        f"{config.grpo_prompts} scenes x {config.grpo_group} captions, lr {config.grpo_lr}, KL "
        f"coef {config.grpo_kl}, {config.num_seeds} seeds, identical for every reward. "
        f"Evaluation every {config.eval_every} steps on {config.eval_scenes} fixed held-out "
        "scenes (temperature-1 samples). Means [95% CI] over seeds.", "",
        f"Learned scorers, frozen during GRPO (label budget {scorer_info['label_budget']} "
        f"labels each, same size {config.scorer.d_model}d x {config.scorer.num_layers} layers "
        f"and {config.scorer_steps} steps each), held out: verifier accuracy "
        f"{scorer_info['verifier_accuracy']:.3f} (majority {scorer_info['verifier_majority']:.3f},"
        f" visible-evidence ceiling {scorer_info['verifier_visible_ceiling']:.3f}); holistic RM "
        f"MAE {scorer_info['rm_mae']:.3f}, correlation with true F1 {scorer_info['rm_corr']:.3f};"
        f" QA reader accuracy {scorer_info['reader_accuracy']:.3f} (majority answer "
        f"{scorer_info['reader_majority']:.3f}).", "",
        "### True F1 (exact scene-graph evaluator) per training reward", "",
        "| reward | proxy start -> end | true F1 start | peak | peak step (mean curve) | final "
        f"| fall after peak | change from step {int(steps[int(round((len(steps) - 1) * 2 / 3))])}"
        " to the end | precision end | recall end | claims end | length end | sqrt KL end |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for k, r in runs.items():
    c, s = r["curves"], summ[k]
    px = c["proxy_" + k]
    md.append(f"| {k} | {px[:, 0].mean():.3f} -> {px[:, -1].mean():.3f} | {s['start'][0]:.3f} | "
              f"{_fmt(s['peak'])} | {s['peak_step_mean_curve']} | {_fmt(s['final'])} | "
              f"{_fmt(s['fall'])} | {_fmt(s['late_change'])} | "
              f"{_fmt(stats.mean_ci(c['precision'][:, -1]))} | "
              f"{_fmt(stats.mean_ci(c['recall'][:, -1]))} | "
              f"{_fmt(stats.mean_ci(c['claims'][:, -1]), 2)} | "
              f"{_fmt(stats.mean_ci(c['length'][:, -1]), 1)} | "
              f"{_fmt(stats.mean_ci(c['sqrt_kl'][:, -1]), 2)} |")
  md += ["", "### Curves (mean over seeds, every eval point)", ""]
  for k, r in runs.items():
    c = r["curves"]
    md.append(f"- **{k}** steps {steps.tolist()}: true F1 "
              f"{np.round(c['f1'].mean(0), 3).tolist()}; proxy "
              f"{np.round(c['proxy_' + k].mean(0), 3).tolist()}; claims "
              f"{np.round(c['claims'].mean(0), 2).tolist()}; sqrt KL "
              f"{np.round(c['sqrt_kl'].mean(0), 2).tolist()}")
  md += ["", "### Verifier-noise prediction", "",
         f"Exact verifier with false-reject rate r = {noise['reject']}, false-accept rate eps; "
         f"one false claim appended to the base captioner's captions (with a free slot). "
         f"Predicted threshold eps* = 1 - r = {noise['threshold']:.2f}.", "",
         "| eps | analytic E[dP] | measured E[dP] [95% CI] | verified precision before | "
         "captions |", "|---|---|---|---|---|"]
  for r_ in noise["rows"]:
    md.append(f"| {r_['eps']:g} | {r_['analytic']:+.4f} | {r_['measured']:+.4f} "
              f"[{r_['measured_ci'][0]:+.4f}, {r_['measured_ci'][1]:+.4f}] | "
              f"{r_['verified_precision']:.3f} | {r_['captions']} |")
  md += _bullets("GRPO under claim-F1 with the noisy verifier (start -> end change):",
                 [f"eps {e:g} ({'above' if v['above_threshold'] else 'below'} threshold): false "
                  f"claims {_fmt(v['false_claims_change'], 2)}, true precision "
                  f"{_fmt(v['precision_change'])}" for e, v in ngrpo.items()])
  md += _bullets("### Paired differences, claim-F1 minus each holistic proxy",
                 [f"{h}: final true F1 {_fmt(v['final_diff'])}; fall after peak (holistic - "
                  f"claim) {_fmt(v['fall_diff'])}" for h, v in per.items()])
  return "\n".join(md)


def _bullets(title: str, items) -> list:
  """Markdown lines of a titled bullet list; nothing when `items` is empty."""
  return ["", title, ""] + [f"- {i}" for i in items] if items else []


def plot(runs, noise, steps, path):
  plt = plotting.pyplot()
  fig, ax = plt.subplots(2, 3, figsize=(16, 9))
  panels = [("f1", "true F1 (exact)", "step"), ("proxy", "proxy reward", "step"),
            ("f1", "true F1 vs sqrt KL", "sqrt_kl"), ("claims", "claims per caption", "step"),
            ("recall", "true recall", "step")]
  for a, (metric, title, xaxis) in zip(ax.flat, panels):
    for k, r in runs.items():
      c = r["curves"]
      y = c["proxy_" + k] if metric == "proxy" else c[metric]
      m = y.mean(0)
      half = np.array([stats.mean_ci(y[:, j])[2] - m[j] for j in range(y.shape[1])])
      x = steps if xaxis == "step" else c["sqrt_kl"].mean(0)
      a.plot(x, m, marker=".", label=k)
      a.fill_between(x, m - half, m + half, alpha=0.2)
    a.set_title(title)
    a.set_xlabel("GRPO step" if xaxis == "step" else "sqrt KL to the start")
  ax[0, 0].legend(fontsize=7)
  a = ax[1, 2]
  eps = [r_["eps"] for r_ in noise["rows"]]
  a.plot(eps, [r_["analytic"] for r_ in noise["rows"]], "k-", label="analytic")
  a.errorbar(eps, [r_["measured"] for r_ in noise["rows"]],
             yerr=[[r_["measured"] - r_["measured_ci"][0] for r_ in noise["rows"]],
                   [r_["measured_ci"][1] - r_["measured"] for r_ in noise["rows"]]],
             fmt="o", label="measured")
  a.axhline(0, color="grey", lw=0.5)
  a.axvline(noise["threshold"], color="r", ls="--", label="1 - r")
  a.set_title("E[change of verified precision] from one unverifiable claim")
  a.set_xlabel("false-accept rate eps")
  a.legend(fontsize=7)
  plotting.save_figure(fig, path, dpi=110)


# ---- entry point --------------------------------------------------------------------------------
def run(config, workdir: str, results_dir=None, mode: str = "full", progress: bool = True):
  cure_config.validate(config)
  t0 = time.time()
  os.makedirs(workdir, exist_ok=True)
  env, params, cap_cfg, scorer_cfg = build(config)
  start = pretrain_captioner(config, env, params, cap_cfg, workdir, progress)
  scorers, scorer_info = train_scorers(config, env, params, scorer_cfg, workdir, progress)
  fns = reward_fns(config, env, scorers)
  evaluator = make_evaluator(config, env, params, cap_cfg, fns)
  runs = {}
  names = list(config.rewards) + [noisy_name(e) for e in config.noise_eps_grpo]
  for name in names:
    curves, train, wall = run_grpo(config, env, params, cap_cfg, start, fns[name], evaluator,
                                   name, progress)
    runs[name] = {"curves": curves, "train": train, "wall_s": wall}
  noise = noise_check(config, env, params, cap_cfg, start)
  steps = np.arange(config.grpo_steps // config.eval_every + 1) * config.eval_every
  summ, per, ngrpo = summarise(config, runs, noise, steps)
  cl = judge_claims(config, runs, noise)
  md = markdown(config, runs, summ, per, ngrpo, noise, scorer_info, steps)
  results_dir = results_dir or results_lib.output_dir(mode)
  os.makedirs(results_dir, exist_ok=True)
  plot(runs, noise, steps, os.path.join(results_dir, f"{NAME}.png"))
  payload = {"steps": steps, "scorers": scorer_info, "noise": noise, "summary": summ,
             "paired": per, "noise_grpo": ngrpo,
             "runs": {k: {"curves": v["curves"], "wall_s": v["wall_s"],
                          "train_reward": v["train"]["reward"].mean(0)} for k, v in runs.items()}}
  path = results_lib.write_results(NAME, mode=mode, config=config,
                                   seeds=list(range(config.num_seeds)), claims=cl,
                                   wall_time_s=time.time() - t0, payload=payload, markdown=md,
                                   results_dir=results_dir)
  return path, runs, noise


def main(argv):
  del argv
  quick = _FLAGS.quick.value
  config = cli.config_for(cure_config, _FLAGS.config.value, quick)
  path, _, _ = run(config, _FLAGS.workdir.value, _FLAGS.results_dir.value,
                   "quick" if quick else "full")
  print(f"wrote {path}")


if __name__ == "__main__":
  app.run(main)
