"""envs/rail/rm_scoring.py (rows, grid-search tuning, held-out scoring) with fake evaluators whose
revenue is known, and the per-seed helpers added to calibration, competition and bound."""

import dataclasses

import chex
from flax import struct
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.rail import (INFORMATION_MODES, baselines, bound, calibration, competition,
                                   rm_scoring)

OPERATOR, POOLED = INFORMATION_MODES.index("operator"), INFORMATION_MODES.index("pooled")


@struct.dataclass
class _Params:
  """The two EnvParams fields the scoring touches (a pytree, as the evaluators are jitted)."""
  information: int = OPERATOR
  demand_level: float = 1.0


def _fake_evals():
  """revenue_total per episode = level * (10 - (theta - 1.25)^2) + 100 * information + the key's
  index / 1000 (so seeds differ); revenue_op splits it 3:1 over two operators."""
  def family(keys, theta, ps):
    n = keys.shape[0]
    rev = (ps.demand_level * (10.0 - (theta - 1.25) ** 2) + 100.0 * ps.information
           + keys[:, 0].astype(jnp.float32) / 1000.0)
    return {"revenue_total": rev, "revenue_op": jnp.stack([0.75 * rev, 0.25 * rev], 1),
            "n": jnp.full((n,), n, jnp.float32)}

  def fixed(keys, lv, ps):
    rev = ps.demand_level * lv.sum().astype(jnp.float32) + jnp.zeros(keys.shape[0])
    return {"revenue_total": rev, "revenue_op": jnp.stack([rev, 0 * rev], 1),
            "n": jnp.full(keys.shape[:1], keys.shape[0], jnp.float32)}

  evals = {name: family for name in baselines.BASELINES}
  evals["fixed"] = fixed
  return evals


def _keys(n_seeds, n):
  """[S, N, 2] keys whose first word is the seed x 1000 + episode."""
  first = np.arange(n_seeds)[:, None] * 1000 + np.arange(n)[None]
  return jnp.asarray(np.stack([first, np.zeros_like(first)], -1), jnp.uint32)


def test_rows_add_pooled_references_only_under_operator_information():
  rows = rm_scoring.rows("operator", ("emsr_b", "cdlp"))
  assert rows[:len(baselines.BASELINES)] == [(b, b, OPERATOR) for b in baselines.BASELINES]
  assert rows[len(baselines.BASELINES):] == [("emsr_b_pooled", "emsr_b", POOLED),
                                             ("cdlp_pooled", "cdlp", POOLED)]
  assert rm_scoring.rows("pooled", ("emsr_b",)) == [(b, b, POOLED) for b in baselines.BASELINES]


def test_tune_picks_the_grid_argmax_and_keeps_given_rows():
  rows = rm_scoring.rows("operator", ("emsr_b",))
  done = {"static": {"grid": [0.0], "revenue": [1.0], "chosen": 0.0}}
  out = rm_scoring.tune(_fake_evals(), rows, _keys(1, 4)[0], _Params(), done)
  assert list(out) == ["static"] + [r[0] for r in rows if r[0] != "static"]
  assert out["static"] == done["static"]                       # not re-tuned
  assert out["emsr_b"]["chosen"] == 1.25 and out["emsr_b_pooled"]["chosen"] == 1.25
  assert out["emsr_b"]["grid"] == list(baselines.THETA_GRID["emsr_b"])
  k = out["emsr_b"]["grid"].index(1.25)
  np.testing.assert_allclose(out["emsr_b"]["revenue"][k], 10.0 + 1.5e-3, rtol=1e-6)
  np.testing.assert_allclose(out["emsr_b_pooled"]["revenue"][k], 110.0 + 1.5e-3, rtol=1e-6)


def test_score_gives_per_seed_means_for_every_row_and_scenario():
  rows = [("myopic", "myopic", OPERATOR), ("myopic_pooled", "myopic", POOLED)]
  scen = {"train_level": _Params(), "shift": _Params(demand_level=2.0)}
  keys = _keys(2, 4)                                           # [S=2, N=4, 2]
  out = rm_scoring.score(_fake_evals(), rows, {"myopic": 1.25, "myopic_pooled": 2.25},
                         {"nash": np.array([1, 2, 3])}, keys, scen)
  assert set(out) == {"myopic", "myopic_pooled", "nash"}
  m = out["myopic"]["shift"]
  chex.assert_shape([m["revenue_total"], m["revenue_op"]], [(2,), (2, 2)])
  seed_mean = np.array([0.0015, 1.0015])                       # mean key index / 1000
  np.testing.assert_allclose(m["revenue_total"], 20.0 + seed_mean, rtol=1e-6)
  np.testing.assert_allclose(m["revenue_op"][:, 0], 0.75 * (20.0 + seed_mean), rtol=1e-6)
  np.testing.assert_allclose(out["myopic_pooled"]["train_level"]["revenue_total"],
                             9.0 + 100.0 + seed_mean, rtol=1e-6)
  np.testing.assert_allclose(out["nash"]["shift"]["revenue_total"], [12.0, 12.0])
  assert out["myopic"]["train_level"]["revenue_total"].dtype == np.float64


def test_calibration_per_seed_folds_the_seed_into_the_key(monkeypatch):
  seen = []

  def fake(env, params, key, n_episodes):
    seen.append((np.asarray(key).tolist(), n_episodes))
    return np.full(3, float(len(seen)))

  monkeypatch.setattr(calibration, "arc_elasticities", fake)
  key = jax.random.PRNGKey(7)
  el = calibration.per_seed(None, None, key, 2, 16)
  np.testing.assert_array_equal(el, [[1.0] * 3, [2.0] * 3])
  assert seen == [(np.asarray(jax.random.fold_in(key, s)).tolist(), 16) for s in range(2)]


def test_benchmark_fares_players_are_operators_or_trains(monkeypatch):
  calls = []
  monkeypatch.setattr(competition, "nash",
                      lambda env, p, players: (calls.append(players.tolist()) or players, True))
  monkeypatch.setattr(competition, "monopoly", lambda env, p, real: real.astype(int))
  p = _Rail(agent_mask=np.array([1.0, 1.0, 1.0, 0.0]), operator=np.array([0, 1, 1, 0]))
  nash_lv, conv, mono = competition.benchmark_fares(None, p, "operator")
  assert calls[-1] == [0, 1, 1, -1] and conv and mono.tolist() == [1, 1, 1, 0]
  competition.benchmark_fares(None, p, "agent")
  assert calls[-1] == [0, 1, 2, -1]


@dataclasses.dataclass(frozen=True)
class _Rail:
  agent_mask: np.ndarray
  operator: np.ndarray


def test_seed_bounds_is_the_mean_bound_per_seed_and_scenario(monkeypatch):
  monkeypatch.setattr(bound, "mean_bound",
                      lambda env, ps, ks: ps.demand_level * ks[:, 0].astype(jnp.float32))
  scen = {"train_level": _Params(), "shift": _Params(demand_level=2.0)}
  ub = bound.seed_bounds(None, _keys(2, 4), scen)
  np.testing.assert_allclose(ub["train_level"], [1.5, 1001.5])
  np.testing.assert_allclose(ub["shift"], [3.0, 2003.0])
