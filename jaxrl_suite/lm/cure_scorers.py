"""The CuRe study's learned scorers: trained once on one label pool, frozen, and scored held out.

  train_scorers(config, env, params, scorer_cfg, workdir) -> (scorers, quality)

scorers = {"verifier" | "holistic_rm" | "qa_reader" | "salience": (LMConfig, params)}: the claim
verifier (claim -> true?), the holistic reward model (caption -> F1), the QA reader (caption,
question -> answer in [A]) and the salience extractor (prompt -> salient fact, the claim reward's
recall side). All four see `config.label_budget` labels from the same pool, have the size of
`config.scorer` and train for `config.scorer_steps` steps; each is a stage of the workdir's stage
cache ("cure/<name>", core.stage_cache) keyed by every input that shapes it, so a re-run reloads
it.
quality = `scorer_quality`'s dict of held-out accuracies / errors (floats) and the label budget.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import reward_models as rmod


def _makers(config, env, pool, scorer_cfg, progress: bool) -> dict:
  """{name: (cfg, make(key) -> (params, ...))}: one trainer per scorer, all on `pool`'s labels
  with the same steps, batch and lr. Insertion order fixes each scorer's key (10 + index)."""
  s = config.scorer
  reader_cfg = rmod.reader_config(env, s.d_model, s.num_layers, s.num_heads)
  ext_cfg = rmod.extractor_config(env, s.d_model, s.num_layers, s.num_heads)
  fit = dict(steps=config.scorer_steps, batch=config.scorer_batch, lr=config.scorer_lr,
             progress=progress)
  return {
      "verifier": (scorer_cfg, lambda k: rmod.train_scorer(
          scorer_cfg, pool["ver_x"], pool["ver_y"], k, desc="verifier", **fit)),
      "holistic_rm": (scorer_cfg, lambda k: rmod.train_scorer(
          scorer_cfg, pool["rm_x"], pool["rm_y"], k, desc="holistic_rm", **fit)),
      "qa_reader": (reader_cfg, lambda k: rmod.train_reader(
          env, reader_cfg, pool["qa_x"], pool["qa_y"], k, desc="qa_reader", **fit)),
      # the learned salience extractor: the claim reward's recall side (never the true masks)
      "salience": (ext_cfg, lambda k: rmod.train_extractor(
          env, ext_cfg, pool["sal_x"], pool["sal_y"], k, desc="salience", **fit))}


def train_scorers(config, env, params, scorer_cfg, workdir: str,
                  progress: bool = True) -> tuple[dict, dict]:
  """({verifier, holistic_rm, qa_reader, salience: (cfg, params)}, held-out quality).

  The label pool is drawn with the pool's own drop / hallucination rates (config.pool_*), so
  the scorers see both good and bad captions; `params` are the SceneCap env params."""
  pool_params = params.replace(drop_prob=config.pool_drop_prob,
                               halluc_prob=config.pool_halluc_prob)
  task = rmod.CaptionTask(env, params, rmod.make_reward("exact_f1", env))
  shared = {"env": config.env, "env_params": config.env_params,
            "pool": [config.pool_drop_prob, config.pool_halluc_prob],
            "label_budget": config.label_budget, "steps": config.scorer_steps,
            "batch": config.scorer_batch, "lr": config.scorer_lr, "seed": config.seed}
  key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 2)
  pool = rmod.label_pool(task, key, config.label_budget, pool_params)
  out = {}
  for i, (name, (cfg, make)) in enumerate(_makers(config, env, pool, scorer_cfg,
                                                  progress).items()):
    k = jax.random.fold_in(key, 10 + i)
    out[name] = (cfg, lm_pretrain.cached_params(
        f"cure/{name}", dict(shared, model=dataclasses.asdict(cfg), index=i),
        lambda make=make, k=k: (make(k)[0], {}), workdir)[0])
  return out, scorer_quality(task, jax.random.fold_in(key, 99), pool_params, out,
                             config.label_budget)


def _majority(labels: np.ndarray, classes: int) -> float:
  """Share of the most frequent class among integer `labels` [N] in [classes]."""
  return float(np.bincount(labels, minlength=classes).max() / len(labels))


def scorer_quality(task, key, pool_params, scorers: dict, budget: int, n: int = 512) -> dict:
  """Held-out quality of the frozen scorers on `n` fresh pool scenes: verifier accuracy (with
  the majority rate and the ceiling of a verifier that can only check visible events: occluded
  true events are not in its prompt), RM MAE / correlation with the exact F1, QA-reader
  accuracy (with the majority answer rate), salience accuracy (with its majority rate)."""
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
          "salience_majority": _majority(sal_y, env.A + 1),
          "verifier_accuracy": float(acc.mean()),
          "verifier_true_rate": float(ver_y.mean()),
          "verifier_majority": float(max(ver_y.mean(), 1 - ver_y.mean())),
          "verifier_visible_ceiling": float((np.asarray(test["ver_visible"]) == ver_y).mean()),
          "rm_mae": float(np.abs(rm_pred - rm_y).mean()),
          "rm_corr": float(np.corrcoef(rm_pred, rm_y)[0, 1]),
          "reader_accuracy": float((qa == qa_y).mean()),
          "reader_majority": _majority(qa_y, env.A),
          "label_budget": int(budget)}
