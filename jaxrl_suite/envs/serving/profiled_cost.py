"""Iteration cost fitted to Vidur's A100 profiles of Llama-2-7B (TP1), as small monotone tables.

Vidur (Agrawal et al., MLSys 2024; microsoft/vidur, MIT) profiles every operator of a decoder
layer. One engine iteration of L = 32 layers costs, in its decomposition,

    t_iter = t_ovh + 1e-3 L [ G(N_tok) + sum_i P(c_i, p_i) + D(n_dec, k_bar) ]      (ms -> s)

- G(N): the non-attention operators of one layer (RMSNorm x2, QKV projection, RoPE, output
  projection, MLP up/act/down, residual add) at N batched tokens: `data/vidur_a100_llama2_7b_mlp.csv`
  = the sum of the nine operators' profiled medians per TP1 row of vidur's
  `data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv` (duplicated token counts
  averaged). It has a small-token floor (0.29 ms at N = 1, 0.38 ms at 128) and is linear from
  ~512 tokens on. G is linear interpolation of the isotonic (PAV) fit of those sums, so it never
  decreases in N (the raw medians do, by up to 10%, between GEMM tile sizes).
- P(c, p): FlashAttention prefill of a chunk of c tokens after p cached tokens.
- D(b, k): paged decode attention of b sequences at mean context k (a per-sequence fixed cost:
  b = 8 at k = 512 costs 0.07 ms per layer, not 8 * 512 * bytes / bandwidth).

Why tables: the closed form `a + b c + g c (p + (c + 1) / 2)` fits the 501 profiled prefill rows
with relative errors p10/p90 = 0.82 / 1.12, and `a + d b + beta b k` fits the 1,039 decode rows
at 0.89 / 1.11 (`closed_form_fit`): outside the 5% asked of the model. So P and D are piecewise-
bilinear surfaces on small node grids (`PREFILL_NODES`, `DECODE_NODES`) fitted to the profiled
rows by least squares in relative error with a small smoothness penalty (`fit_surface`), then made
monotone by a cumulative maximum along both axes (`monotone_grid`): a bilinear surface whose node
values never decrease along either axis never decreases in either argument, so more tokens, more
sequences or more context never make an iteration cheaper.

`bilinear` and `batch_time` run in numpy (float64 reference) or jax.numpy (jit/vmap-safe: clipped
index arithmetic, no data-dependent shapes).

Rows: `data/vidur_a100_llama2_7b_attention.csv` (kind, size = chunk or batch, kv_cache_size,
median_ms), 1,540 rows read from vidur's `attention.csv` (data/ATTRIBUTION.md). They are not
vidur's whole grid; the fit is checked against them in
tests/envs/serving/test_serving_profiled_cost.py.

Beyond the grid (N > 4096 batched tokens, chunk c > 4096, cached p > 4096, decode context
k > 4096: Llama-3.1-8B reaches 128k) the tables continue linearly with the analytic slopes of
A100-7B (`cost_model.A100_7B`, per layer in ms: 1e3 x / L), instead of staying flat:

    G(N)    = G(N') + 1e3 alpha_A / L (N - N')                          N' = min(N, 4096)
    P(c, p) = P(c', p') + 1e3 gamma_A / L [A(p, c) - A(p', c')]        c', p' clipped to the grid
    D(b, k) = D(b, k') + 1e3 beta_A / L b (k - k')                      k' = min(k, 4096)

(A(p, c) = c p + c (c + 1) / 2, cost_model.prefill_pairs): so beyond the grid the time per
context token is beta, per cached token of a chunk of c is gamma c, and per batched token alpha,
as in the analytic model. In the grid the extra terms are exactly 0. The batch axis of D is not
extended: b > 256 decoders cost D(256, k) + the context term (`DECODE_NODES`).

Other GPUs (every `cost_model.GPU_TYPES` spec) are derived from these A100 tables by the ratios
of their analytic constants to A100-7B's (`Ratios`, `ratios`):

    G_i(N) = G(N) max(t_w_i, alpha_i N) / max(t_w_A, alpha_A N)     (floor ratio, then GEMM)
    P_i    = P gamma_i / gamma_A,     D_i = D beta_i / beta_A

with the GPU's own t_ovh. The constants are totals over the model's layers, so L = 32 stays and
the totals follow the GPU's analytic scale (the 80-layer TP4 70B spec; the 8B variants, whose
constants `cost_model.for_model` scaled). One correction keeps G_i monotone: a GPU that stays
floor-bound past A100-7B's knee N_A = t_w_A / alpha_A = 150 tokens (t_w_i / alpha_i > N_A: H100,
L4, L40S, the 70B) gets G_i(N) = max(G_i(N), G_i(N_A)) for N > N_A (`gemm_ms`). Without it the
ratio falls as 1 / N from the knee on while the A100's G sits on the plateau after its 128-token
GEMM tile step, so an H100 would price 256 tokens 37% below 150. A100-7B's ratios are exactly 1
and its times in the grid are the fitted tables' own. Only A100-7B is profiled; the others are
derived, not measured.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from typing import NamedTuple

import numpy as np

from jaxrl_suite.envs.serving import cost_model

N_LAYERS = 32          # Llama-2-7B decoder layers (HF config)
# The spec the tables were profiled on: base of the per-GPU ratios and of the slopes beyond the grid
PROFILED = cost_model.A100_7B
# Slopes beyond the grid, ms per layer (module docstring): per batched token (GEMM), per prefill
# (query, key) pair, per decode context token of one sequence
GEMM_SLOPE_MS = 1e3 * PROFILED.alpha / N_LAYERS
PAIR_SLOPE_MS = 1e3 * PROFILED.gamma / N_LAYERS
CTX_SLOPE_MS = 1e3 * PROFILED.beta / N_LAYERS
# A100-7B's analytic floor/GEMM crossover t_w / alpha (150 tokens): the derived G's hold point
GEMM_KNEE = PROFILED.t_w / PROFILED.alpha
DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
MLP_FILE = "vidur_a100_llama2_7b_mlp.csv"
ATTN_FILE = "vidur_a100_llama2_7b_attention.csv"
# Node grids of the fitted surfaces: chunk/batch first, KV context second. Dense where the
# profiles bend (small chunks, small batches), sparse where they are linear.
PREFILL_NODES = (np.array([1, 64, 128, 256, 512, 1024, 1536, 2048, 2560, 4096], np.float64),
                 np.array([0, 256, 512, 1024, 2048, 3072, 4096], np.float64))
DECODE_NODES = (np.array([1, 2, 4, 8, 16, 32, 64, 96, 128, 256], np.float64),
                np.array([0, 256, 512, 1024, 2048, 3072, 4096], np.float64))


class ProfiledTables(NamedTuple):
  """Fitted per-layer times in ms. gemm_n [G], gemm_ms [G]; pf_c [A], pf_k [B], pf_ms [A, B];
  dec_b [C], dec_k [E], dec_ms [C, E]. Node arrays strictly increasing; values monotone."""
  gemm_n: np.ndarray
  gemm_ms: np.ndarray
  pf_c: np.ndarray
  pf_k: np.ndarray
  pf_ms: np.ndarray
  dec_b: np.ndarray
  dec_k: np.ndarray
  dec_ms: np.ndarray


def _read_csv(name: str, columns: tuple[str, ...], data_dir: str = DATA_DIR) -> list[dict]:
  """Rows of data_dir/name as dicts; errors name the file and the missing column."""
  path = os.path.join(data_dir, name)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} is missing: reinstall jaxrl_suite with its package data "
                            "(setup.cfg [options.package_data] ships data/*.csv)")
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
      raise ValueError(f"{path}: missing column(s) {missing}; expected header {list(columns)}")
    return list(reader)


def _number(path: str, line: int, row: dict, col: str, minimum: float, strict: bool) -> float:
  """row[col] as a finite float >= minimum (> if strict); the error names file, line, column."""
  try:
    v = float(row[col])
  except (TypeError, ValueError):
    raise ValueError(f"{path} line {line}, column {col!r}: {row[col]!r} is not a number") from None
  if not math.isfinite(v) or v < minimum or (strict and v == minimum):
    rel = ">" if strict else ">="
    raise ValueError(f"{path} line {line}, column {col!r}: {v} must be finite and {rel} {minimum}")
  return v


def load_profiles(data_dir: str = DATA_DIR) -> dict[str, np.ndarray]:
  """The shipped profile rows, validated: gemm [G, 2] (num_tokens, ms; sorted, unique tokens);
  prefill and decode [R, 3] (chunk or batch, kv_cache_size, ms). float64."""
  mlp_cols = ("num_tokens", "non_attention_ms")
  mlp_path = os.path.join(data_dir, MLP_FILE)
  mlp = np.array([[_number(mlp_path, i + 2, r, "num_tokens", 1.0, False),
                   _number(mlp_path, i + 2, r, "non_attention_ms", 0.0, True)]
                  for i, r in enumerate(_read_csv(MLP_FILE, mlp_cols, data_dir))])
  if len(mlp) < 2:
    raise ValueError(f"{mlp_path}: needs at least 2 rows, has {len(mlp)}")
  mlp = mlp[np.argsort(mlp[:, 0])]
  if np.any(np.diff(mlp[:, 0]) <= 0):
    raise ValueError(f"{mlp_path}, column 'num_tokens': duplicated token counts; average them")
  attn_cols = ("kind", "size", "kv_cache_size", "median_ms")
  attn_path = os.path.join(data_dir, ATTN_FILE)
  out = {"gemm": mlp, "prefill": [], "decode": []}
  for i, r in enumerate(_read_csv(ATTN_FILE, attn_cols, data_dir)):
    if r["kind"] not in ("prefill", "decode"):
      raise ValueError(f"{attn_path} line {i + 2}, column 'kind': {r['kind']!r} is not "
                       "'prefill' or 'decode'")
    out[r["kind"]].append([_number(attn_path, i + 2, r, "size", 1.0, False),
                           _number(attn_path, i + 2, r, "kv_cache_size", 0.0, False),
                           _number(attn_path, i + 2, r, "median_ms", 0.0, True)])
  for kind in ("prefill", "decode"):
    if len(out[kind]) < 10:
      raise ValueError(f"{attn_path}, column 'kind': only {len(out[kind])} {kind} rows")
    out[kind] = np.array(out[kind], np.float64)
  return out


def isotonic(y: np.ndarray, w: np.ndarray) -> np.ndarray:
  """Weighted isotonic regression (pool adjacent violators): the non-decreasing z minimising
  sum_i w_i (z_i - y_i)^2. [n] -> [n], float64."""
  vals, wts, size = [], [], []
  for yi, wi in zip(np.asarray(y, np.float64), np.asarray(w, np.float64)):
    vals.append(yi); wts.append(wi); size.append(1)
    while len(vals) > 1 and vals[-2] > vals[-1]:
      wsum = wts[-2] + wts[-1]
      v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / wsum
      n = size[-2] + size[-1]
      del vals[-1], wts[-1], size[-1]
      vals[-1], wts[-1], size[-1] = v, wsum, n
  return np.repeat(vals, size)


def _hat_weights(nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
  """[len(x), len(nodes)] piecewise-linear interpolation weights (x clipped to the node range)."""
  x = np.clip(x, nodes[0], nodes[-1])
  i = np.clip(np.searchsorted(nodes, x, side="right") - 1, 0, len(nodes) - 2)
  f = (x - nodes[i]) / (nodes[i + 1] - nodes[i])
  w = np.zeros((len(x), len(nodes)))
  w[np.arange(len(x)), i] = 1.0 - f
  w[np.arange(len(x)), i + 1] += f
  return w


def _second_differences(nx: int, ny: int) -> np.ndarray:
  """[P, nx * ny] rows (1, -2, 1) along each axis of an nx x ny grid (raveled C-order)."""
  rows = []
  for j in range(1, nx - 1):
    for k in range(ny):
      r = np.zeros((nx, ny)); r[j - 1, k], r[j, k], r[j + 1, k] = 1.0, -2.0, 1.0
      rows.append(r.ravel())
  for k in range(1, ny - 1):
    for j in range(nx):
      r = np.zeros((nx, ny)); r[j, k - 1], r[j, k], r[j, k + 1] = 1.0, -2.0, 1.0
      rows.append(r.ravel())
  return np.array(rows)


def fit_surface(nodes_x, nodes_y, x, y, t, smooth: float = 1e-3) -> np.ndarray:
  """Bilinear surface S [len(nodes_x), len(nodes_y)] minimising
  sum_r ((S(x_r, y_r) - t_r) / t_r)^2 + smooth * ||second differences of S / mean t||^2.

  Relative error because the rows span 0.01-3.5 ms and the engine needs each within a few %;
  the penalty only fills nodes no row touches (e.g. large chunks at large KV)."""
  wx, wy = _hat_weights(nodes_x, x), _hat_weights(nodes_y, y)
  a = (wx[:, :, None] * wy[:, None, :]).reshape(len(t), -1) / t[:, None]
  pen = np.sqrt(smooth) * _second_differences(len(nodes_x), len(nodes_y)) / np.mean(t)
  lhs = np.concatenate([a, pen])
  rhs = np.concatenate([np.ones(len(t)), np.zeros(len(pen))])
  sol, *_ = np.linalg.lstsq(lhs, rhs, rcond=None)
  return sol.reshape(len(nodes_x), len(nodes_y))


def monotone_grid(grid: np.ndarray) -> np.ndarray:
  """Cumulative maximum along axis 0, then axis 1: the smallest grid >= `grid` whose values never
  decrease along either axis (the second pass keeps the first's order: a max over b <= j of
  values ordered in i stays ordered in i). Also clamps at 0 from below."""
  return np.maximum.accumulate(np.maximum.accumulate(np.maximum(grid, 0.0), 0), 1)


@functools.lru_cache(maxsize=1)
def a100_llama2_7b() -> ProfiledTables:
  """The fitted tables of Llama-2-7B on one A100 (float64 numpy; cached)."""
  p = load_profiles()
  pf, dc, gm = p["prefill"], p["decode"], p["gemm"]
  return ProfiledTables(
      gemm_n=gm[:, 0], gemm_ms=isotonic(gm[:, 1], 1.0 / gm[:, 1] ** 2),
      pf_c=PREFILL_NODES[0], pf_k=PREFILL_NODES[1],
      pf_ms=monotone_grid(fit_surface(*PREFILL_NODES, pf[:, 0], pf[:, 1], pf[:, 2])),
      dec_b=DECODE_NODES[0], dec_k=DECODE_NODES[1],
      dec_ms=monotone_grid(fit_surface(*DECODE_NODES, dc[:, 0], dc[:, 1], dc[:, 2])))


class Ratios(NamedTuple):
  """One GPU's analytic constants over A100-7B's (`PROFILED`): t_w, alpha (GEMM), beta (decode
  attention), gamma (prefill attention). Scalars or [N] arrays (one per GPU), float64 quotients:
  computed once in numpy, because a jitted x / constant becomes x * (1 / constant) in XLA, and
  3.4e-9 * float32(1 / 3.4e-9) is 0.99999994, not 1 (A100-7B's ratios must be exactly 1)."""
  t_w: np.ndarray
  alpha: np.ndarray
  beta: np.ndarray
  gamma: np.ndarray


def ratios(specs) -> Ratios:
  """Ratios of a cost_model.GPUSpec (float scalars) or a sequence of them ([N] float64)."""
  one = isinstance(specs, cost_model.GPUSpec)
  col = lambda f: np.array([getattr(s, f) / getattr(PROFILED, f)
                            for s in ([specs] if one else specs)], np.float64)
  r = Ratios(*(col(f) for f in Ratios._fields))
  return Ratios(*(float(x[0]) for x in r)) if one else r


def as_jax(tab, dtype=None):
  """ProfiledTables (or Ratios) as jax arrays (default float dtype: float32 unless
  jax_enable_x64)."""
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  return type(tab)(*(jnp.asarray(x, dtype) for x in tab))


def _segment(xp, nodes, x):
  """(i, f): x clipped to [nodes[0], nodes[-1]] lies at nodes[i] + f (nodes[i+1] - nodes[i])."""
  x = xp.clip(x, nodes[0], nodes[-1])
  # In JAX, "compare_all" (one fused count of nodes <= x) rather than the default binary-search
  # loop: the tables are small (<= 259 nodes) and the loop's per-iteration cost dominated the
  # profiled env's step on CPU. The same index either way.
  how = {} if xp is np else {"method": "compare_all"}
  i = xp.clip(xp.searchsorted(nodes, x, side="right", **how) - 1, 0, nodes.shape[0] - 2)
  lo, hi = xp.take(nodes, i), xp.take(nodes, i + 1)
  return i, (x - lo) / (hi - lo)


def interp1(xp, nodes, vals, x):
  """Linear interpolation of vals [G] on nodes [G] at x (any shape), constant outside."""
  i, f = _segment(xp, nodes, x)
  return xp.take(vals, i) * (1 - f) + xp.take(vals, i + 1) * f


def bilinear(xp, nx, ny, grid, x, y):
  """S(x, y) of a bilinear surface on nodes nx [A], ny [B], grid [A, B]; x, y broadcast;
  constant beyond the node range along each axis."""
  x, y = xp.broadcast_arrays(xp.asarray(x), xp.asarray(y))
  i, fx = _segment(xp, nx, x)
  j, fy = _segment(xp, ny, y)
  flat = xp.reshape(grid, (-1,))
  g = lambda a, b: xp.take(flat, a * ny.shape[0] + b)
  return ((1 - fx) * (1 - fy) * g(i, j) + fx * (1 - fy) * g(i + 1, j)
          + (1 - fx) * fy * g(i, j + 1) + fx * fy * g(i + 1, j + 1))


def gemm_ratio(xp, r: Ratios, n_tok):
  """G_i(N) / G(N) = max(t_w_i, alpha_i N) / max(t_w_A, alpha_A N) from the ratios r. With
  u = alpha_A N / t_w_A (the A100's GEMM time over its floor) that is max(r.t_w, r.alpha u) for
  u <= 1 and max(r.t_w / u, r.alpha) after: r = 1 gives exactly 1 (no x / x rounding)."""
  u = n_tok * (PROFILED.alpha / PROFILED.t_w)
  return xp.where(u <= 1.0, xp.maximum(r.t_w, r.alpha * u),
                  xp.maximum(r.t_w / xp.maximum(u, 1.0), r.alpha))


def gemm_ms(xp, tab: ProfiledTables, n_tok, r: Ratios | None = None):
  """G(N): non-attention operators of one layer at N batched tokens, ms (0 where N = 0: an empty
  iteration does not run); + GEMM_SLOPE_MS per token beyond the last node. r: the GPU's ratios,
  None = A100-7B: G_i(N) = G(N) `gemm_ratio`(N), held at least at G_i(GEMM_KNEE) past the knee
  where the GPU is floor-bound longer than the A100 (r.t_w > r.alpha), so that it never
  decreases (module docstring). A100-7B (r.t_w = r.alpha) never takes the hold: G unchanged."""
  g = (interp1(xp, tab.gemm_n, tab.gemm_ms, n_tok)
       + GEMM_SLOPE_MS * xp.maximum(n_tok - tab.gemm_n[-1], 0.0))
  if r is not None:
    g = g * gemm_ratio(xp, r, n_tok)
    knee = interp1(xp, tab.gemm_n, tab.gemm_ms, GEMM_KNEE) * xp.maximum(r.t_w, r.alpha)
    g = xp.where((n_tok > GEMM_KNEE) & (r.t_w > r.alpha), xp.maximum(g, knee), g)
  return xp.where(n_tok > 0, g, 0.0)


def prefill_ms(xp, tab: ProfiledTables, chunk, cached, r: Ratios | None = None):
  """P(c, p): prefill attention of one layer, chunk c after p cached tokens, ms (0 where c = 0);
  beyond the grid + PAIR_SLOPE_MS [A(p, c) - A(p', c')] (c', p' clipped to the last nodes). r: the
  GPU's ratios (x r.gamma); None = A100-7B."""
  c_in, p_in = xp.minimum(chunk, tab.pf_c[-1]), xp.minimum(cached, tab.pf_k[-1])
  # A(p, c) - A(p', c') = c (p - p') + (c - c') (p' + (c + c' + 1) / 2): exactly 0 in the grid
  extra = chunk * (cached - p_in) + (chunk - c_in) * (p_in + (chunk + c_in + 1) / 2)
  v = bilinear(xp, tab.pf_c, tab.pf_k, tab.pf_ms, chunk, cached) + PAIR_SLOPE_MS * extra
  return xp.where(chunk > 0, v if r is None else v * r.gamma, 0.0)


def decode_ms(xp, tab: ProfiledTables, n_dec, mean_ctx, r: Ratios | None = None):
  """D(b, k): decode attention of one layer for b sequences at mean context k, ms (0 if b = 0);
  + CTX_SLOPE_MS b per unit of k beyond the last context node. r: the GPU's ratios (x r.beta);
  None = A100-7B."""
  v = (bilinear(xp, tab.dec_b, tab.dec_k, tab.dec_ms, n_dec, mean_ctx)
       + _ctx_slope(n_dec, None) * xp.maximum(mean_ctx - tab.dec_k[-1], 0.0))
  return xp.where(n_dec > 0, v if r is None else v * r.beta, 0.0)


def _ctx_slope(n_dec, r: Ratios | None):
  """dD/dk beyond the last context node, ms per unit of mean context: CTX_SLOPE_MS b (x r.beta)."""
  return CTX_SLOPE_MS * n_dec * (1.0 if r is None else r.beta)


def batch_time(xp, tab: ProfiledTables, chunk, cached, ctx, is_decode, t_ovh=0.0,
               n_layers: int = N_LAYERS, r: Ratios | None = None):
  """Seconds of one iteration. Per-slot arrays [K]: chunk = prefill tokens this step (0 if none;
  ignored where is_decode), cached = tokens already in KV before the chunk, ctx = decode context
  (read where is_decode). r: the GPU's ratios (None = A100-7B).

  t = t_ovh + 1e-3 L [G(sum chunk + n_dec) + sum_i P(chunk_i, cached_i) + D(n_dec, mean ctx)].
  """
  chunk = xp.where(is_decode, 0, chunk)
  n_dec = xp.sum(is_decode)
  mean_ctx = xp.sum(xp.where(is_decode, ctx, 0)) / xp.maximum(n_dec, 1)
  return iteration_time(xp, tab, xp.sum(chunk) + n_dec,
                        xp.sum(prefill_ms(xp, tab, chunk, cached, r)), n_dec, mean_ctx, t_ovh,
                        n_layers, r)


def iteration_time(xp, tab: ProfiledTables, n_tok, prefill_attn_ms, n_dec, mean_ctx, t_ovh=0.0,
                   n_layers: int = N_LAYERS, r: Ratios | None = None):
  """t = t_ovh + 1e-3 L [G(n_tok) + prefill_attn_ms + D(n_dec, mean_ctx)] from batch totals
  (prefill_attn_ms = sum_i P(c_i, p_i), from `prefill_ms` with the same r: this scales G and D
  only); scalars or broadcasting arrays."""
  per_layer = (gemm_ms(xp, tab, n_tok, r) + prefill_attn_ms
               + decode_ms(xp, tab, n_dec, mean_ctx, r))
  return t_ovh + 1e-3 * n_layers * per_layer


def worst_iteration_time(spec: cost_model.GPUSpec, n_tok: int, max_num_seqs: int,
                         max_model_len: int | None = None) -> float:
  """Seconds of the longest iteration with a token budget n_tok on `spec`, the batch of
  `cost_model.worst_iteration_time` priced by these tables as `batch_time` would (the GEMMs see
  the chunk's and the decodes' tokens): one prefill chunk of n_tok tokens (nothing cached) while
  decodes read a full KV cache (spec.kv_tokens). The analytic form needs
  no decoder count (beta x context sum); here D(b, k) has a per-sequence cost, so the time is the
  max over every count the engine allows, b in [ceil(kv / max_model_len), max_num_seqs] (each
  sequence within the model's context; default spec.max_model_len), at mean context kv / b."""
  tab, r = a100_llama2_7b(), ratios(spec)
  kv = float(spec.kv_tokens)
  b_min = max(1, math.ceil(kv / float(max_model_len or spec.max_model_len)))
  b = np.arange(b_min, max(int(max_num_seqs), b_min) + 1, dtype=np.float64)
  t = iteration_time(np, tab, n_tok + b, float(prefill_ms(np, tab, float(n_tok), 0.0, r)),
                     b, kv / b, spec.t_ovh, N_LAYERS, r)     # as `batch_time` prices that batch
  return float(np.max(t))


def decode_linear(xp, tab: ProfiledTables, n_dec, sum_ctx, t_ovh=0.0, n_layers: int = N_LAYERS,
                  r: Ratios | None = None):
  """A pure-decode iteration of b = n_dec sequences with context sum s, as c0 + beta s.

  For fixed b, D(b, k) is linear in k between two context nodes k_j <= k < k_{j+1}, and from the
  last node k_E on (slope `_ctx_slope`, module docstring), so while the mean context s / b stays
  in that segment the iteration time is exactly

      t(s) = c0 + beta s,  beta = 1e-3 L dD/dk / b,  c0 = t_ovh + 1e-3 L (G(b) + D(b, k_j))
             - beta b k_j,

  and the engine's closed-form decode spans (engine.decode_span_time) hold for as many iterations
  as the mean context (which grows by exactly 1 per iteration) stays below k_{j+1}:
  n_seg = ceil(k_{j+1} - s / b) iterations (inf on the last, unbounded segment, k_j = k_E).
  r: the GPU's ratios (None = A100-7B). Returns (c0, beta, n_seg) (n_seg a float, >= 1)."""
  b = xp.maximum(n_dec, 1)
  k = sum_ctx / b
  j, _ = _segment(xp, tab.dec_k, k)
  k_lo, k_hi = xp.take(tab.dec_k, j), xp.take(tab.dec_k, j + 1)
  d_lo = decode_ms(xp, tab, n_dec, k_lo, r)
  d_hi = decode_ms(xp, tab, n_dec, k_hi, r)
  last = k >= tab.dec_k[-1]                             # then k_hi = k_E (segment clipped)
  slope = xp.where(last, _ctx_slope(n_dec, r), (d_hi - d_lo) / (k_hi - k_lo))  # ms per unit k
  beta = 1e-3 * n_layers * slope / b
  c0 = t_ovh + 1e-3 * n_layers * (gemm_ms(xp, tab, n_dec, r) + xp.where(last, d_hi, d_lo)) \
      - beta * b * xp.where(last, k_hi, k_lo)
  n_seg = xp.where(last, xp.inf, xp.maximum(xp.ceil(k_hi - k), 1.0))
  return c0, beta, n_seg


def decode_series_ms(xp, tab: ProfiledTables, n_dec, k0, m, r: Ratios | None = None):
  """sum_{j=1..m} D(b, k0 + j), ms: decode attention of m padded decode steps of a static batch of
  b = n_dec sequences whose mean context starts at k0 (each step adds one token to every one).

  D(b, .) is linear on each context segment [k_s, k_{s+1}) (and on [k_E, inf), `_ctx_slope`), so
  each segment adds n_s (D(b, k_s) - slope_s k_s) + slope_s sum_{j in s} (k0 + j) over the
  n_s integers j in [1, m] it holds: an arithmetic series, so the sum is closed-form ([E] terms).
  m, k0, n_dec broadcast; m <= 0 gives 0. r: the GPU's ratios (None = A100-7B)."""
  nodes = tab.dec_k
  m = xp.asarray(m)[..., None]
  k0 = xp.asarray(k0)[..., None]
  b = xp.asarray(n_dec)[..., None]
  lo = nodes                                                # segment starts [E]
  hi = xp.concatenate([nodes[1:], xp.asarray([xp.inf], nodes.dtype)])
  d_lo = decode_ms(xp, tab, b, lo, r)
  d_hi = decode_ms(xp, tab, b, xp.minimum(hi, nodes[-1]), r)
  slope = xp.where(xp.isfinite(hi), (d_hi - d_lo) / (xp.minimum(hi, nodes[-1]) - lo + 1e-30),
                   _ctx_slope(b, r))
  # integers j in [1, m] with lo <= k0 + j < hi (the first segment also takes k0 + j < lo: none,
  # since contexts are >= 1 > nodes[0] = 0)
  j_lo = xp.maximum(1.0, xp.ceil(lo - k0))
  j_hi = xp.minimum(m, xp.where(xp.isfinite(hi), xp.ceil(hi - k0) - 1, m))
  n = xp.maximum(j_hi - j_lo + 1, 0.0)
  sum_k = n * k0 + n * (j_lo + j_hi) / 2
  return xp.sum(n * (d_lo - slope * lo) + slope * sum_k, axis=-1)


def static_decode_time(xp, tab: ProfiledTables, t_ovh, n, sum_p, m, n_layers: int = N_LAYERS,
                       r: Ratios | None = None):
  """Seconds of the first m padded decode steps of a static batch of n requests with prompt sum
  sum_p: step k = 1..m runs n decode tokens at mean context sum_p / n + k, so
  m (t_ovh + 1e-3 L G(n)) + 1e-3 L decode_series_ms(n, sum_p / n, m)
  (cost_model.static_decode_time's profiled counterpart). r: the GPU's ratios (None = A100-7B)."""
  k0 = sum_p / xp.maximum(n, 1)
  return m * (t_ovh + 1e-3 * n_layers * gemm_ms(xp, tab, n, r)) \
      + 1e-3 * n_layers * decode_series_ms(xp, tab, n, k0, m, r)


def closed_form_fit(rows: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
  """Least-squares (relative error) closed forms, kept to show why tables are used:
  prefill a + b c + g c (p + (c + 1) / 2); decode a + d b + beta b k. Returns (coef, ratio
  fit/profile per row)."""
  s, k, t = rows.T
  if kind == "prefill":
    x = np.stack([np.ones_like(s), s, s * (k + (s + 1) / 2)], 1)
  else:
    x = np.stack([np.ones_like(s), s, s * k], 1)
  coef, *_ = np.linalg.lstsq(x / t[:, None], np.ones_like(t), rcond=None)
  return coef, x @ coef / t
