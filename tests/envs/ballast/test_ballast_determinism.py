"""Same seed -> same result for the BallastHydro pipeline (docs/ballast.md, "Determinism"):
the episode bank is a function of (layout, seed) alone, whatever the process's global RNG state,
and the trainer (algos/ppo through algos/ballast.make_trainer, seeds vmapped, chunks
across layouts) gives bitwise-equal parameters and metrics on two calls with the same keys.

What is NOT bitwise across processes: XLA:CPU splits large reductions over its intra-op thread
pool, whose size is the number of CPUs the process may run on, so the same program on a
different CPU count rounds differently (measured: a 1-core and a 2-core process differ from the
first PPO chunk; two 2-core processes, with or without the compilation cache, are equal).
"""

import random

import jax
import numpy as np

from configs import ballast_hydro as cfg_mod
from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.envs.ballast import episodes as EP
from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank, hydro_params
from jaxrl_suite.envs.ballast.layout import load_layout
from jaxrl_suite.envs.ballast.routes import build_routes

ENV = BallastHydro()


def _params(lay, g):
  T, E = g["cap"].shape[0], g["edge_mask"].shape[0]
  z = np.zeros((1, T), np.float32)
  empty = EpisodeBank(vol0=z, target=z, clog=np.ones((1, E), np.float32),
                      m_heel0=np.zeros(1, np.float32), m_trim0=np.zeros(1, np.float32),
                      n_blocked=np.zeros(1, np.int32))
  return hydro_params(lay, g, empty)


def _content_check(batch, seed):
  """A deterministic stand-in for the oracle (cheap): accepts by the candidate's content."""
  return np.array([(int(np.floor(e[0].sum())) + seed) % 3 != 0 for e in batch])


def test_bank_depends_on_the_seed_only():
  lay = load_layout("direct10")
  g = build_routes(lay, "auto")
  p = _params(lay, g)
  banks = []
  for glob in (1, 2):              # global RNG state must not leak into the bank
    np.random.seed(glob)
    random.seed(glob)
    banks.append(EP.make_bank(lay, g, p, n=24, seed=5, check=_content_check))
  (b1, r1), (b2, r2) = banks
  for f in ("vol0", "target", "clog", "m_heel0", "m_trim0", "n_blocked"):
    np.testing.assert_array_equal(np.asarray(getattr(b1, f)), np.asarray(getattr(b2, f)))
  assert r1 == r2 and r1["rejection_rate"] > 0       # the stand-in did reject
  b3, _ = EP.make_bank(lay, g, p, n=24, seed=6, check=_content_check)
  assert not np.array_equal(np.asarray(b1.vol0), np.asarray(b3.vol0))


def test_trainer_same_keys_same_parameters_bitwise():
  c = cfg_mod.get_config("quick")
  c.ppo.num_envs, c.ppo.num_steps = 4, 8
  lay = load_layout("direct10")
  g = build_routes(lay, "auto")
  p = _params(lay, g)
  bank, _ = EP.make_bank(lay, g, p, n=8, seed=0, check=lambda b, s: np.ones(len(b), bool))
  tabs = A.make_tables(p.replace(bank=bank), False, ENV.agent_api)
  init, chunk = AB.make_trainer(c, ENV, 2, 1)

  def train(seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), c.n_seeds)
    state = init(keys, tabs)
    ms = []
    for i in range(2):
      keys = jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys)
      state, m = chunk(state, tabs, keys)
      ms.append(m)
    return jax.device_get((state.params, ms))

  a, b, other = train(0), train(0), train(1)
  leaves = lambda t: [np.asarray(x) for x in jax.tree.leaves(t)]
  for x, y in zip(leaves(a), leaves(b)):
    np.testing.assert_array_equal(x, y)
  assert any(not np.array_equal(x, y) for x, y in zip(leaves(a[0]), leaves(other[0])))
