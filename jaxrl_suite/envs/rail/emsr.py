"""EMSR-b protection levels (Belobaba 1992) and the marginal-revenue fare adjustment (Fiig et al.
2010, "EMSRb-MR"), single leg, as pure functions.

Classes j = 1..K in decreasing fare r_1 > ... > r_K, demands ~ N(mu_j, sigma_j^2). Protect
classes 1..j together:

  mu_bar_j = sum_{i<=j} mu_i,  sigma_bar_j^2 = sum_{i<=j} sigma_i^2,
  r_bar_j = sum_{i<=j} r_i mu_i / mu_bar_j,
  y_j = mu_bar_j + sigma_bar_j Phi^{-1}(1 - r_{j+1} / r_bar_j),

and the booking limit of class j+1 is C - y_j. With one price open at a time (undifferentiated
fares), we offer the cheapest class whose booking limit is >= 1 seat.

Fare adjustment (for choice demand): with Q_j the demand when class j is the lowest open one and
R_j = r_j Q_j, the incremental demand is d_j = Q_j - Q_{j-1} and the adjusted fare is the
marginal revenue f_j = (R_j - R_{j-1}) / (Q_j - Q_{j-1}); EMSR-b then runs on (f_j, d_j) and a
class whose adjusted fare is <= 0 is never opened.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri


def protection_levels(fares: jax.Array, mu: jax.Array, sigma: jax.Array) -> jax.Array:
  """y [K-1] (y_j for j = 1..K-1) from fares/mu/sigma [K] sorted by decreasing fare."""
  mu_bar = jnp.cumsum(mu)
  sig_bar = jnp.sqrt(jnp.cumsum(sigma ** 2))
  r_bar = jnp.cumsum(fares * mu) / jnp.maximum(mu_bar, 1e-9)
  frac = 1.0 - fares[1:] / jnp.maximum(r_bar[:-1], 1e-9)
  z = ndtri(jnp.clip(frac, 1e-6, 1 - 1e-6))
  y = mu_bar[:-1] + sig_bar[:-1] * z
  # r_{j+1} >= r_bar_j (no reason to protect) -> y = 0
  return jnp.where(frac > 0, jnp.maximum(y, 0.0), 0.0)


def lowest_open(capacity, fares, mu, sigma) -> jax.Array:
  """Index (0-based, decreasing-fare order) of the cheapest class with booking limit >= 1.

  Classes with fare <= 0 are closed (the MR adjustment marks inefficient classes that way);
  class 0 is always open.
  """
  y = protection_levels(fares, mu, sigma)
  limit_ok = (capacity - y) >= 1.0                                    # class j+1 open
  open_ = jnp.concatenate([jnp.array([True]), jnp.logical_and(limit_ok, fares[1:] > 0)])
  # nested: a class is open only if every dearer class is open, too (booking limits decrease)
  nested = jnp.cumprod(open_.astype(jnp.int32)) > 0
  return jnp.sum(nested) - 1


def mr_adjust(rev: jax.Array, q: jax.Array):
  """(adjusted fares f [K], incremental demand d [K]) from R_j and Q_j [K] (decreasing fare).

  R_j is the revenue (for the seller) when class j is the lowest open one, Q_j the seats it
  sells; q must be non-decreasing (lower fare, more demand). f_j = (R_j - R_{j-1}) /
  (Q_j - Q_{j-1}) with R_0 = Q_0 = 0; a class that adds no demand gets f = -1 (closed).
  """
  dq = jnp.diff(q, prepend=0.0)
  dr = jnp.diff(rev, prepend=0.0)
  f = jnp.where(dq > 1e-9, dr / jnp.maximum(dq, 1e-9), -1.0)
  return f, jnp.maximum(dq, 0.0)
