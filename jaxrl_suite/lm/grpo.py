"""GRPO for the tiny LMs (group-relative advantages, PPO clip, k3 KL to a frozen reference).

Per step: draw B training prompts, sample G responses each from the current policy
(temperature T), reward them with the task's verifier, and take one gradient step on

  L(theta) = PPO-clip(log pi_theta(y_t), log pi_old(y_t), A_b)   token-mean over valid tokens
             + kl_coef * mean_t k3(pi_theta, pi_ref)(y_t),
  A_b = (R_b - mean_group R) / (std_group R + eps)                 (`core.losses.grpo_advantages`)

Pieces are general: `policy_loss` is what other LM methods (STAPO, CuRe, CompactionRL) reuse with
their own advantages, and `sample_groups` / `evaluate` work for any `tasks`-style verifier.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl_suite.core import distributed
from jaxrl_suite.core import losses
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import sampling


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
  steps: int = 100
  prompts_per_step: int = 16   # B
  group_size: int = 8          # G
  lr: float = 1e-3
  clip_eps: float = 0.2
  kl_coef: float = 0.02
  temperature: float = 1.0
  max_grad_norm: float = 1.0

  def __post_init__(self):
    for f in ("steps", "prompts_per_step", "group_size"):
      if getattr(self, f) <= 0:
        raise ValueError(f"GRPOConfig.{f} must be positive, got {getattr(self, f)}")
    if self.group_size < 2:
      raise ValueError(f"GRPOConfig.group_size must be >= 2, got {self.group_size}")


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
  mask = mask.astype(x.dtype)
  return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def policy_loss(logp: jax.Array, old_logp: jax.Array, ref_logp: jax.Array, adv: jax.Array,
                mask: jax.Array, clip_eps: float, kl_coef: float) -> tuple[jax.Array, dict]:
  """Token-mean PPO-clip + k3 KL. All inputs [B, R] (adv broadcast per token); returns (loss, aux).

  `core.losses.ppo_clip_loss` averages over every element; scaling the advantages by
  mask * N / sum(mask) turns that into the mean over valid tokens (the surrogate is
  positively homogeneous in A, and masked entries contribute 0).
  """
  m = mask.astype(jnp.float32)
  scale = m.size / jnp.maximum(m.sum(), 1.0)
  pg = losses.ppo_clip_loss(logp, old_logp, adv * m * scale, clip_eps)
  kl = masked_mean(losses.kl_k3(logp, jax.lax.stop_gradient(ref_logp)), m)
  return pg + kl_coef * kl, {"pg_loss": pg, "kl_ref": kl}


def sample_groups(cfg: lm_model.LMConfig, params: Any, task, key: jax.Array, num_prompts: int,
                  group_size: int, temperature: float = 1.0):
  """(operands [B*G, ops], prompts [B*G, P], Samples) with each prompt repeated G times."""
  k1, k2 = jax.random.split(key)
  ops = jnp.repeat(task.sample_train(k1, num_prompts), group_size, axis=0)
  prompts = task.prompts(ops)
  s = sampling.sample(sampling.lm_stepper(cfg, params), prompts, k2, task.response_len,
                      temperature=temperature)
  return ops, prompts, s


def make_step(cfg: lm_model.LMConfig, task, gcfg: GRPOConfig):
  """Returns (init(params, ref_params) -> state, step(state, key) -> (state, metrics)).

  Pure and vmappable. The frozen reference travels in the state (an argument, not a constant
  baked into the compiled program, so one compilation serves every reference of this shape).
  """
  opt = optax.chain(optax.clip_by_global_norm(gcfg.max_grad_norm), optax.adam(gcfg.lr))
  mesh = distributed.make_mesh()
  data = distributed.data_sharding(mesh)

  def init(params, ref_params):
    return params, opt.init(params), ref_params

  def step(state, key):
    params, opt_state, ref_params = state
    ops, prompts, s = sample_groups(cfg, params, task, key, gcfg.prompts_per_step,
                                    gcfg.group_size, gcfg.temperature)
    prompts, tokens = (jax.lax.with_sharding_constraint(x, data) for x in (prompts, s.tokens))
    rewards = task.reward(ops, tokens)
    adv = losses.grpo_advantages(rewards.reshape(-1, gcfg.group_size)).reshape(-1)
    old_logp = lm_model.token_log_probs(
        sampling.response_logits(cfg, params, prompts, tokens), tokens)
    ref_logp = lm_model.token_log_probs(
        sampling.response_logits(cfg, ref_params, prompts, tokens), tokens)

    def loss_fn(p):
      logp = lm_model.token_log_probs(sampling.response_logits(cfg, p, prompts, tokens), tokens)
      return policy_loss(logp, jax.lax.stop_gradient(old_logp), ref_logp, adv[:, None], s.mask,
                         gcfg.clip_eps, gcfg.kl_coef)

    (loss, aux), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
    upd, opt_state = opt.update(g, opt_state, params)
    params = optax.apply_updates(params, upd)
    return (params, opt_state, ref_params), {"reward": rewards.mean(), "loss": loss, **aux}

  return init, step


def train(cfg: lm_model.LMConfig, params: Any, task, gcfg: GRPOConfig, keys: jax.Array,
          chunk: int = 50, progress: bool = True, desc: str = "grpo",
          params_per_seed: bool = False, timing: Optional[dict] = None) -> tuple[Any, dict]:
  """GRPO from `params` (also the KL reference) for len(keys) seeds at once (vmapped).

  keys [S, 2]; `params_per_seed`: params already carry a leading seed axis (one start per
  seed), else they are broadcast. `timing` as in `pretrain.run_chunked`.
  Returns (params stacked over seeds [S, ...], metrics {name: [S, steps]}).
  """
  init, step = make_step(cfg, task, gcfg)
  n = keys.shape[0]
  stacked = params if params_per_seed else jax.tree.map(
      lambda x: jnp.broadcast_to(x, (n,) + x.shape), params)
  state = jax.vmap(init)(stacked, stacked)

  state, m = run_seeds(step, state, keys, gcfg.steps, chunk, desc, progress, timing)
  return state[0], m


def run_seeds(step, state, keys: jax.Array, steps: int, chunk: int, desc: str = "",
              progress: bool = True, timing: Optional[dict] = None) -> tuple[Any, dict]:
  """Runs a vmapped `step(state, key)` over seeds; seed i's stream depends only on keys[i].

  state has a leading seed axis. Returns (final state, metrics {name: [S, steps]}).
  """

  def multi(carry, _):
    inner, t = carry
    ks = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
    inner, m = jax.vmap(step)(inner, ks)
    return (inner, t + 1), m

  (state, _), m = lm_pretrain.run_chunked(multi, (state, jnp.int32(0)), jax.random.PRNGKey(0),
                                          steps, chunk, desc, progress, timing)
  return state, jax.tree.map(lambda x: np.asarray(x).T, m)


def train_flops(cfg: lm_model.LMConfig, task, gcfg: GRPOConfig) -> float:
  """Analytic FLOPs of one GRPO run (sampling + old/ref forwards + forward/backward)."""
  ctx = task.prompt_len + task.response_len
  f = lm_model.forward_flops_per_token(cfg, ctx)
  n = gcfg.prompts_per_step * gcfg.group_size
  per_step = n * (ctx * f            # sampling (prefill + decode, one forward per token)
                  + 2 * ctx * f      # old and reference log-probs
                  + 3 * ctx * f)     # forward + backward of the loss
  return float(per_step * gcfg.steps)


def evaluate(stepper: sampling.Stepper, task, operands: jax.Array, key: jax.Array,
             temperature: float = 1.0) -> jax.Array:
  """Per-problem reward [N] of one sampled response per held-out problem."""
  s = sampling.sample(stepper, task.prompts(operands), key, task.response_len,
                      temperature=temperature)
  return task.reward(operands, s.tokens)
