"""Nash / monopoly benchmarks and the collusion index on the tiny instance (brute force)."""

import itertools

import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.rail import competition as C
from jaxrl_suite.envs.rail import make_rail


def test_nash_is_a_fixed_point_and_monopoly_is_the_brute_force_optimum():
  env, p = make_rail("tiny")
  p = p.replace(capacity=p.capacity * 5)       # capacity not binding everywhere: interior prices
  real = np.asarray(p.agent_mask) > 0
  players = np.where(real, np.asarray(p.operator), -1)
  lv, conv = C.nash(env, p, players)
  assert conv
  pay = C.fluid_payoffs(env, p)
  grid = np.array(list(itertools.product(range(8), repeat=2)))
  rev = np.asarray(pay(jnp.asarray(grid)))                         # [64, 2]
  idx = {tuple(g): i for i, g in enumerate(grid)}
  base = rev[idx[tuple(lv)]]
  for a in range(2):                                                # no profitable deviation
    for k in range(8):
      dev = lv.copy()
      dev[a] = k
      assert rev[idx[tuple(dev)], a] <= base[a] + 1e-3
  mono = C.monopoly(env, p, real)
  tot = rev.sum(1)
  np.testing.assert_allclose(tot[idx[tuple(mono)]], tot.max(), rtol=1e-6)
  assert tot.max() >= base.sum() - 1e-3


def test_collusion_index_endpoints():
  np.testing.assert_allclose(C.collusion_index([10.0, 20.0, 15.0], 10.0, 20.0), [0.0, 1.0, 0.5])
