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

`shock_hat` re-forecasts the per-episode demand level from the bookings so far, per train a:
  shock_hat[a] = (booked + k0) / (expected at shock 1 + k0),
the ratio estimator with a k0-passenger prior at 1 (baselines tune nothing here; k0 is fixed),
summed over what a's operator observes (`information.py`): its own trains' bookings and its own
expectation (nominal_op_cum) under "operator", every train's under "pooled".

The forecasts of train a use a's operator's view of availability too (rivals open under
"operator"), and `lam_w` may be given per observing train ([A, M, G]), so that each operator's
forecast scales by its own shock estimate.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.rail import demand, information
from jaxrl_suite.envs.rail.env import EnvParams, EnvState, n_agents, prices
from jaxrl_suite.envs.rail.instance import H

K0 = 50.0


def shock_hat(state: EnvState, params: EnvParams) -> jax.Array:
  """[A] the demand-shock estimate each train's operator can make (see the module docstring)."""
  am = params.agent_mask
  own = information.same_operator(params.operator) * am[None, :]   # [A_obs, A]
  b_op = own @ state.booked_cum
  n_op = own @ state.nominal_op_cum
  b_all = jnp.sum(state.booked_cum * am)
  n_all = jnp.sum(state.nominal_cum * am)
  pooled = jnp.full_like(b_op, (b_all + K0) / (n_all + K0))
  return jnp.where(jnp.asarray(params.information) == 0, (b_op + K0) / (n_op + K0), pooled)


def window_demand(time, params: EnvParams, to_go: bool) -> jax.Array:
  """lam_window[m, g] at shock 1 and the scenario's demand level: period `time` or time..H-1."""
  h = jnp.arange(H)
  w = jnp.where(to_go, (h >= time), (h == time)).astype(jnp.float32)
  wg = params.booking_curve @ w                                       # [G]
  return params.lam * wg[None] * params.demand_level * params.market_mask[:, None]


def by_level(state: EnvState, params: EnvParams, lam_w: jax.Array):
  """(Q [A, L, M, G], leg [A, L, NL], rev [A, L], rev_op [A, L], closed [A]) for each train
  deviating alone to each level, as train a's operator forecasts it (module docstring).
  lam_w: [M, G], or [A, M, G] per observing train."""
  levels = params.levels
  n_l = levels.shape[0]
  n_a = n_agents(params)
  dist = demand.time_distance(params.dep_time, params.pref_time)
  seen = information.seen_remaining(state.remaining, params.capacity, params.operator,
                                    params.information)                # [A_obs, A, NL]
  avail_seen = jax.vmap(lambda r: demand.available(params.serves, r, params.legs))(seen)
  avail_seen = avail_seen * params.agent_mask[None, :, None]          # [A_obs, A, M]
  lam_w = jnp.broadcast_to(lam_w, (n_a,) + lam_w.shape[-2:])
  eye = jnp.eye(n_a)

  def one(a, k, closed=False):
    mult = jnp.where(eye[a] > 0, levels[k], state.mult)
    price = prices(mult, params)
    u = demand.utilities(price, params.alpha, params.beta, params.gamma, dist)
    avail = avail_seen[a]
    av = avail * (1.0 - eye[a][:, None]) if closed else avail
    p, _ = demand.mnl_shares(u, av)
    q_all = lam_w[a][None] * p                                         # [A, M, G]
    rev_all = jnp.sum(q_all.sum(-1) * price, -1) * params.agent_mask   # [A]
    sib = (params.operator == params.operator[a]).astype(jnp.float32)
    q = q_all[a]
    return q, q.sum(-1) @ params.legs, rev_all[a], jnp.sum(rev_all * sib)

  aa, kk = jnp.meshgrid(jnp.arange(n_a), jnp.arange(n_l), indexing="ij")
  q, leg, rev, rev_op = jax.vmap(jax.vmap(one))(aa, kk)
  closed = jax.vmap(lambda a: one(a, 0, closed=True)[3])(jnp.arange(n_a))
  return q, leg, rev, rev_op, closed
