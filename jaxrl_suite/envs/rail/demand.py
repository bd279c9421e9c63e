"""Aggregate rail demand: Poisson arrivals, MNL choice with an outside option, leg rationing.

All functions are pure and shape-polymorphic over leading batch axes only where stated; shapes
use A trains, M O-D markets, G customer segments, NL legs.

Choice (per market m and segment g), with availability mask avail[a, m] in {0, 1}:

    u[a, m, g] = alpha[m, g] - beta[m, g] * price[a, m] - gamma[g] * dist(tau_a, tau*_g)
    P[a, m, g] = avail[a, m] exp(u[a, m, g]) / (1 + sum_b avail[b, m] exp(u[b, m, g]))
    P0[m, g]   = 1 / (1 + sum_b avail[b, m] exp(u[b, m, g]))            (outside option, u0 = 0)

Arrivals N[m, g] ~ Poisson(lam[m, g]); by Poisson splitting the counts per alternative are
independent, n[a, m, g] ~ Poisson(lam * P[a]), n0 ~ Poisson(lam * P0), and sum E[n] = lam exactly.

Capacity: a booking for market m on train a uses a seat on every leg l with legs[m, l] = 1. If
the demand on a leg exceeds the remaining seats, every market using that leg is rationed by the
same ratio r[a, l] = min(1, remaining / demand); a market takes the tightest ratio over its legs
and accepted = floor(n * r). Then for every leg l, sum_m floor(n_m r_m) <= sum_m n_m r_l <=
remaining[a, l]: no leg is ever oversold (tests/rail checks this with hypothesis).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NEG = -1e30  # utility of an unavailable alternative (exp underflows to exactly 0)


def time_distance(dep_time: jax.Array, pref_time: jax.Array) -> jax.Array:
  """dist[a, g] = min_k |tau_a - tau*_{g,k}| in hours; dep_time [A], pref_time [G, K]."""
  return jnp.min(jnp.abs(dep_time[:, None, None] - pref_time[None]), axis=-1)


def utilities(price: jax.Array, alpha: jax.Array, beta: jax.Array, gamma: jax.Array,
              dist: jax.Array) -> jax.Array:
  """u[a, m, g] from price [A, M], alpha/beta [M, G], gamma [G], dist [A, G]."""
  return alpha[None] - beta[None] * price[:, :, None] - gamma[None, None] * dist[:, None, :]


def mnl_shares(u: jax.Array, avail: jax.Array) -> tuple[jax.Array, jax.Array]:
  """MNL choice probabilities with an outside option of utility 0.

  Args:
    u: [A, M, G] utilities. avail: [A, M] (bool or 0/1) alternative is offered.
  Returns:
    (P [A, M, G], P0 [M, G]); P.sum(0) + P0 == 1. Computed with a max shift for stability.
  """
  uu = jnp.where(avail[:, :, None] > 0, u, NEG)
  top = jnp.maximum(jnp.max(uu, axis=0), 0.0)                    # [M, G], includes u0 = 0
  e = jnp.exp(uu - top[None])
  e0 = jnp.exp(-top)
  z = e0 + e.sum(0)
  return e / z[None], e0 / z


def logsum(u: jax.Array, avail: jax.Array) -> jax.Array:
  """log(1 + sum_a avail exp(u)) [M, G]: expected max utility (consumer surplus x beta)."""
  uu = jnp.where(avail[:, :, None] > 0, u, NEG)
  top = jnp.maximum(jnp.max(uu, axis=0), 0.0)
  return top + jnp.log(jnp.exp(-top) + jnp.exp(uu - top[None]).sum(0))


SMALL = 10.0     # below: exact inverse-CDF Poisson; above: rounded normal approximation
_N_TERMS = 40    # inverse-CDF terms; P(N >= 40 | mean <= 10) < 1e-11


def poisson(key: jax.Array, mean: jax.Array) -> jax.Array:
  """Poisson counts (float) with the given means, branch-free (fast under vmap on CPU).

  mean <= SMALL: inverse CDF with _N_TERMS terms (exact up to < 1e-11); mean > SMALL:
  max(0, round(mean + sqrt(mean) z)) (normal approximation, mean and variance kept to O(1/mean)).
  jax.random.poisson's per-element rejection loops cost ~10x more inside the env's vmap.

  The CDF is a running sum over the _N_TERMS pmf terms written out term by term (one fused
  elementwise loop): XLA:CPU lowers jnp.cumsum to a reduce_window of width _N_TERMS, i.e.
  _N_TERMS^2 / 2 adds per draw, which was 70% of the env step (experiments/bench_rail.py). The
  float32 sums differ from that reduce_window's order in the last bit, so a draw whose u lies
  within ~1e-7 of a CDF value can move by one (measured: 5 in 14.5M draws).
  """
  ku, kz = jax.random.split(key)
  u = jax.random.uniform(ku, mean.shape)
  lam = jnp.minimum(mean, SMALL)
  k = jnp.arange(_N_TERMS, dtype=jnp.float32)
  # pmf_k = exp(-lam) lam^k / k!, computed in log space; count = #{k : CDF_k < u}
  logp = -lam[..., None] + k * jnp.log(jnp.maximum(lam[..., None], 1e-30)) - jax.lax.lgamma(k + 1)
  pmf = jnp.exp(logp)
  cdf = jnp.zeros_like(u)
  small = jnp.zeros_like(u)
  for i in range(_N_TERMS):
    cdf = cdf + pmf[..., i]
    small = small + (cdf < u).astype(jnp.float32)
  small = jnp.where(mean > 0, small, 0.0)
  z = jax.random.normal(kz, mean.shape)
  large = jnp.maximum(jnp.round(mean + jnp.sqrt(jnp.maximum(mean, 0.0)) * z), 0.0)
  return jnp.where(mean > SMALL, large, small)


def split_poisson(key: jax.Array, lam: jax.Array, probs: jax.Array) -> jax.Array:
  """Counts per alternative of Poisson(lam) arrivals that choose with `probs`.

  lam [...] (any shape), probs [K, ...] over K alternatives (outside option included if wanted):
  returns counts [K, ...] ~ Poisson(lam * probs), independent across alternatives (Poisson
  splitting), so sum_k E[count_k] = lam * sum_k probs_k.
  """
  return poisson(key, lam[None] * probs)


def ration(n: jax.Array, remaining: jax.Array, legs: jax.Array, integral: bool = True):
  """Proportional rationing of requests n [A, M, G] against remaining seats [A, NL].

  legs [M, NL] (0/1). Returns accepted [A, M, G] (floored when `integral`) with, for every train
  a and leg l, sum_{m, g} accepted[a, m, g] legs[m, l] <= remaining[a, l].
  """
  per_market = n.sum(-1)                                           # [A, M]
  leg_demand = per_market @ legs                                   # [A, NL]
  ratio = jnp.where(leg_demand > remaining,
                    remaining / jnp.maximum(leg_demand, 1e-9), 1.0)  # [A, NL]
  # tightest ratio over the legs a market uses (1 where a market uses no leg)
  r = jnp.min(jnp.where(legs[None] > 0, ratio[:, None, :], 1.0), axis=-1)  # [A, M]
  acc = n * r[:, :, None]
  if integral:
    acc = jnp.floor(acc + 1e-6)  # exact integers n*1 must not round down
    acc = jnp.minimum(acc, n)
  return acc


def seats_used(accepted: jax.Array, legs: jax.Array) -> jax.Array:
  """Seats taken per train and leg [A, NL] by bookings accepted [A, M, G]."""
  return accepted.sum(-1) @ legs


def available(serves: jax.Array, remaining: jax.Array, legs: jax.Array) -> jax.Array:
  """avail[a, m] = train a serves m and has at least one seat on every leg of m."""
  has_seat = remaining >= 1.0                                      # [A, NL]
  ok = jnp.all(jnp.where(legs[None] > 0, has_seat[:, None, :], True), axis=-1)
  return jnp.logical_and(serves > 0, ok).astype(jnp.float32)
