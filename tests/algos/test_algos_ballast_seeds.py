"""Seed-level pieces of algos/ballast.py: per-seed slices, the evidence that vmapped seeds
differ, and the half-budget sweep of the fair-chance rule (fake train/score, known answers)."""

import chex
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxrl_suite.algos import ballast as AB

PARAMS = {"params": {"pi0": {"w_resid": jnp.array([1.0, 2.0, 3.0]),
                             "kernel": jnp.array([[0.0, 0.0], [0.5, -1.0], [0.0, 2.0]])}}}


def test_seed_params_slices_every_leaf():
  chex.assert_trees_all_close(AB.seed_params(PARAMS, 1),
                              {"params": {"pi0": {"w_resid": 2.0, "kernel": jnp.array([0.5,
                                                                                       -1.0])}}})


def test_seed_evidence_known_answers():
  # 3 seeds x 8 updates; the curve is read at updates 0, 2, 4, 6, 7
  curve = np.arange(24.0).reshape(3, 8)
  metrics = {k: curve for k in AB.CURVE_METRICS}
  ev = AB.seed_evidence(PARAMS, metrics)
  assert ev["max_abs_param_diff_vs_seed0"] == [0.0, 1.0, 2.0]
  assert ev["w_resid"] == {"pi0": [1.0, 2.0, 3.0]}
  assert set(ev["curve"]) == set(AB.CURVE_METRICS)
  assert ev["curve"]["ent"] == {0: [0.0, 8.0, 16.0], 2: [2.0, 10.0, 18.0],
                                4: [4.0, 12.0, 20.0], 6: [6.0, 14.0, 22.0],
                                7: [7.0, 15.0, 23.0]}


def _cfg(updates):
  c = ml_collections.ConfigDict({"num_envs": 4, "num_steps": 8})
  c.total_timesteps = updates * 32
  return c


def test_half_budget_sweep_trains_half_and_scores_each_seed():
  budgets = []

  def train(cfg):
    budgets.append(cfg.total_timesteps)
    return {"w": jnp.array([10.0, 20.0])}      # 2 seeds

  sw = AB.half_budget_sweep(_cfg(6), train, lambda sp: sp["w"] + 1, [5.0, 6.0])
  assert budgets == [3 * 32]
  assert sw == {"scores": [[11.0, 21.0], [5.0, 6.0]], "budgets": [3, 6], "scale": "log_ratio",
                "better": "lower"}


def test_half_budget_sweep_needs_an_even_number_of_updates():
  never = lambda cfg: (_ for _ in ()).throw(AssertionError("trained"))
  assert AB.half_budget_sweep(_cfg(7), never, None, [1.0]) is None
  assert AB.half_budget_sweep(_cfg(1), never, None, [1.0]) is None
