"""PPO agent for BallastNet task v2 (stability target, free tank choice, two pumps at once).

Action = a pair (a0, a1): a route of pump 0 (or NOOP) and a route of pump 1 (or NOOP) sharing no
edge with a0 (env.step_env turns a clashing a1 into NOOP; this policy never proposes one).

Autoregressive two-head policy, permutation-equivariant over routes like the v1 agent:
  head 0: candidates = the M2 routes of pump 0 with the lowest predicted stability error after
          their move (plus NOOP); pi0(a0 | s).
  head 1: candidates = the M2 routes of pump 1 compatible with a0 (params.pair_ok[a0]) with the
          lowest error after a0's AND their own predicted move (plus NOOP); pi1(a1 | s, a0).
  Per-route features = what the greedy controller B.v2_greedy_policy computes, with the believed
  conductance (replan-v2's evidence; known-bad routes have g = 0 and are never candidates):
  believed conductance g_k, predicted move V_k / (rate*dt), the route's heel / trim effect per
  full step, predicted normalised heel and trim after the move (head 1: after a0's move too) and
  the change of the error distance r = sqrt((heel/heel_tol)^2 + (trim_err/trim_tol)^2); plus
  the v1 agent's evidence / history features (`agent.evidence_route_features`).
  logits = MLP(route feats) + w * resid, resid_k = -min(r_k - min_j r_j, 10) over the head's
  candidates and NOOP (a learnable residual on the greedy score, init w = w_init): the initial
  policy is a noisy replan-v2 (greedy = argmax of resid), PPO learns where to deviate.
  log pi(a0, a1 | s) = log pi0(a0 | s) + log pi1(a1 | s, a0).
  Entropy bonus: H0(s) + H1(s, a0) at the sampled a0 -- a one-sample estimate of the joint
  entropy H(a0, a1 | s) = H0 + E_{a0 ~ pi0}[H1(s, a0)] (chain rule).
  Value: MLP(global features, pooled head-0 route embeddings). No diagnosis head (aux loss 0).
Training: the one learner (`config.agent = "ballast_v2"`, `make_v2` builds the Agent).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
from flax import struct

from jaxrl_suite.core import losses
from jaxrl_suite.agents import ballast as A
from jaxrl_suite.agents.interface import Agent, Eval, Step, no_carry

# The env side (replan-v2's prediction functions, the splitter, K_MAX) comes in through
# Graph2.g.api (envs/ballast/agent_api.BallastNetApi): this module never imports envs/.
M2 = 16                          # candidate route slots per pump
R_CLIP = 10.0                    # clip of the residual (tolerance units)


@struct.dataclass
class Graph2:
  """Static tables: the v1 evidence tables and the greedy controller's (believed conductance)."""
  g: A.Graph
  vp: Any                 # baselines.V2Params


def make_graph2(env_params, api) -> Graph2:
  """api = the env's BallastNetApi (`env.agent_api`)."""
  return Graph2(g=A.make_graph(env_params, api), vp=api.make_v2_params(env_params, oracle=False))


class Pre(NamedTuple):
  """Param-free quantities of one observation, shared by both heads."""
  ev: jax.Array       # [K, 11 + 3 H] evidence / history route features
  heel: jax.Array     # deg
  trim: jax.Array     # trim error, m
  v: jax.Array        # [K] predicted m3 moved this step (believed conductance)
  g: jax.Array        # [K] believed conductance (0 if known-bad)
  lvl: jax.Array      # [K, 2] level fraction at the route's source / sink (SEA: 0.5)
  glob: jax.Array     # [5 + H] time, #failure sets, mean chat, pump rate ratio, dt, hist ratios


class HeadFeats(NamedTuple):
  route: jax.Array       # [M2, 20 + 3 H]
  resid: jax.Array       # [M2 + 1]
  glob: jax.Array        # [N_GLOB]
  slot_mask: jax.Array   # [M2 + 1] (last = NOOP)
  slot_route: jax.Array  # [M2 + 1] route index (NOOP = K_MAX)
  greedy: jax.Array      # route the greedy controller picks for this head (K_MAX = NOOP)


def observe_base(obs: jax.Array, gr: Graph2) -> Pre:
  api = gr.g.api
  f = api.split_obs(obs)
  ev, (_, chat, _, _, _) = A.evidence_route_features(f, gr.g)
  heel, trim, v, g = api.v2_predict(gr.vp, f)
  lvl_ext = jnp.concatenate([f["level"], jnp.array([0.5])])
  lvl = jnp.stack([lvl_ext[gr.vp.bp.route_src], lvl_ext[gr.vp.bp.route_dst]], -1)
  glob = jnp.concatenate([jnp.stack([
      f["time"][0], jnp.sum(f["fail_kind"] > 0) / 16.0,
      jnp.mean(jnp.where(f["edge_mask"] > 0.5, chat, 1.0)),
      gr.vp.step_vol[1] / jnp.maximum(gr.vp.step_vol[0], 1e-6), gr.vp.step_vol[0] / 100.0]),
      f["hist_ratio"]])
  return Pre(ev, heel, trim, v, g, lvl, glob)


def head_feats(pre: Pre, gr: Graph2, pump: int, partner) -> HeadFeats:
  """Candidate slots and features of head `pump` (0 or 1) given the partner route (K_MAX for
  head 0): heel / trim are those after the partner's predicted move."""
  vp, api = gr.vp, gr.g.api
  k_max = api.k_max
  heel, trim = api.v2_after(vp, pre.heel, pre.trim, pre.v, partner)
  err = api.v2_pump_errors(vp, heel, trim, pre.v, pump, partner)      # [K + 1], inf = invalid
  greedy = api.argmin_first(err, k_max)
  r = jnp.sqrt(jnp.minimum(err, 1e12))
  order = jax.lax.top_k(-err[:k_max], M2)[1]
  slot_ok = jnp.isfinite(err[order])
  r_slots = jnp.concatenate([r[order], r[k_max:]])                    # [M2 + 1]
  ok = jnp.concatenate([slot_ok, jnp.array([True])])
  r_min = jnp.min(jnp.where(ok, r_slots, jnp.inf))
  resid = jnp.where(ok, -jnp.minimum(r_slots - r_min, R_CLIP), 0.0)
  step = vp.step_vol[pump]
  h_after = heel + vp.dheel * pre.v
  t_after = trim + vp.dtrim * pre.v
  r_now = r[k_max]
  own = jnp.stack([
      pre.g, pre.v / step, jnp.clip(vp.dheel * step / vp.heel_tol, -5, 5) / 5.0,
      jnp.clip(vp.dtrim * step / vp.trim_tol, -5, 5) / 5.0,
      jnp.clip(h_after / vp.heel_tol, -10, 10) / 5.0,
      jnp.clip(t_after / vp.trim_tol, -10, 10) / 5.0,
      jnp.clip(r[:k_max] - r_now, -5, 5) / 5.0, pre.lvl[:, 0], pre.lvl[:, 1]], -1)
  route = jnp.concatenate([own, pre.ev], -1)[order] * slot_ok[:, None]
  glob = jnp.concatenate([jnp.stack([
      jnp.clip(heel / vp.heel_tol, -10, 10) / 5.0, jnp.clip(trim / vp.trim_tol, -10, 10) / 5.0,
      jnp.minimum(r_now, 20.0) / 10.0, jnp.float32(pump),
      jnp.asarray(partner < k_max, jnp.float32)]),
      pre.glob])
  slot_route = jnp.concatenate([jnp.where(slot_ok, order, k_max), jnp.array([k_max])])
  return HeadFeats(route.astype(jnp.float32), resid, glob, ok, slot_route, greedy)


class V2Agent(nn.Module):
  """Two slot-scoring heads (pump 0, pump 1 given a0) and a value head on head 0's state."""
  hidden: int = 64
  w_init: float = 10.0

  def setup(self):
    self.pi0 = A.SlotScorer(self.hidden, w_init=self.w_init)
    self.pi1 = A.SlotScorer(self.hidden, w_init=self.w_init)
    self.value_head = A.PooledValue(self.hidden)

  def head0(self, ft: HeadFeats):
    logits, h, gh = self.pi0(ft.route, ft.resid, ft.glob, ft.slot_mask)
    return logits, self.value_head(gh, h, ft.slot_mask[..., :-1])

  def head1(self, ft: HeadFeats):
    return self.pi1(ft.route, ft.resid, ft.glob, ft.slot_mask)[0]

  def __call__(self, ft0: HeadFeats, ft1: HeadFeats):
    logits0, value = self.head0(ft0)
    return logits0, self.head1(ft1), value


def _take(x: jax.Array, i: jax.Array) -> jax.Array:
  """x[b, i[b]] for x [B, M], i [B]."""
  return jnp.take_along_axis(x, i[:, None], 1)[:, 0]


def make_actor(hidden: int, w_init: float, gr: Graph2):
  """(net, observe, act) for batched observations; act(params, (pre, ft0, logits0), key, greedy)
  -> (action int32[B, 2], (ft0, ft1, slot0, slot1), log_prob[B], off_greedy[B])."""
  net = V2Agent(hidden=hidden, w_init=w_init)
  base = jax.vmap(observe_base, in_axes=(0, None))
  heads = jax.vmap(head_feats, in_axes=(0, None, None, 0))

  def observe(params, obs):
    pre = base(obs, gr)
    ft0 = heads(pre, gr, 0, jnp.full(obs.shape[0], gr.g.api.k_max, jnp.int32))
    logits0, value = net.apply(params, ft0, method=V2Agent.head0)
    return (pre, ft0, logits0), value

  def act(params, carry, key, greedy: bool = False):
    pre, ft0, logits0 = carry
    k0, k1 = jax.random.split(key)
    slot0 = A.sample_slot(logits0, k0, greedy)
    a0 = _take(ft0.slot_route, slot0)
    ft1 = heads(pre, gr, 1, a0)
    logits1 = net.apply(params, ft1, method=V2Agent.head1)
    slot1 = A.sample_slot(logits1, k1, greedy)
    a1 = _take(ft1.slot_route, slot1)
    log_prob = (losses.categorical_log_prob(logits0, slot0) +
                losses.categorical_log_prob(logits1, slot1))
    # off-greedy: the pair differs from replan-v2's (ft1.greedy is conditional on a0, so the
    # second test matters only when a0 is the greedy route)
    off = (a0 != ft0.greedy) | (a1 != ft1.greedy)
    return (jnp.stack([a0, a1], -1).astype(jnp.int32), (ft0, ft1, slot0, slot1), log_prob,
            off)

  return net, observe, act


def joint_log_prob_entropy(logits0, logits1, slot0, slot1):
  """log pi0(a0) + log pi1(a1 | a0), and H0 + H1(a0) (see module docstring)."""
  lp = losses.categorical_log_prob(logits0, slot0) + losses.categorical_log_prob(logits1, slot1)
  ent = losses.categorical_entropy(logits0) + losses.categorical_entropy(logits1)
  return lp, ent


def make_v2(config: ml_collections.ConfigDict, env, env_params) -> Agent:
  """The v2 agent for a BallastNet env (task v2; its functions from `env.agent_api`): record =
  (ft0, ft1, slot0, slot1); no auxiliary loss (label zeros, aux 0, kept so the loss graph is
  the one the results were produced with); logs off_top_share (the pair differs from
  replan-v2's)."""
  if env.task != "v2":
    raise ValueError("agent ballast_v2 is written for task v2 (the stability target)")
  gr = make_graph2(env_params, env.agent_api)
  net, observe, act_ = make_actor(config.ballast.hidden, config.ballast.w_init, gr)
  k_max = gr.g.api.k_max

  def init(key, obs):
    pre = observe_base(obs[0], gr)
    return net.init(key, head_feats(pre, gr, 0, k_max), head_feats(pre, gr, 1, k_max))

  def act(params, carry, obs, done_prev, key, mask=None):
    del done_prev, mask
    pre, value = observe(params, obs)
    action, record, log_prob, off = act_(params, pre, key)
    return Step(carry, action, log_prob, value, record, {"off_top_share": off})

  def evaluate(params, carry0, seq):
    del carry0
    ft0, ft1, slot0, slot1 = seq.record
    logits0, logits1, value = net.apply(params, ft0, ft1)
    lp, ent = joint_log_prob_entropy(logits0, logits1, slot0, slot1)
    return Eval(lp, ent, value, jnp.zeros(()))

  def value(params, carry, obs):
    del carry
    return observe(params, obs)[1]

  def label(state):
    return jnp.zeros(state.time.shape)

  return Agent(init, no_carry, act, evaluate, value, label=label, module=net)


def make_policy(hidden: int = 64, w_init: float = 10.0, greedy: bool = True):
  """policy((net_params, Graph2), obs, key) -> int32[2] route pair (K_MAX = NOOP); greedy =
  argmax of each head, else sampled. The Graph2 tables come with the params (any layout)."""

  def policy(pp, obs, key):
    params, gr = pp
    _, observe, act = make_actor(hidden, w_init, gr)
    carry, _ = observe(params, obs[None])
    return act(params, carry, key, greedy)[0][0]

  return policy


def deviation_flags(pp, obs: jax.Array, action: jax.Array) -> jax.Array:
  """bool[2] for one step: (pair != replan-v2's greedy pair; the pair's predicted error distance
  r after both moves exceeds the greedy pair's by > A.DEVIATION_TOL tolerance units, i.e. a
  move the greedy model believes worse). pp = (net_params, Graph2), params unused."""
  _, gr = pp
  vp = gr.vp
  api = gr.g.api
  greedy = api.v2_greedy_policy(vp, obs)
  heel, trim, v, _ = api.v2_predict(vp, api.split_obs(obs))

  def r_after(a):
    a1 = jnp.where(vp.pair_ok[a[0], a[1]], a[1], api.k_max)  # as env.step_env
    h, t = api.v2_after(vp, heel, trim, v, a[0])
    h, t = api.v2_after(vp, h, t, v, a1)
    return jnp.sqrt(api.v2_error(vp, h, t)), a1

  r_a, a1 = r_after(action)
  r_g, _ = r_after(greedy)
  return jnp.stack([(action[0] != greedy[0]) | (a1 != greedy[1]),
                    r_a > r_g + A.DEVIATION_TOL])
