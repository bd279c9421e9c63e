"""Demand forecasts a revenue manager would compute from the model (fluid, shares from MNL).

For every train a and fare bucket k, with all other trains at their current multipliers:

  Q[a, k, m, g]  expected requests for train a over a window (current period or all periods to
                 go), lam_window[m, g] * P_a(levels[k]; others' prices, current availability);
  leg[a, k, l]   = sum_{m, g} Q[a, k, m, g] legs[m, l]   (seats asked on leg l);
  rev[a, k]      = sum_{m, g} Q[a, k, m, g] price_k[a, m]  (own revenue);
  rev_op[a, k]   = own revenue + the revenue of a's sibling trains (same operator, at their
                   current prices) when a moves to bucket k: an operator's RM system prices a
                   train net of the cannibalisation of its other trains;
  closed[a]      = the siblings' revenue when train a is not offered, so that
                   rev_op - closed is what offering a at bucket k adds for the operator.

`shock_hat` re-forecasts the per-episode demand level from the bookings so far:
  shock_hat = (booked + k0) / (expected at shock 1 + k0),
the ratio estimator with a k0-passenger prior at 1 (baselines tune nothing here; k0 is fixed).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.rail import demand
from jaxrl_suite.envs.rail.env import EnvParams, EnvState, n_agents, prices
from jaxrl_suite.envs.rail.instance import H

K0 = 50.0


def shock_hat(state: EnvState, params: EnvParams) -> jax.Array:
  b = jnp.sum(state.booked_cum * params.agent_mask)
  n = jnp.sum(state.nominal_cum * params.agent_mask)
  return (b + K0) / (n + K0)


def window_demand(time, params: EnvParams, to_go: bool) -> jax.Array:
  """lam_window[m, g] at shock 1 and the scenario's demand level: period `time` or time..H-1."""
  h = jnp.arange(H)
  w = jnp.where(to_go, (h >= time), (h == time)).astype(jnp.float32)
  wg = params.booking_curve @ w                                       # [G]
  return params.lam * wg[None] * params.demand_level * params.market_mask[:, None]


def by_level(state: EnvState, params: EnvParams, lam_w: jax.Array):
  """(Q [A, L, M, G], leg [A, L, NL], rev [A, L], rev_op [A, L], closed [A]) for each train
  deviating alone to each level (see the module docstring)."""
  levels = params.levels
  n_l = levels.shape[0]
  dist = demand.time_distance(params.dep_time, params.pref_time)
  avail = demand.available(params.serves, state.remaining, params.legs) * params.agent_mask[:, None]
  eye = jnp.eye(n_agents(params))

  def one(a, k, closed=False):
    mult = jnp.where(eye[a] > 0, levels[k], state.mult)
    price = prices(mult, params)
    u = demand.utilities(price, params.alpha, params.beta, params.gamma, dist)
    av = avail * (1.0 - eye[a][:, None]) if closed else avail
    p, _ = demand.mnl_shares(u, av)
    q_all = lam_w[None] * p                                            # [A, M, G]
    rev_all = jnp.sum(q_all.sum(-1) * price, -1) * params.agent_mask   # [A]
    sib = (params.operator == params.operator[a]).astype(jnp.float32)
    q = q_all[a]
    return q, q.sum(-1) @ params.legs, rev_all[a], jnp.sum(rev_all * sib)

  aa, kk = jnp.meshgrid(jnp.arange(n_agents(params)), jnp.arange(n_l), indexing="ij")
  q, leg, rev, rev_op = jax.vmap(jax.vmap(one))(aa, kk)
  closed = jax.vmap(lambda a: one(a, 0, closed=True)[3])(jnp.arange(n_agents(params)))
  return q, leg, rev, rev_op, closed
