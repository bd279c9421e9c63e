"""Multi-agent training: IPPO and MAPPO reach the coordination probe's optimum, and the loss
weights of dead agents (agent mask) are exact."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.agents.interface import Eval
from jaxrl_suite.algos import on_policy, ppo, reinforce, rollout
from jaxrl_suite.envs import registry

OPTIMUM = 2 * 2.0   # team return: 2 live agents x meet_reward
GREEDY = 2 * 0.5    # both grab the immediate reward


@pytest.mark.parametrize("agent,mode", [("mlp", "mappo"),
                                        pytest.param("mlp", "ippo", marks=pytest.mark.slow),
                                        pytest.param("gru", "mappo", marks=pytest.mark.slow)])
def test_ippo_and_mappo_reach_the_coordination_optimum(agent, mode):
  """Budget: 40 updates of 16 envs x 16 steps (x 3 agent slots, 1 masked)."""
  env, params = registry.make("ProbeCoordination-v0")
  c = ppo.default_config()
  c.agent, c.multi_agent = agent, mode
  c.num_envs, c.num_steps, c.total_timesteps = 16, 16, 16 * 16 * 40
  c.lr, c.anneal_lr, c.num_minibatches = 3e-3, False, 2
  c.hidden_sizes, c.gru.hidden_size, c.gru.torso_sizes = (32, 32), 32, (32,)
  learner = ppo.make_learner(c, env, params)
  assert learner.vec_env.num_rows == 16 * 3
  rs, m = jax.jit(learner.train)(jax.random.key(0))
  ret = np.asarray(m["episode_return"])
  assert ret[:2].mean() < 0.8 * OPTIMUM                    # starts away from the optimum
  assert ret[-5:].mean() > 0.98 * OPTIMUM > GREEDY, ret[-5:]


def _batch(key, n=64, live=40):
  ks = jax.random.split(key, 6)
  w = (jnp.arange(n) < live).astype(jnp.float32)
  traj = rollout.Transition(
      record=None, action=None, log_prob=jax.random.normal(ks[0], (n,)),
      value=jax.random.normal(ks[1], (n,)), reward=None, final_obs=None, terminated=None,
      done=None, done_prev=None, mask=None, weight=w, label=None, carry=(), logs={},
      episode_sums={})
  ev = Eval(traj.log_prob + 0.3 * jax.random.normal(ks[2], (n,)),
            jax.random.uniform(ks[3], (n,)), traj.value + jax.random.normal(ks[4], (n,)),
            jnp.zeros(()))
  return on_policy.Batch(traj, jax.random.normal(ks[5], (n,)), jax.random.normal(ks[0], (n,))
                         ), ev


@pytest.mark.parametrize("loss_fn,cfg", [(ppo.ppo_loss, ppo.default_config()),
                                         (reinforce.reinforce_loss,
                                          reinforce.default_config())])
def test_weighted_loss_equals_the_loss_on_live_rows(loss_fn, cfg):
  """Rows with weight 0 (dead agents) change neither the loss nor its gradient: the weighted
  loss over all rows equals the unweighted loss over the live rows alone."""
  batch, ev = _batch(jax.random.key(0))
  live = np.flatnonzero(np.asarray(batch.traj.weight))
  sub = lambda x: None if x is None or isinstance(x, (tuple, dict)) else x[live]
  b_live = jax.tree.map(sub, batch._replace(traj=batch.traj.replace(weight=None)),
                        is_leaf=lambda x: x is None)
  ev_live = ev._replace(log_prob=ev.log_prob[live], entropy=ev.entropy[live],
                        value=ev.value[live])
  full, aux = loss_fn(ev, batch, cfg)
  ref, aux_ref = loss_fn(ev_live, b_live, cfg)
  np.testing.assert_allclose(full, ref, rtol=1e-5)
  for k in aux_ref:
    np.testing.assert_allclose(aux[k], aux_ref[k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_weighted_normalisation_matches_numpy_float64():
  adv = np.random.default_rng(0).normal(size=50)
  w = (np.arange(50) % 3 != 0).astype(np.float64)
  got = on_policy.normalize(jnp.asarray(adv, jnp.float32), True, jnp.asarray(w, jnp.float32))
  live = adv[w > 0]
  ref = (adv - live.mean()) / (live.std() + 1e-8)
  np.testing.assert_allclose(np.asarray(got)[w > 0], ref[w > 0], rtol=1e-5, atol=1e-6)
