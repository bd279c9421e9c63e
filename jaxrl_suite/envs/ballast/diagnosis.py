"""Clog diagnosis: the reference consistency diagnoser and the diagnosis metrics.

Reference diagnoser (design doc 4.4), run on the final observation of any trajectory: every
recorded failure set (blocked: r < r_fail; partial: r_fail <= r <= r_good) minus confirmed-good
edges must contain at least one clogged edge. Sets are explained greedily from the smallest up:
a set already hit by a predicted edge is explained; a singleton proves its edge clogged; otherwise
the edge with the highest prior weight (block_w for blocked sets, partial_w for partial sets; the
lowest index on ties) is predicted. Edges never exercised are predicted clear.

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

from jaxrl_suite.envs.ballast.env import EnvParams, split_obs
from jaxrl_suite.envs.ballast.routes import F_MAX


def reference_diagnosis(obs: jax.Array, env_params: EnvParams) -> jax.Array:
  """Predicted clogged edges bool[E] from a (final) observation. Jittable, vmappable over obs."""
  f = split_obs(obs)
  good = f["good"] > 0.5
  kind = f["fail_kind"].astype(jnp.int32)
  sets = (f["fail_sets"] > 0.5) & ~good[None, :] & (kind > 0)[:, None]
  size = jnp.where(sets.any(-1), sets.sum(-1), 10_000)
  order = jnp.argsort(size * 4 + jnp.where(kind == 1, 0, 1))  # small first, blocked before partial
  w_block = env_params.block_w + 1e-3 * env_params.edge_mask  # 0-weight edges still explainable
  w_part = env_params.partial_w

  def body(i, pred):
    j = order[i]
    s = sets[j]
    w = jnp.where(kind[j] == 1, w_block, w_part)
    pick = jnp.argmax(jnp.where(s, w, -1.0))
    add = s.any() & ~jnp.any(s & pred)
    return pred.at[pick].set(pred[pick] | add)

  return jax.lax.fori_loop(0, F_MAX, body, jnp.zeros_like(good))


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
