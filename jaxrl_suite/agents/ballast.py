"""PPO agent for BallastNet v1 with a route-scoring policy and a clog-diagnosis head.

Trained by the one learner: `ppo.make_learner(config, env, env_params)` with
`config = algos.ballast.default_config("v1")` (`config.agent = "ballast_v1"`; `make_v1` builds
the `agents.interface.Agent`).

Policy (permutation-equivariant over candidate routes, so one set of weights runs on any layout):
  * candidates: the M_SLOTS useful library routes ranked by B-replan's believed cost (routes of
    the current plan job first); slot i stands for route cand[i]; one extra NOOP slot.
  * per-route features (`evidence_route_features`, shared with the v2 agent): believed
    log-conductance, known-bad count, fraction of confirmed-good / exercised edges, unconfirmed
    strainer / main / DB-branch edges (lets the agent learn the location prior), transfer flag,
    and a history stack of the last H_HIST commanded routes: overlap x (1 - observed ratio), so
    the agent can do group testing (pick routes whose overlap pins down a blockage); v1 adds
    useful / plan-job flags, remaining work at the route's tanks and the believed-cost gap.
  * logits_i = MLP(route_features_i) - w_cost * min(cost_i - min_j cost_j, 10), a learnable
    residual (init w_cost = 1 nat per unit of believed -log rate) on B-replan's believed cost.
    The slot RANK is neither a feature nor a penalty (the session-2 agent had both, init 2 nats
    per rank, and all three PPO seeds collapsed to B-replan's argmax): the policy is
    permutation-equivariant over slots, so routes B-replan believes equally good start equally
    likely (B-replan breaks such ties by index), and PPO must learn any preference among them.
  * value = MLP(global features, mean/max-pooled route embeddings);
  * diagnosis d_e = sigmoid(MLP(edge_features_e) + w_ref * (ref_e - 1/2)) per pipe edge, a
    learnable residual on the reference consistency diagnoser ref_e.
Loss (per minibatch), reusing jaxrl_suite.core.losses and jaxrl_suite.core.gae:
  L = ppo_clip_loss + vf_coef * clipped_value_loss - ent_coef * entropy
      + aux_coef * BCE(d, 1[clog < 1])   over real edges,
where the clog labels are the simulator's privileged state (never in the observation); the aux
head does not feed the policy, so the diagnosis cannot leak into acting.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

from jaxrl_suite.agents.interface import Agent, Eval, Step, no_carry
from jaxrl_suite.core import losses
from jaxrl_suite.core.initializers import orthogonal

M_SLOTS = 16
# Feature sizes (H = api.h_hist, the commanded-route history length; n_kinds = api.n_edge_kinds):
# evidence_route_features 11 + 3 H, route slots 16 + 3 H, edges 12 + n_kinds, global 7 + H.


@struct.dataclass
class Graph:
  """Static layout tables the agent needs (from EnvParams); swap them to run on another ship.
  `api` (static) is the env side's functions and sizes (envs/ballast/agent_api.BallastNetApi,
  or `env.agent_api`): injected, so this module never imports envs/."""
  bp: Any                   # baselines.BaselineParams
  edge_kind_oh: jax.Array   # [E, n_kinds]
  cap: jax.Array            # [T]
  step_vol: jax.Array       # pump rate * dt (m3)
  block_w: jax.Array
  partial_w: jax.Array
  env_params: Any           # the env's EnvParams
  api: Any = struct.field(pytree_node=False, default=None)


def make_graph(env_params, api) -> Graph:
  """The tables of one layout; api = the env's BallastNetApi (`env.agent_api`)."""
  kinds = np.eye(api.n_edge_kinds, dtype=np.float32)[np.asarray(env_params.edge_kind)]
  kinds = kinds * np.asarray(env_params.edge_mask)[:, None]
  return Graph(bp=api.make_params(env_params, bayes=False), edge_kind_oh=jnp.asarray(kinds),
               cap=env_params.cap, step_vol=env_params.pump_rate[0] * env_params.dt_h,
               block_w=env_params.block_w, partial_w=env_params.partial_w,
               env_params=env_params, api=api)


class Feats(NamedTuple):
  route: jax.Array      # [M, 16 + 3 H]
  resid: jax.Array      # [M + 1] prior score added to the logits with a learnable weight
  slot_mask: jax.Array  # [M + 1] (last = NOOP)
  slot_route: jax.Array  # [M + 1] int route index (NOOP = K_MAX)
  edge: jax.Array       # [E, 12 + n_kinds]
  glob: jax.Array       # [7 + H]


def evidence_route_features(f: dict[str, jax.Array], g: Graph):
  """Evidence and history features of every library route, shared by the v1 and v2 agents.

  Returns (feats[K, 11 + 3 H], aux) with aux = (good[E], chat[E], n_contain[K], edge_count[E],
  hist[H, E]) for callers that need the raw evidence.
  """
  bp = g.bp
  re = bp.route_edges.astype(jnp.float32)
  n_e = jnp.maximum(re.sum(-1), 1.0)
  good, chat, _, n_contain, edge_count = g.api.evidence(f, bp)
  kinds = g.edge_kind_oh
  unconf = (~good & (f["edge_mask"] > 0.5)).astype(jnp.float32)
  strainer = kinds[:, 0] + kinds[:, 1]
  main = kinds[:, 2] + kinds[:, 3]
  dbb = kinds[:, 5]
  log_g = re @ jnp.log(jnp.maximum(chat, 0.05))
  hist = f["hist_route"].astype(jnp.float32)                      # [H, E]
  overlap = (re @ hist.T) / n_e[:, None]                           # [K, H]
  same = ((re @ hist.T) >= n_e[:, None] - 0.5) & (hist.sum(-1)[None, :] == n_e[:, None])
  fail_h = overlap * (1.0 - jnp.clip(f["hist_ratio"], 0, 1))[None, :] * (hist.sum(-1) > 0)
  feats = jnp.concatenate([
      jnp.stack([bp.route_transfer, bp.route_len / 300.0, log_g,
                 jnp.min(jnp.where(bp.route_edges, chat[None, :], 1.0), -1),
                 jnp.minimum(n_contain, 3) / 3.0, (re @ good.astype(jnp.float32)) / n_e,
                 (re @ f["exercised"]) / n_e, re @ (unconf * strainer), re @ (unconf * main),
                 re @ (unconf * dbb), re @ (edge_count > 0).astype(jnp.float32)],
                -1).astype(jnp.float32),
      overlap, same.astype(jnp.float32), fail_h], -1)
  return feats, (good, chat, n_contain, edge_count, hist)


def features(obs: jax.Array, g: Graph) -> Feats:
  """Per-slot route features, per-edge features and global features of one observation."""
  api = g.api
  f = api.split_obs(obs)
  bp = g.bp
  t_max, k_max, n_hist = api.t_max, api.k_max, api.h_hist
  ev, (good, chat, n_contain, edge_count, hist) = evidence_route_features(f, g)
  useful = api.useful_routes(f, bp)
  job = api.job_candidates(f, bp)
  cost = api.believed_cost(chat, bp) + bp.w_fail * n_contain
  # candidate slots: plan-job routes first, then by believed cost (selection only; the order is
  # not visible to the network)
  rank_key = jnp.where(useful, cost - 1e6 * job, jnp.inf)
  order = jax.lax.top_k(-rank_key, M_SLOTS)[1]  # top_k, not argsort: sorts are slow on XLA:CPU
  slot_ok = jnp.isfinite(rank_key[order])
  gap = jnp.clip(cost - jnp.min(jnp.where(useful, cost, jnp.inf)), 0.0, 10.0)
  cap_ext = jnp.concatenate([g.cap, jnp.ones(1)])
  lvl = jnp.concatenate([f["level"], jnp.zeros(1)])
  tgt = jnp.concatenate([f["target"], jnp.zeros(1)])
  work_dst = jnp.clip((tgt - lvl)[bp.route_dst] * cap_ext[bp.route_dst] / g.step_vol, 0, 12)
  work_src = jnp.clip((lvl - tgt)[bp.route_src] * cap_ext[bp.route_src] / g.step_vol, 0, 12)
  work_dst = jnp.where(bp.route_dst == t_max, 0.0, work_dst)
  work_src = jnp.where(bp.route_src == t_max, 0.0, work_src)
  rf = jnp.concatenate([jnp.stack([useful, job, work_dst / 12.0, work_src / 12.0, gap / 10.0],
                                  -1).astype(jnp.float32), ev], -1)
  route = rf[order] * slot_ok[:, None]
  slot_mask = jnp.concatenate([slot_ok, jnp.array([True])])
  slot_route = jnp.concatenate([jnp.where(slot_ok, order, k_max), jnp.array([k_max])])
  resid = jnp.concatenate([-gap[order] * slot_ok, jnp.zeros(1)])
  # per-edge evidence for the diagnosis head
  sets_all = (f["fail_sets"] > 0.5) & ~good[None, :] & (f["fail_kind"] > 0)[:, None]
  size = jnp.maximum(sets_all.sum(-1), 1)
  single = jnp.any(sets_all & (size == 1)[:, None] & (f["fail_kind"] == 1)[:, None], 0)
  part_count = jnp.sum(sets_all & (f["fail_kind"] == 2)[:, None], 0)
  inv_size = jnp.max(jnp.where(sets_all, 1.0 / size[:, None], 0.0), 0)
  ref = api.reference_diagnosis(obs, g.env_params)
  hist_fail = jnp.sum(hist * (1.0 - jnp.clip(f["hist_ratio"], 0, 1))[:, None], 0)
  ef = jnp.concatenate([jnp.stack([
      good, chat, f["exercised"], jnp.minimum(edge_count, 4) / 4.0, single,
      jnp.minimum(part_count, 4) / 4.0, inv_size, ref, g.block_w / 3.0, g.partial_w / 2.0,
      hist_fail / n_hist, f["edge_mask"]], -1).astype(jnp.float32), g.edge_kind_oh], -1)
  n_open = jnp.sum(f["need_fill"] + f["need_drain"])
  glob = jnp.concatenate([jnp.stack([
      f["time"][0], f["heel"][0], f["trim_err"][0], n_open / 8.0,
      jnp.sum(f["fail_kind"] > 0) / 16.0, jnp.mean(jnp.where(f["edge_mask"] > 0.5, chat, 1.0)),
      jnp.sum(work_dst * (bp.route_src == t_max) * job) / 12.0]), f["hist_ratio"]])
  return Feats(route, resid, slot_mask, slot_route, ef * f["edge_mask"][:, None], glob)


class SlotScorer(nn.Module):
  """Logits over M candidate route slots + NOOP (permutation-equivariant over slots).

  logits_i = MLP(route_i) + w * resid_i for route slots, NOOP: Dense(tanh(Dense(glob))) +
  noop_bias + w * resid_M; masked slots get losses.MASKED_LOGIT. Returns (logits [..., M+1],
  route embeddings h [..., M, hidden], global embedding gh [..., hidden]).
  """
  hidden: int = 64
  w_init: float = 1.0
  noop_bias: float = 0.0

  @nn.compact
  def __call__(self, route, resid, glob, slot_mask):
    h = nn.tanh(nn.Dense(self.hidden, name="r1")(route))
    h = nn.tanh(nn.Dense(self.hidden, name="r2")(h))
    route_logit = nn.Dense(1, name="r_out", kernel_init=orthogonal(0.01))(h)[..., 0]
    gh = nn.tanh(nn.Dense(self.hidden, name="g1")(glob))
    noop_logit = nn.Dense(1, name="noop")(gh)[..., 0] + self.noop_bias
    w = self.param("w_resid", nn.initializers.constant(self.w_init), ())
    logits = jnp.concatenate([route_logit, noop_logit[..., None]], -1) + w * resid
    logits = losses.MASKED_LOGIT * (~slot_mask) + jnp.where(slot_mask, logits, 0.0)
    return logits, h, gh


class PooledValue(nn.Module):
  """V = MLP(global embedding, mean / max of the valid route-slot embeddings)."""
  hidden: int = 64

  @nn.compact
  def __call__(self, gh, h, route_mask):
    m = route_mask[..., None]
    pooled_mean = (h * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)
    pooled_max = jnp.max(jnp.where(m, h, -1.0), -2)
    v = nn.tanh(nn.Dense(self.hidden, name="v1")(
        jnp.concatenate([gh, pooled_mean, pooled_max], -1)))
    return nn.Dense(1, name="v_out")(v)[..., 0]


def sample_slot(logits: jax.Array, key: jax.Array, greedy: bool) -> jax.Array:
  return jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)


class BallastAgent(nn.Module):
  """Route-scoring actor-critic with a per-edge diagnosis head."""
  hidden: int = 64

  @nn.compact
  def __call__(self, ft: Feats):
    # residual on B-replan's believed cost (not on its rank); NOOP starts unlikely
    logits, h, gh = SlotScorer(self.hidden, w_init=1.0, noop_bias=-3.0, name="pi")(
        ft.route, ft.resid, ft.glob, ft.slot_mask)
    value = PooledValue(self.hidden, name="v")(gh, h, ft.slot_mask[..., :-1])
    e = nn.tanh(nn.Dense(32, name="d1")(ft.edge))
    e = nn.tanh(nn.Dense(32, name="d2")(e))
    # residual on the reference diagnoser (edge feature 7), learnable weight, init +-3 nats
    ref_w = self.param("ref_w", nn.initializers.constant(6.0), ())
    diag_logit = nn.Dense(1, name="d_out")(e)[..., 0] + ref_w * (ft.edge[..., 7] - 0.5)
    return logits, value, diag_logit


def make_v1(c: ml_collections.ConfigDict, env, env_params) -> Agent:
  """The v1 agent for a BallastNet env (task v1) and its EnvParams: record = (features, slot);
  aux loss = BCE(diagnosis, 1[clog < 1]) over real edges (privileged labels from the simulator
  state, never observed); logs off_top_share (sampled route != B-replan's). The env-side
  functions come from `env.agent_api` (dependency injection)."""
  if env.task != "v1":
    raise ValueError("the BallastNet route-scoring agent is written for task v1 (ballast_v2)")
  graph = make_graph(env_params, env.agent_api)
  net = BallastAgent(hidden=c.ballast.hidden)
  feat_fn = jax.vmap(features, in_axes=(0, None))
  edge_mask = env_params.edge_mask.astype(jnp.float32)

  def init(key, obs):
    return net.init(key, jax.tree.map(lambda x: x[0], feat_fn(obs[:1], graph)))

  def act(params, carry, obs, done_prev, key, mask=None):
    del done_prev, mask
    ft = feat_fn(obs, graph)
    logits, value, _ = net.apply(params, ft)
    slot = jax.random.categorical(key, logits)
    action = jnp.take_along_axis(ft.slot_route, slot[:, None], 1)[:, 0]
    # off-top: the sampled route is not B-replan's choice (slot 0 = min believed cost, plan job
    # first, lowest index on ties: exactly B.replan_policy's argmin)
    return Step(carry, action, losses.categorical_log_prob(logits, slot), value, (ft, slot),
                {"off_top_share": action != ft.slot_route[:, 0]})

  def evaluate(params, carry0, seq):
    del carry0
    ft, slot = seq.record
    logits, value, dlogit = net.apply(params, ft)
    bce = optax.sigmoid_binary_cross_entropy(dlogit, seq.label)
    aux = jnp.sum(bce * edge_mask) / jnp.maximum(edge_mask.sum() * bce.shape[0], 1.0)
    return Eval(losses.categorical_log_prob(logits, slot), losses.categorical_entropy(logits),
                value, aux)

  def value(params, carry, obs):
    del carry
    return net.apply(params, feat_fn(obs, graph))[1]

  def label(state):
    return (state.clog < 1.0).astype(jnp.float32)

  return Agent(init, no_carry, act, evaluate, value, label=label, module=net)


def make_policy(hidden: int = 64, greedy: bool = True):
  """policy((net_params, graph), obs, key) -> route index (K_MAX = NOOP); works on any layout."""
  net = BallastAgent(hidden=hidden)

  def policy(pp, obs, key):
    params, graph = pp
    ft = features(obs, graph)
    logits, _, _ = net.apply(params, ft)
    slot = sample_slot(logits, key, greedy)
    return ft.slot_route[slot]

  def diagnose(pp, obs):
    """Predicted clogged edges bool[E] (sigmoid(d_e) > 0.5 on real edges)."""
    params, graph = pp
    ft = features(obs, graph)
    _, _, dlogit = net.apply(params, ft)
    return (dlogit > 0.0) & graph.bp.edge_mask

  return policy, diagnose


DEVIATION_TOL = 0.05  # believed-cost margin (nats of -log rate) that counts as "believed worse"


def deviation_flags(pp, obs: jax.Array, action: jax.Array) -> jax.Array:
  """bool[2] for one step: (route != B-replan's route on this observation, i.e. a non-top slot;
  route believed worse than B-replan's by > DEVIATION_TOL). Many routes tie in believed cost
  (parallel paths with no evidence yet), so the first flag counts tie-breaks too; the second
  counts real departures from B-replan's belief. pp = (net_params, Graph), params unused."""
  _, graph = pp
  bp, api = graph.bp, graph.api
  f = api.split_obs(obs)
  rep = api.replan_policy(bp, obs)
  _, chat, _, n_contain, _ = api.evidence(f, bp)
  cost = jnp.concatenate([api.believed_cost(chat, bp) + bp.w_fail * n_contain,
                          jnp.array([jnp.inf])])
  return jnp.stack([action != rep, cost[action] > cost[rep] + DEVIATION_TOL])
