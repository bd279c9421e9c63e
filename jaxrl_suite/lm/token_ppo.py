"""Token-level PPO (and GRPO / GiGPO) for LM agents, on `rollout.Rollout` records.

Per iteration: sample B trajectories (`multi_turn_rollout`), score every window once with the
current and the reference policy, compute token advantages (`lm.advantages`: per-token GAE with
the segment-boundary flag, GRPO, or GiGPO step groups), then `epochs` passes of `num_minibatches`
minibatches. Minibatches are sets of trajectories: a trajectory's windows never split across
minibatches. The loss of one optimiser step is

  L = sum_n w_n [ -min(rho_n A_n, clip(rho_n, 1 - eps, 1 + eps) A_n)          (policy)
                  + vf_coef * 0.5 (V(u_n) - G_n)^2                             (value)
                  + kl_coef * k3(pi_theta, pi_ref)(u_n) - ent_coef * H_n ],    rho_n = pi/pi_old

over the trainable tokens u_n of the minibatch, with normalisation weights `norm`:
  "token"     w_n = 1 / (number of trainable tokens in the minibatch)          (default; unbiased
              under re-segmentation: splitting a trajectory into windows leaves L unchanged)
  "sequence"  w_n = 1 / (N_tau * number of trajectories with tokens)           (per-trajectory mean)
  "segment"   w_n = 1 / (|U_k| * number of non-empty windows)                  (per-window mean: the
              "compression bias", weights trajectories by their number of windows)
pi_old is the policy at the start of the iteration (recomputed by one teacher-forced pass, so
the ratio uses the training forward; at temperature 1 it equals the sampling log-prob). With one
epoch, one minibatch and no clipping, grad L = -sum_n w_n A_n grad log pi(u_n): the policy
gradient (tested). Critic warm-up: for the first `critic_warmup_steps` iterations only the value
parameters move.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from jaxrl_suite.core import losses
from jaxrl_suite.envs.text import base as text_base
from jaxrl_suite.lm import advantages as lm_adv
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import value as lm_value

NORMS = ("token", "sequence", "segment")
ADVANTAGES = ("gae", "grpo", "gigpo")


@dataclasses.dataclass(frozen=True)
class TokenPPOConfig:
  epochs: int = 2
  num_minibatches: int = 2
  lr: float = 3e-4
  critic_lr: float = 1e-3
  clip_eps: float = 0.2
  value_clip: Optional[float] = None   # PPO value clipping range (None: plain squared error)
  vf_coef: float = 0.5
  kl_coef: float = 0.0                 # k3 KL to the reference, in the loss
  ent_coef: float = 0.0
  gamma: float = 1.0
  lam: float = 0.95
  gae_across_segments: bool = True     # False: GAE restarts at every window boundary
  advantage: str = "gae"               # "gae" | "grpo" | "gigpo"
  group_size: int = 1                  # rollouts per task instance (GRPO / GiGPO groups)
  step_weight: float = 1.0             # GiGPO: weight of the step-level term
  normalize_advantages: bool = False   # whiten over the trainable tokens of the batch
  norm: str = "token"                  # "token" | "sequence" | "segment"
  max_grad_norm: float = 1.0
  critic_warmup_steps: int = 0

  def __post_init__(self):
    for f in ("epochs", "num_minibatches", "group_size"):
      if getattr(self, f) <= 0:
        raise ValueError(f"TokenPPOConfig.{f} must be positive, got {getattr(self, f)}")
    if self.norm not in NORMS:
      raise ValueError(f"TokenPPOConfig.norm must be one of {NORMS}, got {self.norm!r}")
    if self.advantage not in ADVANTAGES:
      raise ValueError(f"TokenPPOConfig.advantage must be one of {ADVANTAGES}, got "
                       f"{self.advantage!r}")
    if self.advantage in ("grpo", "gigpo") and self.group_size < 2:
      raise ValueError(f"TokenPPOConfig.group_size must be >= 2 for {self.advantage}, got "
                       f"{self.group_size}")
    if self.clip_eps <= 0:
      raise ValueError(f"TokenPPOConfig.clip_eps must be > 0, got {self.clip_eps}")


def loss_weights(trainable: jax.Array, norm: str) -> jax.Array:
  """w [b, K, W] (sums to 1 when any token is trainable) for the normalisation `norm`."""
  m = trainable.astype(jnp.float32)
  if norm == "token":
    return m / jnp.maximum(m.sum(), 1.0)
  if norm == "sequence":
    n = m.sum((1, 2), keepdims=True)
    return m / jnp.maximum(n, 1.0) / jnp.maximum((n > 0).sum(), 1)
  if norm == "segment":
    n = m.sum(2, keepdims=True)
    return m / jnp.maximum(n, 1.0) / jnp.maximum((n > 0).sum(), 1)
  raise ValueError(f"unknown norm {norm!r}; expected one of {NORMS}")


class Batch(NamedTuple):
  """What the loss needs per token, [b, K, W] each (a minibatch of whole trajectories)."""
  tokens: jax.Array
  trainable: jax.Array
  old_logp: jax.Array
  ref_logp: jax.Array
  advantages: jax.Array
  targets: jax.Array
  old_values: jax.Array


def token_loss_terms(pcfg: TokenPPOConfig, logp: jax.Array, entropy: jax.Array,
                     values: jax.Array, batch: Batch) -> tuple[jax.Array, dict]:
  """The loss of the module doc from per-token arrays logp, entropy, values [b, K, W].

  Only trainable tokens carry weight (w_n = 0 elsewhere), so observed, copied and padding slots
  get exactly zero gradient whatever their advantages or targets hold."""
  wt = loss_weights(batch.trainable, pcfg.norm)
  ratio = jnp.exp(logp - jax.lax.stop_gradient(batch.old_logp))
  a = jax.lax.stop_gradient(batch.advantages)
  pg_tok = -jnp.minimum(ratio * a, jnp.clip(ratio, 1 - pcfg.clip_eps, 1 + pcfg.clip_eps) * a)
  # where(), not a product: an inf/NaN term on a masked slot must not leak into the sum.
  wsum = lambda x: jnp.where(batch.trainable, wt * x, 0.0).sum()
  pg = wsum(pg_tok)
  tgt = jax.lax.stop_gradient(batch.targets)
  if pcfg.value_clip is None:
    vf_tok = 0.5 * (values - tgt) ** 2
  else:
    old_v = jax.lax.stop_gradient(batch.old_values)
    vc = old_v + jnp.clip(values - old_v, -pcfg.value_clip, pcfg.value_clip)
    vf_tok = 0.5 * jnp.maximum((values - tgt) ** 2, (vc - tgt) ** 2)
  vf = wsum(vf_tok)
  kl = wsum(losses.kl_k3(logp, jax.lax.stop_gradient(batch.ref_logp)))
  ent = wsum(entropy)
  loss = pg + pcfg.vf_coef * vf + pcfg.kl_coef * kl - pcfg.ent_coef * ent
  clipped = (jnp.abs(ratio - 1) > pcfg.clip_eps) & batch.trainable
  aux = {"pg_loss": pg, "vf_loss": vf, "kl_ref": kl, "entropy": ent,
         "clip_frac": clipped.sum() / jnp.maximum(batch.trainable.sum(), 1),
         "approx_kl": wsum(jax.lax.stop_gradient(batch.old_logp) - logp)}
  return loss, aux


def ppo_token_loss(cfg: lm_model.LMConfig, vcfg: lm_value.ValueConfig, pcfg: TokenPPOConfig,
                   params: Any, vparams: Any, batch: Batch) -> tuple[jax.Array, dict]:
  """Scalar loss (module doc) and diagnostics for one minibatch of whole trajectories."""
  b, k, w = batch.tokens.shape
  sc = lm_value.policy_and_values(cfg, vcfg, params, vparams, batch.tokens.reshape(b * k, w))
  logp, ent, v = (x.reshape(b, k, w) for x in (sc.logp, sc.entropy, sc.values))
  return token_loss_terms(pcfg, logp, ent, v, batch)


def token_advantages(pcfg: TokenPPOConfig, ro: lm_rollout.Rollout,
                     values: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(advantages, value targets) [B, K, W] of the configured estimator."""
  if pcfg.advantage == "gae":
    adv, tgt = lm_adv.token_gae(ro, values, lm_adv.token_rewards(ro), pcfg.gamma, pcfg.lam,
                                pcfg.gae_across_segments)
  else:
    if pcfg.advantage == "grpo":
      adv = lm_adv.grpo_token_advantages(ro, pcfg.group_size)
    else:
      adv = lm_adv.gigpo_token_advantages(ro, pcfg.group_size, pcfg.step_weight, pcfg.gamma)
    # The critic (if any) still learns Monte-Carlo returns, for diagnostics and warm starts.
    _, tgt = lm_adv.token_gae(ro, values, lm_adv.token_rewards(ro), pcfg.gamma, 1.0,
                              pcfg.gae_across_segments)
  if pcfg.normalize_advantages:
    m = ro.trainable
    n = jnp.maximum(m.sum(), 1)
    mu = jnp.where(m, adv, 0).sum() / n
    sd = jnp.sqrt(jnp.where(m, (adv - mu) ** 2, 0).sum() / n)
    adv = jnp.where(m, (adv - mu) / (sd + 1e-8), 0.0)
  return adv, tgt


class TrainState(NamedTuple):
  params: Any
  vparams: Any
  ref_params: Any
  opt_pi: Any
  opt_v: Any
  step: jax.Array   # int32 [] iterations done


AdvantageFn = Callable[[lm_rollout.Rollout, jax.Array], tuple[jax.Array, jax.Array]]


def make_learner(cfg: lm_model.LMConfig, vcfg: lm_value.ValueConfig, pcfg: TokenPPOConfig,
                 advantage_fn: Optional[AdvantageFn] = None):
  """Returns (init(params, vparams, ref_params) -> TrainState,
  update(state, rollout, key) -> (state, metrics)); pure and vmappable.

  advantage_fn(rollout, old_values [B, K, W]) -> (advantages, value targets) [B, K, W] replaces
  `token_advantages(pcfg, ...)` (the configured estimator and its optional whitening) when
  given: a caller with its own per-step or per-turn advantages (e.g. carried in `rollout.info`
  and spread with `advantages.broadcast_turns`) supplies them directly. Only tokens with
  `rollout.trainable` carry weight in the loss, whatever the function returns elsewhere.
  None (default) is the configured estimator, unchanged.
  """
  opt_pi = optax.chain(optax.clip_by_global_norm(pcfg.max_grad_norm), optax.adam(pcfg.lr))
  opt_v = optax.chain(optax.clip_by_global_norm(pcfg.max_grad_norm), optax.adam(pcfg.critic_lr))

  def init(params, vparams, ref_params):
    return TrainState(params, vparams, ref_params, opt_pi.init(params), opt_v.init(vparams),
                      jnp.int32(0))

  def update(state: TrainState, ro: lm_rollout.Rollout, key: jax.Array):
    b, k, w = ro.tokens.shape
    if b % pcfg.num_minibatches:
      raise ValueError(f"{b} trajectories do not split into num_minibatches="
                       f"{pcfg.num_minibatches}")
    flat_tok = ro.tokens.reshape(b * k, w)
    old = lm_value.policy_and_values(cfg, vcfg, state.params, state.vparams, flat_tok)
    ref = lm_value.policy_and_values(cfg, lm_value.ValueConfig("none"), state.ref_params, {},
                                     flat_tok)
    old_logp, old_v = old.logp.reshape(b, k, w), old.values.reshape(b, k, w)
    if advantage_fn is None:
      adv, tgt = token_advantages(pcfg, ro, old_v)
    else:
      adv, tgt = advantage_fn(ro, old_v)
    data = Batch(ro.tokens, ro.trainable, old_logp, ref.logp.reshape(b, k, w), adv, tgt, old_v)
    train_policy = state.step >= pcfg.critic_warmup_steps
    mb = b // pcfg.num_minibatches

    def mb_step(st, idx):
      params, vparams, o_pi, o_v = st
      batch = jax.tree.map(lambda x: x[idx], data)
      (loss, aux), (g_pi, g_v) = jax.value_and_grad(
          lambda p, vp: ppo_token_loss(cfg, vcfg, pcfg, p, vp, batch), argnums=(0, 1),
          has_aux=True)(params, vparams)
      u_pi, o_pi2 = opt_pi.update(g_pi, o_pi, params)
      u_v, o_v2 = opt_v.update(g_v, o_v, vparams)
      sel = lambda new, old: jax.tree.map(lambda x, y: jnp.where(train_policy, x, y), new, old)
      params2 = sel(optax.apply_updates(params, u_pi), params)
      o_pi2 = sel(o_pi2, o_pi)
      return (params2, optax.apply_updates(vparams, u_v), o_pi2, o_v2), {"loss": loss, **aux}

    def epoch(st, ek):
      perm = jax.random.permutation(ek, b).reshape(pcfg.num_minibatches, mb)
      return jax.lax.scan(mb_step, st, perm)

    st0 = (state.params, state.vparams, state.opt_pi, state.opt_v)
    (params, vparams, o_pi, o_v), m = jax.lax.scan(epoch, st0,
                                                   jax.random.split(key, pcfg.epochs))
    m = jax.tree.map(lambda x: x.mean(), m)
    m.update(adv_mean=jnp.where(ro.trainable, adv, 0).sum() / jnp.maximum(ro.trainable.sum(), 1),
             trainable_tokens=ro.trainable.sum().astype(jnp.float32))
    return state._replace(params=params, vparams=vparams, opt_pi=o_pi, opt_v=o_v,
                          step=state.step + 1), m

  return init, update


def rollout_metrics(ro: lm_rollout.Rollout) -> dict:
  """Scalar summaries of a rollout batch (return, success when the env reports it, lengths)."""
  m = {"return": ro.returns.mean(),
       "turns": ro.turn_valid.sum(-1).mean().astype(jnp.float32),
       "windows": ro.num_segments.mean().astype(jnp.float32),
       "action_tokens": (ro.kind == lm_rollout.KIND_ACTION).sum((1, 2)).mean().astype(jnp.float32)}
  if isinstance(ro.info, dict) and "success" in ro.info:
    m["success"] = (ro.info["success"] & ro.turn_valid).any(-1).mean()
  if isinstance(ro.info, dict) and "invalid" in ro.info:
    m["invalid"] = ((ro.info["invalid"] & ro.turn_valid).sum()
                    / jnp.maximum(ro.turn_valid.sum(), 1))
  return m


def make_train_step(cfg: lm_model.LMConfig, vcfg: lm_value.ValueConfig, pcfg: TokenPPOConfig,
                    env: text_base.TextEnvironment, env_params: Any,
                    rcfg: lm_rollout.RolloutConfig, num_envs: int):
  """Returns (init, step(state, key) -> (state, metrics)): rollout + token-PPO update; one pure
  function per iteration (scan it with `pretrain.run_chunked`, vmap it over seeds)."""
  init, update = make_learner(cfg, vcfg, pcfg)

  def step(state: TrainState, key: jax.Array):
    k_ro, k_up = jax.random.split(key)
    ro = lm_rollout.multi_turn_rollout(
        cfg, state.params, env, env_params, k_ro, num_envs, rcfg, group_size=pcfg.group_size)
    state, m = update(state, ro, k_up)
    return state, {**rollout_metrics(ro), **m}

  return init, step
