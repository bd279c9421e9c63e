"""The v2 (stability target) PPO pump-pair agent: joint log-prob, valid pairs, tiny training."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents import ballast_v2 as A2
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.algos import ppo
from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import make_ballast
from jaxrl_suite.envs.ballast.routes import K_MAX

# noiseless soundings: the agent's level-based candidate test agrees exactly with the env mask
ENV, PARAMS = make_ballast(task="v2", sigma_level=0.0)


def test_joint_log_prob_is_the_sum_of_the_two_heads():
  l0 = jnp.array([[1.0, 2.0, -1e9, 0.5]])
  l1 = jnp.array([[0.0, 3.0, 1.0, -1e9]])
  lp, ent = A2.joint_log_prob_entropy(l0, l1, jnp.array([1]), jnp.array([2]))

  def log_softmax(x):
    x = np.asarray(x, np.float64)
    return x - x.max() - np.log(np.exp(x - x.max()).sum())

  ref = log_softmax(l0[0])[1] + log_softmax(l1[0])[2]
  np.testing.assert_allclose(float(lp[0]), ref, rtol=1e-5)
  p0, p1 = np.exp(log_softmax(l0[0])), np.exp(log_softmax(l1[0]))
  h = -(p0[p0 > 0] * np.log(p0[p0 > 0])).sum() - (p1[p1 > 0] * np.log(p1[p1 > 0])).sum()
  np.testing.assert_allclose(float(ent[0]), h, rtol=1e-5)


def _rollout(n_envs=16, n_steps=12, greedy=False):
  """Sampled actions of a freshly initialised agent on n_envs ships for n_steps steps."""
  gr = A2.make_graph2(PARAMS, ENV.agent_api)
  c = AB.default_config("v2")
  net, observe, act = A2.make_actor(32, c.ballast.w_init, gr)

  def run(key):
    k_init, k_reset, k_run = jax.random.split(key, 3)
    obs, state = jax.vmap(ENV.reset_env, in_axes=(0, None))(jax.random.split(k_reset, n_envs),
                                                           PARAMS)
    pre = A2.observe_base(obs[0], gr)
    params = net.init(k_init, A2.head_feats(pre, gr, 0, K_MAX), A2.head_feats(pre, gr, 1, K_MAX))

    def step(carry, k):
      obs, state = carry
      ka, ks = jax.random.split(k)
      mask = jax.vmap(ENV.action_mask, in_axes=(0, None))(state, PARAMS)
      (carry_obs, value) = observe(params, obs)
      action, record, log_prob, off = act(params, carry_obs, ka, greedy)
      # the update's log-prob (from the stored record) equals the rollout's
      ft0, ft1, s0, s1 = record
      l0, l1, _ = net.apply(params, ft0, ft1)
      lp2, _ = A2.joint_log_prob_entropy(l0, l1, s0, s1)
      greedy_pair = jax.vmap(B.v2_greedy_policy, in_axes=(None, 0))(gr.vp, obs)
      obs2, state2, _, _, _, _ = jax.vmap(ENV.step, in_axes=(0, 0, 0, None))(
          jax.random.split(ks, n_envs), state, action, PARAMS)
      return (obs2, state2), (action, mask, log_prob, lp2, off, greedy_pair, value)

    return jax.lax.scan(step, (obs, state), jax.random.split(k_run, n_steps))[1]

  return jax.jit(run)


def test_agent_pairs_are_valid_and_deterministic():
  run = _rollout()
  action, mask, lp, lp2, off, greedy_pair, value = jax.device_get(run(jax.random.PRNGKey(0)))
  a0, a1 = action[..., 0], action[..., 1]
  pair_ok = np.asarray(PARAMS.pair_ok)
  assert pair_ok[a0, a1].all()                                     # never a clashing pair
  assert np.take_along_axis(mask[:, :, 0], a0[..., None], -1).all()  # pump-0 mask respected
  assert np.take_along_axis(mask[:, :, 1], a1[..., None], -1).all()  # pump-1 mask respected
  rp = np.asarray(PARAMS.route_pump)
  assert ((a0 == K_MAX) | (rp[np.minimum(a0, K_MAX - 1)] == 0)).all()
  assert ((a1 == K_MAX) | (rp[np.minimum(a1, K_MAX - 1)] == 1)).all()
  assert (a0 < K_MAX).any() and (a1 < K_MAX).any()                  # it does move water
  np.testing.assert_allclose(lp, lp2, rtol=1e-5, atol=1e-5)
  assert np.isfinite(value).all() and (lp <= 0).all()
  # off-greedy flag agrees with a direct comparison with B.v2_greedy_policy
  np.testing.assert_array_equal(off, (action != greedy_pair).any(-1))
  again = jax.device_get(run(jax.random.PRNGKey(0)))[0]
  np.testing.assert_array_equal(action, again)                     # same key, same actions


def test_tiny_v2_training_is_finite_and_deterministic():
  c = AB.default_config("v2")
  c.num_envs, c.num_steps, c.num_minibatches, c.update_epochs = 8, 8, 2, 1
  c.ballast.hidden = 16
  c.total_timesteps = 8 * 8 * 3
  train = jax.jit(ppo.make_train(c, ENV, PARAMS))    # the one learner, agent "ballast_v2"
  ts, m = jax.device_get(train(jax.random.PRNGKey(3)))
  for k in ("policy_loss", "value_loss", "entropy", "returned_episode_returns",
            "off_top_share"):
    assert np.isfinite(m[k]).all(), k
  assert m["policy_loss"].shape == (3,) and (m["entropy"] > 0).all()
  ts2, m2 = jax.device_get(train(jax.random.PRNGKey(3)))
  for k in m:
    np.testing.assert_array_equal(m[k], m2[k])
  # the seed matters: another key gives other parameters
  ts3, _ = jax.device_get(train(jax.random.PRNGKey(4)))
  w0, w3 = (np.asarray(t.train_state.params["params"]["pi0"]["r1"]["kernel"])
            for t in (ts, ts3))
  assert not np.allclose(w0, w3)
