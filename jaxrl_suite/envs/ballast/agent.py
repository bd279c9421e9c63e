"""PPO agent for BallastNet v1 with a route-scoring policy and a clog-diagnosis head.

Policy (permutation-equivariant over candidate routes, so one set of weights runs on any layout):
  * candidates: the M_SLOTS useful library routes ranked by B-replan's believed cost (routes of
    the current plan job first); slot i stands for route cand[i]; one extra NOOP slot.
  * per-route features (`route_features`): believed log-conductance, known-bad count, fraction of
    confirmed-good / exercised edges, unconfirmed strainer / main / DB-branch edges (lets the agent
    learn the location prior), remaining work at the route's tanks, transfer flag, rank, and a
    history stack of the last H_HIST commanded routes: overlap x (1 - observed ratio), so the
    agent can do group testing (pick routes whose overlap pins down a blockage).
  * logits_i = MLP(route_features_i) - w_rank * i, a learnable residual on B-replan's ranking
    (the initial policy is a noisy B-replan; PPO learns where to deviate);
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
from flax.training.train_state import TrainState

from jaxrl_suite.core import losses
from jaxrl_suite.core.gae import gae
from jaxrl_suite.core.initializers import orthogonal
from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast.diagnosis import reference_diagnosis
from jaxrl_suite.envs.ballast.env import H_HIST, BallastNet, EnvParams, split_obs
from jaxrl_suite.envs.ballast.layout import EDGE_KINDS
from jaxrl_suite.envs.ballast.routes import E_MAX, K_MAX, T_MAX

M_SLOTS = 16
N_ROUTE_FEAT = 16 + 3 * H_HIST
N_EDGE_FEAT = 12 + len(EDGE_KINDS)
N_GLOBAL_FEAT = 7 + H_HIST


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.num_envs = 64
  c.num_steps = 32
  c.total_timesteps = 200_000
  c.update_epochs = 4
  c.num_minibatches = 4
  c.lr = 1e-3
  c.anneal_lr = True
  c.gamma = 0.99
  c.gae_lambda = 0.95
  c.clip_eps = 0.2
  c.vf_coef = 0.5
  c.ent_coef = 0.003
  c.aux_coef = 0.5
  c.max_grad_norm = 0.5
  c.hidden = 64
  return c


@struct.dataclass
class Graph:
  """Static layout tables the agent needs (from EnvParams); swap them to run on another ship."""
  bp: B.BaselineParams
  edge_kind_oh: jax.Array   # [E, n_kinds]
  cap: jax.Array            # [T]
  step_vol: jax.Array       # pump rate * dt (m3)
  block_w: jax.Array
  partial_w: jax.Array
  env_params: EnvParams


def make_graph(env_params: EnvParams) -> Graph:
  kinds = np.eye(len(EDGE_KINDS), dtype=np.float32)[np.asarray(env_params.edge_kind)]
  kinds = kinds * np.asarray(env_params.edge_mask)[:, None]
  return Graph(bp=B.make_params(env_params, bayes=False), edge_kind_oh=jnp.asarray(kinds),
               cap=env_params.cap, step_vol=env_params.pump_rate[0] * env_params.dt_h,
               block_w=env_params.block_w, partial_w=env_params.partial_w,
               env_params=env_params)


class Feats(NamedTuple):
  route: jax.Array      # [M, N_ROUTE_FEAT]
  slot_mask: jax.Array  # [M + 1] (last = NOOP)
  slot_route: jax.Array  # [M + 1] int route index (NOOP = K_MAX)
  edge: jax.Array       # [E, N_EDGE_FEAT]
  glob: jax.Array       # [N_GLOBAL_FEAT]


def features(obs: jax.Array, g: Graph) -> Feats:
  """Per-slot route features, per-edge features and global features of one observation."""
  f = split_obs(obs)
  bp = g.bp
  re = bp.route_edges.astype(jnp.float32)
  n_e = jnp.maximum(re.sum(-1), 1.0)
  good, chat, fail, n_contain, edge_count = B.evidence(f, bp)
  useful = B.useful_routes(f, bp)
  job = B.job_candidates(f, bp)
  cost = B.believed_cost(chat, bp) + bp.w_fail * n_contain
  rank_key = jnp.where(useful, cost - 1e6 * job, jnp.inf)
  order = jax.lax.top_k(-rank_key, M_SLOTS)[1]  # top_k, not argsort: sorts are slow on XLA:CPU
  slot_ok = jnp.isfinite(rank_key[order])
  kinds = g.edge_kind_oh
  unconf = (~good & (f["edge_mask"] > 0.5)).astype(jnp.float32)
  strainer = kinds[:, 0] + kinds[:, 1]
  main = kinds[:, 2] + kinds[:, 3]
  dbb = kinds[:, 5]
  log_g = re @ jnp.log(jnp.maximum(chat, 0.05))
  cap_ext = jnp.concatenate([g.cap, jnp.ones(1)])
  lvl = jnp.concatenate([f["level"], jnp.zeros(1)])
  tgt = jnp.concatenate([f["target"], jnp.zeros(1)])
  work_dst = jnp.clip((tgt - lvl)[bp.route_dst] * cap_ext[bp.route_dst] / g.step_vol, 0, 12)
  work_src = jnp.clip((lvl - tgt)[bp.route_src] * cap_ext[bp.route_src] / g.step_vol, 0, 12)
  work_dst = jnp.where(bp.route_dst == T_MAX, 0.0, work_dst)
  work_src = jnp.where(bp.route_src == T_MAX, 0.0, work_src)
  hist = f["hist_route"].astype(jnp.float32)                      # [H, E]
  overlap = (re @ hist.T) / n_e[:, None]                           # [K, H]
  same = ((re @ hist.T) >= n_e[:, None] - 0.5) & (hist.sum(-1)[None, :] == n_e[:, None])
  fail_h = overlap * (1.0 - jnp.clip(f["hist_ratio"], 0, 1))[None, :] * (hist.sum(-1) > 0)
  rf = jnp.concatenate([
      jnp.stack([useful, job, bp.route_transfer, bp.route_len / 300.0, log_g,
                 jnp.min(jnp.where(bp.route_edges, chat[None, :], 1.0), -1),
                 jnp.minimum(n_contain, 3) / 3.0, (re @ good.astype(jnp.float32)) / n_e,
                 (re @ f["exercised"]) / n_e, re @ (unconf * strainer), re @ (unconf * main),
                 re @ (unconf * dbb), work_dst / 12.0, work_src / 12.0,
                 re @ (edge_count > 0).astype(jnp.float32),
                 jnp.zeros(K_MAX)], -1).astype(jnp.float32),
      overlap, same.astype(jnp.float32), fail_h], -1)
  rf = rf.at[order, 15].set(jnp.arange(M_SLOTS) / M_SLOTS)  # rank among candidates
  route = rf[order] * slot_ok[:, None]
  slot_mask = jnp.concatenate([slot_ok, jnp.array([True])])
  slot_route = jnp.concatenate([jnp.where(slot_ok, order, K_MAX), jnp.array([K_MAX])])
  # per-edge evidence for the diagnosis head
  sets_all = (f["fail_sets"] > 0.5) & ~good[None, :] & (f["fail_kind"] > 0)[:, None]
  size = jnp.maximum(sets_all.sum(-1), 1)
  single = jnp.any(sets_all & (size == 1)[:, None] & (f["fail_kind"] == 1)[:, None], 0)
  part_count = jnp.sum(sets_all & (f["fail_kind"] == 2)[:, None], 0)
  inv_size = jnp.max(jnp.where(sets_all, 1.0 / size[:, None], 0.0), 0)
  ref = reference_diagnosis(obs, g.env_params)
  hist_fail = jnp.sum(hist * (1.0 - jnp.clip(f["hist_ratio"], 0, 1))[:, None], 0)
  ef = jnp.concatenate([jnp.stack([
      good, chat, f["exercised"], jnp.minimum(edge_count, 4) / 4.0, single,
      jnp.minimum(part_count, 4) / 4.0, inv_size, ref, g.block_w / 3.0, g.partial_w / 2.0,
      hist_fail / H_HIST, f["edge_mask"]], -1).astype(jnp.float32), kinds], -1)
  n_open = jnp.sum(f["need_fill"] + f["need_drain"])
  glob = jnp.concatenate([jnp.stack([
      f["time"][0], f["heel"][0], f["trim_err"][0], n_open / 8.0,
      jnp.sum(f["fail_kind"] > 0) / 16.0, jnp.mean(jnp.where(f["edge_mask"] > 0.5, chat, 1.0)),
      jnp.sum(work_dst * (bp.route_src == T_MAX) * job) / 12.0]), f["hist_ratio"]])
  return Feats(route, slot_mask, slot_route, ef * f["edge_mask"][:, None], glob)


class BallastAgent(nn.Module):
  """Route-scoring actor-critic with a per-edge diagnosis head."""
  hidden: int = 64

  @nn.compact
  def __call__(self, ft: Feats):
    h = nn.tanh(nn.Dense(self.hidden, name="r1")(ft.route))
    h = nn.tanh(nn.Dense(self.hidden, name="r2")(h))
    route_logit = nn.Dense(1, name="r_out", kernel_init=orthogonal(0.01))(h)[..., 0]
    # residual on the replanner: slots are ranked by B-replan's believed cost, and a learnable
    # rank penalty (init 2 nats per rank) makes the initial policy a noisy B-replan
    rank_w = self.param("rank_w", nn.initializers.constant(2.0), ())
    route_logit = route_logit - rank_w * jnp.arange(ft.route.shape[-2])
    gh = nn.tanh(nn.Dense(self.hidden, name="g1")(ft.glob))
    noop_logit = nn.Dense(1, name="noop")(gh)[..., 0] - 3.0   # NOOP starts unlikely
    logits = jnp.concatenate([route_logit, noop_logit[..., None]], -1)
    logits = losses.MASKED_LOGIT * (~ft.slot_mask) + jnp.where(ft.slot_mask, logits, 0.0)
    m = ft.slot_mask[..., :-1, None]
    pooled_mean = (h * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)
    pooled_max = jnp.max(jnp.where(m, h, -1.0), -2)
    v = nn.tanh(nn.Dense(self.hidden, name="v1")(
        jnp.concatenate([gh, pooled_mean, pooled_max], -1)))
    value = nn.Dense(1, name="v_out")(v)[..., 0]
    e = nn.tanh(nn.Dense(32, name="d1")(ft.edge))
    e = nn.tanh(nn.Dense(32, name="d2")(e))
    # residual on the reference diagnoser (edge feature 7), learnable weight, init +-3 nats
    ref_w = self.param("ref_w", nn.initializers.constant(6.0), ())
    diag_logit = nn.Dense(1, name="d_out")(e)[..., 0] + ref_w * (ft.edge[..., 7] - 0.5)
    return logits, value, diag_logit


class Transition(NamedTuple):
  feats: Feats
  action: jax.Array
  log_prob: jax.Array
  value: jax.Array
  reward: jax.Array
  next_value: jax.Array
  terminated: jax.Array
  done: jax.Array
  label: jax.Array
  edge_mask: jax.Array


def make_train(config: ml_collections.ConfigDict, env: BallastNet, env_params: EnvParams):
  """Returns train(key) -> (train_state, metrics); the whole run jits (vmappable over seeds)."""
  if env.task != "v1":
    raise ValueError("the BallastNet agent is written for task v1")
  c = config
  n_updates = int(c.total_timesteps // (c.num_envs * c.num_steps))
  batch = c.num_envs * c.num_steps
  mb = batch // c.num_minibatches
  graph = make_graph(env_params)
  net = BallastAgent(hidden=c.hidden)
  feat_fn = jax.vmap(features, in_axes=(0, None))

  def lr_sched(count):
    frac = 1.0 - (count // (c.num_minibatches * c.update_epochs)) / max(n_updates, 1)
    return c.lr * jnp.where(c.anneal_lr, frac, 1.0)

  def loss_fn(params, tr: Transition, adv, targets):
    logits, value, dlogit = net.apply(params, tr.feats)
    log_prob = losses.categorical_log_prob(logits, tr.action)
    adv_n = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = losses.ppo_clip_loss(log_prob, tr.log_prob, adv_n, c.clip_eps)
    vl = losses.clipped_value_loss(value, tr.value, targets, c.clip_eps)
    ent = losses.categorical_entropy(logits).mean()
    bce = optax.sigmoid_binary_cross_entropy(dlogit, tr.label)
    aux = jnp.sum(bce * tr.edge_mask) / jnp.maximum(tr.edge_mask.sum(), 1.0)
    total = pg + c.vf_coef * vl - c.ent_coef * ent + c.aux_coef * aux
    return total, {"pg": pg, "vf": vl, "ent": ent, "aux": aux}

  def train(key):
    key, k_init, k_reset = jax.random.split(key, 3)
    obs, state = jax.vmap(env.reset_env, in_axes=(0, None))(
        jax.random.split(k_reset, c.num_envs), env_params)
    ft0 = jax.tree.map(lambda x: x[0], feat_fn(obs[:1], graph))
    params = net.init(k_init, ft0)
    tx = optax.chain(optax.clip_by_global_norm(c.max_grad_norm),
                     optax.adam(learning_rate=lr_sched, eps=1e-5))
    ts = TrainState.create(apply_fn=net.apply, params=params, tx=tx)
    ep_ret = jnp.zeros(c.num_envs)
    ep_len = jnp.zeros(c.num_envs, jnp.int32)
    n = c.num_envs

    def env_step(carry, _):
      # ft/logits/value of the current observation are carried from the previous step, where
      # they were computed together with the final observation's (one features + one network
      # call per step in the compiled graph instead of two: compile time dominates short runs)
      ts, (ft, logits, value), state, key, ep_ret, ep_len, stats = carry
      key, ka, ks = jax.random.split(key, 3)
      slot = jax.random.categorical(ka, logits)
      log_prob = losses.categorical_log_prob(logits, slot)
      action = jnp.take_along_axis(ft.slot_route, slot[:, None], 1)[:, 0]
      label = (state.clog < 1.0).astype(jnp.float32)
      obs2, state2, reward, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
          jax.random.split(ks, c.num_envs), state, action, env_params)
      done = term | trunc
      # bootstrap from the pre-reset observation on truncation (gymnax 1.x final_observation)
      ft_both = feat_fn(jnp.concatenate([info["final_observation"], obs2]), graph)
      logits_b, value_b, _ = net.apply(ts.params, ft_both)
      next_value = value_b[:n]
      nxt = (jax.tree.map(lambda x: x[n:], ft_both), logits_b[n:], value_b[n:])
      ep_ret = ep_ret + reward
      ep_len = ep_len + 1
      stats = (stats[0] + jnp.sum(jnp.where(done, ep_ret, 0.0)),
               stats[1] + jnp.sum(jnp.where(done, ep_len, 0)),
               stats[2] + jnp.sum(done), stats[3] + jnp.sum(done & info["success"]))
      ep_ret = jnp.where(done, 0.0, ep_ret)
      ep_len = jnp.where(done, 0, ep_len)
      tr = Transition(ft, slot, log_prob, value, reward, next_value, term, done, label,
                      env_params.edge_mask.astype(jnp.float32)[None].repeat(c.num_envs, 0))
      return (ts, nxt, state2, key, ep_ret, ep_len, stats), tr

    def update(carry, _):
      ts, ft0, state, key, ep_ret, ep_len = carry   # ft0: features of the current observation
      logits0, value0, _ = net.apply(ts.params, ft0)  # params changed since the last step
      stats0 = (jnp.zeros(()), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32),
                jnp.zeros((), jnp.int32))
      (ts, (ft_last, _, _), state, key, ep_ret, ep_len, stats), traj = jax.lax.scan(
          env_step, (ts, (ft0, logits0, value0), state, key, ep_ret, ep_len, stats0), None,
          c.num_steps)
      adv, targets = gae(traj.reward, traj.value, traj.next_value, traj.terminated, traj.done,
                         c.gamma, c.gae_lambda)

      def epoch(carry, _):
        ts, key = carry
        key, kp = jax.random.split(key)
        perm = jax.random.permutation(kp, batch)
        flat = jax.tree.map(lambda x: x.reshape((batch,) + x.shape[2:]), (traj, adv, targets))
        shuf = jax.tree.map(lambda x: x[perm].reshape((c.num_minibatches, mb) + x.shape[1:]),
                            flat)

        def mb_step(ts, b):
          tr, a, t = b
          (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(ts.params, tr, a, t)
          return ts.apply_gradients(grads=grads), aux

        ts, aux = jax.lax.scan(mb_step, ts, shuf)
        return (ts, key), aux

      (ts, key), aux = jax.lax.scan(epoch, (ts, key), None, c.update_epochs)
      n_done = jnp.maximum(stats[2], 1)
      metrics = {"returned_episode_returns": stats[0] / n_done,
                 "episode_length": stats[1] / n_done, "success_rate": stats[3] / n_done,
                 "episodes": stats[2], **jax.tree.map(jnp.mean, aux)}
      return (ts, ft_last, state, key, ep_ret, ep_len), metrics

    (ts, *_), metrics = jax.lax.scan(update, (ts, feat_fn(obs, graph), state, key, ep_ret,
                                              ep_len), None, n_updates)
    return ts, metrics

  return train


def make_policy(hidden: int = 64, greedy: bool = True):
  """policy((net_params, graph), obs, key) -> route index (K_MAX = NOOP); works on any layout."""
  net = BallastAgent(hidden=hidden)

  def policy(pp, obs, key):
    params, graph = pp
    ft = features(obs, graph)
    logits, _, _ = net.apply(params, ft)
    slot = jnp.argmax(logits) if greedy else jax.random.categorical(key, logits)
    return ft.slot_route[slot]

  def diagnose(pp, obs):
    """Predicted clogged edges bool[E] (sigmoid(d_e) > 0.5 on real edges)."""
    params, graph = pp
    ft = features(obs, graph)
    _, _, dlogit = net.apply(params, ft)
    return (dlogit > 0.0) & graph.bp.edge_mask

  return policy, diagnose
