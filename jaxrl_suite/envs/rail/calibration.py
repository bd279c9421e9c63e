"""Price-perturbation check of the demand calibration (market-level fare elasticities).

With capacity made non-binding, every train at the base fare (bucket of multiplier 1.0) and
then every train 10% dearer (bucket 1.1), the same episode keys for both (common random
numbers), the arc elasticity of bookings per segment is

    e_g = log(Q_g(1.1) / Q_g(1.0)) / log(1.1),

to compare with the UK evidence (instance.ELASTICITY targets; ranges full/walk-up -0.2..-0.7,
reduced/leisure -0.65..-1.0, season -0.2..-0.5).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.rail import evaluate

UK_RANGES = {"business": (-0.7, -0.2), "leisure": (-1.0, -0.65), "commuter": (-0.5, -0.2)}


def arc_elasticities(env, params, key, n_episodes: int = 256, lo: float = 1.0, hi: float = 1.1):
  """Per-segment arc elasticities [G] measured by rollouts (see the module docstring)."""
  p = params.replace(capacity=params.capacity * 1e4, recapture=0.0)
  levels = np.asarray(params.levels)
  k_lo, k_hi = int(np.argmin(np.abs(levels - lo))), int(np.argmin(np.abs(levels - hi)))
  keys = jax.random.split(key, n_episodes)
  n = p.agent_mask.shape[0]

  def bookings(k):
    pol = lambda key, obs, state: jnp.full((n,), k, jnp.int32)
    return evaluate.evaluate(env, p, pol, keys)["bookings_g"].sum(0)

  q0, q1 = np.asarray(bookings(k_lo)), np.asarray(bookings(k_hi))
  return np.log(q1 / q0) / np.log(levels[k_hi] / levels[k_lo])


def per_seed(env, params, key, n_seeds: int, n_episodes: int = 256) -> np.ndarray:
  """Arc elasticities [S, G]: one independent set of n_episodes rollouts per seed (keys
  fold_in(key, s)), so the calibration check has replicates."""
  return np.stack([arc_elasticities(env, params, jax.random.fold_in(key, s), n_episodes)
                   for s in range(n_seeds)])
