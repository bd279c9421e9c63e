"""Clog diagnosis: the reference consistency diagnoser and the diagnosis metrics.

Reference diagnoser (design doc 4.4), run on the final observation of any trajectory: every
recorded failure set (blocked: r < r_fail; partial: r_fail <= r <= r_good) minus confirmed-good
edges must contain at least one clogged edge. The prediction is a greedy minimum hitting set of
those sets (most sets explained first, ties by the clog prior); a singleton set proves its edge
clogged. Edges never exercised are predicted clear.

Metrics compare a predicted clogged set pred[E] with labels clog_e < 1 over a mask (all edges,
or exercised edges only, since edges never used cannot be identified):
  exact-set match = all(pred == label on mask);
  F1 on clogged edges and balanced accuracy (TPR + TNR) / 2, both micro-averaged over episodes
  (per-episode F1 is undefined when nothing is clogged and nothing predicted).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.ballast.params import EnvParams, split_hydro_obs, split_obs


def reference_diagnosis(obs: jax.Array, env_params: EnvParams) -> jax.Array:
  """Predicted clogged edges bool[E] from a (final) BallastNet-v0 observation (see
  `diagnose_fields`). Jittable, vmappable over obs."""
  return diagnose_fields(split_obs(obs), env_params.block_w, env_params.partial_w)


def reference_diagnosis_hydro(obs: jax.Array, params) -> jax.Array:
  """The same diagnoser on a BallastHydro-v0 observation (same evidence fields; params a
  HydroParams, whose block_w / partial_w are the layout's clog prior)."""
  return diagnose_fields(split_hydro_obs(obs, params), params.block_w, params.partial_w)


def diagnose_fields(f, block_w: jax.Array, partial_w: jax.Array) -> jax.Array:
  """Predicted clogged edges bool[E] from the evidence fields good [E], fail_sets [F, E],
  fail_kind [F] of an observation and the clog prior block_w / partial_w [E].

  Greedy minimum hitting set: repeatedly predict the edge that explains the most still
  unexplained failure sets (minus confirmed-good edges), ties broken by the clog prior (block_w
  for blocked sets, partial_w for partial ones), then by the lowest index. A singleton set is
  always explained by its own edge (proof); a blockage seen through several routes is blamed on
  the edge they share rather than on one edge per route.
  """
  good = f["good"] > 0.5
  kind = f["fail_kind"].astype(jnp.int32)
  sets = (f["fail_sets"] > 0.5) & ~good[None, :] & (kind > 0)[:, None]          # [F, E]
  w = jnp.where((kind == 1)[:, None], block_w[None, :], partial_w[None, :])    # [F, E]
  score_w = (1.0 + 1e-2 * w) * sets                                            # per set-edge

  def body(_, carry):
    pred, open_ = carry
    score = jnp.sum(score_w * open_[:, None], axis=0)                           # [E]
    # first index of the max via two plain reductions (argmax is slow under vmap on XLA:CPU)
    pick = jnp.min(jnp.where(score == score.max(), jnp.arange(score.shape[0]), score.shape[0]))
    add = score[pick] > 0
    pred = pred.at[pick].set(pred[pick] | add)
    open_ = open_ & ~(sets[:, pick] & add)
    return pred, open_

  pred, _ = jax.lax.fori_loop(0, sets.shape[0], body, (jnp.zeros_like(good), sets.any(-1)))
  return pred


def confusion(pred: np.ndarray, label: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
  """Per-episode counts over mask: tp, fp, fn, tn [N] and exact-set match [N] (numpy)."""
  pred, label, mask = (np.asarray(a, bool) for a in (pred, label, mask))
  tp = (pred & label & mask).sum(-1)
  fp = (pred & ~label & mask).sum(-1)
  fn = (~pred & label & mask).sum(-1)
  tn = (~pred & ~label & mask).sum(-1)
  exact = ((pred == label) | ~mask).all(-1)
  return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "exact": exact}


def diagnosis_metrics(pred, label, mask) -> dict[str, float]:
  """Exact-set match rate, micro F1 on clogged edges, micro balanced accuracy."""
  c = confusion(pred, label, mask)
  tp, fp, fn, tn = (float(c[k].sum()) for k in ("tp", "fp", "fn", "tn"))
  f1 = 2 * tp / max(2 * tp + fp + fn, 1.0)
  tpr = tp / max(tp + fn, 1.0)
  tnr = tn / max(tn + fp, 1.0)
  return {"exact": float(c["exact"].mean()), "f1": f1, "bal_acc": 0.5 * (tpr + tnr),
          "tpr": tpr, "tnr": tnr}
