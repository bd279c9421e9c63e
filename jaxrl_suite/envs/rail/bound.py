"""A valid upper bound on the expected revenue of ANY pricing policy, given the episode's shock.

Why not a "demand-known" policy: a policy that knows the shock (baselines.cdlp_known) is still a
heuristic and can score below a tuned static fare, so it bounds nothing. This module bounds every
policy instead, by relaxing what limits revenue.

Per episode with hidden shock s (drawn at reset from the episode key, so it is the same for every
policy evaluated on the same keys), market m and segment g:

  * bookings. A passenger books at most once, and only if the first-round MNL draw picked a
    train (a recaptured passenger is one whose first choice was a train that had sold out). The
    no-purchase share P0 rises with every price and with every train removed from the choice set,
    so  E[bookings_m | s] <= D_m(s) = sum_g lam[m, g] level s (1 - P0_min[m, g]),  where P0_min
    is the share with every train serving m open at the lowest bucket.
  * fares. A booking in m pays at most f_m = base_fare[m] min(levels[-1], cap_mult[m]).
  * seats. A train sells at most its capacity on every leg.

Realised revenue <= LP(realised bookings), and the LP value is concave and non-decreasing in its
demand caps, so by Jensen  E[revenue | s] <= LP(E[bookings | s]) <= LP(D(s)), with seats pooled
over the trains on each leg (a relaxation of per-train seats, so still a bound, and a tiny LP):

  LP(D) = max_X  sum_m f_m X_m
          s.t.   X_m <= D_m                                   (demand, every market)
                 sum_m legs[m, l] X_m <= sum_a capacity[a, l]  (seats on leg l, all trains)
                 X >= 0,  X_m = 0 where no train serves m.

Averaged over the same episodes it is >= the mean revenue of every policy up to the Poisson noise
given s (tests check it against every baseline). It is loose: it lets every would-be passenger pay
the top fare.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.rail import demand, lp
from jaxrl_suite.envs.rail.env import EnvParams, prices


def demand_caps(params: EnvParams, shock) -> jax.Array:
  """D [M]: the bound on expected bookings per market over the whole horizon."""
  mult = jnp.full(params.agent_mask.shape, params.levels[0])
  dist = demand.time_distance(params.dep_time, params.pref_time)
  u = demand.utilities(prices(mult, params), params.alpha, params.beta, params.gamma, dist)
  avail = params.serves * params.agent_mask[:, None]
  _, p0 = demand.mnl_shares(u, avail)                                    # [M, G]
  lam = params.lam * params.booking_curve.sum(1)[None] * params.market_mask[:, None]
  return jnp.sum(lam * params.demand_level * shock * (1.0 - p0), -1)


def top_fares(params: EnvParams) -> jax.Array:
  """f [M]: the highest fare a booking in each market can pay."""
  return params.base_fare * jnp.minimum(params.levels[-1], params.cap_mult)


def revenue_bound(params: EnvParams, shock) -> jax.Array:
  """LP(D(shock)) in GBP (see the module docstring); jittable, vmappable over shocks."""
  n_m = params.serves.shape[1]
  served = ((params.serves * params.agent_mask[:, None]).sum(0) > 0).astype(jnp.float32)
  c = top_fares(params) * served
  a = jnp.concatenate([jnp.eye(n_m), params.legs.T], 0) * served[None]      # [M + NL, M]
  seats = jnp.sum(params.capacity * params.agent_mask[:, None], 0)            # [NL]
  b = jnp.concatenate([demand_caps(params, shock) * served, seats])
  _, value, _ = lp.simplex_max(c, a, jnp.maximum(b, 0.0), max_iter=4 * n_m)
  return value


def episode_shocks(env, params: EnvParams, keys: jax.Array) -> jax.Array:
  """The hidden shock of each episode key [N, 2] (evaluate.run_episode's reset split)."""
  def one(k):
    k_reset, _ = jax.random.split(k)
    return env.reset_env(k_reset, params)[1].shock
  return jax.vmap(one)(keys)


def mean_bound(env, params: EnvParams, keys: jax.Array) -> jax.Array:
  """Bound per episode [N] on the episodes `evaluate.evaluate(env, params, policy, keys)` plays."""
  return jax.vmap(lambda s: revenue_bound(params, s))(episode_shocks(env, params, keys))


def seed_bounds(env, keys: jax.Array, scenarios: dict) -> dict:
  """{scenario: [S]} mean bound over each seed's keys [S, N, 2], per scenario {name: params}
  (one compile for all)."""
  fn = jax.jit(lambda ks, ps: mean_bound(env, ps, ks))
  return {sc: np.asarray([float(fn(keys[s], ps_).mean()) for s in range(keys.shape[0])])
          for sc, ps_ in scenarios.items()}
