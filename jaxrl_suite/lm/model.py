"""A tiny pre-LN decoder-only transformer (flax.linen) with an explicit KV cache.

One module serves training and decoding. `DecoderLM(cfg)(tokens, positions, cache)`:

  tokens    int32 [B, S]
  positions int32 [S]  absolute positions of the S tokens (default arange(S))
  cache     None (full causal pass, training) or a list (one per layer) of
            {"k": [B, T_max, H, Dh], "v": [B, T_max, H, Dh]}; the S new keys/values are written
            at positions[0]..positions[0]+S-1 and every query attends to cache slots <= its position.
  returns   (logits [B, S, V], new cache or None)

The cache is a plain pytree argument (not a flax mutable collection), so a decode step is a pure
function that `lax.scan` can carry. Block: x += Attn(LN(x)); x += MLP(LN(x)); final LN, untied head.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_suite.lm import tokenizer

Cache = list  # list[dict[str, jax.Array]]


@dataclasses.dataclass(frozen=True)
class LMConfig:
  """Architecture of one family member. Heads have dimension d_model // num_heads."""
  name: str = "lm"
  vocab_size: int = tokenizer.VOCAB_SIZE
  d_model: int = 32
  num_layers: int = 2
  num_heads: int = 2
  d_ff: int = 128
  max_len: int = 32

  def __post_init__(self):
    for f in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_len"):
      if getattr(self, f) <= 0:
        raise ValueError(f"LMConfig.{f} must be positive, got {getattr(self, f)}")
    if self.d_model % self.num_heads:
      raise ValueError(f"LMConfig.d_model={self.d_model} not divisible by num_heads={self.num_heads}")


# The family used by the reproductions (same tokenizer, same T_max). Approximate parameter counts
# are checked in tests: ~29k, ~61k, ~156k, ~455k.
FAMILY: dict[str, LMConfig] = {
    "xs": LMConfig("xs", d_model=32, num_layers=2, num_heads=2, d_ff=128, max_len=24),
    "s": LMConfig("s", d_model=48, num_layers=2, num_heads=3, d_ff=192, max_len=24),
    "m": LMConfig("m", d_model=64, num_layers=3, num_heads=4, d_ff=256, max_len=24),
    "l": LMConfig("l", d_model=96, num_layers=4, num_heads=6, d_ff=384, max_len=24),
}


class Block(nn.Module):
  """Pre-LN transformer block with causal attention over an optional KV cache."""
  cfg: LMConfig

  @nn.compact
  def __call__(self, x, positions, cache):
    cfg = self.cfg
    b, s, d = x.shape
    nh, dh = cfg.num_heads, cfg.d_model // cfg.num_heads
    h = nn.LayerNorm(name="ln_attn")(x)
    qkv = nn.Dense(3 * d, name="qkv")(h).reshape(b, s, 3, nh, dh)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    if cache is None:
      keys, values, key_pos, new_cache = k, v, positions, None
    else:
      start = positions[0]
      keys = jax.lax.dynamic_update_slice(cache["k"], k.astype(cache["k"].dtype), (0, start, 0, 0))
      values = jax.lax.dynamic_update_slice(cache["v"], v.astype(cache["v"].dtype),
                                            (0, start, 0, 0))
      key_pos = jnp.arange(keys.shape[1])
      new_cache = {"k": keys, "v": values}
    scores = jnp.einsum("bshd,bthd->bhst", q, keys) / math.sqrt(dh)
    allowed = key_pos[None, :] <= positions[:, None]  # [S, T]
    scores = jnp.where(allowed[None, None], scores, jnp.finfo(scores.dtype).min)
    attn = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhst,bthd->bshd", attn, values).reshape(b, s, d)
    x = x + nn.Dense(d, name="attn_out")(out)
    h = nn.LayerNorm(name="ln_mlp")(x)
    h = nn.Dense(cfg.d_ff, name="mlp_in")(h)
    x = x + nn.Dense(d, name="mlp_out")(nn.gelu(h))
    return x, new_cache


class DecoderLM(nn.Module):
  """Decoder-only LM: token + learned position embeddings, pre-LN blocks, untied output head."""
  cfg: LMConfig

  @nn.compact
  def __call__(self, tokens, positions: Optional[jax.Array] = None,
               cache: Optional[Cache] = None):
    cfg = self.cfg
    if positions is None:
      positions = jnp.arange(tokens.shape[1])
    x = nn.Embed(cfg.vocab_size, cfg.d_model, name="tok_embed")(tokens)
    x = x + nn.Embed(cfg.max_len, cfg.d_model, name="pos_embed")(positions)[None]
    new_cache = [] if cache is not None else None
    for i in range(cfg.num_layers):
      x, c = Block(cfg, name=f"block_{i}")(x, positions, None if cache is None else cache[i])
      if cache is not None:
        new_cache.append(c)
    x = nn.LayerNorm(name="ln_final")(x)
    logits = nn.Dense(cfg.vocab_size, name="head")(x)
    return logits, new_cache


def init_cache(cfg: LMConfig, batch: int, dtype=jnp.float32) -> Cache:
  """Zero KV cache for `batch` sequences of up to cfg.max_len tokens."""
  dh = cfg.d_model // cfg.num_heads
  shape = (batch, cfg.max_len, cfg.num_heads, dh)
  return [{"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}
          for _ in range(cfg.num_layers)]


def init_params(cfg: LMConfig, key: jax.Array) -> Any:
  return DecoderLM(cfg).init(key, jnp.zeros((1, cfg.max_len), jnp.int32))["params"]


def num_params(params: Any) -> int:
  return int(sum(x.size for x in jax.tree_util.tree_leaves(params)))


def forward_flops_per_token(cfg: LMConfig, context: int) -> float:
  """Approximate forward FLOPs per token (2 x multiply-adds) with `context` attended tokens.

  Dense layers: 2*(4 d^2 + 2 d d_ff) per layer plus the 2 d V head; attention scores and mixing:
  2 * 2 * context * d per layer. Backward is counted as 2x forward by callers (6N rule).
  """
  d, L = cfg.d_model, cfg.num_layers
  dense = L * (4 * d * d + 2 * d * cfg.d_ff) + d * cfg.vocab_size
  attn = L * 2 * context * d
  return 2.0 * (dense + attn)


def token_log_probs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
  """log softmax(logits)[..., tokens]: logits [..., V], tokens [...] -> [...]."""
  logp = jax.nn.log_softmax(logits, axis=-1)
  return jnp.take_along_axis(logp, tokens[..., None], axis=-1)[..., 0]
