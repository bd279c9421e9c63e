"""Value heads for LM agents, and the one teacher-forced pass that scores a rollout's tokens.

Two kinds (`ValueConfig.kind`):
  "shared"    V = w . h_{j-1} + b on the policy's final hidden state (shared trunk: the value loss
              also moves the policy's trunk); params {"head": ...}.
  "separate"  a small critic DecoderLM (`ValueConfig.critic`, same tokenizer) with its own linear
              head on its final hidden state; params {"critic": lm params, "head": ...}.

Alignment. For a window of tokens x_0..x_{W-1}, slot j is scored from the hidden state at j-1
(the context before x_j):
  logp[:, j]   = log pi(x_j | x_<j)         (j >= 1; slot 0 gets 0: it is never trainable)
  values[:, j] = V(x_<j)                      the value of the state in which x_j is emitted
  entropy[:, j] = H(pi(. | x_<j))
so a token's log-prob, value and entropy all refer to the same decision.

Critic warm-up: `token_ppo` updates only the value parameters for its first
`critic_warmup_steps` iterations (policy and, for "shared", the trunk frozen), so advantages
come from a fitted critic before the policy moves.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_suite.core import losses
from jaxrl_suite.lm import model as lm_model


@dataclasses.dataclass(frozen=True)
class ValueConfig:
  kind: str = "shared"                       # "shared" | "separate" | "none"
  critic: Optional[lm_model.LMConfig] = None  # the critic's architecture for "separate"

  def __post_init__(self):
    if self.kind not in ("shared", "separate", "none"):
      raise ValueError(f"ValueConfig.kind must be 'shared', 'separate' or 'none', got {self.kind!r}")
    if self.kind == "separate" and self.critic is None:
      raise ValueError("ValueConfig.critic is required for kind='separate'")


class ValueHead(nn.Module):
  """Linear value head, zero-initialised (V = 0 before training)."""

  @nn.compact
  def __call__(self, h):
    return nn.Dense(1, kernel_init=nn.initializers.zeros, name="out")(h)[..., 0]


def init_value_params(vcfg: ValueConfig, cfg: lm_model.LMConfig, key: jax.Array) -> Any:
  """Value parameters for policy config `cfg` ({} for kind 'none')."""
  if vcfg.kind == "none":
    return {}
  if vcfg.kind == "shared":
    return {"head": ValueHead().init(key, jnp.zeros((1, cfg.d_model)))["params"]}
  lm_model.assert_same_tokenizer(cfg, vcfg.critic)
  k1, k2 = jax.random.split(key)
  return {"critic": lm_model.init_params(vcfg.critic, k1),
          "head": ValueHead().init(k2, jnp.zeros((1, vcfg.critic.d_model)))["params"]}


def _shift(x: jax.Array, fill=0.0) -> jax.Array:
  """[N, W, ...] scored at j from position j-1: out[:, j] = x[:, j-1], out[:, 0] = fill."""
  pad = jnp.full_like(x[:, :1], fill)
  return jnp.concatenate([pad, x[:, :-1]], axis=1)


class TokenScores(NamedTuple):
  logits: jax.Array   # [N, W, V] logits that predict slot j (shifted; row 0 is zeros)
  logp: jax.Array     # [N, W]
  entropy: jax.Array  # [N, W]
  values: jax.Array   # [N, W] (zeros for kind 'none')


def policy_and_values(cfg: lm_model.LMConfig, vcfg: ValueConfig, params: Any, vparams: Any,
                      tokens: jax.Array) -> TokenScores:
  """One causal pass over windows tokens [N, W] (W <= max_len): aligned scores (see module doc)."""
  model = lm_model.DecoderLM(cfg)
  logits, _, hidden = model.apply({"params": params}, tokens, return_hidden=True)
  logits = _shift(logits)
  logp = lm_model.token_log_probs(logits, tokens)
  logp = logp.at[:, 0].set(0.0)
  ent = losses.categorical_entropy(logits).at[:, 0].set(0.0)
  values = value_from_hidden(cfg, vcfg, vparams, tokens, hidden)
  return TokenScores(logits, logp, ent, values)


def value_from_hidden(cfg, vcfg: ValueConfig, vparams: Any, tokens: jax.Array,
                      hidden: Optional[jax.Array]) -> jax.Array:
  """[N, W] aligned values from the policy's hidden states (shared) or the critic (separate)."""
  if vcfg.kind == "none":
    return jnp.zeros(tokens.shape, jnp.float32)
  if vcfg.kind == "separate":
    _, _, hidden = lm_model.DecoderLM(vcfg.critic).apply({"params": vparams["critic"]}, tokens,
                                                        return_hidden=True)
  v = ValueHead().apply({"params": vparams["head"]}, hidden)
  return _shift(v)


def token_values(cfg: lm_model.LMConfig, vcfg: ValueConfig, params: Any, vparams: Any,
                 tokens: jax.Array) -> jax.Array:
  """[N, W] values V(x_<j) (one pass of the trunk for 'shared', of the critic for 'separate')."""
  if vcfg.kind == "none":
    return jnp.zeros(tokens.shape, jnp.float32)
  hidden = None
  if vcfg.kind == "shared":
    _, _, hidden = lm_model.DecoderLM(cfg).apply({"params": params}, tokens, return_hidden=True)
  return value_from_hidden(cfg, vcfg, vparams, tokens, hidden)


def make_value_fn(cfg: lm_model.LMConfig, vcfg: ValueConfig, params: Any, vparams: Any):
  """tokens [N, W] -> values [N, W], for `rollout.multi_turn_rollout(value_fn=...)`."""
  if vcfg.kind == "none":
    return None
  return lambda tokens: token_values(cfg, vcfg, params, vparams, tokens)
