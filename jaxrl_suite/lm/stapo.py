r"""STAPO pieces: step entropy, state-normalised entropy, outlier steps, their targeted update,
and the entropy-based baselines it is compared with (EMPG-style modulation, 80/20 token mask,
EPO-style entropy regularisation with smoothing against its history).

Layout: a rollout batch is B = n_groups * G episodes (G rollouts of one task instance are
consecutive) by T turns; per-turn arrays are [B, T] with `valid` [B, T] marking real turns.

Step entropy (multi-token action: mean token entropy over the action's tokens)
    H_t = (1/|a_t|) sum_{j in a_t} -sum_v pi(v | h_t, a_t,<j) log pi(v | h_t, a_t,<j)
Normalised entropy against the agent's own average behaviour in the same state kappa_t
(groups = the G rollouts of a task instance; hierarchical: episode group -> state group):
leave-one-out: step t is compared with the OTHER steps of its state, never with itself,
    mu_t, sigma_t = mean, population std {H_s : kappa_s = kappa_t, s != t, s in the group}
                                                              if #{s != t} >= min_count
                  = EMA across iterations (decay 0.9) of the batch stats of kappa_t  elif seen
                  = mean, std of the other steps of the task-instance group          otherwise
    z_t = (H_t - mu_t) / (sigma_t + eps),      ratio_t = H_t / (mu_t + eps)
Why leave-one-out: with the step inside its own group's mean and std, z_t <= sqrt(n - 1) for a
state seen n times (the step drags the mean towards itself and inflates the std), so z > 2 was
impossible below n = 6 and a drifted step in a rarely visited state could never be flagged.
Without self, z is unbounded: one step far from its state's other visits gets a large z.
Outlier rule (default "t"): a Student-t prediction interval for a new observation against the
m other visits it is compared with (m = n_t - 1 for a state group, the task group's other steps
for the task fallback, m = inf for the EMA fallback), with the sample std s_t (ddof 1):
    s_t = sigma_t sqrt(m / (m - 1)),     t_t = (H_t - mu_t) / ((s_t + eps) sqrt(1 + 1/m))
    o_t = 1[t_t > q_{1 - alpha}(t_{m - 1})]        (no flag when m < 2: no spread to compare)
Under the null (H of a state's visits i.i.d. normal) t_t ~ t_{m-1} exactly, so the false-flag
rate is alpha at every visit count; a fixed z > 2 instead flags 23% of null steps at m = 2,
15% at m = 3, 9% at m = 5, 5% at m = 10 (LOO z is heavy-tailed with few other visits; measured
by simulation, tests/lm/test_stapo_threshold.py). Ablations on z: z > 2, |z| > 2, top 10%.
STAPO advantage on outlier steps ("trajectory-aware reward" + "trajectory-independent penalty"):
    A'_t = A^step_t(kappa_t) - c 1[R(tau) = 0]
reading "targeted": outliers get A'_t, the rest keep the normal A_t; reading "only": the blog's
"only the outlier steps are updated": outliers get A'_t, the rest get zero weight.

Everything is a pure function of arrays (jittable, vmappable over seeds).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy import stats as _st

from jaxrl_suite.core import losses
from jaxrl_suite.envs.text import goal_house as gh
from jaxrl_suite.lm import advantages as lm_adv
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import token_ppo
from jaxrl_suite.lm import value as lm_value

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
  count: jax.Array    # [B, T] int32 steps with the same key in the group (incl. self; stats exclude it)
  source: jax.Array   # [B, T] int32 SOURCE_GROUP / SOURCE_EMA / SOURCE_TASK
  t: jax.Array        # [B, T] prediction-interval statistic (module docstring)
  others: jax.Array   # [B, T] float m, the number of other steps behind mu, sigma (inf: EMA)


def group_state_stats(h: jax.Array, keys: jax.Array, valid: jax.Array, group_size: int):
  """Leave-one-out same-key statistics within each group of `group_size` episodes.

  Returns (count, mean, std), each [B, T]: count = number of valid steps with the same key in
  the group INCLUDING the step itself (so `recurrence` reads it as before); mean and population
  std are over the OTHER count - 1 such steps (0 when there are none):
      mu_t = sum_{s != t, k_s = k_t} H_s / (n_t - 1),  sd_t^2 = sum_{s != t} (H_s - mu_t)^2 / (n_t - 1)
  Pairwise comparison inside a group (n = G*T steps, n^2 compares): exact and shape-static.
  """
  b, t = h.shape
  ng = b // group_size
  n = group_size * t
  hg = h.reshape(ng, n).astype(jnp.float32)
  kg = keys.reshape(ng, n)
  vg = valid.reshape(ng, n)
  same = (kg[:, :, None] == kg[:, None, :]) & vg[:, :, None] & vg[:, None, :]
  cnt = same.sum(-1)
  w = (same & ~jnp.eye(n, dtype=bool)[None]).astype(jnp.float32)   # others only
  n_o = jnp.maximum(w.sum(-1), 1.0)
  mu = (w * hg[:, None, :]).sum(-1) / n_o
  var = (w * (hg[:, None, :] - mu[..., None]) ** 2).sum(-1) / n_o
  rs = lambda x: x.reshape(b, t)  # noqa: E731
  return rs(cnt).astype(jnp.int32), rs(mu), rs(jnp.sqrt(var))


def task_stats(h: jax.Array, valid: jax.Array, group_size: int):
  """Leave-one-out mean and std of the task-instance group: over the group's OTHER valid steps
  (same reason as `group_state_stats`), and the number of those other steps; [B, T] each."""
  b, t = h.shape
  ng = b // group_size
  hg = h.reshape(ng, -1).astype(jnp.float32)
  vg = valid.reshape(ng, -1).astype(jnp.float32)
  n_o = jnp.maximum(vg.sum(-1, keepdims=True) - vg, 1.0)
  s1 = (hg * vg).sum(-1, keepdims=True) - hg * vg
  s2 = (hg * hg * vg).sum(-1, keepdims=True) - hg * hg * vg
  mu = s1 / n_o
  sd = jnp.sqrt(jnp.maximum(s2 / n_o - mu ** 2, 0.0))
  m = vg.sum(-1, keepdims=True) - vg
  return mu.reshape(b, t), sd.reshape(b, t), jnp.broadcast_to(m, hg.shape).reshape(b, t)


def normalised_entropy(h: jax.Array, keys: jax.Array, valid: jax.Array, group_size: int,
                       ema: EntropyEMA | None = None, min_count: int = 2, eps: float = 1e-3
                       ) -> Normalised:
  """State-normalised entropy z and ratio forms of step entropy h [B, T] (module docstring).

  `ema` is the state before this batch (None: no EMA fallback, rare keys use the task mean).
  `min_count`: the number of OTHER same-key steps in the group needed to use the group stats.
  """
  cnt, mu_g, sd_g = group_state_stats(h, keys, valid, group_size)
  mu_t, sd_t, m_t = task_stats(h, valid, group_size)
  use_group = cnt - 1 >= min_count
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
  m = jnp.where(use_group, (cnt - 1).astype(jnp.float32), jnp.where(use_ema, jnp.inf, m_t))
  t = jnp.where(valid, prediction_t(hf, mu, sd, m, eps), 0.0)
  return Normalised(z, ratio, mu, sd, cnt, source.astype(jnp.int32), t, m)


def prediction_t(h: jax.Array, mu: jax.Array, sd_pop: jax.Array, m: jax.Array,
                 eps: float = 1e-3) -> jax.Array:
  """Student-t statistic of a new observation h against m others with mean mu and population
  std sd_pop (any shape): t = (h - mu) / ((s + eps) sqrt(1 + 1/m)), s = sd_pop sqrt(m / (m - 1))
  the sample std. m = inf means known mean and std (t = z). 0 where m < 2 (no spread)."""
  ok = m >= 2
  mm = jnp.where(ok, m, 2.0)
  s = sd_pop * jnp.sqrt(jnp.where(jnp.isinf(mm), 1.0, mm / (mm - 1)))
  scale = (s + eps) * jnp.sqrt(1.0 + 1.0 / mm)
  return jnp.where(ok, (h - mu) / scale, 0.0)


def t_quantile_table(alpha: float, max_df: int) -> np.ndarray:
  """One-sided upper quantiles q_{1-alpha} of Student-t, float64 [max_df + 2]: entry d is df d
  (entry 0 is +inf: one other visit has no spread, nothing is flagged), the last entry is the
  normal quantile (df = inf, the EMA fallback). Built on the host: alpha and the size are
  static, so the traced rule is a table lookup."""
  if not 0.0 < alpha < 0.5:
    raise ValueError(f"false-flag rate alpha must be in (0, 0.5), got {alpha}")
  q = np.empty(max_df + 2)
  q[0] = np.inf
  q[1:-1] = _st.t.ppf(1.0 - alpha, np.arange(1, max_df + 1))
  q[-1] = _st.norm.ppf(1.0 - alpha)
  return q


def calibrated_outliers(norm: Normalised, valid: jax.Array, alpha: float = 0.025) -> jax.Array:
  """Outlier steps bool [B, T] of the prediction-interval rule: t_t > q_{1-alpha}(t_{m-1})
  (module docstring), so a step of an unremarkable state is flagged with probability alpha
  whatever its number of other visits m."""
  max_df = int(np.prod(valid.shape))            # static: no group holds more other steps
  table = jnp.asarray(t_quantile_table(alpha, max_df), jnp.float32)
  df = jnp.where(jnp.isinf(norm.others), max_df + 1,
                 jnp.clip(norm.others - 1, 0, max_df)).astype(jnp.int32)
  return (norm.t > table[df]) & valid & (norm.others >= 2)


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


class EntropyHistory(NamedTuple):
  """EPO's entropy history across iterations: EMA of the batch step entropy, seen flag, and the
  iteration count (scalars)."""
  mean: jax.Array
  seen: jax.Array
  iteration: jax.Array


def init_history() -> EntropyHistory:
  return EntropyHistory(jnp.float32(0.0), jnp.bool_(False), jnp.int32(0))


def update_history(hist: EntropyHistory, batch_entropy: jax.Array,
                   decay: float = 0.9) -> EntropyHistory:
  """Blends this batch's mean step entropy into the EMA (the first batch sets it)."""
  m = jnp.where(hist.seen, decay * hist.mean + (1 - decay) * batch_entropy, batch_entropy)
  return EntropyHistory(m.astype(jnp.float32), jnp.bool_(True), hist.iteration + 1)


def batch_entropy(h: jax.Array, valid: jax.Array) -> jax.Array:
  """Trajectory-level entropy of a batch: each trajectory's mean step entropy over its valid
  turns, averaged over trajectories with >= 1 turn (h, valid [B, T] -> scalar)."""
  v = valid.astype(jnp.float32)
  n = v.sum(-1)
  per_traj = (h * v).sum(-1) / jnp.maximum(n, 1.0)
  has = (n > 0).astype(jnp.float32)
  return (per_traj * has).sum() / jnp.maximum(has.sum(), 1.0)


def epo_coefficient(hist: EntropyHistory, h_batch: jax.Array, coef: float = 0.05,
                    smooth: float = 0.1, lower: float = 0.9, upper: float = 1.1,
                    phase_steps: int = 30) -> jax.Array:
  """EPO's entropy coefficient of this iteration (a stated reading of 2509.22576):

    c_k = lambda + beta w_k (1[H_k < kappa_l Hbar_k] - 1[H_k > kappa_u Hbar_k]),
    w_k = min(1, k / K_phase)

  lambda (`coef`): trajectory-level entropy regularisation; beta (`smooth`): the smoothing
  regulariser that pushes the batch entropy H_k back into the band [kappa_l, kappa_u] x the
  historical average Hbar_k (EMA of past batches; no push before one is seen); w_k: the
  phase-based weight, from exploration (no smoothing) to full stabilisation at K_phase."""
  w = jnp.minimum(1.0, hist.iteration.astype(jnp.float32) / max(phase_steps, 1))
  below = (h_batch < lower * hist.mean) & hist.seen
  above = (h_batch > upper * hist.mean) & hist.seen
  return coef + smooth * w * (below.astype(jnp.float32) - above.astype(jnp.float32))


def epo_advantages(adv: jax.Array, surprisal: jax.Array, valid: jax.Array, group_size: int,
                   c: jax.Array) -> jax.Array:
  """EPO through the shared learner, as an advantage: A_t + c (s_t - sbar_g), [B, T].

  s_t = -(1/|a_t|) sum_{n in a_t} log pi(a_n | ...) is the sampled action's surprisal; since
  E[grad log pi(a) (-log pi(a))] = grad H, a policy gradient with advantage c s_t is, in
  expectation, c times the gradient of the action's (token-mean) entropy, i.e. the loss term
  -c H of EPO without a second loss. sbar_g, the mean surprisal of the task group's valid
  turns, is a baseline (variance only)."""
  b, t = surprisal.shape
  v = valid.astype(jnp.float32).reshape(b // group_size, -1)
  sg = surprisal.reshape(b // group_size, -1)
  base = (sg * v).sum(-1, keepdims=True) / jnp.maximum(v.sum(-1, keepdims=True), 1.0)
  bonus = (sg - base).reshape(b, t)
  return jnp.where(valid, adv + c * bonus, 0.0)


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


# ---- warm start: behaviour cloning on windows the rollout harness would show ----------------

def truncate_oldest_segments(obs: np.ndarray, obs_len: np.ndarray, act: np.ndarray,
                             act_len: np.ndarray, valid: np.ndarray, window: int,
                             max_action_len: int) -> tuple[np.ndarray, np.ndarray]:
  """Cuts recorded episodes into the context windows `rollout.TruncateOldest(keep_task=False)`
  shows the policy, so behaviour cloning trains on exactly the contexts RL samples in.

  obs [N, T, O], obs_len [N, T], act [N, T, A], act_len [N, T] (incl. <eoa>), valid [N, T].
  A turn is obs_t then act_t. Before turn t the window restarts when pos + obs_len_t + A > W,
  keeping the most recent whole turns that fit in W - A - obs_len_t. Returns rows [M, W] int32
  and trainable [M, W] bool (the actions written inside the row; copied turns are not trained:
  they were sampled under another context).
  """
  rows, masks = [], []
  for n in range(obs.shape[0]):
    toks, train, starts = [], [], []          # the current window and its turn start offsets
    for t in range(obs.shape[1]):
      if not valid[n, t]:
        break
      o = list(obs[n, t, :obs_len[n, t]])
      if len(toks) + len(o) + max_action_len > window:
        budget = window - max_action_len - len(o)
        keep = next((s for s in starts if len(toks) - s <= budget), len(toks))
        rows.append(toks)
        masks.append(train)
        starts = [s - keep for s in starts if s >= keep]
        toks, train = toks[keep:], [False] * (len(toks) - keep)
      starts.append(len(toks))
      a = list(act[n, t, :act_len[n, t]])
      toks += o + a
      train += [False] * len(o) + [True] * len(a)
    rows.append(toks)
    masks.append(train)
  out = np.zeros((len(rows), window), np.int32)
  m = np.zeros((len(rows), window), bool)
  for i, (r, k) in enumerate(zip(rows, masks)):
    out[i, :len(r)] = r
    m[i, :len(k)] = k
  return out, m


def bc_loss(cfg, params, rows: jax.Array, trainable: jax.Array) -> jax.Array:
  """Token-mean NLL of the trainable tokens of rows [b, W] (log-probs from
  `value.policy_and_values`, which aligns each token with the decision that produced it)."""
  sc = lm_value.policy_and_values(cfg, lm_value.ValueConfig("none"), params, {}, rows)
  m = trainable.astype(jnp.float32)
  return -(sc.logp * m).sum() / jnp.maximum(m.sum(), 1.0)


def behaviour_clone(cfg, params, rows: jax.Array, trainable: jax.Array, key: jax.Array,
                    steps: int, batch: int, lr: float, chunk: int = 100,
                    progress: bool = True, desc: str = "warm-start") -> tuple[Any, np.ndarray]:
  """`bc_loss` (next-token NLL of the trainable tokens) on minibatches of
  `rows` [M, W] with AdamW + warmup-cosine. Returns (params, loss per step [steps])."""
  opt = lm_pretrain.make_optimizer(lr, steps)

  def step(state, k):
    p, s = state
    idx = jax.random.randint(k, (batch,), 0, rows.shape[0])
    loss, g = jax.value_and_grad(
        lambda q: bc_loss(cfg, q, rows[idx], trainable[idx]))(p)
    upd, s = opt.update(g, s, p)
    return (optax.apply_updates(p, upd), s), {"loss": loss}

  (params, _), m = lm_pretrain.run_chunked(step, (params, opt.init(params)), key, steps, chunk,
                                           desc, progress)
  return params, np.asarray(m["loss"])


def per_turn_mean(x: jax.Array, turn: jax.Array, mask: jax.Array, num_turns: int) -> jax.Array:
  """Mean of x over the masked tokens of each turn: x, turn, mask [B, K, W] -> [B, H]."""
  b = x.shape[0]
  t = jnp.where(mask, turn, num_turns).reshape(b, -1)
  m = mask.reshape(b, -1).astype(jnp.float32)
  seg = jax.vmap(lambda v, i: jax.ops.segment_sum(v, i, num_turns + 1))
  s = seg(x.reshape(b, -1) * m, t)[:, :num_turns]
  n = seg(m, t)[:, :num_turns]
  return s / jnp.maximum(n, 1.0)


def with_turn_advantages(ro, adv: jax.Array, keep: jax.Array):
  """The rollout the shared learner trains on: per-turn advantages adv [B, H] carried in
  `info["turn_advantage"]`, trainable narrowed to keep [B, K, W] (80/20 mask, STAPO "only"
  reading). `turn_advantage_fn` spreads them onto the kept tokens of each turn, so every method
  here is one advantage array plus one mask fed to `token_ppo.make_learner`: no second loop."""
  return ro._replace(trainable=ro.trainable & keep,
                     info={**ro.info, "turn_advantage": adv.astype(jnp.float32)})


def turn_advantage_fn(ro, values):
  """`token_ppo.make_learner(advantage_fn=...)`: A_n = adv_t on every trainable token n of turn
  t (exact: no reward encoding), zero value targets (the methods here have no critic)."""
  return lm_adv.broadcast_turns(ro, ro.info["turn_advantage"]), jnp.zeros_like(values)


# ---- one training iteration of every compared method -----------------------------------------

METHODS = ("grpo", "gigpo", "mask8020", "empg", "epo", "stapo", "stapo_only", "stapo_raw")


class MethodConfig(NamedTuple):
  """Knobs of the compared methods (shared learner; only the advantage / mask differ). The
  method itself is data (an index into METHODS carried in the state), so one compiled program
  runs every method and vmaps over (method, seed) pairs."""
  group_size: int = 8
  step_weight: float = 1.0        # GiGPO step term weight
  keep_frac: float = 0.2          # 80/20: share of highest-entropy tokens that get gradient
  empg_k: float = 1.0
  empg_k_future: float = 1.0
  empg_zeta: float = 0.1
  penalty: float = 0.5            # STAPO c
  outlier_rule: str = "t"         # "t" (calibrated prediction interval), or on z: "z", ...
  outlier_threshold: float = 2.0  # rules on z only
  false_flag_rate: float = 0.025  # rule "t": alpha (0.025 ~ the one-sided z > 1.96 of large m)
  ema_decay: float = 0.9
  min_count: int = 2
  epo_coef: float = 0.05          # EPO lambda (entropy regularisation)
  epo_smooth: float = 0.1         # EPO beta (smoothing regulariser)
  epo_lower: float = 0.9          # EPO band kappa_l x historical entropy
  epo_upper: float = 1.1          # EPO band kappa_u x historical entropy
  epo_phase_steps: int = 30       # EPO K_phase: iterations until full smoothing weight


def method_id(name: str) -> int:
  if name not in METHODS:
    raise ValueError(f"unknown method {name!r}; expected one of {METHODS}")
  return METHODS.index(name)


def episode_neglect(info: dict, valid: jax.Array) -> dict:
  """Neglect metrics of a batch: events per 100 steps, share of episodes with >= 1, success."""
  ev = info["neglect"].any(-1) & valid
  n = jnp.maximum(valid.sum(), 1)
  return {"neglect_per100": 100.0 * ev.sum() / n,
          "neglect_episodes": ev.any(-1).mean(),
          "success": (info["success"] & valid).any(-1).mean()}


class Signals(NamedTuple):
  """Per-rollout entropy signals: tok_ent [B, K, W], step entropy h [B, H], Normalised, and
  surprisal [B, H] (mean -log pi of each turn's sampled action tokens)."""
  tok_ent: jax.Array
  h: jax.Array
  norm: Normalised
  surprisal: jax.Array


def turn_signals(cfg, params, ro, group_size: int, ema: EntropyEMA, min_count: int = 2
                 ) -> Signals:
  """The entropy signals (`Signals`) of a rollout under params."""
  b, k, w = ro.tokens.shape
  sc = lm_value.policy_and_values(cfg, lm_value.ValueConfig("none"), params, {},
                                  ro.tokens.reshape(b * k, w))
  tok_ent = jax.lax.stop_gradient(sc.entropy.reshape(b, k, w))
  h = per_turn_mean(tok_ent, ro.turn, ro.trainable, ro.rewards.shape[1])
  norm = normalised_entropy(h, ro.state_key, ro.turn_valid, group_size, ema, min_count)
  surprisal = per_turn_mean(-jax.lax.stop_gradient(sc.logp.reshape(b, k, w)), ro.turn,
                            ro.trainable, ro.rewards.shape[1])
  return Signals(tok_ent, h, norm, surprisal)


def flag_steps(mcfg: MethodConfig, norm: Normalised, valid: jax.Array) -> jax.Array:
  """STAPO's outlier steps [B, T] under the configured rule: "t" the calibrated prediction
  interval (`calibrated_outliers`), otherwise `outliers` on z."""
  if mcfg.outlier_rule == "t":
    return calibrated_outliers(norm, valid, mcfg.false_flag_rate)
  return outliers(norm.z, valid, mcfg.outlier_rule, mcfg.outlier_threshold)


def flag_raw(mcfg: MethodConfig, raw_z: jax.Array, valid: jax.Array) -> jax.Array:
  """The raw-entropy ablation's outliers: rule "t" compares the batch z-score with the normal
  quantile q_{1-alpha} (the batch holds hundreds of steps: t_{m-1} ~ normal), same alpha."""
  if mcfg.outlier_rule == "t":
    return (raw_z > float(_st.norm.ppf(1.0 - mcfg.false_flag_rate))) & valid
  return outliers(raw_z, valid, mcfg.outlier_rule, mcfg.outlier_threshold)


def method_advantages(mcfg: MethodConfig, method: jax.Array, ro, sig: Signals,
                      epo_c: jax.Array | float = 0.0) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(per-turn advantage [B, H], token keep mask [B, K, W], outlier steps [B, H]) of method
  index `method` (int32 [], into METHODS). Every variant is computed and one is selected: they
  are tiny next to the rollout, and a traced method index means one compilation for all.

    grpo        A = A_ep (group-normalised return) on every step
    gigpo       A = A_ep + w A_step (same-state return-to-go groups)
    mask8020    A = A_ep on the top `keep_frac` highest-entropy tokens only
    empg        A = g(H_t) A_ep + future-clarity bonus (`empg_modulation`)
    epo         A = A_ep + c_k (s_t - sbar) (`epo_advantages`, c_k = `epo_coefficient`)
    stapo       outliers o_t (`flag_steps`) get A_step - c 1[fail]; others keep A_ep
    stapo_only  the same advantages, and only the outlier steps get gradient
    stapo_raw   as stapo, outliers chosen by raw entropy z-scores (the normalisation ablation)
  """
  tok_ent, h, norm = sig.tok_ent, sig.h, sig.norm
  g, valid = mcfg.group_size, ro.turn_valid
  base = jnp.where(valid, episode_advantages(ro.returns, g)[:, None], 0.0)
  step = lm_adv.step_group_advantages(ro, g)
  success = (ro.info["success"] & valid).any(-1)
  ones = jnp.ones(ro.trainable.shape, bool)
  none = jnp.zeros(valid.shape, bool)
  out_z = flag_steps(mcfg, norm, valid)
  out_raw = flag_raw(mcfg, raw_zscore(h, valid), valid)
  a_st, _ = stapo_advantages(base, step, out_z, success, valid, mcfg.penalty, "targeted")
  a_raw, _ = stapo_advantages(base, step, out_raw, success, valid, mcfg.penalty, "targeted")
  keep_out = lm_adv.broadcast_turns(ro, out_z.astype(jnp.float32)) > 0
  variants = {
      "grpo": (base, ones, none),
      "gigpo": (base + mcfg.step_weight * step, ones, none),
      "mask8020": (base, high_entropy_token_mask(tok_ent, ro.trainable, mcfg.keep_frac), none),
      "empg": (empg_modulation(base, h, valid, mcfg.empg_k, mcfg.empg_k_future,
                               mcfg.empg_zeta), ones, none),
      "epo": (epo_advantages(base, sig.surprisal, valid, g, epo_c), ones, none),
      "stapo": (a_st, ones, out_z),
      "stapo_only": (a_st, keep_out, out_z),
      "stapo_raw": (a_raw, ones, out_raw),
  }
  stacked = [jnp.stack(x) for x in zip(*(variants[m] for m in METHODS))]
  return tuple(x[method] for x in stacked)


def make_train_step(cfg, env, env_params, rcfg, num_envs: int, mcfg: MethodConfig, pcfg):
  """(init(params, method index) -> carry, step(carry, key) -> (carry, metrics)): the
  `multi_turn_rollout`, the method's advantages (`method_advantages`), B's token-PPO update
  (`token_ppo.make_learner` with `advantage_fn=turn_advantage_fn`: the method's advantages
  replace the learner's estimator, so `pcfg.advantage` / `normalize_advantages` are unused).
  Pure; vmap it over (method, seed) pairs."""
  vcfg = lm_value.ValueConfig("none")
  init_l, update = token_ppo.make_learner(cfg, vcfg, pcfg, advantage_fn=turn_advantage_fn)
  num_keys = gh.num_state_keys(env_params)

  def init(params, method: jax.Array):
    return (init_l(params, {}, params), init_ema(num_keys), jnp.asarray(method, jnp.int32),
            init_history())

  def step(carry, key):
    state, ema, method, hist = carry
    k_ro, k_up = jax.random.split(key)
    ro = lm_rollout.multi_turn_rollout(cfg, state.params, env, env_params, k_ro, num_envs, rcfg,
                                       group_size=mcfg.group_size)
    sig = turn_signals(cfg, state.params, ro, mcfg.group_size, ema, mcfg.min_count)
    norm = sig.norm
    ema = update_ema(ema, sig.h, ro.state_key, ro.turn_valid, mcfg.ema_decay)
    h_b = batch_entropy(sig.h, ro.turn_valid)
    epo_c = epo_coefficient(hist, h_b, mcfg.epo_coef, mcfg.epo_smooth, mcfg.epo_lower,
                            mcfg.epo_upper, mcfg.epo_phase_steps)
    hist = update_history(hist, h_b, mcfg.ema_decay)
    adv, keep, out = method_advantages(mcfg, method, ro, sig, epo_c)
    state, m = update(state, with_turn_advantages(ro, adv, keep), k_up)
    valid = ro.turn_valid
    lab = ro.info["neglect"].any(-1) & valid
    n_out = jnp.maximum(out.sum(), 1)
    metrics = {**episode_neglect(ro.info, valid), "return": ro.returns.mean(),
               "turns": valid.sum(-1).mean().astype(jnp.float32),
               "note_rate": ((ro.info["action_index"] == gh.num_actions(env_params) - 1) & valid
                             ).sum() / jnp.maximum(valid.sum(), 1),
               "outlier_share": out.sum() / jnp.maximum(valid.sum(), 1),
               "outlier_precision": (out & lab).sum() / n_out,
               "kept_tokens": (keep & ro.trainable).sum() / jnp.maximum(ro.trainable.sum(), 1),
               "segment_overflow": ro.segment_overflow.mean(),
               **{k: m[k] for k in ("pg_loss", "kl_ref", "entropy", "clip_frac")},
               **recurrence(norm.count, norm.source, valid)}
    metrics.update(batch_entropy=h_b, epo_coef=epo_c)
    return (state, ema, method, hist), metrics

  return init, step
