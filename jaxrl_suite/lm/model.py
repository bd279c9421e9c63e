"""A tiny pre-LN decoder-only transformer (flax.linen) with an explicit KV cache.

One module serves training and decoding. `DecoderLM(cfg)(tokens, positions, cache)`:

  tokens    int32 [B, S]
  positions int32 [S] (shared by the batch) or [B, S] (one offset per sequence, for multi-turn
            rollouts whose sequences have different lengths); default arange(S)
  cache     None (full causal pass, training) or a list (one per layer) of
            {"k": [B, H, T_max, Dh], "v": [B, H, T_max, Dh]} (head-major, so a decode step
            reads it without a transpose; `init_cache`); the S new keys/values are written
            at positions[b, 0]..positions[b, 0]+S-1 and every query attends to cache slots <= its
            position (slots above a query's position may hold stale data: they are never read).
  key_mask  optional bool [B, T] (T = S without a cache, T_max with one): False slots are never
            attended (left-padded or gapped prompts). Right padding needs no mask: causality hides it.
  returns   (logits [B, S, V], new cache or None), plus the final hidden states [B, S, D] with
            `return_hidden=True` (what a shared-trunk value head reads, `lm.value`).

A full pass longer than cfg.max_len raises ValueError at trace time (a learned position table has
no row for it; jnp.take would silently return NaN embeddings).

The cache is a plain pytree argument (not a flax mutable collection), so a decode step is a pure
function that `lax.scan` can carry. Block: x += Attn(LN(x)); x += MLP(LN(x)); final LN, untied head.

Other architectures plug in through their config: a config that is not an `LMConfig` must follow
the `Architecture` protocol (`forward`, `init_cache`, `forward_flops_per_token`, plus the fields
name / vocab_size / max_len / tokenizer_version), and `DecoderLM`, `init_cache`, `init_params`
and `forward_flops_per_token` hand it over. So every LM method here (sampling, GRPO, Direct-OPD,
rollouts) runs a Llama / Qwen3 checkpoint (`lm.llama`, `lm.hf_checkpoint`) unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Protocol, runtime_checkable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_suite.envs.text import tokenizer

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
  tokenizer_version: int = 1   # which `tokenizer.Vocab` the ids mean; vocab_size must match it

  def __post_init__(self):
    for f in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_len"):
      if getattr(self, f) <= 0:
        raise ValueError(f"LMConfig.{f} must be positive, got {getattr(self, f)}")
    if self.d_model % self.num_heads:
      raise ValueError(f"LMConfig.d_model={self.d_model} not divisible by num_heads={self.num_heads}")
    vocab = tokenizer.get(self.tokenizer_version)
    if self.vocab_size != vocab.size:
      raise ValueError(f"LMConfig.vocab_size={self.vocab_size} does not match tokenizer "
                       f"v{self.tokenizer_version} (V={vocab.size})")

  @property
  def vocab(self) -> tokenizer.Vocab:
    return tokenizer.get(self.tokenizer_version)


def assert_same_tokenizer(*cfgs: "LMConfig") -> None:
  """Raises ValueError unless every config uses the same tokenizer version (and so the same ids).

  Call it wherever two models meet (teacher/student, policy/reference, policy/critic)."""
  versions = {c.tokenizer_version for c in cfgs}
  if len(versions) > 1:
    raise ValueError("models use different tokenizer versions: " +
                     ", ".join(f"{c.name}: v{c.tokenizer_version}" for c in cfgs))


# The family used by the reproductions (same tokenizer, same T_max). Approximate parameter counts
# are checked in tests: ~29k, ~61k, ~156k, ~455k.
FAMILY: dict[str, LMConfig] = {
    "xs": LMConfig("xs", d_model=32, num_layers=2, num_heads=2, d_ff=128, max_len=24),
    "s": LMConfig("s", d_model=48, num_layers=2, num_heads=3, d_ff=192, max_len=24),
    "m": LMConfig("m", d_model=64, num_layers=3, num_heads=4, d_ff=256, max_len=24),
    "l": LMConfig("l", d_model=96, num_layers=4, num_heads=6, d_ff=384, max_len=24),
}

# Tokenizer v2 (V=96) family for text environments and multi-turn agents: contexts of 128-256
# tokens. Same widths as FAMILY, so per-token costs compare; only the position table and the
# embedding/head rows differ.
_V2 = dict(vocab_size=tokenizer.V2.size, tokenizer_version=2)
FAMILY_V2: dict[str, LMConfig] = {
    "xs": LMConfig("v2_xs", d_model=32, num_layers=2, num_heads=2, d_ff=128, max_len=128, **_V2),
    "s": LMConfig("v2_s", d_model=48, num_layers=2, num_heads=3, d_ff=192, max_len=128, **_V2),
    "m": LMConfig("v2_m", d_model=64, num_layers=3, num_heads=4, d_ff=256, max_len=256, **_V2),
    "l": LMConfig("v2_l", d_model=96, num_layers=4, num_heads=6, d_ff=384, max_len=256, **_V2),
}


@runtime_checkable
class Architecture(Protocol):
  """What a non-GPT config provides so `DecoderLM` and the helpers below can run it.

  `forward` is called inside `DecoderLM.__call__` (a flax compact method) and builds its layers
  in that scope, so `DecoderLM(cfg).init` gives the architecture's own parameter tree.
  """
  name: str
  vocab_size: int
  max_len: int

  def forward(self, tokens, positions=None, cache=None, key_mask=None,
              return_hidden=False): ...

  def init_cache(self, batch: int, dtype=None, length: Optional[int] = None) -> Cache: ...

  def forward_flops_per_token(self, context: int) -> float: ...


def _architecture(cfg) -> Optional[Architecture]:
  """None for our GPT config (the code below), else cfg itself once it passes the protocol."""
  if isinstance(cfg, LMConfig):
    return None
  if not isinstance(cfg, Architecture):
    missing = [m for m in ("forward", "init_cache", "forward_flops_per_token", "name",
                           "vocab_size", "max_len") if not hasattr(cfg, m)]
    raise TypeError(f"{type(cfg).__name__} is neither an LMConfig nor an lm.model.Architecture "
                    f"(missing {missing})")
  return cfg


def _write_cache(arr: jax.Array, new: jax.Array, positions: jax.Array) -> jax.Array:
  """Writes new [B, S, H, Dh] into the cache arr [B, H, T, Dh] at slots p..p+S-1.

  positions [S]: p = positions[0] for every sequence, one contiguous dynamic_update_slice.
  positions [B, S]: p = positions[b, 0] per sequence (multi-turn rollouts), a batched
  dynamic_update_slice (one in-place scatter of B x H x S x Dh values). Like
  dynamic_update_slice, a start past T - S is clamped to T - S.
  """
  new = jnp.swapaxes(new, 1, 2).astype(arr.dtype)  # [B, H, S, Dh]
  if positions.ndim == 1:
    return jax.lax.dynamic_update_slice(arr, new, (0, 0, positions[0], 0))
  write = jax.vmap(lambda c, u, p0: jax.lax.dynamic_update_slice(c, u, (0, p0, 0)))
  return write(arr, new, positions[:, 0])


class Block(nn.Module):
  """Pre-LN transformer block with causal attention over an optional KV cache."""
  cfg: LMConfig

  @nn.compact
  def __call__(self, x, positions, cache, key_mask=None):
    """positions: [S] or [B, S]; key_mask: None or bool [B, T]."""
    cfg = self.cfg
    b, s, d = x.shape
    nh, dh = cfg.num_heads, cfg.d_model // cfg.num_heads
    h = nn.LayerNorm(name="ln_attn")(x)
    qkv = nn.Dense(3 * d, name="qkv")(h).reshape(b, s, 3, nh, dh)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    pos_b = jnp.broadcast_to(positions, (b, s))  # [B, S]
    if cache is None:  # full pass: the block attends to itself, keys [B, T=S, H, Dh]
      keys, values, key_pos, new_cache, kv = k, v, pos_b, None, "bthd"
    else:
      # The cache is head-major [B, H, T, Dh]: (batch, head) lead as the dots' batch dimensions
      # and Dh is minor, so a decode step reads the cache in place (with [B, T, H, Dh] XLA
      # transposes every layer's whole cache on every step: ~3x the decode step's time).
      keys, values = _write_cache(cache["k"], k, positions), _write_cache(cache["v"], v, positions)
      key_pos = jnp.broadcast_to(jnp.arange(keys.shape[2]), (b, keys.shape[2]))
      new_cache, kv = {"k": keys, "v": values}, "bhtd"
    scores = jnp.einsum(f"bshd,{kv}->bhst", q, keys) / math.sqrt(dh)
    allowed = key_pos[:, None, :] <= pos_b[:, :, None]  # [B, S, T]
    if key_mask is not None:
      allowed = allowed & key_mask[:, None, :]
    scores = jnp.where(allowed[:, None], scores, jnp.finfo(scores.dtype).min)
    attn = jax.nn.softmax(scores, axis=-1)
    if cache is None:
      out = jnp.einsum("bhst,bthd->bshd", attn, values)
    else:  # [B, H, S, Dh] out, then transposed (a few rows): "->bshd" made XLA pick a slow dot
      out = jnp.swapaxes(jnp.einsum("bhst,bhtd->bhsd", attn, values), 1, 2)
    out = out.reshape(b, s, d)
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
               cache: Optional[Cache] = None, key_mask: Optional[jax.Array] = None,
               return_hidden: bool = False):
    cfg = self.cfg
    if _architecture(cfg) is not None:  # e.g. lm.llama.LlamaConfig: its layers, this scope
      return cfg.forward(tokens, positions, cache, key_mask, return_hidden)
    if positions is None:
      if tokens.shape[1] > cfg.max_len:
        raise ValueError(f"{cfg.name}: sequence of {tokens.shape[1]} tokens is longer than "
                         f"LMConfig.max_len={cfg.max_len}")
      positions = jnp.arange(tokens.shape[1])
    x = nn.Embed(cfg.vocab_size, cfg.d_model, name="tok_embed")(tokens)
    pe = nn.Embed(cfg.max_len, cfg.d_model, name="pos_embed")(positions)
    x = x + (pe[None] if positions.ndim == 1 else pe)
    new_cache = [] if cache is not None else None
    for i in range(cfg.num_layers):
      x, c = Block(cfg, name=f"block_{i}")(x, positions, None if cache is None else cache[i],
                                           key_mask)
      if cache is not None:
        new_cache.append(c)
    x = nn.LayerNorm(name="ln_final")(x)
    logits = nn.Dense(cfg.vocab_size, name="head")(x)
    if return_hidden:
      return logits, new_cache, x
    return logits, new_cache


def init_cache(cfg: LMConfig, batch: int, dtype=None,
               length: Optional[int] = None) -> Cache:
  """Zero KV cache for `batch` sequences of `length` slots (default cfg.max_len).

  dtype None: float32 for an LMConfig, the architecture's compute dtype otherwise. A cache may
  be longer than max_len (the multi-turn rollout keeps scratch slots for padded observation
  blocks); positions fed to the model must still be < max_len where they matter.
  """
  if _architecture(cfg) is not None:
    return cfg.init_cache(batch, dtype, length)
  dtype = jnp.float32 if dtype is None else dtype
  dh = cfg.d_model // cfg.num_heads
  length = cfg.max_len if length is None else length
  shape = (batch, cfg.num_heads, length, dh)  # head-major: see Block
  return [{"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}
          for _ in range(cfg.num_layers)]


def init_params(cfg: LMConfig, key: jax.Array) -> Any:
  """Random parameters. An `Architecture` traces 8 tokens, not max_len (rotary positions have no
  table, and a real checkpoint's max_len runs to thousands)."""
  n = cfg.max_len if _architecture(cfg) is None else min(cfg.max_len, 8)
  return DecoderLM(cfg).init(key, jnp.zeros((1, n), jnp.int32))["params"]


def num_params(params: Any) -> int:
  return int(sum(x.size for x in jax.tree_util.tree_leaves(params)))


def forward_flops_per_token(cfg: LMConfig, context: int) -> float:
  """Approximate forward FLOPs per token (2 x multiply-adds) with `context` attended tokens.

  Dense layers: 2*(4 d^2 + 2 d d_ff) per layer plus the 2 d V head; attention scores and mixing:
  2 * 2 * context * d per layer. Backward is counted as 2x forward by callers (6N rule). An
  `Architecture` counts its own.
  """
  if _architecture(cfg) is not None:
    return cfg.forward_flops_per_token(context)
  d, L = cfg.d_model, cfg.num_layers
  dense = L * (4 * d * d + 2 * d * cfg.d_ff) + d * cfg.vocab_size
  attn = L * 2 * context * d
  return 2.0 * (dense + attn)


def token_log_probs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
  """log softmax(logits)[..., tokens]: logits [..., V], tokens [...] -> [...]."""
  logp = jax.nn.log_softmax(logits, axis=-1)
  return jnp.take_along_axis(logp, tokens[..., None], axis=-1)[..., 0]
