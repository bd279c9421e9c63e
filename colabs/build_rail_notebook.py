r"""Builds colabs/rail_pricing.ipynb (run from anywhere: python colabs/build_rail_notebook.py).

The notebook is generated so that its cells stay reviewable here; the first code cell is the
shared setup cell of colabs/build_notebooks.py. It runs top to bottom on CPU in a few minutes.
"""

from __future__ import annotations

import os
import sys

import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_notebooks as bn  # noqa: E402  (shared cells, builder and writer)
from build_notebooks import _code, _md  # noqa: E402


def rail_pricing() -> nbformat.NotebookNode:
  cells = [
      _md("""
# RailRM-v0: pricing trains against revenue-management practice

A line of stations, trains of competing operators, Poisson arrivals per market and segment, MNL
choice among trains (plus not travelling), leg capacities. This notebook builds the environment,
checks the demand calibration by perturbing prices, runs the RM baselines, computes the Nash and
joint-monopoly fares, and trains a small relational MAPPO agent through the shared on-policy
learner. The full study is `python -m experiments.rail_pricing` (see docs/rail_pricing.md).
"""),
      _code("""
import jax, jax.numpy as jnp, numpy as np
import matplotlib.pyplot as plt
from jaxrl_suite.envs.rail import make_rail, calibration, competition, evaluate as E
from jaxrl_suite.envs.rail import baselines as B
from jaxrl_suite.envs.rail.instance import SEGMENTS, ELASTICITY

env, params = make_rail("ecml", pad=9, reward_mode="operator", reward_scale=5e-6)  # O(1) returns
print("trains", env.n_agents, "obs", env.observation_space(params).shape,
      "actions per train", env.num_actions)
"""),
      _md("**Calibration.** Raise every fare by 10% with capacity non-binding and measure the "
          "arc elasticity of bookings per segment (targets from UK evidence)."),
      _code("""
el = calibration.arc_elasticities(env, params, jax.random.PRNGKey(0), n_episodes=32)
for s, e, t in zip(SEGMENTS, el, ELASTICITY):
  print(f"{s:9s} measured {e:+.2f}  target {t:+.2f}  UK range {calibration.UK_RANGES[s]}")
"""),
      _md("**Baselines** on 16 episodes each (the experiment tunes theta on 200 x 8 episodes)."),
      _code("""
keys = jax.random.split(jax.random.PRNGKey(1), 16)
rows = {}
for name, theta in [("static", 5.0), ("myopic", 1.0), ("emsr_b", 1.25), ("emsr_b_mr", 1.25),
                    ("cdlp", 1.25), ("cdlp_known", 1.25)]:
  m = jax.jit(lambda ks: E.evaluate(env, params, E.baseline_policy(B.POLICIES[name], params,
                                                                   theta), ks))(keys)
  rows[name] = float(m["revenue_total"].mean())
  print(f"{name:10s} revenue {rows[name]:10,.0f}  load factor {float(m['load_factor'].mean()):.3f}"
        f"  consumer surplus {float(m['cs'].mean()):10,.0f}")
"""),
      _md("**Upper bound** on any policy's expected revenue on these episodes (every would-be "
          "passenger pays the top fare; loose, but valid, unlike a demand-known heuristic)."),
      _code("""
from jaxrl_suite.envs.rail import bound
print(f"upper bound {float(bound.mean_bound(env, params, keys).mean()):10,.0f}")
"""),
      _md("**Competition benchmarks**: one-shot Nash (operators) and joint-monopoly static fares."),
      _code("""
real = np.asarray(params.agent_mask) > 0
nash, converged = competition.nash(env, params, np.where(real, np.asarray(params.operator), -1))
mono = competition.monopoly(env, params, real)
pay = competition.fluid_payoffs(env, params)
print("Nash buckets", nash, "converged", converged, "revenue", float(pay(jnp.asarray(nash[None])).sum()))
print("monopoly    ", mono, "revenue", float(pay(jnp.asarray(mono[None])).sum()))
"""),
      _md("**Relational MAPPO** (a very short run, to show the API; the experiment trains longer)."),
      _code("""
import ml_collections
from jaxrl_suite.algos import ppo
from jaxrl_suite.agents import rail_features
from jaxrl_suite.envs.rail import token_columns   # the token layout, passed into the agent
cfg = ppo.default_config()
cfg.num_envs, cfg.num_steps, cfg.total_timesteps = 8, 12, 8 * 12 * 6
cfg.update_epochs, cfg.num_minibatches, cfg.multi_agent, cfg.gamma = 2, 2, "mappo", 1.0
agent = rail_features.from_config(
    env.num_actions, env.observation_space(params).shape[1:],
    ml_collections.ConfigDict(dict(attention=True, embed_dim=16, num_heads=2, num_layers=1)),
    centralised=True, **token_columns())
learner = ppo.make_learner(cfg, env, params, agent=agent)
rs, met = jax.jit(learner.train)(jax.random.PRNGKey(0))
pol = lambda k, obs, s: agent.policy(rs.train_state.params, obs, k, greedy=True)
m = jax.jit(lambda ks: E.evaluate(env, params, pol, ks))(keys)
rows["mappo_rel (tiny budget)"] = float(m["revenue_total"].mean())
plt.plot(np.asarray(met["returned_episode_returns"])); plt.xlabel("update"); plt.ylabel("return")
plt.show()
plt.barh(list(rows), list(rows.values())); plt.xlabel("revenue per departure day (GBP)")
plt.show()
"""),
  ]
  return bn.notebook(cells)


if __name__ == "__main__":
  bn.write(rail_pricing(), "rail_pricing.ipynb")
