"""Known answers for the CompactionRL study's host-side pieces (lm/compaction_study.py,
lm/compaction_report.py): budget sweep, a variant's PPO config, pooling of evaluation batches,
seed stacking, and the report's interval, formatting and tables."""

import types

import ml_collections
import numpy as np
import pytest

from jaxrl_suite.lm import compaction_report as report
from jaxrl_suite.lm import compaction_study as study


def _config(**kw):
  c = ml_collections.ConfigDict(dict(
      budgets=[4, 8], max_budget=32, epochs=2, num_minibatches=1, lr=1e-3, critic_lr=1e-3,
      clip_eps=0.2, gamma=1.0, lam=0.95, group_size=4, critic_warmup=3, eval_horizon=16,
      eval_events=[8, 16, 64], train_events=[8, 16], eval_episodes=8, val_episodes=4,
      flat_delta=0.02))
  c.update(kw)
  return c


def test_sweep_budgets_double_to_max():
  assert study.sweep_budgets(_config()) == [4, 8, 16, 32]
  assert study.sweep_budgets(_config(max_budget=8)) == [4, 8]


def test_ppo_config_of_a_spec():
  harness, pc = study.ppo_config(_config(), ("compaction", "token", "grpo", True))
  assert harness == "compaction" and pc.norm == "token" and pc.advantage == "grpo"
  assert pc.group_size == 4 and not pc.normalize_advantages and pc.gae_across_segments
  _, pc = study.ppo_config(_config(), ("truncation", "segment", "gae", False))
  assert pc.group_size == 1 and pc.normalize_advantages and pc.critic_warmup_steps == 3


def test_pool_means_weights_by_count_and_nan_when_empty():
  parts = [{"acc": (1.0, 2), "fid": (0.0, 0)}, {"acc": (2.0, 2), "fid": (0.0, 0)}]
  out = study.pool_means(parts)
  assert out["acc"] == 0.75 and np.isnan(out["fid"])


def test_stack_seeds():
  t = study.stack_seeds([{"w": np.zeros(2)}, {"w": np.ones(2)}])
  np.testing.assert_array_equal(t["w"], [[0, 0], [1, 1]])


def test_ci_and_fmt():
  assert all(np.isnan(report.ci([np.nan])))
  assert report.ci([2.0, np.nan]) == (2.0, 2.0, 2.0)
  m, lo, hi = report.ci([1.0, 3.0])
  assert m == 2.0 and lo < 1.0 and hi > 3.0
  assert report.fmt([0.5], 2) == "0.50 [0.50, 0.50]"


def _rows(names, hs, acc):
  return {n: {h: {"final_acc": np.full(2, acc), "mid_acc": np.full(2, acc),
                  "fidelity": np.full(2, 1.0), "compactions": np.full(2, 2.0)} for h in hs}
          for n in names}


def test_tables_list_the_runs_in_order_and_skip_missing():
  c = _config()
  rows = _rows(["b", "a"], c.eval_events, 0.5)
  md = report.accuracy_tables(c, rows, ("a", "missing", "b"))
  runs = [line.split(" | ")[0] for line in md if line.startswith("| a") or line.startswith("| b")]
  assert runs == ["| a", "| b", "| a", "| b"]
  assert any("H=64 (unseen)" in line and "H=16 **verdicts**" in line for line in md)
  fid = report.fidelity_table(c, rows, ("a",))
  assert fid[-1] == "| a | " + " | ".join(["1.000 [1.000, 1.000]"] * 3) + " | " + " | ".join(
      ["2.00 [2.00, 2.00]"] * 3) + " |"
  assert report.grid_table(c, rows) == []           # the 2x3 grid needs all six variants


def test_training_tables_use_the_given_flatness_rule():
  c = _config()
  st = {"critic": {"vf_loss": np.array([[2.0, 1.0], [2.0, 1.0]])}, "wall": 3.0,
        "curves": {f"return_H{h}": np.arange(10.0)[None].repeat(2, 0) for h in c.train_events}}
  sweeps = {"v": {"budgets": [4.0, 8.0], "scores": np.array([[0.1, 0.1], [0.2, 0.2]])}}
  md = report.training_tables(c, {"v": st}, sweeps,
                              lambda s, b: types.SimpleNamespace(reason="RULE"))
  row = [line for line in md if line.startswith("| v | 2.000")][0]
  assert "RULE" in row and "4, 8" in row and row.endswith("| 3 |")
  assert "| v | 8 | 0.500 [0.500, 0.500] | 8.500 [8.500, 8.500] |" in md


def test_payload_collects_stage_fields():
  st = {"critic": {}, "wall": 1.0, "curves": {"return": np.array([[1.0, 3.0], [3.0, 5.0]])},
        "mass": {"start": 1}}
  m = {"rows": {}, "warm_start": [], "gaps": {}, "stages": {"v": st, "w": {**st}}}
  m["stages"]["w"].pop("mass")
  pl = report.payload(_config(), m, {})
  assert pl["wall"] == {"v": 1.0, "w": 1.0} and set(pl["grad_mass"]) == {"v"}
  np.testing.assert_allclose(pl["curves_mean"]["v"]["return"], [2.0, 4.0])
  assert pl["eval_horizon"] == 16


def test_frozen_harness_evaluates_with_the_warm_start_summariser(monkeypatch):
  """Evaluation (and validation) of the frozen-summariser variant samples its summaries from
  the seed's warm start, as in training, never from the RL-trained policy (the first record
  under the registered claims evaluated it with the policy's summaries). Fakes stand in for the
  rollout and the metrics: each episode reports which parameters wrote its summaries."""
  import jax
  import jax.numpy as jnp
  from jaxrl_suite.lm import compaction as comp
  from jaxrl_suite.lm import rollout as lm_rollout

  def fake_rollout(cfg, pp, env, pe, k, n, rcfg, summary_params=None, **kw):
    writer = pp if summary_params is None else summary_params
    return {"writer": jnp.full((n,), writer["w"]), "policy": jnp.full((n,), pp["w"])}

  monkeypatch.setattr(lm_rollout, "multi_turn_rollout", fake_rollout)
  monkeypatch.setattr(comp, "rollout_config", lambda *a, **k: None)
  monkeypatch.setattr(comp, "episode_metrics", lambda ro, agent, items: ro)
  monkeypatch.setattr(study, "_EVAL_FNS", {})
  c = _config(eval_batch=2, window=8, temperature=1.0, full_context_events=[8])
  c.model = ml_collections.ConfigDict(dict(max_len=64))
  c.env = ml_collections.ConfigDict(dict(num_items=2))
  p = types.SimpleNamespace(replace=lambda **kw: {"num_events": kw["num_events"]})
  policy, warm = {"w": jnp.array([1.0, 2.0])}, {"w": jnp.array([10.0, 20.0])}
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  out = study.evaluate(c, None, p, None, policy, "frozen", 8, keys, 4, warm=warm)
  np.testing.assert_array_equal(out["writer"], [10.0, 20.0])      # warm starts wrote them
  np.testing.assert_array_equal(out["policy"], [1.0, 2.0])        # the policy answered
  out = study.evaluate(c, None, p, None, policy, "compaction", 8, keys, 4, warm=warm)
  np.testing.assert_array_equal(out["writer"], [1.0, 2.0])        # its own summaries
  with pytest.raises(ValueError, match="warm"):
    study.evaluate(c, None, p, None, policy, "frozen", 8, keys, 4)
