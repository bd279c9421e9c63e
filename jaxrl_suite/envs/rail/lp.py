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


def drop_implied_rows(a: jax.Array, b: jax.Array, rtol: float = 1e-6):
  """Presolve: zero every row of `A x <= b` (x >= 0) implied by another row, keeping shapes.

  Row i is implied by row j != i when a_j >= a_i entrywise and b_j <= b_i (then a_i x <= a_j x
  <= b_j <= b_i for x >= 0); of exact duplicates the lowest index is kept. A dropped row becomes
  0 . x <= b_i, whose slack stays basic, so its dual is 0; the duals of the kept rows are then an
  optimal dual of the original LP too (dual feasibility only involves the kept rows).

  Why: the CDLP of a train has one row per leg, and the legs a train runs often carry exactly the
  same seat demand (every market it serves crosses all of them). Pivoting on one of k identical
  rows leaves the others as float32 round-off (~1e-5 of the entries), which the simplex then
  pivots on: the optimum survives, but the duals (the bid prices) came out up to ~9x too high
  (tests/envs/rail/test_rail_rm_references.py, ecml train 6, before this presolve).
  """
  scale = jnp.max(jnp.abs(a)) + 1e-30
  ge = jnp.all(a[None, :, :] >= a[:, None, :] - rtol * scale, -1)   # ge[i, j]: a_j >= a_i
  le_b = b[None, :] <= b[:, None]                                   # b_j <= b_i
  same = jnp.logical_and(jnp.all(jnp.abs(a[None] - a[:, None]) <= rtol * scale, -1),
                         b[None, :] == b[:, None])
  idx = jnp.arange(a.shape[0])
  # j implies i: dominates it, and is not an exact twin of higher index (twins: keep the lowest)
  implies = ge & le_b & (idx[None, :] != idx[:, None]) & ~(same & (idx[None, :] > idx[:, None]))
  drop = jnp.any(implies, -1)
  return jnp.where(drop[:, None], 0.0, a), b, drop
