"""Pretraining a family member on a task mixture, plus shared training plumbing.

`pretrain(cfg, tasks, weights, key, steps, ...)` runs next-token cross-entropy (response tokens
only: prompts are random operands) with AdamW and a warmup-cosine schedule. Steps run in jitted
chunks of `chunk` steps (`lax.scan`) with a tqdm bar between chunks. The batch axis is sharded over
the mesh axis `data` and parameters are replicated (`jaxrl_suite.core.distributed`).

Checkpoints: `save_params` / `load_params` (orbax, through `jaxrl_suite.core.checkpoint`).
`cached_params(name, key, make, workdir)` is the "train once, reuse from the workdir" helper of
the studies (pretraining, warm starts, learned scorers): a stage of `core.stage_cache`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl_suite.core import checkpoint as core_ckpt
from jaxrl_suite.core import distributed
from jaxrl_suite.core import stage_cache
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import tasks as lm_tasks

try:  # tqdm is a project dependency, but keep the library importable without it.
  from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
  def tqdm(x, **_):
    return x


def masked_xent(logits: jax.Array, targets: jax.Array, mask: jax.Array) -> jax.Array:
  """Token-mean cross-entropy over mask: logits [B,T,V], targets [B,T], mask [B,T] -> scalar."""
  nll = -lm_model.token_log_probs(logits, targets)
  return (nll * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def make_optimizer(lr: float, steps: int, warmup: int = 50, weight_decay: float = 0.01,
                   clip: float = 1.0) -> optax.GradientTransformation:
  sched = optax.warmup_cosine_decay_schedule(0.0, lr, min(warmup, max(steps - 1, 1)),
                                             max(steps, 2), end_value=0.1 * lr)
  return optax.chain(optax.clip_by_global_norm(clip), optax.adamw(sched, weight_decay=weight_decay))


def run_chunked(step_fn: Callable, state: Any, key: jax.Array, steps: int, chunk: int,
                desc: str = "", progress: bool = True,
                timing: Optional[dict] = None) -> tuple[Any, dict]:
  """Runs `state, metrics = step_fn(state, key)` `steps` times, jitting `chunk` steps per scan.

  Returns the final state and the metrics stacked over steps (numpy). The scan body is the same
  pure step function for every chunk size, so results do not depend on `chunk`. `chunk` is
  lowered to the largest divisor of `steps` not above it, so exactly one program is compiled.

  If `timing` is a dict, it receives {"compile_s", "run_s"}: the program is compiled ahead of
  time (lower + compile) and the steps are timed separately, so cost comparisons between methods
  measure execution, not XLA compilation.
  """
  chunk = max(d for d in range(1, min(chunk, steps) + 1) if steps % d == 0)

  def run(state, keys):
    return jax.lax.scan(lambda s, k: step_fn(s, k), state, keys)

  keys = jax.random.split(key, steps)
  t0 = time.perf_counter()
  run = jax.jit(run).lower(state, keys[:chunk]).compile()
  t1 = time.perf_counter()
  out = []
  bar = tqdm(range(0, steps, chunk), desc=desc, disable=not progress, leave=False)
  for i in bar:
    state, m = run(state, keys[i:i + chunk])
    out.append(jax.tree.map(np.asarray, m))
  jax.block_until_ready(state)
  if timing is not None:
    timing.update(compile_s=t1 - t0, run_s=time.perf_counter() - t1)
  metrics = jax.tree.map(lambda *xs: np.concatenate(xs), *out) if out else {}
  return state, metrics


def pretrain(cfg: lm_model.LMConfig, tasks: Sequence[lm_tasks.AdditionTask],
             weights: Sequence[float], key: jax.Array, steps: int, batch_size: int = 64,
             lr: float = 3e-3, chunk: int = 100, progress: bool = True,
             timing: Optional[dict] = None) -> tuple[Any, np.ndarray]:
  """Pretrains a fresh model; returns (params, per-step loss [steps]); see `run_chunked`."""
  model = lm_model.DecoderLM(cfg)
  k_init, k_train = jax.random.split(key)
  params = lm_model.init_params(cfg, k_init)
  opt = make_optimizer(lr, steps)
  mesh = distributed.make_mesh()
  rep = distributed.replicated(mesh)
  data = distributed.data_sharding(mesh)

  def loss_fn(p, seq, mask):
    logits, _ = model.apply({"params": p}, seq[:, :-1])
    return masked_xent(logits, seq[:, 1:], mask[:, 1:])

  def step(state, k):
    p, o = state
    seq, mask = lm_tasks.mixture_batch(tasks, weights, k, batch_size)
    # Batch over `data`, parameters replicated: XLA inserts the gradient all-reduce.
    seq = jax.lax.with_sharding_constraint(seq, data)
    mask = jax.lax.with_sharding_constraint(mask, data)
    loss, g = jax.value_and_grad(loss_fn)(p, seq, mask)
    upd, o = opt.update(g, o, p)
    return (optax.apply_updates(p, upd), o), {"loss": loss}

  state = jax.device_put((params, opt.init(params)), rep)
  (params, _), m = run_chunked(step, state, k_train, steps, chunk, f"pretrain {cfg.name}",
                               progress, timing)
  return params, m["loss"]


# ---- checkpoints ---------------------------------------------------------------------------------
def save_params(path: str, params: Any) -> None:
  """Saves a params pytree as step 0 of an orbax checkpoint directory `path` (must be new).

  Uses the project's `core.checkpoint.Checkpointer` (atomic writes, refuses to overwrite).
  """
  with core_ckpt.Checkpointer(os.path.abspath(path), max_to_keep=1) as ck:
    ck.save(0, params)


def load_params(path: str, like: Any) -> Any:
  """Restores the newest params pytree under `path` with the structure/dtypes of `like`."""
  return core_ckpt.restore_latest(os.path.abspath(path), like)[0]


def cached_params(name: str, key: Any, make: Callable[[], tuple[Any, dict]], workdir: str
                  ) -> tuple[Any, dict, bool]:
  """`make()`'s (params, info), trained once: stage `name` of the workdir's stage cache
  (`core.stage_cache`, keyed by `key`, everything the params depend on, and the library), one
  npz file (no pickle). A rerun with the same key and library code reads them back.

  Returns (params as jax arrays, info, hit): info is the JSON-able dict of what the run that made
  the params measured (its loss, wall seconds, ...), as stored. A damaged file raises
  `core.stage_cache.StageCacheError` naming it (delete it and rerun).
  """
  r = stage_cache.run_stage(name, key, lambda: dict(zip(("params", "info"), make())), workdir)
  return jax.tree.map(jnp.asarray, r.value["params"]), r.value["info"], r.hit


# ---- the ladder's divergence rule ----------------------------------------------------------------
def diverged(final_losses: Sequence[float], factor: float) -> list[bool]:
  """Which pretraining runs of one size diverged: final loss > factor * the best run's.

  final_losses: one final loss per family (mean of the last steps); a non-finite loss has
  diverged. The best run is the smallest finite loss; with none finite, all have diverged.
  The rule is relative, so it needs no absolute loss level per size or task mixture.
  """
  x = np.asarray(final_losses, np.float64)
  ok = np.isfinite(x)
  if not ok.any():
    return [True] * len(x)
  best = float(x[ok].min())
  return [bool(not f or v > factor * best) for f, v in zip(ok, x)]
