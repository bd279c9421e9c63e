"""A recurrent agent: `core.networks.GRUActorCritic` (MLP embedding -> GRU cell -> heads).

carry h [B, H]; act resets h where `done_prev` (a new episode starts at this step) and then
steps the cell: h_t = GRU(reset(h_{t-1}, done_prev_t), embed(o_t)). The learner stores the
carry at the start of each rollout; `evaluate` re-runs the cell over whole env sequences
[T, B] from it with the same resets, so the re-evaluated log-probs equal the acting ones
under the acting parameters (no burn-in needed: the sequence starts from the true carry).
Multi-agent rows read [own obs, agent id]; with `centralised=True` (MAPPO) the value head also
sees every agent's observation: V = Dense([GRU output, MLP(global obs, agent id)]).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_suite.agents.mlp import global_input, own_input
from jaxrl_suite.agents.interface import ZERO, Agent, Eval, Step
from jaxrl_suite.core import losses
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.networks import MLP, GRUActorCritic, apply_action_mask


class CentralisedGRU(nn.Module):
  """GRU actor on own inputs; value from [GRU output, MLP(global inputs)]."""
  num_actions: int
  hidden_size: int = 128
  torso_sizes: tuple = (64,)
  activation: str = "tanh"

  @nn.compact
  def __call__(self, hidden, own, glob, reset):
    hidden = jnp.where(reset[..., None], jnp.zeros_like(hidden), hidden)
    x = MLP(self.torso_sizes, self.activation, name="embed")(own)
    hidden, y = nn.GRUCell(self.hidden_size, recurrent_kernel_init=orthogonal(), name="gru")(
        hidden, x)
    logits = nn.Dense(self.num_actions, kernel_init=orthogonal(0.01), name="pi")(y)
    g = MLP(self.torso_sizes, self.activation, name="critic_torso")(glob)
    value = nn.Dense(1, kernel_init=orthogonal(1.0), name="v")(jnp.concatenate([y, g], -1))
    return hidden, logits, value[..., 0]


def make(num_actions: int, hidden_size: int = 128, torso_sizes=(64,), activation: str = "tanh",
         obs_ndim: int = 1, centralised: bool = False) -> Agent:
  if centralised:
    net = CentralisedGRU(num_actions, hidden_size, tuple(torso_sizes), activation)
    cell = lambda p, h, obs, reset: net.apply(p, h, own_input(obs, obs_ndim),
                                              global_input(obs), reset)
  else:
    net = GRUActorCritic(num_actions, hidden_size, tuple(torso_sizes), activation)
    cell = lambda p, h, obs, reset: net.apply(p, h, own_input(obs, obs_ndim), reset)

  def initial_carry(batch: int):
    return jnp.zeros((batch, hidden_size), jnp.float32)

  def init(key, obs):
    b = jax.tree.leaves(obs)[0].shape[0]
    reset = jnp.ones(b, bool)
    if centralised:
      return net.init(key, initial_carry(b), own_input(obs, obs_ndim), global_input(obs), reset)
    return net.init(key, initial_carry(b), own_input(obs, obs_ndim), reset)

  def act(params, carry, obs, done_prev, key, mask=None):
    h, logits, value = cell(params, carry, obs, done_prev)
    logits = apply_action_mask(logits, mask)
    action = jax.random.categorical(key, logits)
    return Step(h, action, losses.categorical_log_prob(logits, action), value, obs, {})

  def evaluate(params, carry0, seq):
    """seq leaves [T, B, ...], carry0 [B, H]: the cell re-run over the sequences."""

    def step(h, x):
      obs, done_prev = x
      h, logits, value = cell(params, h, obs, done_prev)
      return h, (logits, value)

    _, (logits, value) = jax.lax.scan(step, carry0, (seq.record, seq.done_prev))
    logits = apply_action_mask(logits, seq.mask)
    return Eval(losses.categorical_log_prob(logits, seq.action),
                losses.categorical_entropy(logits), value, ZERO)

  def value(params, carry, obs):
    b = carry.shape[0]
    return cell(params, carry, obs, jnp.zeros(b, bool))[2]

  return Agent(init, initial_carry, act, evaluate, value, recurrent=True, module=net)
