"""The Direct-OPD pretraining ladder: one pretraining family per seed at every model size.

Seed i's models of every size form pretraining family i (its own PRNG key
fold_in(PRNGKey(config.seed), 100 + size index + 1000 family)), so every seed is an independent
replicate of the study. Each run is a stage of the workdir's stage cache (core.stage_cache,
through `pretrain.cached_params`) named `pretrain/<size>` and keyed by everything it depends on
(`pretrain_key`: task mixture, steps, batch, lr, seed, family) and the library; it stores the
params with the cost its run measured (lr, final loss, wall and compile seconds).

The divergence rule (registered in the study's config): a family whose final loss exceeds
config.diverge_factor x the best family's (`pretrain.diverged`) is rerun from the same key with
the lr of its last attempt halved, at most config.max_reruns times; of a family's attempts the
one with the lowest final training loss is kept.

  pretrain_family(config, tasks, workdir) -> {size: (params [num_seeds, ...], info)}

`config` is the study's ConfigDict (fields seed, num_seeds, sizes, mixture, pretrain_steps,
pretrain_batch, pretrain_lr, diverge_factor, max_reruns); `tasks` is {name: AdditionTask}.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain


def pretrain_key(config, tasks, i: int, size: str, f: int, lr: float) -> dict:
  """Every input of family f's run at `size` (size index i) and `lr`: its stage key, so a
  changed config never loads stale params."""
  return {"size": size, "size_index": i, "family": f, "lr": float(lr), "seed": config.seed,
          "steps": config.pretrain_steps[size], "batch": config.pretrain_batch[size],
          "mixture": list(config.mixture),
          "tasks": [[t.name, t.num_digits, t.bug_rate] for t in tasks.values()]}


def pretrain_one(config, tasks, workdir: str, i: int, size: str, f: int, lr: float
                 ) -> tuple[Any, dict]:
  """One pretraining run of family f at size index i (cached in the workdir).

  Returns (params, info) with info = {"lr", "loss_last" (mean of the last 20 step losses),
  "wall_s", "compile_s", "cached"}; a cached run's numbers are those its own run measured.
  """
  cfg = lm_model.FAMILY[size]
  steps, batch = config.pretrain_steps[size], config.pretrain_batch[size]
  key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 100 + i + 1000 * f)

  def make():
    timing, t0 = {}, time.time()
    params, loss = lm_pretrain.pretrain(
        cfg, list(tasks.values()), list(config.mixture), key, steps, batch, lr,
        chunk=max(steps // 10, 1), timing=timing)
    return params, {"lr": float(lr), "loss_last": float(np.mean(loss[-20:])),
                    "wall_s": time.time() - t0, "compile_s": timing["compile_s"]}

  params, info, was_cached = lm_pretrain.cached_params(
      f"pretrain/{size}", pretrain_key(config, tasks, i, size, f, lr), make, workdir)
  return params, dict(info, cached=was_cached)


def loss_key(info: dict) -> float:
  """Sort key of an attempt: its final loss, +inf when missing or not finite (never kept over a
  finite one)."""
  v = info["loss_last"]
  return float(v) if v is not None and np.isfinite(v) else float("inf")


def _attempts(config, tasks, workdir, i, size) -> tuple[list, list[int], list[bool]]:
  """Runs the divergence rule: (tried [family][attempt] = (params, info), kept attempt per
  family, diverged? per family after the last round)."""
  n = config.num_seeds
  tried = [[pretrain_one(config, tasks, workdir, i, size, f, config.pretrain_lr[size])]
           for f in range(n)]
  best = lambda f: min(range(len(tried[f])), key=lambda j: loss_key(tried[f][j][1]))
  while True:
    runs = [tried[f][best(f)] for f in range(n)]
    bad = lm_pretrain.diverged([r[1]["loss_last"] for r in runs], config.diverge_factor)
    for f in range(n):
      tried[f][-1][1]["diverged"] = bad[f]
    retry = [f for f in range(n) if bad[f] and len(tried[f]) <= config.max_reruns]
    if not retry:
      return tried, [best(f) for f in range(n)], bad
    for f in retry:
      tried[f].append(pretrain_one(config, tasks, workdir, i, size, f,
                                   tried[f][-1][1]["lr"] / 2))


def pretrain_size(config, tasks, workdir: str, i: int, size: str) -> tuple[Any, dict]:
  """All families of one size (size index i) under the divergence rule.

  Returns (params stacked over families [num_seeds, ...], info): info["attempts"][f] lists every
  run of family f (lr, final loss, diverged?), info["kept"][f] the attempt kept,
  info["still_diverged"] the families the rule could not fix; loss_last / lr of the kept runs,
  summed wall / compile seconds, analytic FLOPs of every attempt, cached (all runs loaded).
  """
  n = config.num_seeds
  tried, kept, bad = _attempts(config, tasks, workdir, i, size)
  runs = [tried[f][kept[f]] for f in range(n)]
  attempts = [[dict(t[1]) for t in tr] for tr in tried]
  cfg = lm_model.FAMILY[size]
  steps, batch = config.pretrain_steps[size], config.pretrain_batch[size]
  ctx = max(t.prompt_len + t.response_len for t in tasks.values())
  n_runs = sum(len(a) for a in attempts)
  info = {"loss_last": [r[1]["loss_last"] for r in runs], "lr": [r[1]["lr"] for r in runs],
          "attempts": attempts, "kept": kept,
          "still_diverged": [f for f in range(n) if bad[f]],
          "wall_s": float(sum(a["wall_s"] for at in attempts for a in at)),
          "compile_s": float(sum(a["compile_s"] for at in attempts for a in at)),
          "cached": all(a["cached"] for at in attempts for a in at),
          "families": n, "family_of_seed": list(range(n)),
          "num_params": lm_model.num_params(runs[0][0]), "steps": steps, "batch": batch,
          "flops": 3.0 * steps * batch * ctx * lm_model.forward_flops_per_token(cfg, ctx) * n_runs}
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[r[0] for r in runs])
  print(f"[pretrain] {size}: {info['num_params']} params x {n} families, cached="
        f"{info['cached']}, wall={info['wall_s']:.1f}s, loss="
        + "/".join(f"{x:.4f}" for x in info["loss_last"]) + f", reruns={n_runs - n}", flush=True)
  return stacked, info


def pretrain_family(config, tasks, workdir: str) -> dict[str, Any]:
  """{size: (params stacked over seeds [num_seeds, ...], info)} (seed i = family i)."""
  return {size: pretrain_size(config, tasks, workdir, i, size)
          for i, size in enumerate(config.sizes)}
