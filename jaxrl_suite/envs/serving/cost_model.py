"""Per-GPU-type iteration cost model for LLM serving, as data.

One engine iteration (a batch of prefill chunks and decode tokens on one GPU or TP group) takes

    t_iter = t_ovh + max(t_w, alpha * N_tok) + beta * sum_decode ctx_j + gamma * sum_prefill A_i

where `N_tok` = prefill tokens + decode sequences in the step, `t_w` the weight-streaming floor
(memory-bound small batches), `alpha` the per-token GEMM cost once compute-bound, `beta` the
per-context-token cost of reading KV in decode attention, and `gamma` the cost of one
(query, key) pair of prefill attention. A_i counts the pairs of prefill chunk i with causal
masking: a chunk of c tokens after p tokens already in the KV cache (earlier chunks, or the prefix
cache) has token j = 1..c attend to the p earlier tokens and the j tokens up to itself, so

    A(p, c) = sum_{j=1..c} (p + j) = c p + c (c + 1) / 2 = c (p + (c + 1) / 2)

(`prefill_pairs`; an unchunked prompt of p tokens: p (p + 1) / 2, about half of the p^2 of
unmasked attention). This is the two-regime model of the design doc (docs/serving.md), the same
shape as microsoft/vidur's predictors.

A GPUSpec is one GPU type serving one model. The Llama-2-7B specs are the measured base;
`for_model(spec, model)` derives the same GPU serving another architecture (`ModelProfile`) by
scaling each constant with what drives it (weight bytes, FLOPs per token, KV bytes per token,
attention FLOPs per pair, memory left for KV). `LONG_CONTEXT` holds Llama-3.1-8B (128k context)
on each 7B GPU type: the model for Mooncake, whose prompts reach 123k tokens (`TRACE_MODELS`).

KV capacity is counted in 16-token blocks (vLLM's paged-attention block size).

Sources of each constant are in the comments; "derived" marks numbers computed from a source
rather than read off it (see the design doc's "prototype estimate" labels).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

BLOCK_TOKENS = 16  # vLLM paged KV block size (docs.vllm.ai; vidur memory_planner).


@dataclasses.dataclass(frozen=True)
class GPUSpec:
  """Cost constants of one serving replica (one GPU type + model + TP degree).

  Times are seconds, per token or per token^2.
  """
  name: str
  t_ovh: float     # s per iteration (scheduler/launch/TP-comm overhead)
  t_w: float       # s, weight-streaming floor of one iteration
  alpha: float     # s per batched token (GEMM, compute-bound regime)
  beta: float      # s per decode context token (KV read, memory-bound)
  gamma: float     # s per prefill-chunk token^2 (attention quadratic term)
  kv_tokens: int   # KV capacity in tokens after weights, at gpu_memory_utilization 0.9
  gpu: str = ""    # the GPU type (a GPU_TYPES name) when it differs from `name` (for_model)
  max_model_len: int = 4096   # the model's context: prompt + output tokens

  @property
  def kv_blocks(self) -> int:
    return self.kv_tokens // BLOCK_TOKENS

  @property
  def gpu_type(self) -> str:
    """The GPU type (a base spec name): engine defaults and the observation type code."""
    return self.gpu or self.name


# --- Llama-2-7B, fp16, TP1 -------------------------------------------------------------------
# t_w and alpha: vidur measured MLP/non-attention profiles (data/profiling/compute/*/mlp.csv),
#   summed over 32 layers: A100 1-token 9.3 ms, alpha(1k-4k) 62 us/tok; H100 5.6 ms, 20 us/tok
#   (design doc §2.2 table).
# beta: KV bytes/token 0.5 MiB (2*32 layers*32 heads*128 dim*2 B, vidur memory_planner.py) divided
#   by HBM bandwidth: A100 2.039 TB/s -> 0.26 us, H100 3.35 TB/s -> 0.16 us, L4 0.30 TB/s -> 1.75 us
#   (design doc §2.2, derived).
# gamma: prefill attention FLOPs 4*L*d*c^2 = 4*32*4096*c^2 = 5.24e5 c^2 at ~50% of dense fp16 peak
#   (A100 312 TF, H100 1000 TF (vidur device configs), L4 121 TF) -> 3.4e-9, 1.05e-9, 8.7e-9 s/tok^2
#   (derived; the design doc gives the form, not the number).
# t_ovh: vidur skips CPU overhead by default; we keep 0.5 ms of scheduler/launch cost (assumption).
# kv_tokens: (0.9*80 GiB - 13.5 GB)/0.5 MiB ~ 115k tokens on 80 GB parts; L4 ~18k (design doc §2.3).
# L4 t_w = 13.5 GB / 0.30 TB/s ~ 45 ms, alpha ~ 160 us/tok (design doc §2.2, derived estimate).
A100_7B = GPUSpec("A100-7B", t_ovh=0.5e-3, t_w=9.3e-3, alpha=62e-6, beta=0.26e-6, gamma=3.4e-9,
                  kv_tokens=115_000)
H100_7B = GPUSpec("H100-7B", t_ovh=0.5e-3, t_w=5.6e-3, alpha=20e-6, beta=0.16e-6, gamma=1.05e-9,
                  kv_tokens=115_000)
L4_7B = GPUSpec("L4-7B", t_ovh=0.5e-3, t_w=45e-3, alpha=160e-6, beta=1.75e-6, gamma=8.7e-9,
                kv_tokens=18_000)
# L40S (NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s, 362 TF dense FP16/BF16 tensor), derived
#   from its public specs exactly as L4: t_w = 13.5 GB / 0.864 TB/s ~ 15.6 ms; alpha = 13.5 GFLOP
#   per token at the ~70% of peak that A100/L4's alpha imply (62 and 160 us/tok) -> 53 us/tok;
#   beta = 0.5 MiB / 0.864 TB/s ~ 0.61 us; gamma = 5.24e5 / (0.5 * 362 TF) ~ 2.9e-9 s/tok^2;
#   kv_tokens = (0.9 * 48 GiB - 13.5 GB) / 0.5 MiB ~ 62.7k. No profile behind it: the routing
#   study's held-out GPU type (a type no policy trained on), not a calibrated engine.
L40S_7B = GPUSpec("L40S-7B", t_ovh=0.5e-3, t_w=15.6e-3, alpha=53e-6, beta=0.61e-6, gamma=2.9e-9,
                  kv_tokens=62_700)
# --- Llama-2-70B, fp16, TP4 on A100 ----------------------------------------------------------
# t_w 24.9 ms, alpha 149 us/tok (vidur profiles summed over 80 layers, design doc §2.2).
# beta: 320 KiB/token (GQA, vidur memory_planner) / (4 * 2.039 TB/s) ~ 0.04 us (derived).
# gamma: 4*80*8192*c^2 FLOPs at 50% of 4*312 TF -> 4.2e-9 s/tok^2 (derived).
# t_ovh: 2 all-reduces/layer * 80 layers * 0.02 ms NCCL launch (vidur config) = 3.2 ms + 0.5 ms.
# kv_tokens ~ 500k on TP4 A100 (design doc §2.3).
A100x4_70B = GPUSpec("A100x4-70B", t_ovh=3.7e-3, t_w=24.9e-3, alpha=149e-6, beta=0.04e-6,
                     gamma=4.2e-9, kv_tokens=500_000)

BASE_TYPES = (A100_7B, H100_7B, L4_7B, A100x4_70B, L40S_7B)
# Order used for the one-hot GPU-type feature in observations (GPU types only: a model variant
# has its GPU's index).
TYPE_INDEX = {g.name: i for i, g in enumerate(BASE_TYPES)}


@dataclasses.dataclass(frozen=True)
class ModelProfile:
  """A decoder-only transformer's serving-relevant sizes (fp16 weights and KV)."""
  name: str
  n_params: float      # parameters
  n_layers: int
  n_heads: int         # query heads
  n_kv_heads: int      # key/value heads (GQA)
  head_dim: int
  max_context: int     # tokens

  @property
  def weight_bytes(self) -> float:
    return 2.0 * self.n_params

  @property
  def kv_bytes_per_token(self) -> float:
    """K and V of every layer: 2 * layers * kv_heads * head_dim * 2 bytes."""
    return 2.0 * self.n_layers * self.n_kv_heads * self.head_dim * 2

  @property
  def attn_flops_per_pair(self) -> float:
    """QK^T and AV, 2 FLOPs per multiply-add each: 4 * layers * heads * head_dim per pair."""
    return 4.0 * self.n_layers * self.n_heads * self.head_dim


# Llama-2-7B (Touvron et al. 2023, arXiv:2307.09288; HF config): 6.74e9 params, 32 layers,
# 32 heads (MHA), head_dim 128, 4096-token context.
LLAMA2_7B = ModelProfile("Llama-2-7B", 6.74e9, 32, 32, 32, 128, 4096)
# Llama-3.1-8B (Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3; HF config
# meta-llama/Llama-3.1-8B): 8.03e9 params, 32 layers, d_model 4096 = 32 heads x 128, 8 KV heads
# (GQA), 131,072-token context. KV per token 2*32*8*128*2 B = 128 KiB (a quarter of Llama-2-7B);
# attention FLOPs per pair equal to Llama-2-7B's (same query heads and width).
LLAMA31_8B = ModelProfile("Llama-3.1-8B", 8.03e9, 32, 32, 8, 128, 131_072)
MODELS = {m.name: m for m in (LLAMA2_7B, LLAMA31_8B)}


def for_model(spec: GPUSpec, model: ModelProfile, name: str | None = None) -> GPUSpec:
  """The GPU of `spec` (a Llama-2-7B spec) serving `model`, derived by scaling:
  t_w with weight bytes (weight streaming), alpha with parameters (GEMM FLOPs per token), beta
  with KV bytes per token (decode attention reads the KV cache), gamma with attention FLOPs per
  pair; KV capacity = the base's KV memory, minus the extra weight bytes, over the model's KV
  bytes per token. t_ovh is kept (scheduler/launch cost). Derived, not measured."""
  if spec.gpu or spec.max_model_len != LLAMA2_7B.max_context or not spec.name.endswith("-7B"):
    raise ValueError(f"for_model derives from a Llama-2-7B spec, got {spec.name!r}")
  b = LLAMA2_7B
  kv_mem = spec.kv_tokens * b.kv_bytes_per_token - (model.weight_bytes - b.weight_bytes)
  if kv_mem <= model.kv_bytes_per_token * BLOCK_TOKENS:
    raise ValueError(f"{model.name} leaves no KV memory on {spec.name}")
  return GPUSpec(name or f"{spec.name[:-3]}-{model.name}", t_ovh=spec.t_ovh,
                 t_w=spec.t_w * model.weight_bytes / b.weight_bytes,
                 alpha=spec.alpha * model.n_params / b.n_params,
                 beta=spec.beta * model.kv_bytes_per_token / b.kv_bytes_per_token,
                 gamma=spec.gamma * model.attn_flops_per_pair / b.attn_flops_per_pair,
                 kv_tokens=int(kv_mem // model.kv_bytes_per_token), gpu=spec.name,
                 max_model_len=model.max_context)


# Llama-3.1-8B on each 7B GPU type (~440k KV tokens on 80 GB parts, ~52k on L4, so one L4 holds
# less than a 128k context: `max_model_len_of` caps it at the KV capacity, as vLLM does).
LONG_CONTEXT = {s.name: for_model(s, LLAMA31_8B, f"{s.name[:-3]}-8B")
                for s in (A100_7B, H100_7B, L4_7B, L40S_7B)}
GPU_TYPES = {g.name: g for g in BASE_TYPES + tuple(LONG_CONTEXT.values())}
# The model each shipped trace is served with: one whose context holds the trace (Azure 2023:
# prompts mostly < 4k, ~1% of prompt tokens clipped; Mooncake: prompts up to 123k tokens).
TRACE_MODELS = {"azure_conv": LLAMA2_7B.name, "azure_code": LLAMA2_7B.name,
                "mooncake_conv": LLAMA31_8B.name}


def spec_for(gpu: str, model: str = LLAMA2_7B.name) -> GPUSpec:
  """The spec of GPU type `gpu` (a Llama-2-7B spec name, e.g. "A100-7B") serving `model`."""
  if model not in MODELS:
    raise ValueError(f"unknown model {model!r}; known: {sorted(MODELS)}")
  if gpu not in GPU_TYPES or GPU_TYPES[gpu].gpu:
    raise ValueError(f"unknown GPU type {gpu!r}; known: {[g.name for g in BASE_TYPES]}")
  if model == LLAMA2_7B.name:
    return GPU_TYPES[gpu]
  if model == LLAMA31_8B.name and gpu in LONG_CONTEXT:
    return LONG_CONTEXT[gpu]
  return for_model(GPU_TYPES[gpu], MODELS[model])


def max_model_len_of(spec: GPUSpec) -> int:
  """Context the engine accepts: the model's, at most what the KV cache holds (vLLM refuses a
  max_model_len whose KV does not fit)."""
  return int(min(spec.max_model_len, spec.kv_blocks * BLOCK_TOKENS))


@dataclasses.dataclass(frozen=True)
class EngineSettings:
  """vLLM engine limits of one replica: running requests and tokens per iteration (the chunked-
  prefill budget, so also the largest prefill chunk)."""
  max_num_seqs: int
  max_num_batched_tokens: int


# vLLM defaults (vllm engine/arg_utils.py): max_num_seqs 256 and max_num_batched_tokens 2048
# (online serving) on A100 and on GPUs under 70 GiB (L4); 1024 and 8192 on >= 70 GiB non-A100
# GPUs (H100).
VLLM_DEFAULTS = {
    "A100-7B": EngineSettings(256, 2048),
    "H100-7B": EngineSettings(1024, 8192),
    "L4-7B": EngineSettings(256, 2048),
    "A100x4-70B": EngineSettings(256, 2048),
    "L40S-7B": EngineSettings(256, 2048),
}
CHUNK_STEP = 256   # token budgets are searched in multiples of this


def prefill_pairs(p, c):
  """A(p, c) = c p + c (c + 1) / 2: (query, key) pairs of a causal prefill chunk of c tokens
  after p cached tokens (module docstring). Integer-valued; exact in float64."""
  return c * p + c * (c + 1) / 2


def worst_iteration_time(spec: GPUSpec, n_tok: int) -> float:
  """Longest iteration with a token budget n_tok: one prefill chunk of n_tok tokens attending to
  itself causally (gamma n_tok (n_tok + 1) / 2) while decodes read a full KV cache
  (beta * kv_tokens)."""
  return float(iteration_time(np, spec.t_ovh, spec.t_w, spec.alpha, spec.beta, spec.gamma,
                              float(n_tok), float(spec.kv_tokens),
                              float(prefill_pairs(0, n_tok))))


def engine_settings(spec: GPUSpec, slo_tpot: float, worst=None) -> EngineSettings:
  """vLLM's defaults for the GPU type, with the token budget cut to the largest multiple of
  CHUNK_STEP whose worst iteration fits the TPOT budget: every iteration emits one token to each
  decoding request, so a longer one breaks the TPOT SLO of all of them. E.g. L4 at 0.2 s: 2048
  tokens take ~0.39 s, the budget becomes 768 (~0.16 s).

  worst(spec, n_tok, max_num_seqs) -> seconds: the cost model's worst iteration (default: the
  analytic `worst_iteration_time`; `profiled_cost.worst_iteration_time` for the profiled one)."""
  d = VLLM_DEFAULTS[spec.gpu_type]
  worst = worst or (lambda s, n, _: worst_iteration_time(s, n))
  t = lambda n: worst(spec, n, d.max_num_seqs)
  n = d.max_num_batched_tokens
  while n > CHUNK_STEP and t(n) > slo_tpot:
    n -= CHUNK_STEP
  if t(n) > slo_tpot:
    raise ValueError(f"{spec.name}: even a {n}-token iteration ({t(n):.3f} s) exceeds "
                     f"slo_tpot={slo_tpot}")
  return EngineSettings(d.max_num_seqs, n)


def spec_table(specs: Sequence[GPUSpec]) -> dict[str, np.ndarray]:
  """Stacks specs into float64 arrays [N] (plus kv_blocks int32, type_id int32) for env params."""
  return {
      "t_ovh": np.array([s.t_ovh for s in specs], np.float64),
      "t_w": np.array([s.t_w for s in specs], np.float64),
      "alpha": np.array([s.alpha for s in specs], np.float64),
      "beta": np.array([s.beta for s in specs], np.float64),
      "gamma": np.array([s.gamma for s in specs], np.float64),
      "kv_blocks": np.array([s.kv_blocks for s in specs], np.int32),
      "type_id": np.array([TYPE_INDEX[s.gpu_type] for s in specs], np.int32),
  }


def iteration_time(xp, t_ovh, t_w, alpha, beta, gamma, n_tok, sum_ctx, sum_pairs):
  """t_iter for one iteration; `xp` is numpy or jax.numpy (shared by the env and the reference).
  sum_pairs: sum of `prefill_pairs` over the iteration's prefill chunks.

  The token sums are integers, converted here so both simulators add the same floats in the
  same order.
  """
  return (t_ovh + xp.maximum(t_w, alpha * n_tok) + beta * sum_ctx + gamma * sum_pairs)


def static_decode_time(xp, t_ovh, t_w, alpha, beta, n, sum_p, m):
  """D(m) = sum_{k=1..m} (t_ovh + max(t_w, alpha n) + beta (sum p + n k)): the first m padded
  decode iterations of a static batch of n requests (closed form)."""
  return m * (t_ovh + xp.maximum(t_w, alpha * n) + beta * sum_p) + beta * n * (m * (m + 1) / 2.0)


def static_batch_time(xp, t_ovh, t_w, alpha, beta, gamma, n, sum_p, sum_pairs, max_o):
  """Duration of a static (request-level) batch of `n` requests, closed form.

  One unchunked prefill iteration (N_tok = sum p, gamma * sum p (p + 1) / 2: `sum_pairs`, causal)
  produces the first token of every member; then max_o - 1 padded decode iterations
  k = 1..M-1 (`static_decode_time`): every slot computes until the longest member ends
  (FasterTransformer-style padding). A member with o output tokens has streamed its last one
  after prefill + D(o - 1) (batching.py: per-token streaming).

  Returns (prefill_time, total_time).
  """
  t_pref = t_ovh + xp.maximum(t_w, alpha * sum_p) + gamma * sum_pairs
  return t_pref, t_pref + static_decode_time(xp, t_ovh, t_w, alpha, beta, n, sum_p, max_o - 1)
