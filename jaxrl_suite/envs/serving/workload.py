"""Episode workloads in JAX: windows of a trace, rate scaling, and the noisy length predictor.

An episode is a window of K consecutive requests of a trace stored in the env params
(`TraceArrays`, [T] each). `window_start` = -1 draws a uniformly random window at reset (training);
a fixed start gives a deterministic episode (evaluation, tests). Arrivals are re-zeroed at the
window start and divided by `rate_scale` (the load knob).

Per-window rate normalization (`trace_arrays(..., rate_window=K)`, the steady-state protocol):
bursty traces hold windows of K consecutive requests whose own mean rate
lambda_s = (K - 1) / (a_{s+K-1} - a_s) is far from the trace's: Azure code's 512-request
windows span 26 s to 250 s (0.7x to 6.3x its mean rate), so a rate scale r offered r x 20 req/s
in one replay and r x 2 in the next, and a "capacity" r* x lambda_trace was set by the burstiest
training window. With `norm` [T] = lambda_s / lambda_ref, the arrivals of the window at s become
(a - a_s) norm_s / r: every replay offers the same mean rate r lambda_ref, with the trace's own
burst shape inside it (`window_rate` is the check).

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
  norm: jax.Array | None = None     # float [T] window rate / reference rate (module docstring)


def window_rate_norm(arrival: np.ndarray, k: int, rate_ref: float) -> np.ndarray:
  """norm [T]: norm_s = lambda_s / rate_ref, lambda_s = (k - 1) / (a_{s+k-1} - a_s) the mean rate
  of the k-request window starting at s (starts past T - k use the last full window, as
  `sample_requests` clips them). float64 numpy."""
  a = np.asarray(arrival, np.float64)
  t = a.shape[0]
  if not 2 <= k <= t:
    raise ValueError(f"rate_window={k} must be in [2, {t}] (the trace's length)")
  if not rate_ref > 0:
    raise ValueError(f"rate_ref must be > 0, got {rate_ref}")
  span = a[k - 1:] - a[:t - k + 1]                       # [T - k + 1]
  lam = (k - 1) / np.maximum(span, 1e-9)
  lam = np.concatenate([lam, np.full(k - 1, lam[-1])])
  return lam / float(rate_ref)


def trace_arrays(tr: traces.Trace, max_model_len: int = 4096, max_output: int = 2048,
                 dtype=float, hashes: bool = False, rate_window: int | None = None,
                 rate_ref: float | None = None) -> TraceArrays:
  """Clips a trace to the model's context and stores it as JAX arrays (with its prompt block
  ids if `hashes`: the prefix cache; off by default so that traces with and without ids share
  one pytree structure). rate_window = K: every K-request window is rescaled to the mean rate
  rate_ref (default: the trace's own, `Trace.rate`) before `rate_scale` (module docstring);
  None: arrivals as recorded."""
  tr = tr.clipped(max_model_len, max_output)
  if hashes and tr.hash_ids is None:
    raise ValueError(f"trace {tr.name!r} has no hash_ids (the prefix cache needs them)")
  h = jnp.asarray(tr.hash_ids, jnp.int32) if hashes else None
  ft = jnp.result_type(dtype)
  norm = None
  if rate_window is not None:
    norm = jnp.asarray(window_rate_norm(tr.arrival, int(rate_window),
                                        tr.rate if rate_ref is None else rate_ref), ft)
  return TraceArrays(jnp.asarray(tr.arrival, ft), jnp.asarray(tr.prompt, jnp.int32),
                     jnp.asarray(tr.output, jnp.int32), h, norm)


def window_rate(req: engine.Requests) -> jax.Array:
  """Mean arrival rate of an episode's requests, (K - 1) / (a_{K-1} - a_0)."""
  k = req.arrival.shape[-1]
  return (k - 1) / (req.arrival[..., -1] - req.arrival[..., 0])


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
  arr = arr - arr[0]
  if tr.norm is not None:
    # window rate normalized to the reference rate (module docstring); norm_s is exact for
    # windows of the K it was built for
    arr = arr * tr.norm[start]
  arr = arr / rate_scale
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
