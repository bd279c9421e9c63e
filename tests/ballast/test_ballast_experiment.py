"""End-to-end quick run of experiments/ballast.py, the config validator, and the agent pieces."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import ballast as cfg
from jaxrl_suite.envs.ballast import agent as A
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


def test_agent_features_and_policy_on_two_layouts():
  policy, diagnose = A.make_policy(32)
  env, p = make_ballast()
  obs, s = env.reset(jax.random.PRNGKey(0), p)
  g = A.make_graph(p)
  ft = A.features(obs, g)
  params = A.BallastAgent(hidden=32).init(jax.random.PRNGKey(1), ft)
  a = int(policy((params, g), obs, jax.random.PRNGKey(2)))
  mask = np.asarray(env.action_mask(s, p))
  assert mask[a] and a < K_MAX
  # the initial policy is B-replan's choice (rank-0 slot) thanks to the residual rank prior
  assert a == int(ft.slot_route[0])
  # same weights, other layout (generalisation path)
  env2, p2 = make_ballast(layout="direct10")
  obs2, s2 = env2.reset(jax.random.PRNGKey(0), p2)
  a2 = int(policy((params, A.make_graph(p2)), obs2, jax.random.PRNGKey(2)))
  assert np.asarray(env2.action_mask(s2, p2))[a2]
  d = diagnose((params, g), obs)
  assert d.shape == (p.edge_mask.shape[0],) and not bool(d[~p.edge_mask].any())


@pytest.mark.slow
def test_quick_reproduction_writes_results(tmp_path, repo_root):
  from experiments import ballast as exp
  c = cfg.get_config("quick")
  c.n_episodes = 60
  out = exp.run(c, quick=True, workdir=str(tmp_path), results_dir=str(tmp_path))
  assert {cl["verdict"] for cl in out["claims"]} <= {"reproduced", "partly reproduced",
                                                     "not reproduced", "contradicted",
                                                     "inconclusive"}
  rec = json.load(open(os.path.join(str(tmp_path), "ballast.json")))
  assert os.path.exists(os.path.join(str(tmp_path), "ballast.png"))
  assert rec["mode"] == "quick" and "table" in rec
  t = rec["table"]["none"]
  # with no clog the oracle and B-replan take the same number of steps
  assert abs(t["oracle"]["steps"] - t["replan"]["steps"]) < 1e-6
  assert rec["table"]["all"]["oracle"]["steps"] <= rec["table"]["all"]["replan"]["steps"]
