"""Hugging Face-format checkpoint folders <-> `llama.LlamaConfig` and its parameters.

  cfg = read_config(folder, max_len=512)          # config.json -> LlamaConfig (or a ValueError
                                                  # naming the unsupported field)
  params = load_params(folder, cfg)               # *.safetensors (single file or sharded index)
  cfg, params = load(folder)                      # both
  save(folder, cfg, params, shards=2)             # write config.json + safetensors (+ index)

Nothing is downloaded: `folder` is a local directory. Tensors are read with `safetensors.numpy`
(bf16 arrives as ml_dtypes.bfloat16) and cast to cfg.dtype. Tensor names follow the HF layout
(`model.layers.{i}.self_attn.q_proj.weight`, ...); a Linear weight [out, in] becomes a flax
kernel [in, out]. A missing tensor or a shape mismatch is a ValueError naming the tensor and the
folder. Supported: LlamaForCausalLM (model_type "llama", no rope scaling, no biases) and
Qwen3ForCausalLM (model_type "qwen3", per-head q/k RMSNorm, no sliding window).
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import numpy as np

from jaxrl_suite.lm import llama

ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "qwen3"}


def _config_json(folder: str) -> dict:
  path = os.path.join(folder, "config.json")
  if not os.path.isfile(path):
    raise ValueError(f"{folder}: no config.json (point at a Hugging Face checkpoint folder)")
  with open(path) as f:
    return json.load(f)


def read_config(folder: str, max_len: Optional[int] = None, dtype: str = "float32",
                tokenizer_version: Optional[int] = None, name: Optional[str] = None
                ) -> llama.LlamaConfig:
  """LlamaConfig from `folder`/config.json; max_len defaults to max_position_embeddings."""
  c = _config_json(folder)
  where = os.path.join(folder, "config.json")
  archs = c.get("architectures") or []
  mtype = c.get("model_type")
  if mtype not in ARCHITECTURES.values() or any(a not in ARCHITECTURES for a in archs):
    raise ValueError(f"{where}: unsupported architecture (model_type={mtype!r}, architectures="
                     f"{archs}); supported: {sorted(ARCHITECTURES)}")

  def unsupported(field, value, ok):
    raise ValueError(f"{where}: field {field}={value!r} is not supported (need {ok})")

  if c.get("hidden_act", "silu") != "silu":
    unsupported("hidden_act", c["hidden_act"], "'silu'")
  rs = c.get("rope_scaling")
  if rs not in (None, {}) and (rs.get("rope_type", rs.get("type")) != "default"):
    unsupported("rope_scaling", rs, "null")
  for f in ("attention_bias", "mlp_bias", "use_sliding_window"):
    if c.get(f, False):
      unsupported(f, c[f], "false")
  for f in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "vocab_size"):
    if f not in c:
      raise ValueError(f"{where}: missing field {f}")
  heads = int(c["num_attention_heads"])
  return llama.LlamaConfig(
      name=name or os.path.basename(os.path.normpath(folder)),
      vocab_size=int(c["vocab_size"]), d_model=int(c["hidden_size"]),
      num_layers=int(c["num_hidden_layers"]), num_heads=heads,
      num_kv_heads=int(c.get("num_key_value_heads") or heads),
      head_dim=int(c.get("head_dim") or int(c["hidden_size"]) // heads),
      d_ff=int(c["intermediate_size"]),
      max_len=int(max_len or c.get("max_position_embeddings", 2048)),
      rope_theta=float(c.get("rope_theta", 10000.0)),
      rms_eps=float(c.get("rms_norm_eps", 1e-6)),
      tie_embeddings=bool(c.get("tie_word_embeddings", False)),
      qk_norm=mtype == "qwen3", dtype=dtype, tokenizer_version=tokenizer_version)


def expected_tensors(cfg: llama.LlamaConfig) -> dict[str, tuple[tuple[int, ...], tuple]]:
  """HF tensor name -> (HF shape, (flax path..., transpose?)) for every tensor the model reads."""
  d, h, kv, dh, f, v = (cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.d_ff,
                        cfg.vocab_size)
  out = {"model.embed_tokens.weight": ((v, d), ("embed_tokens", "embedding", False)),
         "model.norm.weight": ((d,), ("norm", "weight", False))}
  if not cfg.tie_embeddings:
    out["lm_head.weight"] = ((v, d), ("lm_head", "kernel", True))
  for i in range(cfg.num_layers):
    p, L = f"model.layers.{i}.", f"layers_{i}"
    lin = {"self_attn.q_proj": (h * dh, d), "self_attn.k_proj": (kv * dh, d),
           "self_attn.v_proj": (kv * dh, d), "self_attn.o_proj": (d, h * dh),
           "mlp.gate_proj": (f, d), "mlp.up_proj": (f, d), "mlp.down_proj": (d, f)}
    for n, shape in lin.items():
      out[p + n + ".weight"] = (shape, (L, *n.split("."), "kernel", True))
    for n in ("input_layernorm", "post_attention_layernorm"):
      out[p + n + ".weight"] = ((d,), (L, n, "weight", False))
    if cfg.qk_norm:
      for n in ("q_norm", "k_norm"):
        out[p + f"self_attn.{n}.weight"] = ((dh,), (L, "self_attn", n, "weight", False))
  return out


def _shard_files(folder: str) -> dict[str, str]:
  """tensor name -> safetensors file, from the sharded index or every *.safetensors file."""
  index = os.path.join(folder, "model.safetensors.index.json")
  if os.path.isfile(index):
    with open(index) as fh:
      wm = json.load(fh).get("weight_map")
    if not isinstance(wm, dict):
      raise ValueError(f"{index}: no 'weight_map' object")
    return {k: os.path.join(folder, v) for k, v in wm.items()}
  files = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
  if not files:
    raise ValueError(f"{folder}: no *.safetensors file and no model.safetensors.index.json")
  from safetensors import safe_open
  names = {}
  for n in files:
    with safe_open(os.path.join(folder, n), framework="numpy") as fh:
      names.update({k: os.path.join(folder, n) for k in fh.keys()})
  return names


def load_params(folder: str, cfg: llama.LlamaConfig) -> Any:
  """Parameters of `llama.LlamaLM(cfg)` read from `folder` (numpy arrays, cast to cfg.dtype)."""
  import jax.numpy as jnp
  from safetensors import safe_open
  where = _shard_files(folder)
  dt = llama.DTYPES[cfg.dtype]
  params: dict = {}
  handles: dict = {}
  try:
    for name, (shape, path) in expected_tensors(cfg).items():
      if name not in where:
        raise ValueError(f"{folder}: tensor {name} is missing (expected shape {shape})")
      file = where[name]
      if not os.path.isfile(file):
        raise ValueError(f"{folder}: tensor {name} is mapped to {file}, which does not exist")
      if file not in handles:
        handles[file] = safe_open(file, framework="numpy").__enter__()
      try:
        arr = handles[file].get_tensor(name)
      except Exception as e:  # the index names a tensor its shard lacks
        raise ValueError(f"{folder}: tensor {name} not readable from {file}: {e}") from e
      if tuple(arr.shape) != shape:
        raise ValueError(f"{folder}: tensor {name} has shape {tuple(arr.shape)}, the config "
                         f"needs {shape}")
      arr = arr.T if path[-1] else arr
      node = params
      for k in path[:-2]:
        node = node.setdefault(k, {})
      node[path[-2]] = jnp.asarray(np.ascontiguousarray(arr), dt)
  finally:
    for h in handles.values():
      h.__exit__(None, None, None)
  return params


def load(folder: str, max_len: Optional[int] = None, dtype: str = "float32",
         tokenizer_version: Optional[int] = None) -> tuple[llama.LlamaConfig, Any]:
  cfg = read_config(folder, max_len, dtype, tokenizer_version)
  return cfg, load_params(folder, cfg)


def to_hf_tensors(cfg: llama.LlamaConfig, params: Any) -> dict[str, np.ndarray]:
  """The inverse mapping: flax parameters -> {HF tensor name: float32 numpy array}."""
  out = {}
  for name, (_, path) in expected_tensors(cfg).items():
    node = params
    for k in path[:-1]:
      node = node[k]
    arr = np.asarray(node, np.float32)
    out[name] = np.ascontiguousarray(arr.T if path[-1] else arr)
  return out


def config_dict(cfg: llama.LlamaConfig) -> dict:
  """config.json contents for `cfg` (the fields `read_config` reads)."""
  arch = "Qwen3ForCausalLM" if cfg.qk_norm else "LlamaForCausalLM"
  return {"architectures": [arch], "model_type": "qwen3" if cfg.qk_norm else "llama",
          "vocab_size": cfg.vocab_size, "hidden_size": cfg.d_model,
          "num_hidden_layers": cfg.num_layers, "num_attention_heads": cfg.num_heads,
          "num_key_value_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim,
          "intermediate_size": cfg.d_ff, "max_position_embeddings": cfg.max_len,
          "rope_theta": cfg.rope_theta, "rms_norm_eps": cfg.rms_eps,
          "tie_word_embeddings": cfg.tie_embeddings, "hidden_act": "silu",
          "attention_bias": False, "rope_scaling": None, "torch_dtype": "float32"}


def save(folder: str, cfg: llama.LlamaConfig, params: Any, shards: int = 1,
         extra_files: Optional[dict[str, str]] = None) -> None:
  """Writes config.json and float32 safetensors (sharded with an index if shards > 1).

  extra_files: {file name: source path} copied alongside (e.g. the tokenizer.json)."""
  import shutil
  from safetensors.numpy import save_file
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(config_dict(cfg), f, indent=1)
  tensors = to_hf_tensors(cfg, params)
  names = list(tensors)
  if shards <= 1:
    save_file(tensors, os.path.join(folder, "model.safetensors"))
  else:
    weight_map = {}
    for s in range(shards):
      fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
      part = {n: tensors[n] for n in names[s::shards]}
      save_file(part, os.path.join(folder, fname))
      weight_map.update({n: fname for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
      json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
  for n, src in (extra_files or {}).items():
    shutil.copyfile(src, os.path.join(folder, n))
