"""Llama / Qwen3 decoder loaded from tiny random HF checkpoints vs a float64 numpy reference.

The checkpoints are written here with `safetensors.numpy.save_file` + config.json + a
`tokenizers` tokenizer.json, in the HF tensor layout; the reference reads those HF-named arrays
directly (Linear weights [out, in]), so it shares no code with the model or the loader.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from jaxrl_suite.lm import hf_checkpoint
from jaxrl_suite.lm import hf_tokenizer
from jaxrl_suite.lm import llama

TINY = {
    # Qwen3-style: q/k norms, explicit head_dim != hidden/heads, tied embeddings, GQA 4:2
    "qwen3": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=32,
                  hidden_size=24, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, intermediate_size=40,
                  max_position_embeddings=64, rope_theta=1000000.0, rms_norm_eps=1e-6,
                  tie_word_embeddings=True, hidden_act="silu", attention_bias=False),
    # Llama-style: no q/k norms, head_dim = hidden/heads, untied head, GQA 4:1
    "llama": dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=32,
                  hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=1, intermediate_size=48, max_position_embeddings=64,
                  rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                  hidden_act="silu", rope_scaling=None),
}


def hf_tensors(c: dict, seed: int) -> dict:
  """Random HF-named float32 tensors for config dict c (norm weights away from 1)."""
  rng = np.random.default_rng(seed)
  d, h = c["hidden_size"], c["num_attention_heads"]
  kv, dh = c["num_key_value_heads"], c.get("head_dim", d // h)
  f, v = c["intermediate_size"], c["vocab_size"]
  w = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
  g = lambda n: (1.0 + 0.3 * rng.standard_normal(n)).astype(np.float32)
  t = {"model.embed_tokens.weight": w(v, d), "model.norm.weight": g(d)}
  if not c["tie_word_embeddings"]:
    t["lm_head.weight"] = w(v, d)
  for i in range(c["num_hidden_layers"]):
    p = f"model.layers.{i}."
    t.update({p + "self_attn.q_proj.weight": w(h * dh, d), p + "self_attn.k_proj.weight":
              w(kv * dh, d), p + "self_attn.v_proj.weight": w(kv * dh, d),
              p + "self_attn.o_proj.weight": w(d, h * dh), p + "mlp.gate_proj.weight": w(f, d),
              p + "mlp.up_proj.weight": w(f, d), p + "mlp.down_proj.weight": w(d, f),
              p + "input_layernorm.weight": g(d), p + "post_attention_layernorm.weight": g(d)})
    if c["model_type"] == "qwen3":
      t[p + "self_attn.q_norm.weight"] = g(dh)
      t[p + "self_attn.k_norm.weight"] = g(dh)
  return t


def write_tiny(folder, kind: str, seed: int = 0, shards: int = 1, **overrides) -> dict:
  """Writes a tiny checkpoint folder; returns its tensors (float32, HF names)."""
  os.makedirs(folder, exist_ok=True)
  c = {**TINY[kind], **overrides}
  with open(os.path.join(folder, "config.json"), "w") as fh:
    json.dump(c, fh)
  t = hf_tensors(c, seed)
  if shards == 1:
    save_file(t, os.path.join(folder, "model.safetensors"))
  else:
    names, wm = sorted(t), {}
    for s in range(shards):
      fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
      save_file({n: t[n] for n in names[s::shards]}, os.path.join(folder, fn))
      wm.update({n: fn for n in names[s::shards]})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as fh:
      json.dump({"weight_map": wm}, fh)
  hf_tokenizer.write_vocab_tokenizer(os.path.join(folder, "tokenizer.json"), 1)
  return t


# ---- float64 numpy reference ---------------------------------------------------------------
def ref_logits(c: dict, t: dict, tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
  """Logits [B, S, V] of tokens [B, S] at absolute positions [B, S], causal over positions."""
  t = {k: v.astype(np.float64) for k, v in t.items()}
  d, h = c["hidden_size"], c["num_attention_heads"]
  kv, dh = c["num_key_value_heads"], c.get("head_dim", d // h)
  eps, theta = c["rms_norm_eps"], c["rope_theta"]
  rms = lambda x, w: w * x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)

  def rot(x, pos):  # x [B, S, N, Dh]; pairs (i, i + Dh/2)
    inv = theta ** (-np.arange(0, dh, 2) / dh)
    a = pos[..., None].astype(np.float64) * inv
    cos, sin = np.cos(a)[:, :, None], np.sin(a)[:, :, None]
    x1, x2 = x[..., :dh // 2], x[..., dh // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

  b, s = tokens.shape
  x = t["model.embed_tokens.weight"][tokens]
  for i in range(c["num_hidden_layers"]):
    p = f"model.layers.{i}."
    y = rms(x, t[p + "input_layernorm.weight"])
    q = (y @ t[p + "self_attn.q_proj.weight"].T).reshape(b, s, h, dh)
    k = (y @ t[p + "self_attn.k_proj.weight"].T).reshape(b, s, kv, dh)
    v = (y @ t[p + "self_attn.v_proj.weight"].T).reshape(b, s, kv, dh)
    if c["model_type"] == "qwen3":
      q, k = rms(q, t[p + "self_attn.q_norm.weight"]), rms(k, t[p + "self_attn.k_norm.weight"])
    q, k = rot(q, positions), rot(k, positions)
    out = np.zeros((b, s, h, dh))
    for head in range(h):
      kh = head // (h // kv)
      sc = np.einsum("bsd,btd->bst", q[:, :, head], k[:, :, kh]) / np.sqrt(dh)
      sc = np.where(positions[:, None, :] <= positions[:, :, None], sc, -np.inf)
      a = np.exp(sc - sc.max(-1, keepdims=True))
      a /= a.sum(-1, keepdims=True)
      out[:, :, head] = np.einsum("bst,btd->bsd", a, v[:, :, kh])
    x = x + out.reshape(b, s, h * dh) @ t[p + "self_attn.o_proj.weight"].T
    y = rms(x, t[p + "post_attention_layernorm.weight"])
    gate, up = y @ t[p + "mlp.gate_proj.weight"].T, y @ t[p + "mlp.up_proj.weight"].T
    x = x + (gate / (1 + np.exp(-gate)) * up) @ t[p + "mlp.down_proj.weight"].T
  x = rms(x, t["model.norm.weight"])
  head = t["model.embed_tokens.weight"] if c["tie_word_embeddings"] else t["lm_head.weight"]
  return x @ head.T


def _tol(ref):
  return dict(atol=2e-4 * max(1.0, np.abs(ref).max()), rtol=2e-4)


@pytest.mark.parametrize("kind", ["qwen3", "llama"])
def test_full_pass_matches_reference_over_offsets(tmp_path, kind):
  t = write_tiny(tmp_path, kind)
  cfg, params = hf_checkpoint.load(str(tmp_path))
  assert cfg.qk_norm == (kind == "qwen3") and cfg.tokenizer_version is None
  rng = np.random.default_rng(1)
  tokens = rng.integers(0, 32, (3, 7))
  offsets = np.array([0, 5, 29])                     # per-sequence start positions
  pos = offsets[:, None] + np.arange(7)
  ref = ref_logits(TINY[kind], t, tokens, pos)
  model = llama.LlamaLM(cfg)
  logits, cache = model.apply({"params": params}, jnp.asarray(tokens), jnp.asarray(pos))
  assert cache is None
  np.testing.assert_allclose(np.asarray(logits), ref, **_tol(ref))
  # shared positions [S] = arange(S) is the default
  logits0, _ = model.apply({"params": params}, jnp.asarray(tokens))
  ref0 = ref_logits(TINY[kind], t, tokens, np.broadcast_to(np.arange(7), (3, 7)))
  np.testing.assert_allclose(np.asarray(logits0), ref0, **_tol(ref0))


@pytest.mark.parametrize("kind", ["qwen3", "llama"])
def test_kv_cache_prefill_and_decode_match_reference(tmp_path, kind):
  """Prefill P tokens at per-sequence offsets, then decode one token at a time with the cache."""
  t = write_tiny(tmp_path, kind, seed=3)
  cfg, params = hf_checkpoint.load(str(tmp_path), max_len=48)
  model = llama.LlamaLM(cfg)
  rng = np.random.default_rng(2)
  b, p, n = 3, 4, 5
  tokens = rng.integers(0, 32, (b, p + n))
  offsets = np.array([0, 3, 11])
  pos = offsets[:, None] + np.arange(p + n)
  # slots before each offset hold garbage keys that the key mask must hide
  cache = [{"k": jnp.full(x["k"].shape, 7.0), "v": jnp.full(x["v"].shape, -3.0)}
           for x in llama.init_cache(cfg, b, length=32)]
  key_mask = jnp.asarray(np.arange(32)[None] >= offsets[:, None])
  ref = ref_logits(TINY[kind], t, tokens, pos)
  logits, cache = model.apply({"params": params}, jnp.asarray(tokens[:, :p]),
                              jnp.asarray(pos[:, :p]), cache, key_mask)
  np.testing.assert_allclose(np.asarray(logits), ref[:, :p], **_tol(ref))
  step = jax.jit(lambda c, tok, ps: model.apply({"params": params}, tok, ps, c, key_mask))
  for j in range(p, p + n):
    lj, cache = step(cache, jnp.asarray(tokens[:, j:j + 1]), jnp.asarray(pos[:, j:j + 1]))
    np.testing.assert_allclose(np.asarray(lj[:, 0]), ref[:, j], **_tol(ref))
  assert cache[0]["k"].shape == (b, 32, cfg.num_kv_heads, cfg.head_dim)


def test_sharded_checkpoint_loads_the_same_params(tmp_path):
  write_tiny(tmp_path / "one", "qwen3", seed=5)
  write_tiny(tmp_path / "three", "qwen3", seed=5, shards=3)
  _, a = hf_checkpoint.load(str(tmp_path / "one"))
  _, b = hf_checkpoint.load(str(tmp_path / "three"))
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def test_save_round_trip_and_param_count(tmp_path):
  write_tiny(tmp_path / "src", "llama", seed=6)
  cfg, params = hf_checkpoint.load(str(tmp_path / "src"))
  hf_checkpoint.save(str(tmp_path / "dst"), cfg, params, shards=2)
  cfg2, params2 = hf_checkpoint.load(str(tmp_path / "dst"))
  assert dataclasses_equal(cfg, cfg2)
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)),
               params, params2)
  n = sum(x.size for x in jax.tree_util.tree_leaves(params))
  assert n == llama.num_params_analytic(cfg)
  init = llama.init_params(cfg, jax.random.PRNGKey(0))
  assert jax.tree.structure(init) == jax.tree.structure(params)


def dataclasses_equal(a, b):
  import dataclasses
  return {k: v for k, v in dataclasses.asdict(a).items() if k != "name"} == \
      {k: v for k, v in dataclasses.asdict(b).items() if k != "name"}


def test_bfloat16_checkpoint_loads_and_runs(tmp_path):
  import ml_dtypes
  t = write_tiny(tmp_path, "qwen3", seed=7)
  save_file({k: v.astype(ml_dtypes.bfloat16) for k, v in t.items()},
            os.path.join(tmp_path, "model.safetensors"))
  cfg, params = hf_checkpoint.load(str(tmp_path), dtype="bfloat16")
  assert params["norm"]["weight"].dtype == jnp.bfloat16
  tokens = np.arange(6)[None] % 32
  logits, _ = llama.LlamaLM(cfg).apply({"params": params}, jnp.asarray(tokens))
  t16 = {k: v.astype(ml_dtypes.bfloat16).astype(np.float32) for k, v in t.items()}
  ref = ref_logits(TINY["qwen3"], t16, tokens, np.arange(6)[None])
  assert logits.dtype == jnp.float32
  # bf16 activations: ~3 significant digits
  np.testing.assert_allclose(np.asarray(logits), ref, atol=0.05 * np.abs(ref).max())
