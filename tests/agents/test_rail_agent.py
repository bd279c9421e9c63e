"""The rail pricing agent: permutation invariance over other trains, the MLP ablation sees only
its own token, both run through the one on-policy learner (IPPO and MAPPO)."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxrl_suite.envs.rail import field_slice, make_rail
from jaxrl_suite.train.rail.variants import rail_agent

ENV, P = make_rail("ecml", pad=9)


def _agent(att, centralised=False):
  c = ml_collections.ConfigDict(dict(attention=att, embed_dim=16, num_heads=2, num_layers=1))
  return rail_agent(ENV, P, c, centralised)


def _rows():
  obs, s = ENV.reset_env(jax.random.PRNGKey(0), P)
  _, s, *_ = ENV.step_env(jax.random.PRNGKey(1), s, jnp.arange(9) % 8, P)
  obs = ENV.get_obs(s, P)
  return {"obs": obs, "agent_id": jnp.eye(9),
          "global": jnp.broadcast_to(obs.reshape(1, -1), (9, obs.size))}


def test_relational_agent_is_invariant_to_permuting_other_trains():
  ag = _agent(True)
  rows = _rows()
  params = ag.init(jax.random.PRNGKey(0), rows)
  logits, v = ag.module.apply(params, *_inputs(ag, rows))
  perm = np.array([0, 3, 1, 2, 8, 7, 6, 5, 4])                  # row 0 keeps its own slot 0
  rows_p = dict(rows, obs=rows["obs"][:, perm])
  logits_p, v_p = ag.module.apply(params, *_inputs(ag, rows_p))
  np.testing.assert_allclose(np.asarray(logits_p), np.asarray(logits), atol=1e-5)
  np.testing.assert_allclose(np.asarray(v_p), np.asarray(v), atol=1e-5)


def _inputs(ag, rows):
  tok = rows["obs"]
  return (tok, tok[..., field_slice("valid").start] > 0.5,
          tok[..., field_slice("rel_type").start].astype(jnp.int32),
          tok[..., field_slice("relation").start])


def test_mlp_ablation_ignores_other_trains_tokens():
  ag = _agent(False)
  rows = _rows()
  params = ag.init(jax.random.PRNGKey(0), rows)
  a = ag.module.apply(params, *_inputs(ag, rows))[0]
  eye = np.eye(9, dtype=bool)[..., None]
  feat = np.arange(rows["obs"].shape[-1]) < field_slice("relation").start
  # change every feature of every other train's token (relations and validity stay consistent)
  noisy = jnp.where(eye | ~feat, rows["obs"], rows["obs"] + 0.5)
  b = ag.module.apply(params, *_inputs(ag, dict(rows, obs=noisy)))[0]
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


@pytest.mark.parametrize("mode,att,action_mode", [("ippo", True, "bucket"),
                                                  ("mappo", False, "delta")])
def test_trains_through_the_on_policy_learner(mode, att, action_mode):
  from jaxrl_suite.algos import ppo
  env, p = make_rail("ecml", action_mode=action_mode, pad=9, reward_scale=5e-6)
  cfg = ppo.default_config()
  cfg.num_envs, cfg.num_steps, cfg.total_timesteps = 2, 12, 48
  cfg.update_epochs, cfg.num_minibatches, cfg.multi_agent = 1, 2, mode
  c = ml_collections.ConfigDict(dict(attention=att, embed_dim=16, num_heads=2, num_layers=1))
  agent = rail_agent(env, p, c, mode == "mappo")
  learner = ppo.make_learner(cfg, env, p, agent=agent)
  rs, met = jax.jit(learner.train)(jax.random.PRNGKey(0))
  assert np.all(np.isfinite(np.asarray(met["loss"])))
  # returns are O(1) at the experiment's reward scale (what lets the critic fit them)
  assert 0.0 < float(np.max(met["returned_episode_returns"])) < 50.0
  obs, _ = env.reset_env(jax.random.PRNGKey(3), p)
  act = agent.policy(rs.train_state.params, obs, jax.random.PRNGKey(4), greedy=True)
  assert act.shape == (9,) and int(act.min()) >= 0 and int(act.max()) < env.num_actions
