"""A small dense simplex solver in pure JAX (jittable, vmappable) for the bid-price LPs.

Solves   max c.x  s.t.  A x <= b,  x >= 0,   with b >= 0 (the slack basis is feasible),
which is the form of the choice-based deterministic LP (capacities and a time budget on the
right). Tableau method with Bland's rule (no cycling), at most `max_iter` pivots.

Returns (x [n], value, y [m]) where y are the optimal duals (shadow prices of the rows): in the
final tableau the objective row's entries under the slack columns. Strong duality
c.x = b.y holds at the optimum (tests check it against brute-force vertex enumeration).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_EPS = 1e-7


def simplex_max(c: jax.Array, a: jax.Array, b: jax.Array, max_iter: int = 64):
  """c [n], a [m, n], b [m] (>= 0). See the module docstring."""
  m, n = a.shape
  dt = jnp.result_type(c.dtype, jnp.float32)
  # tableau rows 0..m-1 constraints [A | I | b], row m objective [-c | 0 | 0]
  tab = jnp.zeros((m + 1, n + m + 1), dt)
  tab = tab.at[:m, :n].set(a).at[:m, n:n + m].set(jnp.eye(m, dtype=dt)).at[:m, -1].set(b)
  tab = tab.at[m, :n].set(-c)
  basis = n + jnp.arange(m)

  def cond(carry):
    tab, basis, it = carry
    return jnp.logical_and(it < max_iter, jnp.any(tab[m, :-1] < -_EPS))

  def body(carry):
    tab, basis, it = carry
    obj = tab[m, :-1]
    col = jnp.argmax(obj < -_EPS)                      # Bland: lowest index with negative cost
    colv = tab[:m, col]
    ratio = jnp.where(colv > _EPS, tab[:m, -1] / jnp.where(colv > _EPS, colv, 1.0), jnp.inf)
    best = jnp.min(ratio)
    # Bland tie-break: among minimal ratios the row whose basic variable has the lowest index
    tie = ratio <= best + 1e-9
    row = jnp.argmin(jnp.where(tie, basis, n + m + 1))
    unbounded = ~jnp.isfinite(best)
    piv = tab[row] / tab[row, col]
    new = tab - tab[:, col][:, None] * piv[None]
    new = new.at[row].set(piv)
    tab = jnp.where(unbounded, tab, new)
    basis = jnp.where(unbounded, basis, basis.at[row].set(col))
    return tab, basis, jnp.where(unbounded, max_iter, it + 1)

  tab, basis, _ = jax.lax.while_loop(cond, body, (tab, basis, jnp.asarray(0)))
  x = jnp.zeros(n + m, dt).at[basis].set(tab[:m, -1])[:n]
  y = tab[m, n:n + m]
  return x, tab[m, -1], y
