"""A diagonal-Gaussian actor-critic for Box action spaces, tanh-squashed to the bounds.

obs [B, D] -> mean mu [B, K], state-independent log std [K], value [B]. The agent samples
u ~ N(mu, sigma^2) and sends a = low + (tanh(u) + 1) / 2 * (high - low) to the environment.
Change of variables (exact, per dimension k):

  log pi(a | s) = sum_k [ log N(u_k; mu_k, sigma_k) - log((high_k - low_k) / 2)
                          - log(1 - tanh(u_k)^2) ]

with log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)) (stable for large |u|). The record
keeps (obs, u), so `evaluate` re-scores u without an atanh of a saturated action. The entropy
bonus is the base Gaussian's, sum_k (0.5 + 0.5 log(2 pi) + log sigma_k) (the squashed entropy
has no closed form). Imports core only (agents/ layer).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents.interface import ZERO, Agent, Eval, Step, no_carry
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.networks import MLP

_LOG_2PI = float(np.log(2 * np.pi))


def gaussian_log_prob(u, mean, log_std):
  """sum_k log N(u_k; mean_k, exp(log_std_k)^2): [..., K] -> [...]."""
  z = (u - mean) * jnp.exp(-log_std)
  return jnp.sum(-0.5 * z * z - log_std - 0.5 * _LOG_2PI, -1)


def gaussian_entropy(log_std, batch_shape=()):
  """sum_k (0.5 + 0.5 log 2 pi + log_std_k), broadcast to `batch_shape`."""
  return jnp.broadcast_to(jnp.sum(0.5 + 0.5 * _LOG_2PI + log_std, -1), batch_shape)


def squashed_log_prob(u, mean, log_std, low, high):
  """log pi(a) of a = low + (tanh(u) + 1)/2 (high - low), per the module docstring."""
  log_det = 2.0 * (jnp.log(2.0) - u - jax.nn.softplus(-2.0 * u))   # log(1 - tanh(u)^2)
  return (gaussian_log_prob(u, mean, log_std)
          - jnp.sum(log_det + jnp.log((high - low) / 2.0), -1))


def squash(u, low, high):
  return low + (jnp.tanh(u) + 1.0) * 0.5 * (high - low)


class GaussianActorCritic(nn.Module):
  """obs [..., D] -> (mean [..., K], log_std [K], value [...])."""
  action_dim: int
  hidden_sizes: tuple = (64, 64)
  activation: str = "tanh"
  log_std_init: float = 0.0

  @nn.compact
  def __call__(self, obs):
    a = MLP(self.hidden_sizes, self.activation, name="actor_torso")(obs)
    mean = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), name="mu")(a)
    log_std = self.param("log_std", nn.initializers.constant(self.log_std_init),
                         (self.action_dim,))
    c = MLP(self.hidden_sizes, self.activation, name="critic_torso")(obs)
    value = nn.Dense(1, kernel_init=orthogonal(1.0), name="v")(c)[..., 0]
    return mean, log_std, value


def make(low, high, hidden_sizes=(64, 64), activation: str = "tanh",
         log_std_init: float = 0.0) -> Agent:
  """The agent for a Box(low, high) action space of shape [K] (finite bounds)."""
  low = jnp.asarray(low, jnp.float32).reshape(-1)
  high = jnp.asarray(high, jnp.float32).reshape(-1)
  net = GaussianActorCritic(int(low.shape[0]), tuple(hidden_sizes), activation, log_std_init)

  def init(key, obs):
    return net.init(key, obs)

  def act(params, carry, obs, done_prev, key, mask=None):
    del done_prev, mask
    mean, log_std, value = net.apply(params, obs)
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
    return Step(carry, squash(u, low, high), squashed_log_prob(u, mean, log_std, low, high),
                value, {"obs": obs, "u": u}, {})

  def evaluate(params, carry0, seq):
    del carry0
    mean, log_std, value = net.apply(params, seq.record["obs"])
    u = seq.record["u"]
    return Eval(squashed_log_prob(u, mean, log_std, low, high),
                gaussian_entropy(log_std, value.shape), value, ZERO)

  def value(params, carry, obs):
    del carry
    return net.apply(params, obs)[2]

  def policy(params, obs, key, mask=None, greedy: bool = False):
    """obs [..., D] -> action [..., K] (greedy: the squashed mean)."""
    del mask
    mean, log_std, _ = net.apply(params, obs.reshape(obs.shape[:-1] + (-1,)).astype(jnp.float32))
    u = mean if greedy else mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
    return squash(u, low, high)

  return Agent(init, no_carry, act, evaluate, value, module=net, policy=policy)
