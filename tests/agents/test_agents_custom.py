"""A hand-written agent plugs into the one learner (the interface the ballast agents use):
a record that is not the observation, per-step logs, an auxiliary loss on privileged labels.

Probe: a contextual bandit with 4 arms; the observation is a one-hot context c in {0..3} and
only arm c pays 1 (episodes of one step). A uniform policy earns 0.25; the learner must reach
> 0.9. The auxiliary head must learn the privileged label (the context itself, read from the
env state) to near-zero loss. This separates "the learner cannot run a custom agent" from
"the ballast task is hard".
"""

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_suite.agents.interface import Agent, Eval, Step, no_carry
from jaxrl_suite.algos import ppo


@struct.dataclass
class _State(environment.EnvState):
  ctx: jax.Array


@struct.dataclass
class _Params(environment.EnvParams):
  max_steps_in_episode: int = 1


class _Bandit(environment.Environment):
  @property
  def default_params(self):
    return _Params()

  def reset_env(self, key, params):
    s = _State(time=0, ctx=jax.random.randint(key, (), 0, 4))
    return self.get_obs(s), s

  def get_obs(self, s, params=None, key=None):
    return jax.nn.one_hot(s.ctx, 4)

  def step_env(self, key, s, action, params):
    r = (action == s.ctx).astype(jnp.float32)
    s = s.replace(time=s.time + 1)
    return self.get_obs(s), s, r, jnp.array(True), {"success": r > 0}

  def is_terminal(self, s, params):
    return jnp.array(True)

  @property
  def num_actions(self):
    return 4

  def action_space(self, params=None):
    return spaces.Discrete(4)

  def observation_space(self, params):
    return spaces.Box(0.0, 1.0, (4,), jnp.float32)


class _Net(nn.Module):
  @nn.compact
  def __call__(self, x):
    h = nn.tanh(nn.Dense(16)(x))
    return nn.Dense(4)(h), nn.Dense(1)(h)[..., 0], nn.Dense(4, name="aux")(h)


def _agent() -> Agent:
  net = _Net()

  def act(params, carry, obs, done_prev, key, mask=None):
    logits, value, _ = net.apply(params, obs)
    a = jax.random.categorical(key, logits)
    lp = jnp.take_along_axis(jax.nn.log_softmax(logits), a[:, None], -1)[:, 0]
    return Step(carry, a, lp, value, {"a": a, "obs": obs}, {"first_arm": a == 0})

  def evaluate(params, carry0, seq):
    logits, value, aux_logits = net.apply(params, seq.record["obs"])
    logp = jax.nn.log_softmax(logits)
    lp = jnp.take_along_axis(logp, seq.record["a"][:, None], -1)[:, 0]
    ent = -jnp.sum(jnp.exp(logp) * logp, -1)
    aux = optax.softmax_cross_entropy_with_integer_labels(aux_logits, seq.label).mean()
    return Eval(lp, ent, value, aux)

  return Agent(init=net.init, initial_carry=no_carry, act=act, evaluate=evaluate,
               value=lambda p, c, o: net.apply(p, o)[1], label=lambda state: state.ctx)


def test_custom_agent_learns_a_contextual_bandit_with_aux_loss_and_logs():
  c = ppo.default_config()
  c.num_envs, c.num_steps, c.total_timesteps, c.lr = 16, 8, 16 * 8 * 40, 3e-3
  c.ent_coef, c.aux_coef, c.episode_info = 0.0, 0.5, ("success",)
  env = _Bandit()
  rs, m = jax.jit(ppo.make_train(c, env, env.default_params, agent=_agent()))(
      jax.random.PRNGKey(0))
  m = jax.device_get(m)
  ret = m["episode_return"]
  assert ret[:3].mean() < 0.5                       # starts near chance (0.25)
  assert ret[-5:].mean() > 0.9, ret
  np.testing.assert_allclose(m["success_rate"], ret, atol=1e-6)   # reward 1 iff success
  assert m["first_arm"][0] > 0.1 and m["first_arm"][-1] < 0.4     # logs: arm 0 share -> 1/4
  assert m["aux_loss"][-1] < 0.5 * m["aux_loss"][0]               # the privileged label is learnt
  logits, _, _ = _Net().apply(rs.train_state.params, jnp.eye(4))
  chex.assert_trees_all_equal(jnp.argmax(logits, -1), jnp.arange(4))
