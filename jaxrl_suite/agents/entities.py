"""An entity-set agent: attention over a variable set of entities (requests, GPUs, trains).

Observation of one row: K entity slots x F features, [K, F] (flat [K * F] rows are reshaped;
an observation [..., F] of more dims, e.g. MinAtar's [10, 10, C] grid, is read as K = prod(...)
cells of F features).
Slot k is present iff obs[k, mask_feature] > 0.5 (mask_feature < 0: all present); with
type_feature >= 0, obs[k, type_feature] is an integer entity type in [0, num_types).

  e_k = Dense(x_k)                                      per-entity embedding, [K, d]
  layer l (num_layers times), heads h = 1..H, d_h = d / H:
    q_k = W_q e_k,  k_j = W_k e_j + T[type_j],  v_j = W_v e_j    (type embeddings on the keys)
    a_kj = softmax_j(q_k . k_j / sqrt(d_h) over present j) * present_j
    e_k <- LN(e_k + W_o [sum_j a_kj v_j]_h);  e_k <- LN(e_k + MLP(e_k))
  logits_k = w . e_k (MASKED_LOGIT on absent slots), [K]; with num_actions == K + 1 the last
      action (no-op) gets a logit from the pooled embedding; with any other number of actions
      (actions that are not entities) all logits come from the pooled embedding
  V = MLP([mean_k e_k, max_k e_k] over present slots)

Every op is per entity or a masked sum over entities, so permuting the slots permutes the
logits (equivariance) and leaves V unchanged (invariance), and absent slots' features never
reach an output. Multi-agent rows append the agent id to every entity; MAPPO
(`centralised=True`) adds a second encoder whose tokens are every agent's entities (with their
owner's id) for the value: a critic on all agents' tokens.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents.interface import Agent, feed_forward
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.core.losses import MASKED_LOGIT


class SetEncoder(nn.Module):
  """tokens [..., K, F], present [..., K] bool, types [..., K] int | None -> [..., K, d]."""
  embed_dim: int = 32
  num_heads: int = 2
  num_layers: int = 1
  num_types: int = 0

  @nn.compact
  def __call__(self, tokens, present, types=None):
    d, nh = self.embed_dim, self.num_heads
    dh = d // nh
    dense = lambda n, name, s=np.sqrt(2): nn.Dense(n, kernel_init=orthogonal(s), name=name)
    e = nn.relu(dense(d, "embed")(tokens))
    split = lambda x: x.reshape(x.shape[:-1] + (nh, dh))
    for l in range(self.num_layers):
      q = split(dense(d, f"q{l}", 1.0)(e))
      k = dense(d, f"k{l}", 1.0)(e)
      if types is not None and self.num_types > 0:
        k = k + nn.Embed(self.num_types, d, name=f"type{l}")(types)
      k = split(k)
      v = split(dense(d, f"v{l}", 1.0)(e))
      scores = jnp.einsum("...qhc,...khc->...hqk", q, k) / np.sqrt(dh)
      key_ok = present[..., None, None, :]
      w = jax.nn.softmax(jnp.where(key_ok, scores, MASKED_LOGIT), -1) * key_ok
      att = jnp.einsum("...hqk,...khc->...qhc", w, v).reshape(e.shape)
      e = nn.LayerNorm(name=f"ln_a{l}")(e + dense(d, f"o{l}", 1.0)(att))
      e = nn.LayerNorm(name=f"ln_m{l}")(e + dense(d, f"m{l}", 1.0)(nn.relu(dense(d, f"f{l}")(e))))
    return e


def pool(e, present):
  """[mean, max] of the present entities' embeddings, [..., 2d] (zeros if none present)."""
  m = present[..., None]
  mean = jnp.sum(e * m, -2) / jnp.maximum(jnp.sum(m, -2), 1.0)
  mx = jnp.max(jnp.where(m, e, -1e9), -2)
  return jnp.concatenate([mean, jnp.where(jnp.any(m, -2), mx, 0.0)], -1)


class EntityActorCritic(nn.Module):
  num_actions: int
  embed_dim: int = 32
  num_heads: int = 2
  num_layers: int = 1
  num_types: int = 0
  centralised: bool = False

  @nn.compact
  def __call__(self, tokens, present, types, extra, g_tokens=None, g_present=None,
               g_types=None):
    enc = SetEncoder(self.embed_dim, self.num_heads, self.num_layers, self.num_types,
                     name="encoder")
    e = enc(tokens, present, types)
    ent_logit = nn.Dense(1, kernel_init=orthogonal(0.01), name="pi")(e)[..., 0]
    ent_logit = jnp.where(present, ent_logit, MASKED_LOGIT)
    pooled = jnp.concatenate([pool(e, present), extra], -1)
    k = tokens.shape[-2]
    if self.num_actions not in (k, k + 1):      # actions are not entities: a pooled head
      logits = nn.Dense(self.num_actions, kernel_init=orthogonal(0.01), name="pooled_pi")(pooled)
    elif self.num_actions == k + 1:
      noop = nn.Dense(1, kernel_init=orthogonal(0.01), name="noop")(pooled)
      logits = jnp.concatenate([ent_logit, noop], -1)
    else:
      logits = ent_logit
    if self.centralised:
      ge = SetEncoder(self.embed_dim, self.num_heads, self.num_layers, self.num_types,
                      name="critic_encoder")(g_tokens, g_present, g_types)
      pooled = jnp.concatenate([pool(ge, g_present), extra], -1)
    h = nn.tanh(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), name="v1")(pooled))
    value = nn.Dense(1, kernel_init=orthogonal(1.0), name="v")(h)[..., 0]
    return logits, value


def make(num_actions: int, obs_shape, embed_dim: int = 32, num_heads: int = 2,
         num_layers: int = 1, mask_feature: int = 0, type_feature: int = -1, num_types: int = 0,
         centralised: bool = False, num_agents: int = 1) -> Agent:
  if len(obs_shape) < 2:
    raise ValueError(f"the entities agent needs [K, F] (or [..., F]) observations, got shape "
                     f"{obs_shape}")
  f = int(obs_shape[-1])
  k_ent = int(np.prod(obs_shape[:-1]))
  obs_shape = (k_ent, f)
  net = EntityActorCritic(num_actions, embed_dim, num_heads, num_layers,
                          num_types if type_feature >= 0 else 0, centralised)

  def parse(x):
    present = (x[..., mask_feature] > 0.5) if mask_feature >= 0 else jnp.ones(x.shape[:-1], bool)
    types = (jnp.clip(x[..., type_feature].astype(jnp.int32), 0, max(num_types - 1, 0))
             if type_feature >= 0 else None)
    return present, types

  def inputs(obs):
    if isinstance(obs, dict):
      tok = obs["obs"].reshape(obs["obs"].shape[:1] + (k_ent, f))
      ids = obs["agent_id"]
      extra = ids
      present, types = parse(tok)
      tok_in = jnp.concatenate([tok, jnp.broadcast_to(ids[..., None, :], tok.shape[:-1]
                                                      + ids.shape[-1:])], -1)
      g = ()
      if centralised:
        gt = obs["global"].reshape(obs["global"].shape[:-1] + (num_agents, k_ent, f))
        gp, gty = parse(gt)
        owner = jnp.broadcast_to(jnp.eye(num_agents)[:, None, :], gt.shape[:-1] + (num_agents,))
        gt = jnp.concatenate([gt, owner], -1)
        lead = gt.shape[:-3]
        g = (gt.reshape(lead + (num_agents * k_ent, -1)), gp.reshape(lead + (-1,)),
             None if gty is None else gty.reshape(lead + (-1,)))
      return (tok_in, present, types, extra) + g
    tok = obs.reshape(obs.shape[:-1] + (k_ent, f))
    present, types = parse(tok)
    return tok, present, types, jnp.zeros(obs.shape[:-1] + (0,), obs.dtype)

  apply = lambda p, obs: net.apply(p, *inputs(obs))

  def init(key, obs):
    return net.init(key, *inputs(obs))

  def single(params, obs):
    """Single-agent rows [..., K * F] or [..., K, F]."""
    if not isinstance(obs, dict) and obs.ndim >= 2 and tuple(obs.shape[-2:]) == (k_ent, f):
      obs = obs.reshape(obs.shape[:-2] + (-1,))
    return apply(params, obs)

  return feed_forward(init, single, net, single_agent_policy=not centralised)
