"""End-to-end quick run of experiments/ballast.py, the config validator, and the agent pieces."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import ballast as cfg
from jaxrl_suite.agents import ballast as A
from jaxrl_suite.envs.ballast import make_ballast
from jaxrl_suite.envs.ballast.routes import K_MAX


def test_config_validation_names_the_bad_field():
  c = cfg.get_config("quick")
  cfg.validate(c)
  c.n_episodes = -1
  with pytest.raises(ValueError, match="n_episodes"):
    cfg.validate(c)
  c = cfg.get_config()
  c.baselines = ("tabu",)
  with pytest.raises(ValueError, match="oracle"):
    cfg.validate(c)
  for bad in (-1,):          # (a float is refused by the ConfigDict itself)
    c = cfg.get_config()
    c.v2_bank = bad
    with pytest.raises(ValueError, match="v2_bank"):
      cfg.validate(c)


def test_claims_register():
  from jaxrl_suite.repro import Claim
  regs = [Claim.from_dict(d) for d in cfg.claims()]
  assert len({r.id for r in regs}) == len(regs)
  for r in regs:
    assert r.why and r.selection and r.unit in ("seed", "seed x episode")
  c = cfg.get_config("quick")
  c.eval_groups = 1
  with pytest.raises(ValueError, match="eval_groups"):
    cfg.validate(c)


def test_agent_features_and_policy_on_two_layouts():
  policy, diagnose = A.make_policy(32)
  policy, diagnose = jax.jit(policy), jax.jit(diagnose)  # eager dispatch is slow
  env, p = make_ballast()
  obs, s = jax.jit(env.reset)(jax.random.PRNGKey(0), p)
  g = A.make_graph(p, env.agent_api)
  ft = jax.jit(A.features)(obs, g)
  params = A.BallastAgent(hidden=32).init(jax.random.PRNGKey(1), ft)
  a = int(policy((params, g), obs, jax.random.PRNGKey(2)))
  mask = np.asarray(jax.jit(env.action_mask)(s, p))
  assert mask[a] and a < K_MAX
  # the initial policy picks a route B-replan believes best (believed-cost residual, no rank
  # prior): its residual is 0, and it is not a known-bad or believed-worse route
  slot = int(np.flatnonzero(np.asarray(ft.slot_route) == a)[0])
  assert float(ft.resid[slot]) == 0.0
  assert not bool(jax.jit(A.deviation_flags)((params, g), obs, jnp.int32(a))[1])
  # permutation-equivariant over slots: no rank feature or rank penalty (the session-2 agent
  # had both, and its three seeds collapsed to B-replan's argmax)
  perm = np.r_[np.random.default_rng(0).permutation(A.M_SLOTS), A.M_SLOTS]
  ft_p = ft._replace(route=ft.route[perm[:-1]], resid=ft.resid[perm],
                     slot_mask=ft.slot_mask[perm], slot_route=ft.slot_route[perm])
  net = A.BallastAgent(hidden=32)
  lg, lg_p = net.apply(params, ft)[0], net.apply(params, ft_p)[0]
  np.testing.assert_allclose(np.asarray(lg)[perm], np.asarray(lg_p), rtol=1e-5, atol=1e-5)
  # same weights, other layout (generalisation path)
  env2, p2 = make_ballast(layout="direct10")
  obs2, s2 = jax.jit(env2.reset)(jax.random.PRNGKey(0), p2)
  a2 = int(policy((params, A.make_graph(p2, env2.agent_api)), obs2, jax.random.PRNGKey(2)))
  assert np.asarray(jax.jit(env2.action_mask)(s2, p2))[a2]
  d = diagnose((params, g), obs)
  assert d.shape == (p.edge_mask.shape[0],) and not bool(d[~p.edge_mask].any())


def test_tiny_reproduction_end_to_end(tmp_path, repo_root):
  """Default-suite e2e: the whole pipeline (train, one evaluator, sweep, claims, files) on a tiny
  config; numbers are checked for internal consistency only."""
  from experiments import ballast as exp
  c = cfg.get_config("quick")
  c.n_episodes = 40
  c.n_boot = 100
  c.rl.num_envs, c.rl.num_steps, c.rl.num_minibatches = 16, 16, 2
  c.rl.total_timesteps = 16 * 16 * 2
  out = exp.run(c, quick=True, workdir=str(tmp_path), results_dir=str(tmp_path))
  assert len(out["claims"]) >= 3
  rec = json.load(open(os.path.join(str(tmp_path), "ballast.json")))
  # every claim is a registered one, judged by the reproduction layer from stored samples
  from jaxrl_suite.repro import records
  ids = {d["id"] for d in cfg.claims()}
  for row in rec["claims"]:
    assert records.on_layer(row) and row["repro"]["rule"]["id"] in ids
    assert records.check_row(row) is None, row["repro"]["rule"]["id"]
  by_id = {r["repro"]["rule"]["id"]: r for r in rec["claims"]}
  rl = by_id["ballast.rl_vs_dijkstra_32_blocked.v1"]["repro"]
  assert len(rl["samples"]["a"]) == c.rl_seeds                  # one unit per RL seed
  assert {s["what"].split(" ")[0] for s in rl["selection"]} == {"comparator", "mode"}
  assert all(s["split"] != "evaluation" for s in rl["selection"])
  fc = rec["fair_chance_sweep"]
  assert fc["budgets"][1] == 2 * fc["budgets"][0] and len(fc["scores"][0]) == c.rl_seeds
  orc = by_id["ballast.oracle_ceiling_32_blocked.v1"]["repro"]["samples"]
  assert len(orc["a"]) == c.eval_groups
  assert rec["comparator_selection"]["choice"] in c.baselines
  sweep = json.load(open(os.path.join(str(tmp_path), "ballast_dt_sweep.json")))
  # the main run and the dt-sweep file report the same numbers
  assert sweep["dt_sweep"] == rec["dt_sweep"]
  # any-order heel bound: no episode capsizes, for any policy
  for pol, rows in rec["failures"].items():
    assert all(r["capsized"] == 0.0 for r in rows.values()), pol
  t = rec["table"]["all"]
  assert t["oracle"]["steps"] <= t["replan"]["steps"]
  # per seed x action mode rows with deviation shares in [0, 1]; headline mode is one of them
  assert rec["rl_mode"] in ("greedy", "sampled")
  assert {r["mode"] for r in rec["rl_seeds"]} == {"greedy", "sampled"}
  assert all(0.0 <= r["believed_worse"] <= r["off_top"] <= 1.0 for r in rec["rl_seeds"])


@pytest.mark.slow
def test_quick_reproduction_writes_results(tmp_path, repo_root):
  from experiments import ballast as exp
  c = cfg.get_config("quick")
  c.n_episodes = 60
  out = exp.run(c, quick=True, workdir=str(tmp_path), results_dir=str(tmp_path))
  from jaxrl_suite.repro import verdicts
  assert {cl["verdict"] for cl in out["claims"]} <= set(verdicts.WORDS)
  rec = json.load(open(os.path.join(str(tmp_path), "ballast.json")))
  assert os.path.exists(os.path.join(str(tmp_path), "ballast.png"))
  assert rec["mode"] == "quick" and "table" in rec
  t = rec["table"]["none"]
  # with no clog the oracle and B-replan take the same number of steps
  assert abs(t["oracle"]["steps"] - t["replan"]["steps"]) < 1e-6
  assert rec["table"]["all"]["oracle"]["steps"] <= rec["table"]["all"]["replan"]["steps"]


def test_fair_chance_sweep_needs_an_even_number_of_updates():
  """An odd update count used to skip the sweep silently (the full run's 200,000 steps gave 97
  updates), leaving every negative RL verdict "fair chance not shown"; now the config says so."""
  c = cfg.get_config()
  cfg.validate(c)
  c.rl.total_timesteps = 97 * c.rl.num_envs * c.rl.num_steps
  with pytest.raises(ValueError, match="config.rl.total_timesteps gives 97 PPO updates"):
    cfg.validate(c)
  c.fair_chance_sweep = False
  cfg.validate(c)
