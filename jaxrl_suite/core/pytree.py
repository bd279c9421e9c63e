"""Small pytree utilities (comparison of runner states, typed PRNG keys included)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def _host(x) -> np.ndarray:
  if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


def max_abs_diff(a: Any, b: Any) -> float:
  """Largest elementwise |a - b| over the leaves of two pytrees (PRNG keys by their data).

  Only the leaves are compared: static fields (e.g. a TrainState's apply_fn) may differ between
  two builds of the same learner.
  """
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  if len(la) != len(lb):
    raise ValueError(f"pytrees have {len(la)} and {len(lb)} leaves")
  worst = 0.0
  for x, y in zip(la, lb):
    x, y = _host(x), _host(y)
    if x.shape != y.shape:
      raise ValueError(f"leaf shapes differ: {x.shape} vs {y.shape}")
    if x.size:
      worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))))
  return worst


def trees_equal(a: Any, b: Any) -> bool:
  """Bit-for-bit equality of two pytrees."""
  return max_abs_diff(a, b) == 0.0
