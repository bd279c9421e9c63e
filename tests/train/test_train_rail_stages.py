"""train/rail: variant names, the RL stage's per-budget bookkeeping (fake evaluator, known
scores), the fair-chance inputs, the stage cache of the variants and the report tables, with
known answers."""

import types

import chex
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxrl_suite.train.rail import report, rl_stage, sweep_inputs, variants


def _ci(x):
  x = np.asarray(x, np.float64)
  return float(x.mean()), float(x.min()), float(x.max())


def test_variant_names_and_budgets():
  assert variants.parse("mappo_rel_delta") == ("mappo", True, "delta")
  assert variants.parse("ippo_mlp") == ("ippo", False, "bucket")
  c = ml_collections.ConfigDict(dict(budget_updates=(12, 24, 48), rel_max_updates=24))
  assert variants.budgets(c, attention=True) == [12, 24]
  assert variants.budgets(c, attention=False) == [12, 24, 48]


def _scores(main=4):
  """_Scores over 2 seeds with a fake evaluator: tuning revenue = 10 x seed + (5 if greedy else 7)
  + the params' step count; held-out revenue = demand_level x the same (one key per seed)."""
  def ev_rl(ps, keys, pv, greedy):
    rev = (10.0 * jnp.arange(2.0) + jnp.where(greedy, 5.0, 7.0) + ps)[:, None]
    return {"revenue_total": pv.demand_level * jnp.broadcast_to(rev, keys.shape[:2])}

  c = types.SimpleNamespace(main_updates=main)
  rules = rl_stage.Rules(
      pick_mode=lambda s, data: types.SimpleNamespace(
          choice=max(s, key=lambda m: s[m].mean()), data=data),
      last_doubling=None, ratio=None)
  p = types.SimpleNamespace(demand_level=1.0, replace=lambda demand_level: types.SimpleNamespace(
      demand_level=demand_level))
  scen = {"train_level": types.SimpleNamespace(demand_level=1.0),
          "shift": types.SimpleNamespace(demand_level=2.0)}
  return rl_stage._Scores("v", c, ev_rl, jnp.zeros((2, 3, 2)), jnp.zeros((2, 1, 2)), scen, p,
                          rules)


def _state(step):
  return types.SimpleNamespace(train_state=types.SimpleNamespace(params=jnp.full(2, step)))


def test_scores_record_both_modes_and_evaluate_the_chosen_one_at_main():
  sc = _scores(main=4)
  for done in (2, 4):
    sc(done, _state(float(done)), {"entropy": jnp.ones((2, 3)) * done})
  np.testing.assert_allclose(np.stack(sc.sw["greedy"], 1), [[7.0, 9.0], [17.0, 19.0]])
  np.testing.assert_allclose(np.stack(sc.sw["sampled"], 1), [[9.0, 11.0], [19.0, 21.0]])
  np.testing.assert_allclose(np.stack(sc.ent, 1), [[2.0, 4.0], [2.0, 4.0]])
  assert not sc.greedy and sc.sel == {"greedy": 14.0, "sampled": 16.0}   # at 4 updates
  np.testing.assert_allclose(sc.out["train_level"]["revenue_total"], [11.0, 21.0])
  np.testing.assert_allclose(sc.out["shift"]["revenue_total"], [22.0, 42.0])


def test_per_seed_means_over_episodes():
  m = rl_stage.per_seed({"revenue_total": np.arange(6.0).reshape(2, 3),
                         "revenue_op": np.ones((2, 3, 4))})
  np.testing.assert_allclose(m["revenue_total"], [1.0, 4.0])
  chex.assert_shape(m["revenue_op"], (2, 4))


def test_sweep_inputs_revenue_and_relative():
  a = {"greedy": np.array([[1.0, 2.0, 4.0], [2.0, 4.0, 8.0]]), "updates": np.array([1., 2., 4.])}
  b = {"sampled": np.array([[1.0, 1.0], [1.0, 2.0]]), "updates": np.array([1., 2.])}
  rev = sweep_inputs.revenue(a, "greedy")
  chex.assert_shape(rev["scores"], (3, 2))                     # [B, S]
  assert rev["budgets"] == [1.0, 2.0, 4.0] and rev["better"] == "higher"
  rel = sweep_inputs.relative(a, "greedy", b, "sampled")       # budgets both reached: 1, 2
  np.testing.assert_allclose(rel["scores"], [[1.0, 2.0], [2.0, 2.0]])
  assert rel["budgets"] == [1.0, 2.0] and rel["scale"] == "log_ratio"


def test_train_variants_are_stages_of_the_workdir_cache(tmp_path, monkeypatch):
  """A variant trained once is read back (core.stage_cache, keyed by the config) by a rerun,
  as stored: arrays keep their dtype, the meta its training seconds; another config trains."""
  calls = []

  def fake(c, name, key, tune_rows, eval_keys, scenarios, rules):
    calls.append(name)
    return ({"train_level": {"revenue_total": np.arange(2.0, dtype=np.float32)}},
            np.ones((2, 3)), {"mode": "greedy"}, {"greedy": np.zeros((2, 1))})

  monkeypatch.setattr(rl_stage, "train_variant", fake)
  c = ml_collections.ConfigDict(dict(variants=("mappo_rel", "ippo_mlp"), seed=0))
  keys, ev = jnp.zeros((4, 2), jnp.uint32), jnp.zeros((2, 4, 2), jnp.uint32)
  first = rl_stage.train_variants(c, None, keys, ev, {}, None, str(tmp_path))
  again = rl_stage.train_variants(c, None, keys, ev, {}, None, str(tmp_path))
  assert calls == ["mappo_rel", "ippo_mlp"]
  for a, b in zip(first, again):
    chex.assert_trees_all_equal(a, b)
  out = again[0]["mappo_rel"]["train_level"]["revenue_total"]
  assert out.dtype == np.float32 and again[2]["ippo_mlp"]["train_s"] >= 0
  c.seed = 1
  rl_stage.train_variants(c, None, keys, ev, {}, None, str(tmp_path))
  assert calls == ["mappo_rel", "ippo_mlp"] * 2


def _metrics(rev):
  rev = np.asarray(rev, np.float64)
  m = {k: rev * 0 + 1.0 for k in report.METRICS}
  m["revenue_total"] = rev
  m["revenue_op"] = np.stack([rev, 0 * rev], 1)
  return m


def test_table_and_bound_summary():
  rl = {"rl": {"train_level": _metrics([3.0, 5.0])}}
  base = {"static": {"train_level": _metrics([1.0, 2.0])}}
  tab = report.table(rl, base, _ci)
  assert list(tab["train_level"]) == ["static", "rl"]          # baselines first
  row = tab["train_level"]["rl"]
  assert row["revenue_total"] == [4.0, 3.0, 5.0] and row["revenue_seeds"] == [3.0, 5.0]
  assert row["revenue_op"] == [[4.0, 3.0, 5.0], [0.0, 0.0, 0.0]]
  rec, line = report.bound_summary({"train_level": np.array([8.0, 12.0])}, tab, _ci)
  assert rec["train_level"] == {"ci": [10.0, 8.0, 12.0], "per_seed": [8.0, 12.0],
                                "max_policy": "rl", "max_policy_revenue": 4.0, "holds": True}
  assert "best policy rl 0.0k (40% of it; bound holds)" in line
  rec, line = report.bound_summary({"train_level": np.array([3.0, 3.0])}, tab, _ci)
  assert not rec["train_level"]["holds"] and "VIOLATED" in line


def test_flat_text_and_fmt():
  f = {"gain_ci": [0.01, -0.02, 0.04], "budgets": [48.0, 96.0], "state": "unknown",
       "delta": 0.05}
  assert report.flat_text(f) == ("last doubling 48 -> 96 updates gains +1.00% [-2.00%, +4.00%] "
                                 "(log revenue): unknown at +-5%")
  f["last_vs_main"] = [1.1, 1.0, 1.2]
  assert report.flat_text(f).endswith(", 96 vs main budget x1.100 [1.000, 1.200]")
  assert report.fmt((1234.5, 1000.0, 1500.0), 1, 1e-3) == "1.2 [1.0, 1.5]"
