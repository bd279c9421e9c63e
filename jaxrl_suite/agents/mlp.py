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

from jaxrl_suite.agents.interface import Agent, feed_forward
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.networks import MLP, ActorCritic


def own_input(obs, obs_ndim: int) -> jax.Array:
  """[B, D] actor input: the flat observation, or [own obs flattened, agent id] (multi-agent)."""
  if not isinstance(obs, dict):
    return obs
  o = obs["obs"]
  o = o.reshape(o.shape[:o.ndim - obs_ndim] + (-1,))
  return jnp.concatenate([o, obs["agent_id"]], -1)


def global_input(obs) -> jax.Array:
  """[B, N * D + N] centralised-critic input: every agent's observation and the agent id."""
  return jnp.concatenate([obs["global"], obs["agent_id"]], -1)


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
    apply = lambda p, obs: net.apply(p, own_input(obs, obs_ndim), global_input(obs))
  else:
    net = ActorCritic(num_actions, tuple(hidden_sizes), activation)
    apply = lambda p, obs: net.apply(p, own_input(obs, obs_ndim))

  def init(key, obs):
    if centralised:
      return net.init(key, own_input(obs, obs_ndim), global_input(obs))
    return net.init(key, own_input(obs, obs_ndim))

  return feed_forward(init, apply, net, single_agent_policy=not centralised)
