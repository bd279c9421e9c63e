"""flax.linen networks: MLP actor-critics (discrete, multi-discrete, masked) and a GRU core.

Shapes: observations [..., obs_dim] float32; logits [..., num_actions] (or [..., K, n] for
multi-discrete); values [...]. Masks are applied by `apply_action_mask`, outside the module, so
the same parameters serve masked and unmasked environments.
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.losses import MASKED_LOGIT

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "silu": nn.silu}


def activation_fn(name: str):
  if name not in _ACTIVATIONS:
    raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {name!r}")
  return _ACTIVATIONS[name]


def _dense(features: int, scale: float) -> nn.Dense:
  # Orthogonal init with per-layer gains, as in the PPO implementation details (Huang et al.
  # 2022): sqrt(2) hidden, 0.01 policy head, 1.0 value head. Our LAPACK-free orthogonal: flax's
  # QR deadlocks XLA:CPU's thread pool when init is vmapped over seeds (core/initializers.py).
  return nn.Dense(features, kernel_init=orthogonal(scale),
                  bias_init=nn.initializers.constant(0.0))


class MLP(nn.Module):
  """Plain MLP torso: obs [..., D] -> features [..., hidden_sizes[-1]]."""
  hidden_sizes: Sequence[int] = (64, 64)
  activation: str = "tanh"

  @nn.compact
  def __call__(self, x):
    act = activation_fn(self.activation)
    for h in self.hidden_sizes:
      x = act(_dense(h, np.sqrt(2))(x))
    return x


class ActorCritic(nn.Module):
  """Separate actor and critic MLPs (purejaxrl's layout).

  `action_dims` = (n,) for a Discrete(n) space -> logits [..., n];
  (n1, ..., nK) with equal n_k for MultiDiscrete -> logits [..., K, n].
  Returns (logits, value [...]).
  """
  num_actions: int
  hidden_sizes: Sequence[int] = (64, 64)
  activation: str = "tanh"
  num_heads: int = 1  # > 1: multi-discrete, num_heads independent categorical actions.

  @nn.compact
  def __call__(self, obs):
    actor = MLP(self.hidden_sizes, self.activation, name="actor_torso")(obs)
    logits = _dense(self.num_actions * self.num_heads, 0.01)(actor)
    if self.num_heads > 1:
      logits = logits.reshape(logits.shape[:-1] + (self.num_heads, self.num_actions))
    critic = MLP(self.hidden_sizes, self.activation, name="critic_torso")(obs)
    value = _dense(1, 1.0)(critic)[..., 0]
    return logits, value


class GRUActorCritic(nn.Module):
  """Recurrent actor-critic for partially observed environments.

  Call with (hidden [..., H], obs [..., D], reset [...] bool); `reset` zeroes the hidden state
  before the step (episode boundary). Returns (new_hidden, logits, value).
  """
  num_actions: int
  hidden_size: int = 128
  torso_sizes: Sequence[int] = (64,)
  activation: str = "tanh"

  @nn.compact
  def __call__(self, hidden, obs, reset):
    hidden = jnp.where(reset[..., None], jnp.zeros_like(hidden), hidden)
    x = MLP(self.torso_sizes, self.activation, name="embed")(obs)
    gru = nn.GRUCell(self.hidden_size, recurrent_kernel_init=orthogonal(), name="gru")
    hidden, y = gru(hidden, x)
    logits = _dense(self.num_actions, 0.01)(y)
    value = _dense(1, 1.0)(y)[..., 0]
    return hidden, logits, value

  def initial_state(self, batch_shape=()):
    return jnp.zeros(tuple(batch_shape) + (self.hidden_size,), jnp.float32)


def apply_action_mask(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
  """Sets logits of invalid actions (mask False) to MASKED_LOGIT. mask broadcasts to logits."""
  if mask is None:
    return logits
  return jnp.where(mask, logits, MASKED_LOGIT)
