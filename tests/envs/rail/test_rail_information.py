"""Information parity of the RM baselines (issue #38, step 2; envs/rail/information.py).

Under information="operator" (the default) a train's forecast, shock estimate and action depend
only on what its operator observes: perturbing a rival operator's private state (seats left,
bookings, its own expectations) leaves them unchanged. Under "pooled" the same perturbation moves
them (so the test can tell the modes apart)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.rail import INFORMATION_MODES, baselines as B, forecast, make_rail


def _mid_episode(information, periods=4, seed=0):
  env, p = make_rail("ecml", information=information)
  key = jax.random.PRNGKey(seed)
  _, s = env.reset_env(key, p)
  for _ in range(periods):
    key, ka, ks = jax.random.split(key, 3)
    _, s, _, _, _ = env.step_env(ks, s, jax.random.randint(ka, (12,), 2, 6), p)
  return env, p, s


def _perturb_rivals(s, p, op=0):
  """Rivals of operator `op`: sold out on every leg, three times the bookings and expectations."""
  rival = (np.asarray(p.operator) != op) & (np.asarray(p.agent_mask) > 0)
  r = jnp.asarray(rival, jnp.float32)
  return s.replace(remaining=s.remaining * (1 - r[:, None]),
                   booked_cum=s.booked_cum * (1 + 2 * r),
                   nominal_cum=s.nominal_cum * (1 + 0.5 * r),
                   nominal_op_cum=s.nominal_op_cum * (1 + 0.5 * r),
                   sales_last=s.sales_last * (1 + r[:, None]),
                   revenue_cum=s.revenue_cum * (1 + r)), ~rival & (np.asarray(p.agent_mask) > 0)


def test_default_is_operator_and_bad_mode_is_refused():
  _, p = make_rail("tiny")
  assert INFORMATION_MODES[int(p.information)] == "operator"
  assert int(make_rail("tiny", information="pooled")[1].information) == 1
  with pytest.raises(ValueError, match="operator.*pooled"):
    make_rail("tiny", information="everything")


def test_shock_estimate_uses_own_operator_bookings_only():
  _, p, s = _mid_episode("operator")
  s2, mine = _perturb_rivals(s, p)
  np.testing.assert_array_equal(np.asarray(forecast.shock_hat(s, p))[mine],
                                np.asarray(forecast.shock_hat(s2, p))[mine])
  # operator 0's estimate is its own ratio estimator, by hand
  b = float(jnp.sum(s.booked_cum * mine)), float(jnp.sum(s.nominal_op_cum * mine))
  np.testing.assert_allclose(float(forecast.shock_hat(s, p)[0]),
                             (b[0] + forecast.K0) / (b[1] + forecast.K0), rtol=1e-6)
  _, pp, sp = _mid_episode("pooled")
  sp2, _ = _perturb_rivals(sp, pp)
  assert not np.allclose(np.asarray(forecast.shock_hat(sp, pp))[mine],
                         np.asarray(forecast.shock_hat(sp2, pp))[mine])


def test_forecasts_ignore_rivals_private_state_under_operator_parity():
  _, p, s = _mid_episode("operator")
  s2, mine = _perturb_rivals(s, p)
  lam = forecast.window_demand(s.time, p, True)
  out1 = forecast.by_level(s, p, lam * forecast.shock_hat(s, p)[:, None, None])
  out2 = forecast.by_level(s2, p, lam * forecast.shock_hat(s2, p)[:, None, None])
  for x1, x2 in zip(out1, out2):
    np.testing.assert_allclose(np.asarray(x1)[mine], np.asarray(x2)[mine], rtol=1e-6)
  # pooled: rivals sold out shift operator 0's demand forecast (passengers come to it)
  _, pp, sp = _mid_episode("pooled")
  sp2, _ = _perturb_rivals(sp, pp)
  q1 = forecast.by_level(sp, pp, lam)[0]
  q2 = forecast.by_level(sp2, pp, lam)[0]
  assert float(jnp.sum(q2[mine])) > float(jnp.sum(q1[mine])) * 1.01


@pytest.mark.parametrize("name", ["emsr_b", "cdlp"])
def test_policy_actions_ignore_rivals_private_state(name):
  _, p, s = _mid_episode("operator", periods=6)
  s2, mine = _perturb_rivals(s, p)
  pol = jax.jit(lambda st: B.POLICIES[name](None, st, p, 1.0))
  np.testing.assert_array_equal(np.asarray(pol(s))[mine], np.asarray(pol(s2))[mine])


def test_operator_expectation_equals_pooled_until_a_rival_sells_out():
  """nominal_op (rivals open) == nominal (true availability) while every train has seats; with a
  rival sold out the operator's expectation for its own train is lower than the true one (it
  does not see the passengers the rival turns away)."""
  env, p = make_rail("tiny", information="operator")
  _, s = env.reset_env(jax.random.PRNGKey(0), p)
  _, s1, _, _, _ = env.step_env(jax.random.PRNGKey(1), s, jnp.array([3, 3]), p)
  np.testing.assert_allclose(np.asarray(s1.nominal_op_cum), np.asarray(s1.nominal_cum), rtol=1e-6)
  sold = s.replace(remaining=s.remaining.at[1].set(0.0))
  _, s2, _, _, _ = env.step_env(jax.random.PRNGKey(1), sold, jnp.array([3, 3]), p)
  assert float(s2.nominal_op_cum[0]) < float(s2.nominal_cum[0]) * 0.99
