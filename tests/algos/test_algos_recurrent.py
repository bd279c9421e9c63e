"""The GRU agent: it solves the memory probe the MLP agent provably cannot, its sequence
re-evaluation equals acting, and a resumed recurrent run ends bit-exactly where an
uninterrupted one does (the carry is part of the checkpointed runner state)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.algos import on_policy, ppo, rollout
from jaxrl_suite.envs import registry


def _config(agent, updates=60, **kw):
  c = ppo.default_config()
  c.agent = agent
  c.num_envs, c.num_steps, c.total_timesteps = 16, 16, 16 * 16 * updates
  c.lr, c.anneal_lr, c.ent_coef, c.num_minibatches = 3e-3, False, 0.01, 2
  c.hidden_sizes, c.gru.hidden_size, c.gru.torso_sizes = (32, 32), 32, (32,)
  c.env_name = "ProbeMemory-v0"
  c.update(kw)
  return c


def test_gru_solves_the_memory_probe_the_mlp_cannot():
  """ProbeMemory: the rewarded action at the last step is the cue shown at t = 0 only. Any
  policy of the current observation earns 0 in expectation (the last observation does not
  depend on the cue); a policy with memory earns 1. Budget: 60 updates of 256 steps."""
  env, params = registry.make("ProbeMemory-v0")
  out = {}
  for agent in ("mlp", "gru"):
    _, m = jax.jit(ppo.make_train(_config(agent), env, params))(jax.random.key(0))
    out[agent] = float(np.mean(np.asarray(m["episode_return"])[-5:]))   # ~320 episodes
  assert out["gru"] > 0.95, out
  assert abs(out["mlp"]) < 0.2, out      # 0 +- 4 standard errors


def test_sequence_evaluation_equals_acting():
  """Under the acting parameters, re-running the GRU over whole sequences from the stored
  carry gives the log-probs and values the rollout recorded (resets at episode starts)."""
  env, params = registry.make("ProbeMemory-v0")
  learner = ppo.make_learner(_config("gru", updates=2), env, params)

  @jax.jit
  def check(key):
    rs = learner.update(learner.init(key))[0]          # a carry that is not the initial one
    carry0 = rs.env.agent_carry
    _, _, traj = rollout.collect(learner.agent, rs.train_state.params, learner.vec_env, rs.env,
                                 rs.key, 16)
    ev = learner.agent.evaluate(rs.train_state.params, carry0,
                                on_policy.loss_view(traj, recurrent=True))
    return ev, traj, carry0

  ev, traj, carry0 = check(jax.random.key(1))
  assert float(jnp.abs(carry0).max()) > 0.0
  assert bool(traj.done_prev[1:].any())                # the sequence crosses episode starts
  np.testing.assert_allclose(ev.log_prob, traj.log_prob, atol=1e-5)
  np.testing.assert_allclose(ev.value, traj.value, atol=1e-5)


@pytest.mark.slow   # ~60 s: three host-loop runs with orbax checkpoints
def test_recurrent_run_resumes_bit_exactly(tmp_path):
  from configs import ppo_cartpole
  from jaxrl_suite import train
  from jaxrl_suite.core.pytree import trees_equal
  c = ppo_cartpole.get_config("quick")
  c.update(_config("gru", updates=8).to_dict())
  c.updates_per_chunk, c.checkpoint_every, c.log_every = 2, 2, 1
  full, n_full = train.run_training(c, str(tmp_path / "a"), progress=False)
  part, n_part = train.run_training(c, str(tmp_path / "b"), progress=False, stop_after=4)
  assert (n_full, n_part) == (8, 4)
  resumed, n = train.run_training(c, str(tmp_path / "b"), progress=False)
  assert n == 8
  assert trees_equal(full, resumed)        # params, optimiser, env state, carry, PRNG keys
  assert float(jnp.abs(resumed.env.agent_carry).max()) > 0.0   # the carry was restored too
