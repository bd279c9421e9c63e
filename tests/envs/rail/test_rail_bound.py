"""The revenue upper bound (envs/rail/bound.py): closed form when seats never bind, and no policy
beats it on the episodes it is computed for."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.rail import bound, evaluate as E, make_rail

ENV, P = make_rail("ecml", pad=9)


def _p0_min_numpy(p):
  """No-purchase share [M, G] with every train serving m open at the lowest bucket (float64)."""
  price = np.asarray(p.base_fare, np.float64)[None] * np.minimum(
      float(p.levels[0]), np.asarray(p.cap_mult, np.float64))[None]                 # [1, M]
  dist = np.min(np.abs(np.asarray(p.dep_time, np.float64)[:, None, None]
                       - np.asarray(p.pref_time, np.float64)[None]), -1)           # [A, G]
  u = (np.asarray(p.alpha, np.float64)[None] - np.asarray(p.beta, np.float64)[None]
       * price[..., None] - np.asarray(p.gamma, np.float64)[None, None] * dist[:, None])
  open_ = (np.asarray(p.serves) * np.asarray(p.agent_mask)[:, None])[..., None] > 0
  return 1.0 / (1.0 + np.sum(np.where(open_, np.exp(u), 0.0), 0))


def test_bound_with_ample_seats_is_top_fare_times_demand_cap():
  p = P.replace(capacity=P.capacity * 1e4)
  shock = 1.3
  p0 = _p0_min_numpy(p)
  lam = np.asarray(p.lam, np.float64) * np.asarray(p.booking_curve, np.float64).sum(1)[None]
  d = np.sum(lam * np.asarray(p.market_mask)[:, None] * shock * (1 - p0), -1)
  f = np.asarray(p.base_fare, np.float64) * np.minimum(1.5, np.asarray(p.cap_mult, np.float64))
  served = (np.asarray(p.serves) * np.asarray(p.agent_mask)[:, None]).sum(0) > 0
  want = np.sum(np.where(served, f * d, 0.0))
  got = float(bound.revenue_bound(p, shock))
  np.testing.assert_allclose(got, want, rtol=1e-4)
  # seats only tighten it
  assert float(bound.revenue_bound(P, shock)) <= got * (1 + 1e-6)


@pytest.mark.slow   # ~15 CPU-s: compiles an episode evaluator (the full run checks the same bound
#                     against every policy on its held-out episodes, results: upper_bound.holds)
def test_no_policy_beats_the_bound_on_its_episodes():
  keys = jax.random.split(jax.random.PRNGKey(5), 8)
  ub = float(bound.mean_bound(ENV, P, keys).mean())
  fixed = jax.jit(lambda lv: E.evaluate(ENV, P, lambda k, o, s: lv, keys)["revenue_total"].mean())
  revs = [float(fixed(jnp.full((9,), k, jnp.int32))) for k in range(8)]
  assert max(revs) < ub
  # and the shocks are the ones the evaluator's episodes draw (common to every policy)
  s = np.asarray(bound.episode_shocks(ENV, P, keys))
  assert s.shape == (8,) and np.all(s > 0) and np.std(s) > 0
