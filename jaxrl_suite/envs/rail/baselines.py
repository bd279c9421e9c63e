"""Revenue-management baselines for RailRM-v0, as pure policies over the environment state.

Every baseline is `policy(key, state, params, theta) -> levels int32[A]` (bucket actions): a
revenue manager sees its own inventory and the model-based forecast (`forecast`), not the
simulator's hidden demand shock, which it re-estimates from bookings (`forecast.shock_hat`).
What it may observe is `params.information` (information.py): by default "operator" (its own
operator's bookings and seats, every train's published fare), "pooled" (all operators') as an
upper reference reported separately.
`theta` is the one tuned parameter of each family (same tuning budget for all, see
experiments/rail_pricing.py):

  static      theta = fare bucket k for every train, fixed for the whole horizon.
  myopic      theta = forecast scale; each period each train picks the bucket maximising this
              period's expected revenue (requests rationed to remaining seats), others' prices
              held at their current values, ignoring the future.
  emsr_b      theta = forecast scale; leg EMSR-b on the train's bottleneck leg, re-optimised each
              period, classes = the 8 buckets with independent incremental demand
              d_j = Q_j - Q_{j-1} (Q_j: demand to go with bucket j the cheapest open) at the
              bucket's average fare; offers the cheapest open bucket.
  emsr_b_mr   the same with the marginal-revenue fare adjustment for choice demand (Fiig et al.).
  cdlp        theta = forecast scale; choice-based deterministic LP per train, re-solved each
              period: max sum_k t_k R_k s.t. sum_k t_k Q_{k,l} <= c_l (every leg), sum_k t_k <= 1
              (R, Q: revenue and leg seats to go with bucket k offered all the time); the leg
              duals pi_l are bid prices and the train offers argmax_k R_k^now - pi . Q_k^now.
  cdlp_known  cdlp with the true per-episode demand shock (demand known), tuned on the same grid:
              an information benchmark, NOT an upper bound (a heuristic that knows the shock can
              still score below a tuned static fare); the valid bound is `bound.revenue_bound`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.rail import demand, emsr, forecast, lp
from jaxrl_suite.envs.rail.env import EnvParams, EnvState, n_agents, prices
from jaxrl_suite.envs.rail.instance import NL_MAX

BASELINES = ("static", "myopic", "emsr_b", "emsr_b_mr", "cdlp", "cdlp_known")
THETA_GRID = {"static": (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0),
              "myopic": (0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0),
              "emsr_b": (0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0),
              "emsr_b_mr": (0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0),
              "cdlp": (0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0),
              "cdlp_known": (0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)}


def _scale(state, params, theta, known_shock=False):
  """[A, 1, 1]: theta x each train's operator's shock estimate (the true shock: cdlp_known)."""
  s = forecast.shock_hat(state, params)
  if known_shock:
    s = jnp.full_like(s, state.shock)
  return (theta * s)[:, None, None]


def static(key, state: EnvState, params: EnvParams, theta):
  del key, state
  k = jnp.asarray(theta, jnp.int32)
  return jnp.full((n_agents(params),), k, jnp.int32)


def myopic(key, state: EnvState, params: EnvParams, theta):
  del key
  lam = forecast.window_demand(state.time, params, to_go=False) * _scale(state, params, theta)
  q, _, rev, rev_op, _ = forecast.by_level(state, params, lam)           # q [A, L, M, G]

  def own(a, k):
    acc = demand.ration(q[a, k][None], state.remaining[a][None], params.legs, integral=False)[0]
    mult = params.levels[k]
    return jnp.sum(acc.sum(-1) * prices(jnp.full((n_agents(params),), mult), params)[a])

  aa, kk = jnp.meshgrid(jnp.arange(n_agents(params)), jnp.arange(params.levels.shape[0]),
                        indexing="ij")
  r = jax.vmap(jax.vmap(own))(aa, kk) + (rev_op - rev)   # own sales capped + siblings' revenue
  return jnp.argmax(r, -1).astype(jnp.int32)


def _leg_classes(state, params, theta):
  """Per train, on its bottleneck leg, by decreasing fare (bucket L-1 first): (fares [A, L]
  = own revenue per passenger, Q [A, L] seats asked on the leg, R_inc [A, L] = what offering the
  bucket adds to the operator's revenue, capacity [A])."""
  lam = forecast.window_demand(state.time, params, to_go=True) * _scale(state, params, theta)
  q, leg, rev, rev_op, closed = forecast.by_level(state, params, lam)
  runs = params.capacity > 0
  k_cur = jnp.argmin(jnp.abs(params.levels[None] - state.mult[:, None]), -1)   # [A]
  cur = jnp.take_along_axis(leg, k_cur[:, None, None], 1)[:, 0]              # [A, NL]
  tight = jnp.where(runs, cur / jnp.maximum(state.remaining, 0.5), -1.0)
  b = jnp.argmax(tight, -1)                                                  # [A]
  q_b = jnp.take_along_axis(leg, b[:, None, None], 2)[..., 0]                # [A, L]
  pax = q.sum((2, 3))
  fare = rev / jnp.maximum(pax, 1e-9)                                        # [A, L]
  cap = jnp.take_along_axis(state.remaining, b[:, None], 1)[:, 0]
  r_inc = rev_op - closed[:, None]
  return fare[:, ::-1], q_b[:, ::-1], r_inc[:, ::-1], cap


def _emsr(state, params, theta, adjust: bool):
  fare, q, r_inc, cap = _leg_classes(state, params, theta)
  n_l = params.levels.shape[0]
  q = jax.lax.cummax(q, axis=1)                # demand cannot fall as the fare falls

  def one(f, qq, r, c):
    if adjust:
      f, d = emsr.mr_adjust(r, qq)
    else:
      d = jnp.maximum(jnp.diff(qq, prepend=0.0), 0.0)
    sig = jnp.sqrt(d + (params.demand_cv * d) ** 2)
    j = emsr.lowest_open(c, f, d, sig)
    return n_l - 1 - j

  return jax.vmap(one)(fare, q, r_inc, cap).astype(jnp.int32)


def emsr_b(key, state: EnvState, params: EnvParams, theta):
  del key
  return _emsr(state, params, theta, adjust=False)


def emsr_b_mr(key, state: EnvState, params: EnvParams, theta):
  del key
  return _emsr(state, params, theta, adjust=True)


def bid_prices(state: EnvState, params: EnvParams, theta, known_shock=False):
  """Leg bid prices pi [A, NL] and period quantities (rev_now [A, L], leg_now [A, L, NL])."""
  sc = _scale(state, params, theta, known_shock)
  _, leg, _, rev_op, closed = forecast.by_level(
      state, params, forecast.window_demand(state.time, params, True) * sc)
  _, leg_now, _, rev_op_now, closed_now = forecast.by_level(
      state, params, forecast.window_demand(state.time, params, False) * sc)
  # objective: what offering the train at bucket k adds to its operator's revenue (own revenue
  # minus the siblings' revenue it cannibalises); t = 0 (not offering) is worth 0
  rev = rev_op - closed[:, None]
  rev_now = rev_op_now - closed_now[:, None]
  n_l = params.levels.shape[0]

  def solve(r, lg, cap):
    a = jnp.concatenate([lg.T, jnp.ones((1, n_l))], 0)                  # [NL + 1, L]
    b = jnp.concatenate([jnp.maximum(cap, 0.0), jnp.ones((1,))])
    a, b, _ = lp.drop_implied_rows(a, b)          # identical legs: float32-safe duals (lp.py)
    _, _, y = lp.simplex_max(r, a, b)
    return y[:NL_MAX]

  pi = jax.vmap(solve)(rev, leg, state.remaining)
  return pi, rev_now, leg_now


def _cdlp(state, params, theta, known_shock):
  pi, rev_now, leg_now = bid_prices(state, params, theta, known_shock)
  score = rev_now - jnp.einsum("al,akl->ak", pi, leg_now)
  return jnp.argmax(score, -1).astype(jnp.int32)


def cdlp(key, state: EnvState, params: EnvParams, theta):
  del key
  return _cdlp(state, params, theta, False)


def cdlp_known(key, state: EnvState, params: EnvParams, theta):
  del key
  return _cdlp(state, params, theta, True)


POLICIES = {"static": static, "myopic": myopic, "emsr_b": emsr_b, "emsr_b_mr": emsr_b_mr,
            "cdlp": cdlp, "cdlp_known": cdlp_known}
