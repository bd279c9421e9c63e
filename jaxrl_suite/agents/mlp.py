"""The default agent: purejaxrl's MLP actor-critic (`core.networks.ActorCritic`), feed-forward.

Single-agent rows: obs [B, D] -> logits [B, A], value [B]. Multi-agent rows (a dict from
`algos.rollout.VecEnv.view`): the actor and, for IPPO, the critic read [own obs, agent id]; for
MAPPO (`centralised=True`) the critic reads [every agent's obs, agent id] (a centralised critic
with shared parameters; actions still depend on the agent's own observation only).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.algos.agent import ZERO, Agent, Eval, Step, no_carry
from jaxrl_suite.core import losses
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.networks import MLP, ActorCritic, apply_action_mask


def own_input(obs, obs_ndim: int) -> jax.Array:
  """[B, D] actor input: the flat observation, or [own obs flattened, agent id] (multi-agent)."""
  if not isinstance(obs, dict):
    return obs
  o = obs["obs"]
  o = o.reshape(o.shape[:o.ndim - obs_ndim] + (-1,))
  return jnp.concatenate([o, obs["agent_id"]], -1)


class CentralisedActorCritic(nn.Module):
  """MAPPO: actor MLP on the agent's own input, critic MLP on the global input."""
  num_actions: int
  hidden_sizes: tuple = (64, 64)
  activation: str = "tanh"

  @nn.compact
  def __call__(self, own, glob):
    a = MLP(self.hidden_sizes, self.activation, name="actor_torso")(own)
    logits = nn.Dense(self.num_actions, kernel_init=orthogonal(0.01), name="pi")(a)
    c = MLP(self.hidden_sizes, self.activation, name="critic_torso")(glob)
    value = nn.Dense(1, kernel_init=orthogonal(1.0), name="v")(c)[..., 0]
    return logits, value


def make(num_actions: int, hidden_sizes=(64, 64), activation: str = "tanh",
         obs_ndim: int = 1, centralised: bool = False) -> Agent:
  """The MLP agent (record = the observation rows)."""
  if centralised:
    net = CentralisedActorCritic(num_actions, tuple(hidden_sizes), activation)
    apply = lambda p, obs: net.apply(p, own_input(obs, obs_ndim),
                                     jnp.concatenate([obs["global"], obs["agent_id"]], -1))
  else:
    net = ActorCritic(num_actions, tuple(hidden_sizes), activation)
    apply = lambda p, obs: net.apply(p, own_input(obs, obs_ndim))

  def init(key, obs):
    if centralised:
      return net.init(key, own_input(obs, obs_ndim),
                      jnp.concatenate([obs["global"], obs["agent_id"]], -1))
    return net.init(key, own_input(obs, obs_ndim))

  def act(params, carry, obs, done_prev, key, mask=None):
    del done_prev
    logits, value = apply(params, obs)
    logits = apply_action_mask(logits, mask)
    action = jax.random.categorical(key, logits)
    return Step(carry, action, losses.categorical_log_prob(logits, action), value, obs, {})

  def evaluate(params, carry0, seq):
    del carry0
    logits, value = apply(params, seq.record)
    logits = apply_action_mask(logits, seq.mask)
    return Eval(losses.categorical_log_prob(logits, seq.action),
                losses.categorical_entropy(logits), value, ZERO)

  def value(params, carry, obs):
    del carry
    return apply(params, obs)[1]

  def policy(params, obs, key, mask=None, greedy: bool = False):
    """Heuristic-policy signature: obs [..., D] -> action [...] (single-agent rows)."""
    logits, _ = net.apply(params, obs.reshape(obs.shape[:-1] + (-1,)).astype(jnp.float32))
    logits = apply_action_mask(logits, mask)
    return jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)

  return Agent(init, no_carry, act, evaluate, value, module=net,
               policy=None if centralised else policy)
