"""train/ballast_hydro: the RL stage's chunk and checkpoint bookkeeping (fake trainer), the
validation sweep and the final scoring of one layout (fake evaluators), with known answers."""

import glob
import os
import types
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxrl_suite.train.ballast_hydro import rl_stage, scoring


def _cfg(**kw):
  c = dict(n_seeds=2, budget_updates=(4, 8, 16), chunk_updates=4, sweep_episodes=3,
           sweep_episodes_last=5, eval_episodes=3, variants=("rl_gru",))
  c.update(kw)
  return types.SimpleNamespace(**c)


def _trainer(log):
  """params [S] count the updates; chunk records which tables it trained on."""
  def init(keys, tabs):
    return types.SimpleNamespace(params=jnp.zeros(keys.shape[0]))

  def chunk(state, tabs, keys):
    log.append(tabs)
    m = {"entropy": jnp.ones((keys.shape[0], 4)), "ignored": jnp.zeros((keys.shape[0], 4))}
    return types.SimpleNamespace(params=state.params + 4), m
  return init, chunk


def test_train_variant_cycles_layouts_and_scores_every_checkpoint():
  c, used, asked = _cfg(), [], []

  def sweep_fn(params, n_ep):
    asked.append(n_ep)
    x = np.broadcast_to(np.asarray(params)[:, None, None], (2, 1, n_ep))
    return {"steps_eff": x, "success": np.ones_like(x)}

  params, sweep, curve = rl_stage.train_variant(
      c, _trainer(used), ["t0", "t1", "t2"], sweep_fn, "rl_gru", jax.random.PRNGKey(0),
      lambda s: None)
  assert used == ["t0", "t1", "t2", "t0"]                        # 16 updates, 4 per chunk
  chex.assert_trees_all_close(params, jnp.full(2, 16.0))
  assert [s["updates"] for s in sweep] == [4, 8, 16]
  assert asked == [3, 5, 5]                                      # the last two on more episodes
  assert [float(s["steps_eff"].mean()) for s in sweep] == [4.0, 8.0, 16.0]
  assert curve == [{"entropy": [1.0, 1.0]}] * 4


def test_train_variant_stops_at_the_given_budgets():
  c, used = _cfg(), []
  sweep_fn = lambda params, n_ep: {k: np.zeros((2, 1, n_ep)) for k in ("steps_eff", "success")}
  _, sweep, _ = rl_stage.train_variant(c, _trainer(used), ["t0"], sweep_fn, "rl_gru_resid",
                                       jax.random.PRNGKey(0), lambda s: None, budgets=[4])
  assert len(used) == 1 and [s["updates"] for s in sweep] == [4]


def _episodes(s, n, steps):
  return {"steps": np.full((s, n), steps), "success": np.ones((s, n), bool),
          "violated": np.zeros((s, n), bool), "max_heel": np.zeros((s, n)),
          "energy_kwh": np.zeros((s, n)), "exercised": np.ones((s, n, 2)),
          "final_obs": np.zeros((s, n, 3)), "final_carry": np.zeros((s, n, 1))}


def _fake_ev():
  """rl: steps = 2 + the seed's params on every episode; diagnose: every edge clogged;
  reference: none."""
  rl = lambda p, pt, idx, ks: {**_episodes(2, len(idx), 0), "steps": (
      2 + np.asarray(pt[0])[:, None] + np.zeros(len(idx)))}
  return types.SimpleNamespace(
      rl=rl, api=None, diagnose=lambda pt, carry, obs: np.ones(obs.shape[:-1] + (2,), bool),
      reference=lambda obs, p: np.zeros((obs.shape[0], 2), bool), base=None)


def test_validation_sweep_scores_the_first_episodes_of_every_layout(monkeypatch):
  monkeypatch.setattr(rl_stage.A, "make_tables", lambda p, resid, api: resid)
  vals = {"gen7": "p7", "gen8": "p8"}
  keys = {n: jnp.zeros((5, 2)) for n in vals}
  fn = rl_stage.validation_sweep(_cfg(), _fake_ev(), vals, keys, False, 50, 0.5)
  out = fn(jnp.array([1.0, 3.0]), 9)                              # capped at sweep_episodes_last
  assert set(out) == set(rl_stage.SWEEP_METRICS)
  assert out["steps_eff"].shape == (2, 2, 5)
  np.testing.assert_array_equal(out["steps_eff"][:, 0, 0], [3.0, 5.0])


def test_score_layout_pairs_policies_and_counts_diagnoses(monkeypatch):
  monkeypatch.setattr(scoring.A, "make_tables", lambda p, resid, api: resid)
  base_out = {k: v[0] for k, v in _episodes(1, 3, 7).items()}
  metrics = {"steps_eff": np.full(3, 7.0)}
  monkeypatch.setattr(scoring, "score_baselines", lambda *a: (
      {b: metrics for b in ("oracle", "heel_replan_1")}, {"heel_replan_1": base_out}))
  p = types.SimpleNamespace(bank=types.SimpleNamespace(clog=np.array([[0.0, 1]] * 3),
                                                       n_blocked=np.array([1, 1, 1])),
                            edge_mask=np.array([1, 1]))
  sc, dg = scoring.score_layout(_cfg(), _fake_ev(), p, jnp.zeros((3, 2)),
                                {"rl_gru": jnp.array([0.0, 1.0])}, "heel_replan_1", 50, 1.0)
  np.testing.assert_array_equal(sc["rl_gru"]["steps_eff"], [[2.0] * 3, [3.0] * 3])
  assert sc["_heel_aware_is"] == "heel_replan_1" and sc["heel_aware"] is metrics
  # head: edge 0 TP, edge 1 FP; reference: edge 0 FN, per seed and episode
  np.testing.assert_array_equal(dg["rl_gru"]["head"]["tp"], np.ones((2, 3)))
  np.testing.assert_array_equal(dg["rl_gru"]["head"]["fp"], np.ones((2, 3)))
  np.testing.assert_array_equal(dg["rl_gru"]["reference"]["fn"], np.ones((2, 3)))
  assert dg["heel_aware"]["reference"]["fn"].shape == (1, 3)


def test_validation_sweep_plays_episodes_in_chunks_in_order(monkeypatch):
  """With a chunk of 2, 5 episodes are played as [0, 1], [2, 3], [4] and put back in order:
  the fake evaluator's steps are the episode index, so steps_eff reads 0..4 per seed."""
  monkeypatch.setattr(rl_stage.A, "make_tables", lambda p, resid, api: resid)
  monkeypatch.setattr(rl_stage, "SWEEP_CHUNK", 2)
  calls = []

  def rl(p, pt, idx, ks):
    calls.append(np.asarray(idx).tolist())
    return {**_episodes(2, len(idx), 0), "steps": np.tile(np.asarray(idx, float), (2, 1))}
  ev = types.SimpleNamespace(rl=rl, api=None)
  fn = rl_stage.validation_sweep(_cfg(), ev, {"gen7": "p7"}, {"gen7": jnp.zeros((5, 2))},
                                 False, 50, 0.5)
  out = fn(jnp.array([1.0, 3.0]), 5)
  assert calls == [[0, 1], [2, 3], [4]]
  np.testing.assert_array_equal(out["steps_eff"], np.tile(np.arange(5.0), (2, 1, 1)))


class _State(NamedTuple):
  params: jax.Array


def test_train_variant_resumes_from_its_last_stored_checkpoint(tmp_path):
  """With a workdir each budget checkpoint is a stage: a run that lost its last checkpoint
  trains only that segment again, from the stored state, and returns what the full run did."""
  c = ml_collections.ConfigDict(dict(n_seeds=2, budget_updates=(4, 8, 16), chunk_updates=4,
                                     sweep_episodes=3, sweep_episodes_last=5))

  def trainer(log):
    def chunk(state, tabs, keys):
      log.append(tabs)
      noise = jax.vmap(lambda k: jax.random.uniform(k))(keys)   # depends on the chunk's keys
      return _State(state.params + 4 + noise), {"entropy": jnp.ones((keys.shape[0], 4))}
    return (lambda keys, tabs: _State(jnp.zeros(keys.shape[0]))), chunk

  def sweep_fn(params, n_ep):
    return {"steps_eff": np.broadcast_to(np.asarray(params)[:, None, None], (2, 1, n_ep)),
            "success": np.ones((2, 1, n_ep))}

  def run(log, timing):
    return rl_stage.train_variant(c, trainer(log), ["t0", "t1", "t2"], sweep_fn, "rl_gru",
                                  jax.random.PRNGKey(0), lambda s: None, workdir=str(tmp_path),
                                  timing=timing)
  first_used, again_used, t1, t2 = [], [], {}, {}
  p1, s1, c1 = run(first_used, t1)
  plain = rl_stage.train_variant(c, trainer([]), ["t0", "t1", "t2"], sweep_fn, "rl_gru",
                                 jax.random.PRNGKey(0), lambda s: None)
  chex.assert_trees_all_close(p1, plain[0])
  last = glob.glob(os.path.join(str(tmp_path), "stages", "ballast_hydro", "train",
                                "rl_gru_u16.*.npz"))
  assert len(last) == 1 and first_used == ["t0", "t1", "t2", "t0"] and "cached_s" not in t1
  os.remove(last[0])
  p2, s2, c2 = run(again_used, t2)
  assert again_used == ["t2", "t0"] and "cached_s" in t2     # 8 -> 16 only, from the store
  np.testing.assert_array_equal(np.asarray(p2), np.asarray(p1))
  assert c2 == c1 and [s["updates"] for s in s2] == [4, 8, 16]
  for a, b in zip(s1, s2):
    np.testing.assert_array_equal(a["steps_eff"], b["steps_eff"])
