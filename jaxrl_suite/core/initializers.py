"""Orthogonal weight initialisation (Saxe et al. 2014) without LAPACK.

Why not `flax.linen.initializers.orthogonal`: it calls QR, which on CPU is LAPACK `sgeqrf`
behind an FFI kernel. When a whole training run is vmapped over seeds, the QR is batched, and
jaxlib runs the batch with `ParallelBatchMap` on XLA's intra-op thread pool, blocking the pool
thread that called it until its sub-tasks finish. With two QRs running at once (one per network
layer, scheduled concurrently) on a two-thread pool (a 2-core machine), both pool threads wait
for sub-tasks that no thread is left to run: the process hangs with every thread in futex wait
and 0% CPU. gdb showed exactly that stack: both `tf_XLAEigen` threads in
`jax::QrFactorization::Kernel -> jax::ParallelBatchMap -> BlockingCounter::Wait`.

Gram-Schmidt (classical, with one re-orthogonalisation pass) on the same Gaussian matrix
returns the same Q as QR with a positive R diagonal, which is what flax's initialiser returns,
so parameters match flax's to float rounding for the same key, and it is made only of matmuls.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def orthonormal_columns(a: jax.Array) -> jax.Array:
  """Q with orthonormal columns and Q^T a upper triangular with positive diagonal.

  a: [m, k] with m >= k and full column rank. Returns [m, k]. Columns are processed in a
  `fori_loop`; the not-yet-filled columns of Q are zero, so projecting on all of Q is exact.
  """
  def column(j, q):
    v = jax.lax.dynamic_index_in_dim(a, j, axis=1, keepdims=False)
    for _ in range(2):   # CGS2: a second pass restores orthogonality lost to rounding
      v = v - q @ (q.T @ v)
    return jax.lax.dynamic_update_index_in_dim(q, v / jnp.linalg.norm(v), j, axis=1)

  return jax.lax.fori_loop(0, a.shape[1], column, jnp.zeros_like(a))


def orthogonal(scale: float = 1.0, column_axis: int = -1):
  """Drop-in for `flax.linen.initializers.orthogonal(scale)`: init(key, shape, dtype)."""

  def init(key, shape, dtype=jnp.float32):
    if len(shape) < 2:
      raise ValueError(f"orthogonal initialisation needs a shape of rank >= 2, got {shape}")
    n_cols = shape[column_axis]
    n_rows = math.prod(shape) // n_cols
    matrix_shape = (n_cols, n_rows) if n_rows < n_cols else (n_rows, n_cols)
    q = orthonormal_columns(jax.random.normal(key, matrix_shape, jnp.float32))
    if n_rows < n_cols:
      q = q.T
    rest = tuple(s for i, s in enumerate(shape) if i != column_axis % len(shape))
    q = jnp.moveaxis(q.reshape(rest + (n_cols,)), -1, column_axis)
    return (scale * q).astype(dtype)

  return init
