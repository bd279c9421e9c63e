r"""STAPO pieces: step entropy, state-normalised entropy, outlier steps, their targeted update,
and the entropy-based baselines it is compared with (EMPG-style modulation, 80/20 token mask).

Layout: a rollout batch is B = n_groups * G episodes (G rollouts of one task instance are
consecutive) by T turns; per-turn arrays are [B, T] with `valid` [B, T] marking real turns.

Step entropy (multi-token action: mean token entropy over the action's tokens)
    H_t = (1/|a_t|) sum_{j in a_t} -sum_v pi(v | h_t, a_t,<j) log pi(v | h_t, a_t,<j)
Normalised entropy against the agent's own average behaviour in the same state kappa_t
(groups = the G rollouts of a task instance; hierarchical: episode group -> state group):
    mu(k), sigma(k) = mean, std {H_s : kappa_s = k, s in the group}      if count >= min_count
                    = EMA across iterations (decay 0.9) of the batch stats of k   elif seen before
                    = mean, std of all steps of the task-instance group            otherwise
    z_t = (H_t - mu(kappa_t)) / (sigma(kappa_t) + eps),      ratio_t = H_t / (mu(kappa_t) + eps)
Outlier rule o_t = 1[z_t > 2] (ablations: |z| > 2, top 10% of the batch).
STAPO advantage on outlier steps ("trajectory-aware reward" + "trajectory-independent penalty"):
    A'_t = A^step_t(kappa_t) - c 1[R(tau) = 0]
reading "targeted": outliers get A'_t, the rest keep the normal A_t; reading "only": the blog's
"only the outlier steps are updated": outliers get A'_t, the rest get zero weight.

Everything is a pure function of arrays (jittable, vmappable over seeds).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats as _st

from jaxrl_suite.core import losses

SOURCE_GROUP, SOURCE_EMA, SOURCE_TASK = 0, 1, 2


def token_entropy(logits: jax.Array) -> jax.Array:
  """Entropy of softmax(logits) over the last axis: [..., V] -> [...]."""
  return losses.categorical_entropy(logits)


def step_entropy(tok_entropy: jax.Array, tok_mask: jax.Array) -> jax.Array:
  """Mean token entropy of each action: tok_entropy, tok_mask [..., L] -> [...] (0 if empty)."""
  m = tok_mask.astype(tok_entropy.dtype)
  return (tok_entropy * m).sum(-1) / jnp.maximum(m.sum(-1), 1.0)


class EntropyEMA(NamedTuple):
  """Per-state-key running statistics across iterations: mean, second moment, seen flag [K]."""
  mean: jax.Array
  sq: jax.Array
  seen: jax.Array


def init_ema(num_keys: int) -> EntropyEMA:
  z = jnp.zeros((num_keys,), jnp.float32)
  return EntropyEMA(z, z, jnp.zeros((num_keys,), bool))


def update_ema(ema: EntropyEMA, h: jax.Array, keys: jax.Array, valid: jax.Array,
               decay: float = 0.9) -> EntropyEMA:
  """EMA of each key's batch mean / second moment over all valid steps of this batch."""
  k = ema.mean.shape[0]
  w = valid.astype(jnp.float32).reshape(-1)
  kk = jnp.clip(keys.reshape(-1), 0, k - 1)
  hh = h.reshape(-1).astype(jnp.float32)
  cnt = jax.ops.segment_sum(w, kk, k)
  s1 = jax.ops.segment_sum(w * hh, kk, k) / jnp.maximum(cnt, 1.0)
  s2 = jax.ops.segment_sum(w * hh * hh, kk, k) / jnp.maximum(cnt, 1.0)
  present = cnt > 0
  blend = lambda old, new: jnp.where(present, jnp.where(ema.seen, decay * old + (1 - decay) * new,  # noqa: E731
                                                        new), old)
  return EntropyEMA(blend(ema.mean, s1), blend(ema.sq, s2), ema.seen | present)


class Normalised(NamedTuple):
  z: jax.Array        # [B, T] z-score form
  ratio: jax.Array    # [B, T] ratio form H / mu
  mean: jax.Array     # [B, T] mu(kappa_t) used
  std: jax.Array      # [B, T] sigma(kappa_t) used
  count: jax.Array    # [B, T] int32 number of steps with the same key in the group (incl. self)
  source: jax.Array   # [B, T] int32 SOURCE_GROUP / SOURCE_EMA / SOURCE_TASK


def group_state_stats(h: jax.Array, keys: jax.Array, valid: jax.Array, group_size: int):
  """Same-key (count, mean, std) within each group of `group_size` episodes: [B, T] each.

  Pairwise comparison inside a group (n = G*T steps, n^2 compares): exact and shape-static.
  """
  b, t = h.shape
  ng = b // group_size
  hg = h.reshape(ng, group_size * t).astype(jnp.float32)
  kg = keys.reshape(ng, group_size * t)
  vg = valid.reshape(ng, group_size * t)
  same = (kg[:, :, None] == kg[:, None, :]) & vg[:, :, None] & vg[:, None, :]
  w = same.astype(jnp.float32)
  cnt = w.sum(-1)
  mu = (w * hg[:, None, :]).sum(-1) / jnp.maximum(cnt, 1.0)
  var = (w * (hg[:, None, :] - mu[..., None]) ** 2).sum(-1) / jnp.maximum(cnt, 1.0)
  rs = lambda x: x.reshape(b, t)  # noqa: E731
  return rs(cnt).astype(jnp.int32), rs(mu), rs(jnp.sqrt(var))


def task_stats(h: jax.Array, valid: jax.Array, group_size: int):
  """Mean and std of all valid steps of each task-instance group, broadcast to [B, T]."""
  b, t = h.shape
  ng = b // group_size
  hg = h.reshape(ng, -1).astype(jnp.float32)
  vg = valid.reshape(ng, -1).astype(jnp.float32)
  n = jnp.maximum(vg.sum(-1, keepdims=True), 1.0)
  mu = (hg * vg).sum(-1, keepdims=True) / n
  sd = jnp.sqrt(((hg - mu) ** 2 * vg).sum(-1, keepdims=True) / n)
  full = lambda x: jnp.broadcast_to(x, hg.shape).reshape(b, t)  # noqa: E731
  return full(mu), full(sd)


def normalised_entropy(h: jax.Array, keys: jax.Array, valid: jax.Array, group_size: int,
                       ema: EntropyEMA | None = None, min_count: int = 2, eps: float = 1e-3
                       ) -> Normalised:
  """State-normalised entropy z and ratio forms of step entropy h [B, T] (module docstring).

  `ema` is the state before this batch (None: no EMA fallback, rare keys use the task mean).
  """
  cnt, mu_g, sd_g = group_state_stats(h, keys, valid, group_size)
  mu_t, sd_t = task_stats(h, valid, group_size)
  use_group = cnt >= min_count
  if ema is None:
    use_ema = jnp.zeros_like(use_group)
    mu_e = sd_e = jnp.zeros_like(mu_g)
  else:
    kk = jnp.clip(keys, 0, ema.mean.shape[0] - 1)
    use_ema = ~use_group & ema.seen[kk]
    mu_e = ema.mean[kk]
    sd_e = jnp.sqrt(jnp.maximum(ema.sq[kk] - mu_e ** 2, 0.0))
  mu = jnp.where(use_group, mu_g, jnp.where(use_ema, mu_e, mu_t))
  sd = jnp.where(use_group, sd_g, jnp.where(use_ema, sd_e, sd_t))
  source = jnp.where(use_group, SOURCE_GROUP, jnp.where(use_ema, SOURCE_EMA, SOURCE_TASK))
  hf = h.astype(jnp.float32)
  z = jnp.where(valid, (hf - mu) / (sd + eps), 0.0)
  ratio = jnp.where(valid, hf / (mu + eps), 0.0)
  return Normalised(z, ratio, mu, sd, cnt, source.astype(jnp.int32))


def raw_zscore(h: jax.Array, valid: jax.Array, eps: float = 1e-3) -> jax.Array:
  """The un-normalised baseline: (H - batch mean) / batch std, same outlier rule as z."""
  v = valid.astype(jnp.float32)
  n = jnp.maximum(v.sum(), 1.0)
  mu = (h * v).sum() / n
  sd = jnp.sqrt((((h - mu) ** 2) * v).sum() / n)
  return jnp.where(valid, (h - mu) / (sd + eps), 0.0)


def outliers(score: jax.Array, valid: jax.Array, rule: str = "z", threshold: float = 2.0,
             top_frac: float = 0.1) -> jax.Array:
  """Outlier steps bool [B, T]: rule "z" (score > thr), "two_sided" (|score| > thr) or "top"
  (the top `top_frac` of valid steps of the batch by score)."""
  if rule == "z":
    o = score > threshold
  elif rule == "two_sided":
    o = jnp.abs(score) > threshold
  elif rule == "top":
    s = jnp.where(valid, score, -jnp.inf).reshape(-1)
    n = valid.sum()
    k = jnp.maximum(jnp.ceil(top_frac * n).astype(jnp.int32), 1)
    kth = jnp.sort(s)[::-1][jnp.clip(k - 1, 0, s.shape[0] - 1)]
    o = score >= kth
  else:
    raise ValueError(f"outlier rule must be 'z', 'two_sided' or 'top', got {rule!r}")
  return o & valid


def recurrence(count: jax.Array, source: jax.Array, valid: jax.Array) -> dict:
  """How often states recur in a group: if they rarely do, z falls back (EMA / task mean) and
  state normalisation degenerates towards plain (task-)normalised entropy."""
  v = valid.astype(jnp.float32)
  n = jnp.maximum(v.sum(), 1.0)
  return {"share_recurring": ((count >= 2) * v).sum() / n,
          "mean_count": (count * v).sum() / n,
          "share_group": ((source == SOURCE_GROUP) * v).sum() / n,
          "share_ema": ((source == SOURCE_EMA) * v).sum() / n,
          "share_task": ((source == SOURCE_TASK) * v).sum() / n}


# ---- advantages -------------------------------------------------------------------------------

def returns_to_go(rewards: jax.Array, valid: jax.Array, gamma: float = 1.0) -> jax.Array:
  """Discounted return from each turn to the episode's end: [B, T] -> [B, T]."""
  def body(g, x):
    r, v = x
    g = jnp.where(v, r + gamma * g, 0.0)
    return g, g
  _, out = jax.lax.scan(body, jnp.zeros(rewards.shape[0]),
                        (rewards.T.astype(jnp.float32), valid.T), reverse=True)
  return out.T


def step_group_advantages(rtg: jax.Array, keys: jax.Array, valid: jax.Array, group_size: int,
                          eps: float = 1e-6, scale: bool = True) -> jax.Array:
  """GiGPO-style step advantage: return-to-go normalised over the same-state steps of a group
  (anchor states); a state seen once gets 0. [B, T] -> [B, T]."""
  cnt, mu, sd = group_state_stats(rtg, keys, valid, group_size)
  a = rtg - mu
  if scale:
    a = a / (sd + eps)
  return jnp.where(valid & (cnt >= 2), a, 0.0)


def episode_advantages(returns: jax.Array, group_size: int) -> jax.Array:
  """GRPO episode advantage [B] (group-normalised returns), `core.losses.grpo_advantages`."""
  return losses.grpo_advantages(returns.reshape(-1, group_size)).reshape(-1)


def stapo_advantages(base_adv: jax.Array, step_adv: jax.Array, outlier: jax.Array,
                     success: jax.Array, valid: jax.Array, penalty: float = 0.5,
                     reading: str = "targeted") -> tuple[jax.Array, jax.Array]:
  """(advantage [B, T], step weight [B, T]) of STAPO.

  base_adv [B, T] the normal (GRPO / GiGPO) advantage, step_adv [B, T] the same-state step
  advantage, outlier [B, T], success [B] (R(tau) > 0), penalty c. reading "targeted": non-outlier
  steps keep base_adv (weight 1); "only": they get weight 0 (the blog's reading).
  """
  if reading not in ("targeted", "only"):
    raise ValueError(f"STAPO reading must be 'targeted' or 'only', got {reading!r}")
  fail = (~success.astype(bool)).astype(jnp.float32)[:, None]
  a_out = step_adv - penalty * fail
  adv = jnp.where(outlier, a_out, base_adv)
  w = valid.astype(jnp.float32)
  if reading == "only":
    w = w * outlier
  return jnp.where(valid, adv, 0.0), w


def empg_modulation(adv: jax.Array, h: jax.Array, valid: jax.Array, k: float = 1.0,
                    k_future: float = 1.0, zeta: float = 0.1) -> jax.Array:
  """EMPG-style entropy-modulated advantage (2509.09265, simplified and stated):

    Hn_t = (H_t - min H) / (max H - min H) over the batch's valid steps
    g_t  = exp(-k Hn_t) / mean_valid exp(-k Hn)             (confident steps amplified, mean 1)
    A~_t = g_t A_t + zeta exp(-k_future Hn_{t+1})           (future-clarity bonus; 0 at the end)
  """
  v = valid.astype(jnp.float32)
  lo = jnp.min(jnp.where(valid, h, jnp.inf))
  hi = jnp.max(jnp.where(valid, h, -jnp.inf))
  hn = jnp.where(valid, (h - lo) / jnp.maximum(hi - lo, 1e-6), 0.0)
  e = jnp.exp(-k * hn)
  g = e / jnp.maximum((e * v).sum() / jnp.maximum(v.sum(), 1.0), 1e-6)
  nxt_valid = jnp.concatenate([valid[:, 1:], jnp.zeros_like(valid[:, :1])], axis=1)
  nxt = jnp.concatenate([hn[:, 1:], jnp.zeros_like(hn[:, :1])], axis=1)
  bonus = jnp.where(nxt_valid, zeta * jnp.exp(-k_future * nxt), 0.0)
  return jnp.where(valid, g * adv + bonus, 0.0)


def high_entropy_token_mask(tok_entropy: jax.Array, tok_mask: jax.Array,
                            keep_frac: float = 0.2) -> jax.Array:
  """80/20 forking-token mask (2506.01939): tokens with entropy >= the (1 - keep_frac) quantile
  of the batch's valid tokens. Any shape; returns bool of the same shape."""
  flat = jnp.where(tok_mask, tok_entropy, jnp.nan).reshape(-1)
  thr = jnp.nanquantile(flat, 1.0 - keep_frac)
  return tok_mask & (tok_entropy >= thr)


# ---- detection metrics (numpy, host side) ------------------------------------------------------

def auroc(score: np.ndarray, label: np.ndarray) -> float:
  """Area under the ROC curve (Mann-Whitney U with mid-ranks for ties); nan if one class."""
  score = np.asarray(score, np.float64).ravel()
  label = np.asarray(label, bool).ravel()
  npos, nneg = label.sum(), (~label).sum()
  if npos == 0 or nneg == 0:
    return float("nan")
  ranks = _st.rankdata(score)  # mid-ranks for ties
  return float((ranks[label].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def precision(pred: np.ndarray, label: np.ndarray) -> float:
  """P(label | pred); nan when nothing is predicted."""
  pred = np.asarray(pred, bool).ravel()
  label = np.asarray(label, bool).ravel()
  return float(label[pred].mean()) if pred.any() else float("nan")
