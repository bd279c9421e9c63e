"""Configs validate; the two reproductions run end to end in --quick mode."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import configs.serving_batching as cfg_b  # noqa: E402
import configs.serving_routing as cfg_r  # noqa: E402


@pytest.mark.parametrize("cfg", [cfg_b, cfg_r])
def test_configs_validate(cfg):
  for arg in (None, "quick"):
    c = cfg.get_config(arg)
    cfg.validate(c)
    assert c.num_seeds >= (2 if arg else 4)
  c = cfg.get_config("quick")
  c.eval_table = -1
  with pytest.raises(ValueError, match="eval_table"):
    cfg.validate(c)
  c = cfg.get_config("quick")
  c.loads = (0.5, -1.0)
  with pytest.raises(ValueError, match="loads"):
    cfg.validate(c)
  c = cfg.get_config("quick")
  c.iteration_cost = "vidur"
  with pytest.raises(ValueError, match="iteration_cost"):
    cfg.validate(c)


def test_iteration_cost_reaches_both_studies_envs():
  """config.iteration_cost selects the engine's cost model in the batching and routing envs."""
  from jaxrl_suite.envs.serving import batching, routing, traces
  from jaxrl_suite.train.serving import batching_study, routing_setup
  budgets = {}
  for cost in ("analytic", "profiled"):
    c = cfg_b.get_config("quick")
    c.iteration_cost = cost
    train_tr, test_tr = traces.load_shipped(c.trace).split(c.train_frac)
    model, mml = batching_study.model_of(c, c.trace)
    kw = batching_study._env_kwargs(c, "continuous", model, mml, train_tr)
    _, p = batching.make_batching("continuous", table_size=8, trace=train_tr, **kw)
    assert (p.hw.prof is not None) == (cost == "profiled")
    c = cfg_r.get_config("quick")
    c.iteration_cost = cost
    c.engine_settings = "per_gpu"       # token budgets cut by the same cost model's worst step
    ct, su = routing_setup.trace_setup(c, train_tr, test_tr)
    _, p = routing.make_routing(table_size=8, trace=train_tr,
                                **routing_setup.env_kwargs(ct, ct.cluster, su))
    assert (p.hw.prof is not None) == (cost == "profiled")
    specs = su.specs(ct.cluster)
    want = routing.engine_settings(specs, "per_gpu", 0, 0, c.slo_tpot, cost)
    budgets[cost] = [int(x) for x in p.hw.max_batched_tokens[:len(specs)]]
    assert budgets[cost] == list(want["max_batched_tokens"])
  assert budgets["profiled"] != budgets["analytic"]


def test_routing_config_checks_the_cluster_family():
  for field, value, match in (("max_gpus", 3, "max_gpus"),
                              ("heldout_cluster", ("H100-7B", "A100-7B", "L4-7B", "L4-7B"),
                               "heldout_cluster"),
                              # only trained GPU types / no more GPUs than training: the
                              # held-out cluster must extrapolate
                              ("heldout_cluster", ("H100-7B", "A100-7B", "L4-7B", "L4-7B",
                                                   "L4-7B"), "must extrapolate"),
                              ("heldout_cluster", ("H100-7B", "L40S-7B", "L4-7B"),
                               "must extrapolate"),
                              ("family_clusters", (("H100-7B", "TPU"),), "clusters"),
                              ("variants", ("scratch", "dagger"), "variants"),
                              ("budget_chunks", 3, "budget_chunks"),
                              ("observation", "flat", "observation"),
                              ("budget_scale", {"scratch": 0, "bc": 1}, "budget_scale.scratch"),
                              ("budget_scale", {"scratch": 2.5, "bc": 1},
                               "budget_scale.scratch"),
                              ("budget_scale", {"scratch": 4, "bc": 1, "scrach": 2},
                               "budget_scale has unknown variants")):
    c = cfg_r.get_config("quick")
    c[field] = value
    with pytest.raises(ValueError, match=match):
      cfg_r.validate(c)


@pytest.mark.parametrize("name", ["serving_routing", "serving_batching"])
def test_quick_reproduction_end_to_end(tmp_path, name, monkeypatch):
  """The --quick run writes a valid record with verdicts and a plot; --eval_trace re-evaluates
  the saved policies on another trace file (same compiled evaluator: padded trace length)."""
  import importlib
  from jaxrl_suite.core import results
  exp = importlib.import_module(f"experiments.{name}")
  cfg = importlib.import_module(f"configs.{name}")
  c = cfg.get_config("quick")
  c.loads, c.n_tune_windows = (0.5, 1.3), 2        # test-time budget: fewer evaluations
  if name == "serving_batching":
    # Static mode only here (test-time budget; continuous mode has its own unit tests and is in
    # the CLI's --quick run): each mode is two more XLA compiles.
    c.modes = ("static",)
  monkeypatch.setenv(results.ENV_VAR, str(tmp_path / "results"))
  exp.run(c, True, str(tmp_path / "wd"))
  rec = json.load(open(tmp_path / "results" / f"{name}.json"))
  results.validate_record(rec)
  assert rec["mode"] == "quick" and len(rec["claims"]) >= 1
  assert all(cl["verdict"] in results.ROW_VERDICTS for cl in rec["claims"])
  from jaxrl_suite.repro import records
  for cl in rec["claims"]:   # every claim on the layer, re-judged from its stored samples
    assert records.on_layer(cl) and records.check_row(cl) is None, cl["claim"]
  ids = {cl["repro"]["rule"]["id"] for cl in rec["claims"]}
  assert ids == {d["id"] for d in cfg.claims(c)}, ids   # exactly the registered claims
  assert (tmp_path / "results" / f"{name}.png").exists()
  md = open(tmp_path / "results" / f"{name}.md").read()
  assert "clipped" in md and "training windows" in md
  clip = rec["clipping"]
  assert 0.0 < clip["train part"]["clipped_share"] < 0.5
  if name == "serving_routing":
    # the cross-cluster table, the budget sweep and both PPO starts are in the record
    assert "Cross-cluster generalisation" in md and "Budget sweep" in md
    assert {"ppo", "ppo_bc"} <= set(rec["learning_curves"])
    assert set(rec["budget_sweep_goodput"]) >= {"ppo@1@0.5", "ppo_bc@2@1.3"}
    # scratch PPO trains budget_scale["scratch"] x the BC-started run's env steps
    steps = rec["budget_steps"]
    assert steps["ppo"]["2"] == c.budget_scale.scratch * c.ppo.total_timesteps
    assert steps["ppo_bc"]["2"] == c.budget_scale.bc * c.ppo.total_timesteps
    assert len(rec["bc"]["accuracy_per_seed"]) == c.num_seeds
    held = [cl for cl in rec["claims"] if "never trained on" in cl["claim"]]
    assert len(held) == 1 and held[0]["verdict"] in results.VERDICTS
    # crossed seeds x evaluation windows: [S][W] cells per arm, Fieller by test inversion
    for cl in rec["claims"]:
      assert cl["repro"]["interval"]["method"] == "crossed_fieller"
      assert np.shape(cl["repro"]["samples"]["a"]) == (c.num_seeds, c.n_eval_windows)
    assert rec["resumed_stages"] == []
    # each policy's own SLO capacity on both clusters; the held-out one extrapolates
    pols = {k.rsplit("@", 1)[0] for k in rec["summary"]}
    assert set(rec["slo_capacity"]) == pols == set(rec["heldout_slo_capacity"])
    assert all(v["how"] in ("interpolated", "at least", "below")
               for v in rec["slo_capacity"].values())
    assert rec["heldout_extrapolates"]["new_gpu_types"] == ["L40S-7B"]
    assert rec["heldout_extrapolates"]["gpus"] > rec["heldout_extrapolates"]["max_training_gpus"]
    assert "SLO capacity per policy" in md and "extrapolates" in md
    # A second run in the same workdir resumes: tuned baselines and both trained variants come
    # from the workdir's caches, and the evaluation gives the same numbers.
    exp.run(c, True, str(tmp_path / "wd"))
    again = json.load(open(tmp_path / "results" / f"{name}.json"))
    assert again["resumed_stages"] == ["heuristics", "ppo", "ppo_bc"]
    assert again["summary"] == rec["summary"] and again["tuned"] == rec["tuned"]
    return      # --eval_trace goes through the same shared code; checked once (cheaper static run)
  # A second run in the same workdir reads capacity and tuning back (a stage) and gives the
  # same numbers.
  exp.run(c, True, str(tmp_path / "wd"))
  again = json.load(open(tmp_path / "results" / f"{name}.json"))
  assert again["summary"] == rec["summary"] and again["tuned"] == rec["tuned"]
  assert again["capacity_rps"] == rec["capacity_rps"]
  stages = tmp_path / "wd" / "stages" / "serving_batching"
  assert sorted(os.listdir(stages)) == sorted(f"{t}_static" for t in c.traces)
  # --eval_trace: the saved policy is evaluated on any trace file.
  trace = os.path.join(ROOT, "jaxrl_suite", "envs", "serving", "data", "azure2023_code_sample.csv")
  exp.run(c, True, str(tmp_path / "wd"), eval_trace=trace)
  assert (tmp_path / "results" / f"{name}_eval.json").exists()


@pytest.mark.slow
def test_routing_with_two_workers_trains_the_variants_side_by_side(tmp_path):
  """`--workers=2`: a helper process shares the workdir; the tuning is done once (the helper
  waits for it), each process trains one RL variant, and both evaluate the same policies."""
  out = tmp_path / "results"
  env = dict(os.environ, PYTHONPATH=ROOT, JAXRL_RESULTS_DIR=str(out))
  p = subprocess.run([sys.executable, "-m", "experiments.serving_routing", "--quick",
                      "--workers=2", f"--workdir={tmp_path / 'wd'}", "--config.n_tune_windows=2"],
                     cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
  assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
  rec = json.load(open(out / "serving_routing.json"))
  helped = [s for s in rec["resumed_stages"] if s.endswith("(other process)")]
  assert len(helped) == 1 and "heuristics" not in rec["resumed_stages"], rec["resumed_stages"]
  log = open(tmp_path / "wd" / "helpers" / "1.log").read()
  assert "tuned" in log and "(from the workdir)" in log     # the helper read the tuning back
  trained = {v for v in ("ppo", "ppo_bc") if f"route train {v} (" in log}   # tqdm's label
  assert len(trained) == 1 and helped == [f"{trained.pop()} (other process)"], log[-3000:]


def test_late_gain_of_a_flat_and_a_rising_curve():
  """The report's late gain (display: verdicts use the layer's budget-doubling rule)."""
  from jaxrl_suite.envs.serving import protocol
  flat = np.tile(np.r_[np.linspace(0, 10, 8), np.full(8, 10.0)], (4, 1)) + np.arange(4)[:, None]
  rising = np.tile(np.linspace(0, 10, 16), (4, 1)) + 0.1 * np.arange(4)[:, None]
  g_flat, g_rise = protocol.late_gain(flat, frac=0.25), protocol.late_gain(rising, frac=0.25)
  np.testing.assert_allclose(g_flat, (0.0, 0.0, 0.0), atol=1e-12)
  np.testing.assert_allclose(g_rise[0], 10 / 15 * 4, rtol=1e-9)  # 4 updates apart, slope 2/3


def test_budget_checkpoints_resume_after_an_interruption(tmp_path, monkeypatch):
  """A run stopped after its first budget checkpoint and started again with the same resume
  file continues from the saved runner state: same checkpoints and curves as one unbroken run."""
  import gymnax
  import jax
  from jaxrl_suite.algos import ppo
  from jaxrl_suite.train.serving import training
  env, p = gymnax.make("CartPole-v1")
  cfg = ppo.default_config()
  cfg.num_envs, cfg.num_steps, cfg.total_timesteps = 4, 16, 256     # 4 updates, 2 checkpoints
  cfg.update_epochs, cfg.num_minibatches = 1, 2
  whole, curves, _ = training.train_checkpoints(ppo, cfg, env, p, [0, 1], 2, "whole")
  path = str(tmp_path / "training.npz")
  real_tqdm = training.tqdm
  monkeypatch.setattr(training, "tqdm", lambda it, **kw: list(it)[:1])    # killed after chunk 1
  first, _, _ = training.train_checkpoints(ppo, cfg, env, p, [0, 1], 2, "cut", resume_path=path,
                                         resume_key="k")
  assert len(first) == 1 and os.path.exists(path)
  monkeypatch.setattr(training, "tqdm", real_tqdm)
  resumed, curves_r, _ = training.train_checkpoints(ppo, cfg, env, p, [0, 1], 2, "resumed",
                                                  resume_path=path, resume_key="k")
  assert len(resumed) == 2
  for a, b in zip(whole, resumed):
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)
  np.testing.assert_array_equal(curves, curves_r)
  # a resume file of another run (key) is not used: training starts over from the given state
  fresh = {"x": np.zeros(3)}
  state, ckpts, _, _ = training._resume(path, "another run", fresh, 2)
  assert state is fresh and ckpts == []


def test_batching_heuristics_stage_round_trips_through_the_stage_cache(tmp_path):
  """The batching study's capacity-and-tuning stage stores grid indices and scores as JSON and
  gives back the same grid points (by identity) and scores; a second call reads the stage."""
  import ml_collections
  from jaxrl_suite.core import stage_cache
  from jaxrl_suite.train.serving import batching_study
  c = ml_collections.ConfigDict({"loads": (0.5, 1.1)})
  grids = {"fixed": [{"b": 1}, {"b": 2}, {"b": 3}], "timeout": [{"t": 0.1}, {"t": 0.2}]}
  tuned = {("fixed", 0.5): grids["fixed"][2], ("fixed", 1.1): grids["fixed"][0],
           ("timeout", 0.5): grids["timeout"][1], ("timeout", 1.1): grids["timeout"][1]}
  score = {("fixed", 0.5): 1.5, ("fixed", 1.1): float("nan"), ("timeout", 0.5): 0.25,
           ("timeout", 1.1): 2.0}
  calls = []

  def fn():
    calls.append(1)
    return batching_study.heuristics_record(c, grids, 3.2, 0.65, "SLO capacity", tuned, score,
                                            40)

  for _ in range(2):
    h = stage_cache.optional_stage("serving_batching/t_static/heuristics", {"x": 1}, fn,
                                   str(tmp_path))
    t2, s2 = batching_study.heuristics_restore(c, grids, h)
    assert all(t2[k] is tuned[k] for k in tuned) and set(t2) == set(tuned)
    np.testing.assert_equal([s2[k] for k in score], [score[k] for k in score])
    assert (h["capacity"], h["base_scale"], h["capacity_how"], h["n_evals"]) == (
        3.2, 0.65, "SLO capacity", 40)
  assert len(calls) == 1
