"""Episode workloads in JAX: windows of a trace, rate scaling, and the noisy length predictor.

An episode is a window of K consecutive requests of a trace stored in the env params
(`TraceArrays`, [T] each). `window_start` = -1 draws a uniformly random window at reset (training);
a fixed start gives a deterministic episode (evaluation, tests). Arrivals are re-zeroed at the
window start and divided by `rate_scale` (the load knob).

The predictor reports the output-length bucket (thresholds `BUCKETS`): the true bucket with
probability `pred_acc`, otherwise a uniformly random bucket. Policies never see the true length.
"""

from __future__ import annotations

import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import engine, traces

BUCKETS = (32, 128, 512)          # output-length bucket edges, tokens
BUCKET_TOKENS = (16, 64, 256, 1024)  # representative output length per bucket (geometric mid)
N_BUCKETS = len(BUCKETS) + 1


@struct.dataclass
class TraceArrays:
  arrival: jax.Array  # float [T] seconds, sorted
  prompt: jax.Array   # int32 [T]
  output: jax.Array   # int32 [T]
  hashes: jax.Array | None = None   # int32 [T, B] prompt block ids (-1 = none), for the cache


def trace_arrays(tr: traces.Trace, max_model_len: int = 4096, max_output: int = 2048,
                 dtype=float, hashes: bool = False) -> TraceArrays:
  """Clips a trace to the model's context and stores it as JAX arrays (with its prompt block
  ids if `hashes`: the prefix cache; off by default so that traces with and without ids share
  one pytree structure)."""
  tr = tr.clipped(max_model_len, max_output)
  if hashes and tr.hash_ids is None:
    raise ValueError(f"trace {tr.name!r} has no hash_ids (the prefix cache needs them)")
  h = jnp.asarray(tr.hash_ids, jnp.int32) if hashes else None
  return TraceArrays(jnp.asarray(tr.arrival, jnp.result_type(dtype)),
                     jnp.asarray(tr.prompt, jnp.int32), jnp.asarray(tr.output, jnp.int32), h)


def pad_trace(ta: TraceArrays, length: int) -> TraceArrays:
  """Pads a trace to `length` rows (repeating the last row) so that several traces share one
  compiled evaluation; windows must still start within the real rows."""
  n = ta.arrival.shape[0]
  if length < n:
    raise ValueError(f"cannot pad a trace of {n} rows to {length}")
  idx = jnp.minimum(jnp.arange(length), n - 1)
  return jax.tree.map(lambda x: x[idx], ta)


def bucket_of(output) -> jax.Array:
  return jnp.sum(output[..., None] > jnp.asarray(BUCKETS), axis=-1).astype(jnp.int32)


def draw_rate(key, rate_scale, rate_mults) -> jax.Array:
  """rate_scale times one of `rate_mults` drawn uniformly (training across loads)."""
  mults = jnp.asarray(rate_mults)
  i = jax.random.randint(jax.random.fold_in(key, 7), (), 0, mults.shape[0])
  return rate_scale * mults[i]


def sample_requests(key, tr: TraceArrays, k: int, rate_scale, window_start, pred_acc
                    ) -> engine.Requests:
  """Window of k requests (random start if window_start < 0) with noisy predicted buckets."""
  t_len = tr.arrival.shape[0]
  if t_len < k:
    raise ValueError(f"trace has {t_len} requests, fewer than the table size {k}")
  k_start, k_flip, k_rand = jax.random.split(key, 3)
  rand_start = jax.random.randint(k_start, (), 0, t_len - k + 1)
  start = jnp.where(window_start < 0, rand_start, jnp.minimum(window_start, t_len - k))
  sl = lambda x: jax.lax.dynamic_slice(x, (start,), (k,))
  arr = sl(tr.arrival)
  arr = (arr - arr[0]) / rate_scale
  out = sl(tr.output)
  true_b = bucket_of(out)
  flip = jax.random.uniform(k_flip, (k,)) >= pred_acc
  pred = jnp.where(flip, jax.random.randint(k_rand, (k,), 0, N_BUCKETS), true_b)
  h = (None if tr.hashes is None else
       jax.lax.dynamic_slice(tr.hashes, (start, 0), (k, tr.hashes.shape[1])))
  return engine.Requests(arrival=arr, prompt=sl(tr.prompt), output=out, pred=pred, hashes=h)


def requests_from_trace(tr: traces.Trace, start: int, k: int, rate_scale: float = 1.0,
                        max_model_len: int = 4096, max_output: int = 2048, dtype=float,
                        pred: np.ndarray | None = None) -> engine.Requests:
  """Deterministic Requests for tests and the reference simulator (perfect predictor default)."""
  tr = tr.clipped(max_model_len, max_output).slice(start, start + k)
  out = jnp.asarray(tr.output, jnp.int32)
  return engine.Requests(arrival=jnp.asarray(tr.arrival / rate_scale, jnp.result_type(dtype)),
                         prompt=jnp.asarray(tr.prompt, jnp.int32), output=out,
                         pred=bucket_of(out) if pred is None else jnp.asarray(pred, jnp.int32),
                         hashes=None if tr.hash_ids is None else jnp.asarray(tr.hash_ids,
                                                                             jnp.int32))
