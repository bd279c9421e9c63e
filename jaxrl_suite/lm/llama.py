"""Llama / Qwen3-style decoder (flax.linen) behind the `model.DecoderLM` interface.

Same call as `DecoderLM`: `LlamaLM(cfg)(tokens, positions, cache, key_mask, return_hidden)`

  tokens    int32 [B, S]
  positions int32 [S] or [B, S] (per-sequence offsets); default arange(S)
  cache     None or a list (one per layer) of {"k": [B, T, KV, Dh], "v": [B, T, KV, Dh]};
            keys are cached *after* the rotary embedding, so a cached key never moves
  key_mask  optional bool [B, T]: False slots are never attended
  returns   (logits [B, S, V], new cache or None) (+ final normed hidden [B, S, D])

Block (pre-norm, no biases):
  h = x + W_o Attn(RoPE(n_q(W_q RMS(x))), RoPE(n_k(W_k RMS(x))), W_v RMS(x))
  y = h + W_down( silu(W_gate RMS(h)) * W_up RMS(h) )
  RMS(x) = w * x / sqrt(mean(x^2) + eps)        (computed in float32)
  n_q, n_k: Qwen3's per-head RMSNorm over Dh (identity for Llama)
  RoPE (half-rotation layout of the HF checkpoints): for pair i < Dh/2 at position p,
    angle = p * theta^(-2i/Dh);  x'[i] = x[i] cos - x[i+Dh/2] sin,  x'[i+Dh/2] = x[i+Dh/2] cos + x[i] sin
  Grouped-query attention: query head h reads key/value head h // (H / KV).
Logits = RMS(x_L) @ E^T when embeddings are tied, else the separate lm_head.

`LlamaConfig` carries `forward` / `init_cache` / `forward_flops_per_token`, so `model.DecoderLM`
and `model.init_cache` can hand a non-GPT config to this module (see docs/lm_checkpoints.md);
the layers are built in the caller's flax scope, so `LlamaLM(cfg).init` and
`DecoderLM(cfg).init` give the same parameter tree.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_suite.envs.text import tokenizer

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
  """Llama (qk_norm=False) or Qwen3 (qk_norm=True) architecture; fields follow config.json.

  max_len bounds the contexts the LM code builds (rotary positions have no table, so it is a
  budget, not a weight shape). tokenizer_version: the `envs.text.tokenizer` version whose ids the
  checkpoint's tokenizer reproduces (tiny test checkpoints), or None (a real tokenizer).
  """
  name: str = "llama"
  vocab_size: int = 32
  d_model: int = 32          # hidden_size
  num_layers: int = 2        # num_hidden_layers
  num_heads: int = 4         # num_attention_heads
  num_kv_heads: int = 2      # num_key_value_heads
  head_dim: int = 8
  d_ff: int = 64             # intermediate_size
  max_len: int = 64
  rope_theta: float = 10000.0
  rms_eps: float = 1e-6
  tie_embeddings: bool = False
  qk_norm: bool = False
  dtype: str = "float32"     # compute and parameter dtype ("bfloat16" on accelerators)
  tokenizer_version: Optional[int] = None

  def __post_init__(self):
    for f in ("vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads", "head_dim",
              "d_ff", "max_len"):
      if getattr(self, f) <= 0:
        raise ValueError(f"LlamaConfig.{f} must be positive, got {getattr(self, f)}")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(f"LlamaConfig.num_heads={self.num_heads} is not a multiple of "
                       f"num_kv_heads={self.num_kv_heads} (grouped-query attention)")
    if self.head_dim % 2:
      raise ValueError(f"LlamaConfig.head_dim={self.head_dim} must be even (rotary pairs)")
    if self.dtype not in DTYPES:
      raise ValueError(f"LlamaConfig.dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
    if self.tokenizer_version is not None:
      size = tokenizer.get(self.tokenizer_version).size
      if size != self.vocab_size:
        raise ValueError(f"LlamaConfig.vocab_size={self.vocab_size} does not match tokenizer "
                         f"v{self.tokenizer_version} (V={size})")

  @property
  def vocab(self) -> tokenizer.Vocab:
    if self.tokenizer_version is None:
      raise ValueError(f"{self.name}: its tokenizer is not one of ours (tokenizer_version=None); "
                       "use lm.hf_tokenizer for its ids")
    return tokenizer.get(self.tokenizer_version)

  # ---- the hooks model.DecoderLM / model.init_cache / forward_flops_per_token dispatch to ----
  def forward(self, tokens, positions=None, cache=None, key_mask=None, return_hidden=False):
    """Builds the layers in the current flax scope (call inside a compact __call__)."""
    return _forward(self, tokens, positions, cache, key_mask, return_hidden)

  def init_cache(self, batch: int, dtype=None, length: Optional[int] = None):
    return init_cache(self, batch, dtype, length)

  def forward_flops_per_token(self, context: int) -> float:
    return forward_flops_per_token(self, context)


class RMSNorm(nn.Module):
  eps: float
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    w = self.param("weight", nn.initializers.ones, (x.shape[-1],), self.dtype)
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return (w.astype(jnp.float32) * y).astype(x.dtype)


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
  """Rotary embedding, half-rotation layout: x [B, S, N, Dh], positions [B, S] -> same shape."""
  dh = x.shape[-1]
  inv = theta ** (-jnp.arange(0, dh, 2, dtype=jnp.float32) / dh)        # [Dh/2]
  ang = positions.astype(jnp.float32)[..., None] * inv                   # [B, S, Dh/2]
  cos, sin = jnp.cos(ang)[:, :, None], jnp.sin(ang)[:, :, None]          # [B, S, 1, Dh/2]
  x32 = x.astype(jnp.float32)
  x1, x2 = x32[..., : dh // 2], x32[..., dh // 2:]
  return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(x.dtype)


def _dense(features, name, dt):
  return nn.Dense(features, use_bias=False, dtype=dt, param_dtype=dt, name=name)


def _write(cache_arr, new, positions):
  """Writes new [B, S, KV, Dh] at positions[b, 0] (or positions[0] for all) into the cache."""
  new = new.astype(cache_arr.dtype)
  if positions.ndim == 1:
    return jax.lax.dynamic_update_slice(cache_arr, new, (0, positions[0], 0, 0))
  write = jax.vmap(lambda c, u, p0: jax.lax.dynamic_update_slice(c, u, (p0, 0, 0)))
  return write(cache_arr, new, positions[:, 0])


class LlamaAttention(nn.Module):
  cfg: LlamaConfig

  @nn.compact
  def __call__(self, x, positions, cache, key_mask):
    cfg, dt = self.cfg, DTYPES[self.cfg.dtype]
    b, s, _ = x.shape
    h, kv, dh = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    q = _dense(h * dh, "q_proj", dt)(x).reshape(b, s, h, dh)
    k = _dense(kv * dh, "k_proj", dt)(x).reshape(b, s, kv, dh)
    v = _dense(kv * dh, "v_proj", dt)(x).reshape(b, s, kv, dh)
    if cfg.qk_norm:
      q = RMSNorm(cfg.rms_eps, dt, name="q_norm")(q)
      k = RMSNorm(cfg.rms_eps, dt, name="k_norm")(k)
    pos_b = jnp.broadcast_to(positions, (b, s))
    q, k = rope(q, pos_b, cfg.rope_theta), rope(k, pos_b, cfg.rope_theta)
    if cache is None:
      keys, values, key_pos, new_cache = k, v, pos_b, None
    else:
      keys, values = _write(cache["k"], k, positions), _write(cache["v"], v, positions)
      key_pos = jnp.broadcast_to(jnp.arange(keys.shape[1]), (b, keys.shape[1]))
      new_cache = {"k": keys, "v": values}
    qg = q.reshape(b, s, kv, h // kv, dh)
    scores = jnp.einsum("bskgd,btkd->bkgst", qg, keys.astype(q.dtype),
                        preferred_element_type=jnp.float32) / math.sqrt(dh)
    allowed = key_pos[:, None, :] <= pos_b[:, :, None]                  # [B, S, T]
    if key_mask is not None:
      allowed = allowed & key_mask[:, None, :]
    scores = jnp.where(allowed[:, None, None], scores, jnp.finfo(jnp.float32).min)
    attn = jax.nn.softmax(scores, axis=-1).astype(dt)
    out = jnp.einsum("bkgst,btkd->bskgd", attn, values.astype(dt)).reshape(b, s, h * dh)
    return _dense(cfg.d_model, "o_proj", dt)(out), new_cache


class LlamaMLP(nn.Module):
  cfg: LlamaConfig

  @nn.compact
  def __call__(self, x):
    dt = DTYPES[self.cfg.dtype]
    g = _dense(self.cfg.d_ff, "gate_proj", dt)(x)
    u = _dense(self.cfg.d_ff, "up_proj", dt)(x)
    return _dense(self.cfg.d_model, "down_proj", dt)(nn.silu(g) * u)


class LlamaBlock(nn.Module):
  cfg: LlamaConfig

  @nn.compact
  def __call__(self, x, positions, cache, key_mask):
    cfg, dt = self.cfg, DTYPES[self.cfg.dtype]
    a, new_cache = LlamaAttention(cfg, name="self_attn")(
        RMSNorm(cfg.rms_eps, dt, name="input_layernorm")(x), positions, cache, key_mask)
    x = x + a
    x = x + LlamaMLP(cfg, name="mlp")(RMSNorm(cfg.rms_eps, dt, name="post_attention_layernorm")(x))
    return x, new_cache


def _forward(cfg: LlamaConfig, tokens, positions, cache, key_mask, return_hidden):
  """The decoder body; submodules attach to the flax module whose compact call runs this."""
  dt = DTYPES[cfg.dtype]
  if positions is None:
    if tokens.shape[1] > cfg.max_len:
      raise ValueError(f"{cfg.name}: sequence of {tokens.shape[1]} tokens is longer than "
                       f"LlamaConfig.max_len={cfg.max_len}")
    positions = jnp.arange(tokens.shape[1])
  embed = nn.Embed(cfg.vocab_size, cfg.d_model, dtype=dt, param_dtype=dt,
                   embedding_init=nn.initializers.normal(0.02), name="embed_tokens")
  x = embed(tokens)
  new_cache = [] if cache is not None else None
  for i in range(cfg.num_layers):
    x, c = LlamaBlock(cfg, name=f"layers_{i}")(x, positions,
                                               None if cache is None else cache[i], key_mask)
    if cache is not None:
      new_cache.append(c)
  x = RMSNorm(cfg.rms_eps, dt, name="norm")(x)
  if cfg.tie_embeddings:
    logits = embed.attend(x)
  else:
    logits = _dense(cfg.vocab_size, "lm_head", dt)(x)
  logits = logits.astype(jnp.float32)  # losses and sampling read float32 log-probs
  if return_hidden:
    return logits, new_cache, x
  return logits, new_cache


class LlamaLM(nn.Module):
  """Standalone module (same parameter tree as `model.DecoderLM(cfg)` with the dispatch)."""
  cfg: LlamaConfig

  @nn.compact
  def __call__(self, tokens, positions=None, cache=None, key_mask=None, return_hidden=False):
    return _forward(self.cfg, tokens, positions, cache, key_mask, return_hidden)


def init_cache(cfg: LlamaConfig, batch: int, dtype=None, length: Optional[int] = None):
  """Zero cache: per layer {"k", "v"} of [batch, length (default max_len), KV, Dh]."""
  dtype = DTYPES[cfg.dtype] if dtype is None else dtype
  length = cfg.max_len if length is None else length
  shape = (batch, length, cfg.num_kv_heads, cfg.head_dim)
  return [{"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}
          for _ in range(cfg.num_layers)]


def init_params(cfg: LlamaConfig, key: jax.Array) -> Any:
  return LlamaLM(cfg).init(key, jnp.zeros((1, min(cfg.max_len, 8)), jnp.int32))["params"]


def num_params_analytic(cfg: LlamaConfig) -> int:
  """Parameter count from the config (what the memory table in docs/lm_checkpoints.md uses)."""
  d, h, kv, dh, f = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.d_ff
  attn = d * h * dh * 2 + d * kv * dh * 2 + (2 * dh if cfg.qk_norm else 0)
  block = attn + 3 * d * f + 2 * d
  head = 0 if cfg.tie_embeddings else cfg.vocab_size * d
  return cfg.num_layers * block + cfg.vocab_size * d + d + head


def forward_flops_per_token(cfg: LlamaConfig, context: int) -> float:
  """2 x multiply-adds per token: projections, SwiGLU, head, and attention over `context`."""
  d, h, kv, dh = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
  dense = cfg.num_layers * (2 * d * h * dh + 2 * d * kv * dh + 3 * d * cfg.d_ff) + \
      d * cfg.vocab_size
  attn = cfg.num_layers * 2 * context * h * dh
  return 2.0 * (dense + attn)
