"""Behaviour cloning of a scripted multi-turn policy: the "pretrained start" of LM-agent runs.

Data are `rollout.scripted_rollout` records (the same packed window layout the sampler builds),
the loss is the next-token cross-entropy on the scripted actions only (observations and the task
are context, never targets):

  L(theta) = - sum_{n trainable} log pi_theta(x_n | x_<n) / #trainable

so a cloned model samples actions from the scripted policy's distribution in exactly the
contexts `multi_turn_rollout` will show it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax

from jaxrl_suite.envs.text import base as text_base
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import value as lm_value


def bc_loss(cfg: lm_model.LMConfig, params: Any, ro: lm_rollout.Rollout) -> jax.Array:
  """Token-mean negative log-likelihood of the rollout's trainable tokens."""
  b, k, w = ro.tokens.shape
  sc = lm_value.policy_and_values(cfg, lm_value.ValueConfig("none"), params, {},
                                  ro.tokens.reshape(b * k, w))
  m = ro.trainable.reshape(b * k, w).astype(jnp.float32)
  return -(sc.logp * m).sum() / jnp.maximum(m.sum(), 1.0)


def pretrain_bc(cfg: lm_model.LMConfig, env: text_base.TextEnvironment, env_params: Any,
                action_fn: Callable, key: jax.Array, steps: int, num_envs: int = 64,
                num_turns: int = 3, window: int = 64, lr: float = 3e-3, chunk: int = 100,
                progress: bool = True, timing: Optional[dict] = None) -> tuple[Any, Any]:
  """Fresh params cloned from `action_fn` (see `rollout.scripted_rollout`); (params, loss [steps])."""
  if env.vocab.version != cfg.tokenizer_version:
    raise ValueError(f"env speaks tokenizer v{env.vocab.version}, model {cfg.name} "
                     f"v{cfg.tokenizer_version}")
  k_init, k_train = jax.random.split(key)
  params = lm_model.init_params(cfg, k_init)
  opt = lm_pretrain.make_optimizer(lr, steps)

  def step(state, k):
    p, o = state
    ro = lm_rollout.scripted_rollout(env, env_params, k, num_envs, num_turns, window, action_fn)
    loss, g = jax.value_and_grad(lambda q: bc_loss(cfg, q, ro))(p)
    upd, o = opt.update(g, o, p)
    return (optax.apply_updates(p, upd), o), {"loss": loss}

  (params, _), m = lm_pretrain.run_chunked(step, (params, opt.init(params)), k_train, steps,
                                           chunk, f"bc {cfg.name}", progress, timing)
  return params, m["loss"]
