"""The RL stage of the BallastHydro-v0 study: every variant on S vmapped seeds, budget sweep.

  validation_sweep(c, ev, vals, val_keys, resid, max_steps, dt_h) -> fn(params [S], n_ep)
  train_variant(c, trainer, train_tabs, sweep_fn, name, key, log, budgets=None, workdir=None)
      -> (params [S], sweep, curve)
  train_variants(c, banks, ev, val_keys, key, log, timings, workdir=None)
      -> (params, sweeps, curves)

A variant cycles through the training layouts `c.chunk_updates` PPO updates at a time (one
algos/ballast.make_trainer program for every layout and variant, lr constant); at every budget
checkpoint its greedy policy plays the validation layouts' episodes (never the held-out
evaluation layouts): c.sweep_episodes per layout, c.sweep_episodes_last at its last two
checkpoints (the flattening test's pair). rl_gru_resid (the replanner-residual ablation) stops
at c.resid_max_updates. A sweep is [{"updates", "steps_eff" | "success" | "violated" [S, L, n]}],
a curve [{metric: [S] chunk means}] per chunk.

With a workdir, each (variant, budget checkpoint) is a stage of its stage cache
("ballast_hydro/train/<variant>_u<updates>": the train state's leaves, the seeds' keys, the
chunk counter, the curve segment and the checkpoint's sweep entry; keyed by the whole config
and the library), so a run stopped after hours resumes from its last checkpoint with the data
an uninterrupted run computes (every run reads its own checkpoints back).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.core import stage_cache
from jaxrl_suite.envs.ballast.hydro_scoring import episode_metrics

SWEEP_METRICS = ("steps_eff", "success", "violated")
CURVE_METRICS = ("episode_length", "success_rate", "violated_rate", "episode_return", "entropy",
                 "approx_kl", "aux_loss")
# Validation episodes played at once (S seeds x this many rollouts in one vmapped program):
# bounds the sweep's memory however many episodes c.sweep_episodes_last asks for.
SWEEP_CHUNK = 1024


def validation_sweep(c, ev, vals, val_keys, resid: bool, max_steps: int, dt_h: float):
  """fn(params [S], n_ep) -> {metric: [S, L, n]}: greedy validation metrics on the first n =
  min(n_ep, c.sweep_episodes_last) episodes of each validation layout's bank (vals {name:
  params}, val_keys {name: keys}); the same episodes at every checkpoint, so differences are
  paired."""
  def fn(params, n_ep):
    n_sw = min(n_ep, c.sweep_episodes_last)
    outs = []
    for n, p in vals.items():
      tables = A.make_tables(p, resid, ev.api)
      parts = []
      for lo in range(0, n_sw, SWEEP_CHUNK):
        hi = min(lo + SWEEP_CHUNK, n_sw)
        out = ev.rl(p, (params, tables), jnp.arange(lo, hi), val_keys[n][lo:hi])
        parts.append(episode_metrics(jax.device_get(out), max_steps, dt_h))
      outs.append({k: np.concatenate([q[k] for q in parts], -1) for k in SWEEP_METRICS})
    return {k: np.stack([o[k] for o in outs], 1) for k in SWEEP_METRICS}
  return fn


def train_variant(c, trainer, train_tabs, sweep_fn, name: str, key, log, budgets=None,
                  workdir=None, timing=None):
  """Trains one variant (trainer = (init, chunk) of make_trainer) across the training layouts'
  tables up to the last of `budgets` (default c.budget_updates); chunk i uses the seeds' keys
  folded with i. Each budget checkpoint is a stage of `workdir`'s cache (module doc; None: no
  cache). Returns (final params [S], sweep, training curve)."""
  init, chunk = trainer
  keys = jax.random.split(key, c.n_seeds)
  state = init(keys, train_tabs[0])
  sweep, curve, done, i = [], [], 0, 0
  budgets = list(budgets or c.budget_updates)
  for bi, b in enumerate(budgets):
    def segment(state=state, keys=keys, done=done, i=i, bi=bi, b=b):
      seg = []
      while done < b:
        tabs = train_tabs[i % len(train_tabs)]
        keys = jax.vmap(lambda k: jax.random.fold_in(k, i))(keys)
        state, m = chunk(state, tabs, keys)
        seg.append({k: np.asarray(v).mean(-1).tolist() for k, v in m.items()
                    if k in CURVE_METRICS})
        done += c.chunk_updates
        i += 1
      # the last two checkpoints (the last doubling, the flattening test) on more episodes
      n_ep = c.sweep_episodes_last if bi >= len(budgets) - 2 else c.sweep_episodes
      return state, keys, i, done, seg, {"updates": b, **sweep_fn(state.params, n_ep)}
    if workdir is None:
      state, keys, i, done, seg, entry = segment()
    else:
      state, keys, i, done, seg, entry = _checkpoint_stage(
          f"ballast_hydro/train/{name}_u{b}", dict(config=c.to_dict(), variant=name,
                                                   updates=b, budgets=budgets),
          segment, jax.tree.structure(state), workdir, timing)
    curve += seg
    sweep.append(entry)
    log(f"{name}: {b} updates, validation steps_eff "
        f"{np.mean(sweep[-1]['steps_eff']):.2f} success {np.mean(sweep[-1]['success']):.3f}")
  return state.params, sweep, curve


def _checkpoint_stage(name, config, segment, treedef, workdir, timing):
  """segment()'s (state, keys, i, done, curve rows, sweep entry) through the stage cache: the
  state stored as its leaves and rebuilt on `treedef`, every value as read back."""
  def run():
    state, keys, i, done, seg, entry = segment()
    return {"state": jax.tree.leaves(jax.device_get(state)), "keys": np.asarray(keys),
            "i": i, "done": done, "curve": seg, "sweep": entry}
  out = stage_cache.optional_stage(name, config, run, workdir, timing)
  state = jax.tree.unflatten(treedef, [jnp.asarray(x) for x in out["state"]])
  return (state, jnp.asarray(out["keys"]), int(out["i"]), int(out["done"]),
          [{k: np.asarray(v).tolist() for k, v in row.items()} for row in out["curve"]],
          {k: (int(v) if k == "updates" else v) for k, v in out["sweep"].items()})


def train_variants(c, banks, ev, val_keys, key, log, timings, workdir=None):
  """Every variant of c.variants (variant vi with key fold_in(key, 100 + vi)); wall seconds
  go to timings["train_{variant}_s"]. Returns ({variant: params [S]}, {variant: sweep},
  {variant: curve}). workdir: the stage cache of the budget checkpoints (train_variant)."""
  trainer = AB.make_trainer(c, banks.env, int(c.budget_updates[-1]), int(c.chunk_updates))
  rl_params, sweeps, curves = {}, {}, {}
  for vi, var in enumerate(c.variants):
    resid = var == "rl_gru_resid"
    tabs = [A.make_tables(p, resid, ev.api) for _, p, _ in banks.train]
    budgets = [b for b in c.budget_updates if not resid or b <= c.resid_max_updates]
    sweep_fn = validation_sweep(c, ev, banks.vals, val_keys, resid, banks.max_steps, banks.dt_h)
    t = time.time()
    rl_params[var], sweeps[var], curves[var] = train_variant(
        c, trainer, tabs, sweep_fn, var, jax.random.fold_in(key, 100 + vi), log, budgets,
        workdir, timings)
    timings[f"train_{var}_s"] = time.time() - t
  return rl_params, sweeps, curves
