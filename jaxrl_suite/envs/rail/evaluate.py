"""Episode evaluation and the pricing metrics of RailRM-v0 (pure, vmappable over episodes).

`run_episode(env, params, policy, key)` plays one episode with `policy(key, obs, state) ->
action [A]` (in the env's action form) and returns per-episode metrics:

  revenue [A] (GBP per train), revenue_total, revenue_op [O_MAX] (per operator),
  load_factor = seat-km sold / seat-km offered, spill (passengers refused for capacity and not
  recaptured), cs (expected consumer surplus, logsum / beta, GBP), equity over operators
  1 - sum_ij |x_i - x_j| / (2 n sum x) (the paper code's equality measure), volatility = mean
  |log(mult_t / mult_{t-1})| over real trains and periods t >= 1, bookings_g [G] per segment.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.rail.instance import H, O_MAX


def equity(x: jax.Array, mask: jax.Array) -> jax.Array:
  """1 - sum_ij |x_i - x_j| / (2 n sum x) over the masked entries of x [N]."""
  n = jnp.maximum(mask.sum(), 1.0)
  d = jnp.abs(x[:, None] - x[None, :]) * mask[:, None] * mask[None, :]
  return 1.0 - d.sum() / (2.0 * n * jnp.maximum((x * mask).sum(), 1e-9))


def run_episode(env, params, policy, key):
  k_reset, k_run = jax.random.split(key)
  obs, state = env.reset_env(k_reset, params)

  def step(carry, k):
    obs, state = carry
    k_pol, k_env = jax.random.split(k)
    action = policy(k_pol, obs, state)
    obs, state, _, _, info = env.step_env(k_env, state, action, params)
    return (obs, state), info

  (_, final), info = jax.lax.scan(step, (obs, state), jax.random.split(k_run, H))
  am = params.agent_mask
  rev = info["revenue"].sum(0)
  op_onehot = jax.nn.one_hot(params.operator, O_MAX) * am[:, None]
  rev_op = rev @ op_onehot
  op_mask = (op_onehot.sum(0) > 0).astype(jnp.float32)
  cap_km = jnp.sum(params.capacity * params.leg_km[None])
  vol = jnp.sum(info["price_change"][1:]) / jnp.maximum(am.sum() * (H - 1), 1.0)
  return {"revenue": rev, "revenue_total": rev.sum(), "revenue_op": rev_op,
          "load_factor": info["seat_km"].sum() / cap_km, "spill": info["spill"].sum(),
          "cs": info["cs"].sum(), "equity": equity(rev_op, op_mask), "volatility": vol,
          "bookings_g": info["bookings_g"].sum(0), "min_remaining": jnp.min(final.remaining)}


def evaluate(env, params, policy, keys):
  """run_episode vmapped over keys [N, 2]: metrics with a leading [N] axis."""
  return jax.vmap(lambda k: run_episode(env, params, policy, k))(keys)


def baseline_policy(fn, params, theta):
  """Adapts a state baseline `fn(key, state, params, theta)` to `policy(key, obs, state)`."""
  return lambda key, obs, state: fn(key, state, params, theta)
