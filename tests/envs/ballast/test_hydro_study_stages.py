"""The BallastHydro-v0 study's agent-free stages (envs/ballast/hydro_*.py) on hand-made episode
outputs with known answers: per-episode metrics, diagnosis counts on exercised edges, the
baselines' bookkeeping, the bootstrap intervals, the regime and diagnosis tables, the paired
keys and the report."""

import types

import chex
import jax
import numpy as np
import pytest

from jaxrl_suite.envs.ballast import (hydro_banks, hydro_report, hydro_scoring, hydro_stats,
                                      hydro_tables)


def _out(steps, success, violated=None):
  n = len(steps)
  return {"steps": np.asarray(steps, np.int32), "success": np.asarray(success, bool),
          "violated": np.zeros(n, bool) if violated is None else np.asarray(violated, bool),
          "max_heel": np.full(n, 2.0, np.float32), "energy_kwh": np.arange(n, dtype=np.float32)}


def test_failures_count_at_the_step_limit():
  out = _out([3, 7, 5], [True, False, True], [False, True, False])
  out["broke"] = np.array([0, 4 | 8, 0], np.int32)          # episode 1: trim and draught
  np.testing.assert_array_equal(hydro_scoring.eff_steps(out, 20), [3, 20, 5])
  m = hydro_scoring.episode_metrics(out, 20, 0.5)
  chex.assert_trees_all_close(m, {"steps": np.array([3.0, 7, 5]),
                                  "steps_eff": np.array([3.0, 20, 5]),
                                  "hours": np.array([1.5, 3.5, 2.5]),
                                  "success": np.array([1.0, 0, 1]),
                                  "violated": np.array([0.0, 1, 0]),
                                  "max_heel": np.full(3, 2.0), "energy_kwh": np.arange(3.0),
                                  "broke_heel": np.zeros(3), "broke_gm": np.zeros(3),
                                  "broke_trim": np.array([0.0, 1, 0]),
                                  "broke_draught": np.array([0.0, 1, 0])})
  assert all(v.dtype == np.float64 for v in m.values())


def test_counts_only_on_real_exercised_edges():
  # 2 episodes x 3 edges, edge 2 is padding; episode 0 has edge 0 clogged, episode 1 none
  p = types.SimpleNamespace(bank=types.SimpleNamespace(clog=np.array(
      [[0.0, 1, 0], [1.0, 1, 0], [1.0, 1, 1]])), edge_mask=np.array([1, 1, 0]))
  out = {"exercised": np.array([[[1, 1, 1], [1, 0, 1]]], np.float32)}        # [S=1, N=2, E=3]
  pred = np.array([[[True, True, True], [True, True, False]]])
  c = hydro_scoring.exercised_counts(pred, out, p, np.array([0, 1]))
  # ep 0: edge 0 TP, edge 1 FP (edge 2 padding); ep 1: edge 0 FP, edge 1 not exercised
  np.testing.assert_array_equal(c["tp"], [[1, 0]])
  np.testing.assert_array_equal(c["fp"], [[1, 1]])
  np.testing.assert_array_equal(c["fn"], [[0, 0]])


def test_reference_reads_every_final_observation():
  ref_rows = lambda obs, p: obs[:, :2] > p                          # [B, O] -> [B, E=2]
  out = {"final_obs": np.arange(2 * 3 * 4).reshape(2, 3, 4)}        # [S, N, O]
  r = hydro_scoring.reference_on(ref_rows, out, 10)
  assert r.shape == (2, 3, 2)
  np.testing.assert_array_equal(r, out["final_obs"][..., :2] > 10)


def test_baselines_share_episodes_and_the_heel_aware_means(monkeypatch):
  """Every baseline on the same (idx, keys); the heel-aware means are per bank."""
  monkeypatch.setattr(hydro_scoring, "_baseline", lambda p, b: b)
  monkeypatch.setattr(hydro_scoring.OR, "run_oracle",
                      lambda ev, p, idx, ks, ms: _out([1, 1], [True, True]))
  steps = {"replan": [4, 6], "heel_replan_1": [3, 30], "heel_replan_multi": [5, 5]}
  seen = []

  def ev_base(p, b, idx, ks):
    seen.append((b, tuple(np.asarray(idx))))
    return _out(steps[b][:len(idx)], [b != "heel_replan_1"] * len(idx))

  sc, outs = hydro_scoring.score_baselines(ev_base, None, np.arange(2), None, 10, 1.0)
  assert list(sc) == list(hydro_scoring.BASELINES) and list(outs) == list(sc)
  assert {s[1] for s in seen} == {(0, 1)}
  np.testing.assert_array_equal(sc["heel_replan_1"]["steps_eff"], [10.0, 10.0])
  bank = types.SimpleNamespace(bank=types.SimpleNamespace(vol0=np.zeros((2, 4))))
  means = hydro_scoring.heel_aware_means(ev_base, [bank, bank], jax.random.PRNGKey(0), 10)
  assert means == {"heel_replan_1": [10.0, 10.0], "heel_replan_multi": [5.0, 5.0]}


def test_intervals_of_constant_samples_are_points():
  x = np.full((3, 8), 4.0)
  assert hydro_stats.rl_stat_ci(x, 50) == (4.0, 4.0, 4.0)
  r = hydro_stats.reduction_ci(x * 0.5, np.full(8, 4.0), 50)
  chex.assert_trees_all_close(r, (0.5, 0.5, 0.5))
  m, lo, hi = hydro_stats.rl_stat_ci(np.arange(12.0).reshape(3, 4), 200)
  assert m == 5.5 and lo <= m <= hi
  assert hydro_stats.flattening([{"updates": 1, "steps_eff": x}], 10, 0.5) == {
      "steps": [], "flattened": False}


def _study(S=2):
  """Two layouts (one per group), 4 episodes each (0, 1, 1, 3 blocked): RL takes 5 steps and
  both heel-aware forms 10, the plain replanner 20; RL violates once per seed on gen1."""
  def pol(steps, s, violated=0.0):
    m = {k: np.full((s, 4), float(steps)) for k in hydro_tables.METRICS}
    m["violated"] = np.zeros((s, 4))
    m["violated"][:, 1] = violated
    return {k: v if s > 1 else v[0] for k, v in m.items()}

  scores = {}
  for n, viol in (("ring14", 0.0), ("gen1", 1.0)):
    scores[n] = {"oracle": pol(4, 1), "replan": pol(20, 1), "heel_replan_1": pol(10, 1),
                 "heel_replan_multi": pol(10, 1), "heel_aware": pol(10, 1),
                 "rl_gru": pol(5, S, viol), "_n_blocked": np.array([0, 1, 1, 3])}
  counts = lambda tp: {"tp": np.full((S, 4), tp), "fp": np.ones((S, 4)), "fn": np.ones((S, 4))}
  diag = {n: {"rl_gru": {"head": counts(3), "reference": counts(1)},
              "heel_aware": {"reference": {k: v[:1] for k, v in counts(1).items()}}}
          for n in scores}
  return scores, diag, {"ring14": "shipped", "gen1": "held_out"}


def test_regime_tables_known_answers():
  scores, _, groups = _study()
  assert hydro_tables.group_names(groups, "held_out") == ["gen1"]
  assert hydro_tables.pool(scores, ["ring14", "gen1"], "replan", "steps").shape == (1, 8)
  table, comp = hydro_tables.regime_tables(scores, groups, ("rl_gru",), 50)
  assert list(table) == ["shipped", "held_out"]
  row = table["held_out"]["1 blocked"]
  assert row["episodes"] == 2 and row["rl_gru"]["steps_eff"] == (5.0, 5.0, 5.0)
  m, lo, hi = row["rl_gru"]["violated"]                              # one of the two episodes
  assert m == 0.5 and 0.0 <= lo <= m <= hi <= 1.0
  assert table["held_out"]["2 blocked"]["oracle"]["steps"] is None    # no such episode
  chex.assert_trees_all_close(comp["held_out"]["rl_gru_vs_heel_aware"], (0.5, 0.5, 0.5))
  chex.assert_trees_all_close(comp["held_out"]["rl_gru_vs_replan"], (0.75, 0.75, 0.75))
  assert comp["shipped"]["violation_rate_diff_rl_minus_heel_aware"] == (0.0, 0.0, 0.0)


def test_diagnosis_table_known_answers():
  scores, diag, groups = _study()
  t = hydro_tables.diagnosis_table(diag, scores, groups, ("rl_gru",), 50)
  row = t["shipped"][">=1 blocked"]
  assert row["episodes"] == 3
  # head: 2 TP / (2 TP + FP + FN) = 6 / 8 per episode; reference 2 / 4
  chex.assert_trees_all_close(row["rl_gru"]["head_f1"], (0.75, 0.75, 0.75))
  chex.assert_trees_all_close(row["rl_gru"]["head_minus_reference"], (0.25, 0.25, 0.25))
  assert row["rl_gru"]["clogged_exercised_edges"] == 2 * 3 * (3 + 1)
  chex.assert_trees_all_close(row["heel_aware_reference_f1"], (0.5, 0.5, 0.5))


def test_episode_keys_are_paired_by_layout_position():
  key = jax.random.PRNGKey(3)
  ks = hydro_banks.episode_keys(key, {"a": 0, "b": 1}, 7, 5)
  assert list(ks) == ["a", "b"] and ks["a"].shape == (5, 2)
  np.testing.assert_array_equal(ks["b"], jax.random.split(jax.random.fold_in(key, 8), 5))


def test_report_formats_every_section(tmp_path):
  scores, diag, groups = _study()
  table, comp = hydro_tables.regime_tables(scores, groups, ("rl_gru",), 20)
  dt = hydro_tables.diagnosis_table(diag, scores, groups, ("rl_gru",), 20)
  c = types.SimpleNamespace(n_seeds=2, budget_updates=(10, 20), resid_max_updates=10,
                            ppo=types.SimpleNamespace(num_envs=4, num_steps=8, aux_coef=0.5),
                            eval_episodes=4, variants=("rl_gru",), n_boot=20, flat_tol=0.5)
  sw = [{"updates": u, "steps_eff": np.full((2, 1, 4), 6.0 - u / 10)} for u in (10, 20)]
  payload = {"layouts": {"train": ["gen0"], "held_out": ["gen1"], "shipped": ["ring14"]},
             "decision_step_h": 0.25, "heel_aware_comparator": {"gen1": "heel_replan_1"},
             "host": {"cpus": 2, "backend": "cpu"}, "diagnosis_f1": dt,
             "sweep": {"rl_gru": [{"updates": 10, "episodes": 4, "steps_eff": 5.0,
                                   "success": 1.0, "violated": 0.0}]},
             "flattening": {"rl_gru": hydro_stats.flattening(sw, 20, 0.5)}}
  md = hydro_report.markdown(c, payload, table, comp)
  assert "| 1 blocked | 2 | rl_gru | 5.0 [5.0, 5.0] |" in md
  assert "- held_out rl_gru_vs_replan: +0.750 [+0.750, +0.750]" in md
  assert "- rl_gru 10 -> 20: -1.00 [-1.00, -1.00] (4 episodes x 2 seeds)" in md
  assert "- rl_gru within flat_tol (0.5 steps, bootstrap): False" in md
  assert "A description only" in md
  assert "| held_out | >=1 blocked | 3 | rl_gru | 0.750 [0.750, 0.750] |" in md
  assert md.endswith("![trade-off and sweep](ballast_hydro.png)\n")
  assert hydro_report.fmt(None) == "-" and hydro_report.fmt((0.5, 0.25, 1.0), True) == (
      "0.500 [0.250, 1.000]")
  path = tmp_path / "f.png"
  hydro_report.plot(table, {"rl_gru": sw}, dt, str(path), c)
  assert path.exists()


@pytest.mark.parametrize("n_held, want", [(1, 4), (3, 12)])
def test_paired_delta_reads_two_dim_sweeps_as_one_layout(n_held, want):
  a = np.zeros((2, n_held, 4))
  assert hydro_stats.paired_delta(a, a + 1).shape == (2, want)
