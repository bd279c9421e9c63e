"""Train-pricing agents for RailRM-v0: relational attention over train tokens, and its MLP ablation.

Rows are (env, train) pairs (the learner's multi-agent view): obs["obs"] [B, K, F] are the K train
tokens seen by the row's train (envs/rail/env.py: public features of every train, private ones on
the own token, relation bits and the integer relation type in column `type_col`, validity in
`valid_col`); obs["global"] (MAPPO) holds every train's tokens, [B, K * K * F].

relational (attention=True):
  e = SetEncoder(tokens, present, rel_type)         entities.SetEncoder: num_layers of masked
                                                    multi-head attention, relation-type embeddings
                                                    added to the keys (self, same market, same
                                                    operator, overlapping legs, connecting)
  h_i = sum_k self_k e_k                            the own token's embedding after attention
  logits = W_pi h_i  [B, L price actions]
  IPPO value:  V = MLP([h_i, mean_k e_k, max_k e_k])
  MAPPO value: a second SetEncoder over the full-information tokens (each train's own token,
               private features included, typed by its relation to train i): V = MLP([h_c_i, pool])
ablation (attention=False): the same heads on h_i = MLP(own token) (no other train is seen);
  the MAPPO critic is an MLP on all full-information tokens, flattened.

Shared parameters over trains; permuting the other trains' slots leaves a row's outputs unchanged.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents.entities import SetEncoder, pool
from jaxrl_suite.agents.interface import Agent, feed_forward
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.networks import apply_action_mask


class RailPricer(nn.Module):
  num_actions: int
  embed_dim: int = 64
  num_heads: int = 4
  num_layers: int = 2
  num_types: int = 17
  attention: bool = True
  centralised: bool = False

  @nn.compact
  def __call__(self, tokens, present, types, self_w, g_tokens=None, g_present=None):
    d = self.embed_dim
    dense = lambda n, name, s=np.sqrt(2): nn.Dense(n, kernel_init=orthogonal(s), name=name)
    own = jnp.sum(tokens * self_w[..., None], -2)                         # [B, F]
    if self.attention:
      e = SetEncoder(d, self.num_heads, self.num_layers, self.num_types, name="encoder")(
          tokens, present, types)
      h = jnp.sum(e * self_w[..., None], -2)
      ctx = pool(e, present)
    else:
      h = own
      for l in range(self.num_layers + 1):
        h = nn.relu(dense(d, f"own{l}")(h))
      ctx = jnp.zeros(h.shape[:-1] + (0,), h.dtype)
    logits = dense(self.num_actions, "pi", 0.01)(h)
    if self.centralised:
      if self.attention:
        ge = SetEncoder(d, self.num_heads, self.num_layers, self.num_types,
                        name="critic_encoder")(g_tokens, g_present, types)
        vin = jnp.concatenate([jnp.sum(ge * self_w[..., None], -2), pool(ge, g_present)], -1)
      else:
        vin = g_tokens.reshape(g_tokens.shape[:-2] + (-1,))
        for l in range(self.num_layers + 1):
          vin = nn.relu(dense(d, f"critic{l}")(vin))
    else:
      vin = jnp.concatenate([h, ctx], -1)
    v = nn.tanh(dense(64, "v1")(vin))
    return logits, dense(1, "v", 1.0)(v)[..., 0]


def make(num_actions: int, obs_shape, *, valid_col: int, type_col: int, self_col: int,
         embed_dim: int = 64, num_heads: int = 4, num_layers: int = 2, num_types: int = 17,
         attention: bool = True, centralised: bool = False) -> Agent:
  """The agent for rows of [K, F] train tokens. valid_col, type_col, self_col, num_types: the
  token layout as plain ints (the env's `token_columns()`, passed in by the caller)."""
  k_ent, f = obs_shape
  net = RailPricer(num_actions, embed_dim, num_heads, num_layers, num_types, attention,
                   centralised)

  rel_cols = np.zeros(f, bool)
  rel_cols[self_col:type_col + 1] = True                                     # relation bits + type

  def tokens(obs):
    return obs["obs"].reshape(obs["obs"].shape[:-2] + (k_ent, f))

  def full_tokens(obs, tok):
    """Full-information tokens [B, K, F]: train j's own token from train j's observation
    (private features included), with the relation columns of the row's own view."""
    if "full" in obs:                                    # a compact rollout record (see `act`)
      return obs["full"]
    g = obs["global"].reshape(obs["global"].shape[:-1] + (k_ent, k_ent, f))
    diag = jnp.diagonal(g, axis1=-3, axis2=-2).swapaxes(-1, -2)            # [B, K, F]
    return jnp.where(rel_cols, tok, diag)

  def inputs(obs):
    tok = tokens(obs)
    present = tok[..., valid_col] > 0.5
    types = jnp.clip(tok[..., type_col].astype(jnp.int32), 0, num_types - 1)
    self_w = tok[..., self_col]
    if not centralised:
      return tok, present, types, self_w
    return tok, present, types, self_w, full_tokens(obs, tok), present

  apply = lambda p, obs: net.apply(p, *inputs(obs))

  def init(key, obs):
    return net.init(key, *inputs(obs))

  def compact(obs):
    """What the rollout stores for `evaluate`: the row's tokens [B, K, F] and, for MAPPO, its
    full-information tokens [B, K, F] instead of every train's whole view [B, K * K * F] (9x
    less to store and to shuffle into minibatches; the same inputs to the network)."""
    tok = tokens(obs)
    return {"obs": tok, "full": full_tokens(obs, tok)} if centralised else {"obs": tok}

  def policy(params, obs, key, mask=None, greedy: bool = False):
    """obs: one env's [N, K, F] tokens (leading axes allowed) -> actions [..., N]; the actor
    reads only each train's own row, so no global view is needed."""
    row = {"obs": obs}
    if centralised:
      n = obs.shape[-3]
      row["global"] = jnp.broadcast_to(obs.reshape(obs.shape[:-3] + (1, -1)),
                                       obs.shape[:-3] + (n, n * k_ent * f))
    logits, _ = apply(params, row)
    logits = apply_action_mask(logits, mask)
    return jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)

  # act / evaluate / value from the shared feed-forward helper, with the compact record; the
  # policy reads [N, K, F] rows
  base = feed_forward(init, apply, net, single_agent_policy=False)

  def act(params, carry, obs, done_prev, key, mask=None):
    step = base.act(params, carry, obs, done_prev, key, mask)
    return step._replace(record=compact(step.record))

  return base._replace(act=act, policy=policy)


def from_config(num_actions: int, obs_shape, config, centralised: bool, *, valid_col: int,
                type_col: int, self_col: int, num_types: int) -> Agent:
  """`make` from a config with fields attention, embed_dim, num_heads, num_layers
  (configs/rail_pricing.py). The token layout (columns, number of relation types) comes in as
  plain ints from the caller (envs.rail.token_columns()): agents/ does not import envs/."""
  return make(num_actions, obs_shape, valid_col=valid_col, type_col=type_col, self_col=self_col,
              embed_dim=config.embed_dim, num_heads=config.num_heads,
              num_layers=config.num_layers, num_types=num_types, attention=config.attention,
              centralised=centralised)
