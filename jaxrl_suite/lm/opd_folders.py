"""Direct-OPD on user checkpoints (folder mode): check the folders, then transfer the delta.

The inputs are Hugging Face checkpoint folders (config.json, *.safetensors, tokenizer.json;
docs/lm_checkpoints.md), keyed by the command-line flag that named them: "small_dir" (the
teacher's reference model), "large_dir" (the model the delta goes to) and optionally
"small_rl_dir" (the teacher after RL; without it GRPO on small_dir makes one per seed).

  load_folders(folders, task) -> {flag: (cfg, params, stored cfg)}
      everything a run reads (config fields, tokenizer ids, context length, tensors) is checked
      here, before any compute; a problem is a ValueError naming the file and the field or
      tensor. cfg has max_len = the task's prompt + response; `stored cfg` is as on disk.
  run_folders(config, task, ckpts, seed_keys [S]) -> {"acc": {row: [S] held-out accuracies},
      "cost": {...}, "student_seed0": params of the distilled large model, seed 0}
      rows teacher_ref, teacher_rl, large_base, large_decode (delta at config.beta),
      large_direct_opd (adaptive alpha, config.distill_steps).
  folder_report(config, task, folders, ckpts, res) -> markdown of what was loaded and measured.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import stats
from jaxrl_suite.lm import direct_opd
from jaxrl_suite.lm import grpo as lm_grpo
from jaxrl_suite.lm import hf_checkpoint
from jaxrl_suite.lm import hf_tokenizer
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import opd_study

FOLDER_FLAGS = ("small_dir", "small_rl_dir", "large_dir")


def read_folder_config(flag: str, folder: str, task):
  """(config with max_len = the task's context, config as stored) of one folder, or ValueError
  naming the folder's file and field."""
  if not os.path.isdir(folder):
    raise ValueError(f"--{flag}={folder}: not a directory (point at a Hugging Face checkpoint "
                     "folder with config.json, *.safetensors and tokenizer.json)")
  version = hf_tokenizer.matching_version(hf_tokenizer.load(folder))
  if version != 1:
    raise ValueError(f"{os.path.join(folder, 'tokenizer.json')} (--{flag}): its ids are not our "
                     f"v1 vocabulary, and {task.name}'s prompts and verifier are v1 ids (see "
                     "docs/lm_checkpoints.md, 'Folder mode')")
  try:
    stored = hf_checkpoint.read_config(folder, tokenizer_version=version,
                                       name=flag.replace("_dir", ""))
  except ValueError as e:
    where = os.path.join(folder, "config.json")
    raise ValueError(str(e) if where in str(e) else f"{where} (--{flag}): {e}") from None
  ctx = task.prompt_len + task.response_len
  if stored.max_len < ctx:
    raise ValueError(f"{os.path.join(folder, 'config.json')} (--{flag}): "
                     f"max_position_embeddings={stored.max_len} is below the {ctx} tokens of a "
                     f"{task.name} prompt + response")
  # The KV caches hold exactly one prompt + response (not max_position_embeddings slots).
  return dataclasses.replace(stored, max_len=ctx), stored


def load_folders(folders: dict[str, str], task) -> dict[str, tuple[Any, Any, Any]]:
  """{flag: (cfg, params, stored cfg)} for the folder-mode flags given (empty values are not
  given); ValueError naming the file and the field or tensor, before any compute."""
  folders = {k: v for k, v in folders.items() if v}
  if "small_dir" not in folders or "large_dir" not in folders:
    given = ", ".join(f"--{k}" for k in folders)
    raise ValueError(f"folder mode needs both --small_dir and --large_dir (given: {given})")
  cfgs = {flag: read_folder_config(flag, d, task) for flag, d in folders.items()}
  if "small_rl_dir" in folders:  # the RL checkpoint must be the same model as its reference
    a, b = (hf_checkpoint.config_dict(cfgs[f][1]) for f in ("small_dir", "small_rl_dir"))
    diff = [k for k in a if a[k] != b[k]]
    if diff:
      k = diff[0]
      raise ValueError(f"{os.path.join(folders['small_rl_dir'], 'config.json')}: field {k}="
                       f"{b[k]!r} differs from --small_dir's {a[k]!r} (the post-RL checkpoint "
                       "must be the reference model after training)")
  return {flag: (cfgs[flag][0], hf_checkpoint.load_params(d, cfgs[flag][0]), cfgs[flag][1])
          for flag, d in folders.items()}


def _broadcast(n: int, tree):
  """The same parameters for every seed: leaves [...] -> [n, ...]."""
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)


def _teacher_rl(config, task, ckpts, seed_keys, cost) -> Any:
  """The teacher's post-RL params [S, ...]: the given checkpoint, or GRPO on small_dir per seed
  (its cost and reward curve go to cost["teacher_grpo"])."""
  if "small_rl_dir" in ckpts:
    return _broadcast(config.num_seeds, ckpts["small_rl_dir"][1])
  cs, ref = ckpts["small_dir"][:2]
  timing = {}
  rl, m = lm_grpo.train(cs, ref, task, opd_study.rl_configs(config)[0], seed_keys, config.chunk,
                        timing=timing, desc=f"grpo small_dir {task.name}")
  cost["teacher_grpo"] = {"wall_s": timing["run_s"], "compile_s": timing["compile_s"],
                          "reward_curve": m["reward"].mean(0).tolist()}
  return rl


def run_folders(config, task, ckpts, seed_keys) -> dict[str, Any]:
  """Teacher RL (or the given RL checkpoint), then base / decode-time delta / Direct-OPD on the
  large checkpoint; per-seed held-out accuracies (temperature config.eval_temperature)."""
  n = config.num_seeds
  cs, ref = ckpts["small_dir"][:2]
  cl, large = ckpts["large_dir"][:2]
  cost, acc = {}, {}
  rl = _teacher_rl(config, task, ckpts, seed_keys, cost)
  ops = jnp.asarray(task.heldout_set(config.eval_problems, seed=1000 + config.seed))
  ek = jax.vmap(lambda k: jax.random.fold_in(k, 7))(seed_keys)
  ident = jnp.arange(cs.vocab_size)
  ref_s, large_s = _broadcast(n, ref), _broadcast(n, large)

  def evaluate(name, cfg, p, start, beta=0.0):
    ev = opd_study.evaluator(cfg, cs, task, config.eval_temperature)
    a, _ = ev(p, start, ref_s, rl, jnp.float32(beta), ident, ops, ek)
    acc[name] = np.asarray(a).tolist()

  evaluate("teacher_ref", cs, ref_s, ref_s)
  evaluate("teacher_rl", cs, rl, ref_s)
  evaluate("large_base", cl, large_s, large_s)
  evaluate("large_decode", cl, large_s, large_s, config.beta)
  timing = {}
  student, m = direct_opd.train(
      cl, large, direct_opd.DeltaPair(cs, ref, rl), task, opd_study.rl_configs(config)[1],
      jax.vmap(lambda k: jax.random.fold_in(k, 11))(seed_keys), mode="direct_opd",
      chunk=config.chunk, desc=f"direct_opd large_dir {task.name}", timing=timing)
  cost["direct_opd"] = {"wall_s": timing["run_s"], "compile_s": timing["compile_s"],
                        "reward_curve": m["reward"].mean(0).tolist(),
                        "alpha_curve": m["alpha"].mean(0).tolist()}
  evaluate("large_direct_opd", cl, student, large_s)
  return {"acc": acc, "cost": cost, "student_seed0": jax.tree.map(lambda x: x[0], student)}


def folder_report(config, task, folders, ckpts, res) -> str:
  """Markdown: what was loaded, and accuracy per row (mean [95% CI] over seeds)."""
  rows = ["| checkpoint | architecture | params | folder |", "|---|---|---|---|"]
  for flag, (cfg, params, _) in ckpts.items():
    arch = "Qwen3" if cfg.qk_norm else "Llama"
    rows.append(f"| {flag} | {arch} d={cfg.d_model} L={cfg.num_layers} | "
                f"{lm_model.num_params(params):,} | `{folders[flag]}` |")
  rows += ["", f"Held-out {task.name} accuracy, {config.eval_problems} problems, "
           f"{config.num_seeds} seeds (mean [95% CI]):", "", "| row | accuracy |", "|---|---|"]
  for name, a in res["acc"].items():
    m, lo, hi = stats.mean_ci(np.asarray(a))
    rows.append(f"| {name} | {m:.3f} [{lo:.3f}, {hi:.3f}] |")
  base = np.asarray(res["acc"]["large_base"])
  for name in ("large_decode", "large_direct_opd"):
    m, lo, hi = stats.mean_ci(np.asarray(res["acc"][name]) - base)
    rows.append(f"| {name} - large_base | {m:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
  rl_from = (f"`{folders['small_rl_dir']}`" if folders.get("small_rl_dir")
             else f"GRPO on small_dir for {config.grpo_steps} steps, one run per seed")
  return "\n".join([f"Teacher delta: small_dir -> {rl_from}. Direct-OPD: "
                    f"{config.distill_steps} steps, adaptive alpha from {config.alpha_init}; "
                    f"decode-time beta={config.beta}. Descriptive figures on user checkpoints: no "
                    "claim is judged.", ""] + rows)
