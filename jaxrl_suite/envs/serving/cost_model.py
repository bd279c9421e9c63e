"""Per-GPU-type iteration cost model for LLM serving, as data.

One engine iteration (a batch of prefill chunks and decode tokens on one GPU or TP group) takes

    t_iter = t_ovh + max(t_w, alpha * N_tok) + beta * sum_decode ctx_j + gamma * sum_prefill c_i^2

where `N_tok` = prefill tokens + decode sequences in the step, `t_w` the weight-streaming floor
(memory-bound small batches), `alpha` the per-token GEMM cost once compute-bound, `beta` the
per-context-token cost of reading KV in decode attention, and `gamma` the quadratic part of prefill
attention (applied to each prefill chunk length c_i). This is the two-regime model of the design
doc (docs/serving.md), the same shape as microsoft/vidur's predictors.

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

  @property
  def kv_blocks(self) -> int:
    return self.kv_tokens // BLOCK_TOKENS


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
# --- Llama-2-70B, fp16, TP4 on A100 ----------------------------------------------------------
# t_w 24.9 ms, alpha 149 us/tok (vidur profiles summed over 80 layers, design doc §2.2).
# beta: 320 KiB/token (GQA, vidur memory_planner) / (4 * 2.039 TB/s) ~ 0.04 us (derived).
# gamma: 4*80*8192*c^2 FLOPs at 50% of 4*312 TF -> 4.2e-9 s/tok^2 (derived).
# t_ovh: 2 all-reduces/layer * 80 layers * 0.02 ms NCCL launch (vidur config) = 3.2 ms + 0.5 ms.
# kv_tokens ~ 500k on TP4 A100 (design doc §2.3).
A100x4_70B = GPUSpec("A100x4-70B", t_ovh=3.7e-3, t_w=24.9e-3, alpha=149e-6, beta=0.04e-6,
                     gamma=4.2e-9, kv_tokens=500_000)

GPU_TYPES = {g.name: g for g in (A100_7B, H100_7B, L4_7B, A100x4_70B)}
# Order used for the one-hot GPU-type feature in observations.
TYPE_INDEX = {name: i for i, name in enumerate(GPU_TYPES)}


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
}
CHUNK_STEP = 256   # token budgets are searched in multiples of this


def worst_iteration_time(spec: GPUSpec, n_tok: int) -> float:
  """Longest iteration with a token budget n_tok: one prefill chunk of n_tok tokens attending to
  itself (gamma n_tok^2) while decodes read a full KV cache (beta * kv_tokens)."""
  return float(iteration_time(np, spec.t_ovh, spec.t_w, spec.alpha, spec.beta, spec.gamma,
                              float(n_tok), float(spec.kv_tokens), float(n_tok) ** 2))


def engine_settings(spec: GPUSpec, slo_tpot: float) -> EngineSettings:
  """vLLM's defaults for the GPU type, with the token budget cut to the largest multiple of
  CHUNK_STEP whose worst iteration (`worst_iteration_time`) fits the TPOT budget: every
  iteration emits one token to each decoding request, so a longer one breaks the TPOT SLO of all
  of them. E.g. L4 at 0.2 s: 2048 tokens take ~0.39 s, the budget becomes 768 (~0.16 s)."""
  d = VLLM_DEFAULTS[spec.name]
  n = d.max_num_batched_tokens
  while n > CHUNK_STEP and worst_iteration_time(spec, n) > slo_tpot:
    n -= CHUNK_STEP
  if worst_iteration_time(spec, n) > slo_tpot:
    raise ValueError(f"{spec.name}: even a {n}-token iteration "
                     f"({worst_iteration_time(spec, n):.3f} s) exceeds slo_tpot={slo_tpot}")
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
      "type_id": np.array([TYPE_INDEX[s.name] for s in specs], np.int32),
  }


def iteration_time(xp, t_ovh, t_w, alpha, beta, gamma, n_tok, sum_ctx, sum_chunk_sq):
  """t_iter for one iteration; `xp` is numpy or jax.numpy (shared by the env and the reference).

  The token sums are integers, converted here so both simulators add the same floats in the
  same order.
  """
  return (t_ovh + xp.maximum(t_w, alpha * n_tok) + beta * sum_ctx + gamma * sum_chunk_sq)


def static_batch_time(xp, t_ovh, t_w, alpha, beta, gamma, n, sum_p, sum_p_sq, max_o):
  """Duration of a static (request-level) batch of `n` requests, closed form.

  One unchunked prefill iteration (N_tok = sum p, gamma * sum p^2) produces the first token of
  every member; then max_o - 1 padded decode iterations k = 1..M-1 each cost
  t_ovh + max(t_w, alpha n) + beta (sum p + n k): every slot computes until the longest member
  ends (FasterTransformer-style padding).

  Returns (prefill_time, total_time).
  """
  t_pref = t_ovh + xp.maximum(t_w, alpha * sum_p) + gamma * sum_p_sq
  m1 = max_o - 1
  t_dec = (m1 * (t_ovh + xp.maximum(t_w, alpha * n) + beta * sum_p)
           + beta * n * (m1 * (m1 + 1) / 2.0))
  return t_pref, t_pref + t_dec
