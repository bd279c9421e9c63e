"""Recurrent route-entity agent for BallastHydro-v0, trained across a layout family.

The clog state is hidden: what a route will deliver is only known through the evidence the
operation has gathered, so the agent carries a GRU memory h [H] over the episode (reset on
`done_prev`), beside the environment's own evidence fields.

Action int32[P]: one command per pump slot, chosen autoregressively (slot p sees slots < p):

  head p: candidates = the M routes of pump p still allowed (useful: sink needs water, source
          has water to give; no pipe shared with an earlier slot's route, `pair_ok`), the M
          with the largest predicted volume this step (the clear-pipe operating point times
          the believed flow ratios, the env's predicted_moves), plus NOOP.
          logits_m = MLP([route_m, g(h), glob_p]) (+ resid_on * w * resid_m, the ablation),
          NOOP: MLP([g(h), glob_p]).
  Per-route features (layout-free, so one policy runs on any layout): predicted and clear-pipe
  volume over the pump's rated step volume, believed ratio v / v_max, #failure sets inside the
  route, transfer flag, length, plan-order job flag, source/sink levels, volume still to give /
  need, shares of the route's edges confirmed good / exercised, and the heel after this step
  (slot p: after the earlier slots' predicted moves) with its band [lo, hi] over the route's
  delivery between 0 and v_max, in heel-limit units, the least room the bands of trim and
  draughts leave to their limits (trim in trim-limit units, draughts in m), and whether every
  band stays inside its limits (the limit-aware replanner's admissibility test, as a feature,
  not a rule).

GRU input: [global features (heel, trim, time, #open jobs, evidence summary, last ratios),
pooled head-0 route embeddings]; V = MLP([h, pooled]).

log pi(a | s) = sum_p log pi_p(a_p | s, a_<p); entropy = sum_p H_p at the sampled prefix (a
one-sample estimate of the joint entropy, chain rule).

Diagnosis head (per edge, layout-free): d_e = MLP([edge_e, y]) with y the GRU output and edge_e
the edge's evidence (confirmed good, believed ratio chat_e, exercised, #blocked / #partial
failure sets holding it, 1 / size of the smallest such set, shortfall of the last commands
through it, clog prior block_w / partial_w, edge kind one-hot). Trained through the one
learner's auxiliary-loss hook (`Agent.label` -> `Eval.aux_loss`, weight `aux_coef`):
  L_aux = mean over steps and real edges of BCE(d_e, 1[clog_e < 1]),
with the episode's true clog mask as the privileged label (never observed). The gradient flows
into the GRU (the belief the head reads is the one the policy acts from); the policy still
acts from tank levels and the evidence fields only. `make_diagnose` scores the head after an
episode (d_e > 0 on real edges = predicted clogged).

Ablation "with the replanner residual": resid_m = -min(score_m - min_j score_j, R) on the
working slots (heel-admissible and through no known failure set, score < w_fail; score = the
replanner's -log(Q gain) + eps len + w_fail #sets), -R on the others; NOOP -R when the slot has
a working route, else 0, except on slot 0 when no pump has a working route (then -R: something
must move, as the replanner's first command); weight w learnable (init `w_init`);
`resid_on` = 0 switches it off (w then gets no gradient). resid_on is a traced leaf of the
tables, so both variants share one compiled program.

Training across layouts: `algos.ballast.make_trainer` builds the one learner (`algos/ppo`)
inside a jitted function whose argument is a layout's tables (every layout padded to the
family's sizes), so one program trains on any layout (agents/ never import algos/).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import struct

from jaxrl_suite.agents.interface import Agent, Eval, Step
from jaxrl_suite.core import losses
from jaxrl_suite.core.initializers import orthogonal

N_ROUTE_FEAT = 19
N_DYN = 5                     # route features that depend on the earlier slots' commands
N_GLOB = 13
N_STEP = 10
N_EDGE_SCALAR = 10            # edge features before the edge-kind one-hot
R_CLIP = 10.0
MAX_PUMPS = 3


def default_config() -> ml_collections.ConfigDict:
  """Agent fields (learner fields come from ppo.default_config)."""
  return ml_collections.ConfigDict(dict(hidden=64, gru=64, slots=16, w_init=3.0))


@struct.dataclass
class Tables:
  """What the agent reads about a layout: the replanner tables (env params inside) and the
  residual switch. Traced leaves: one compiled program serves every padded layout. `api`
  (static) is the env side's functions (envs/ballast/agent_api.HydroApi, `env.agent_api`),
  injected so that this module never imports envs/."""
  bp: Any                   # hydro_baselines.HydroBaselineParams
  resid_on: jax.Array       # () float, 1.0 = the replanner-residual ablation
  api: Any = struct.field(pytree_node=False, default=None)


def make_tables(env_params, resid: bool, api) -> Tables:
  """Tables of one layout (HydroParams) for the agent; api = the env's HydroApi."""
  return Tables(bp=api.make_baseline(env_params, "heel_replan"),
                resid_on=jnp.float32(1.0 if resid else 0.0), api=api)


class Pre(NamedTuple):
  """Param-free per-observation quantities shared by the heads (one observation)."""
  base: jax.Array     # [K, N_ROUTE_FEAT - N_DYN] static route features
  v: jax.Array        # [K] predicted m3 this step
  v_max: jax.Array    # [K] clear-pipe m3 this step
  score: jax.Array    # [K] replanner score (lower = better)
  free: jax.Array     # [K] useful and moving water
  q: jax.Array        # [5] limited quantities now (heel deg, trim m, draughts fwd/aft/mean m)
  step: jax.Array     # [N_STEP] GRU input features
  edge: jax.Array     # [E, N_EDGE_SCALAR + n_kinds] diagnosis-head edge features
  rates: jax.Array    # [K, 5] change of q per m3 moved along each route, at the sounded fills
  lim_lo: jax.Array   # [5] admissible range of q (margins taken off)
  lim_hi: jax.Array   # [5]


class Head(NamedTuple):
  route: jax.Array      # [M, N_ROUTE_FEAT]
  glob: jax.Array       # [N_GLOB]
  resid: jax.Array      # [M + 1]
  slot_mask: jax.Array  # [M + 1] (last = NOOP)
  slot_route: jax.Array  # [M + 1] route index (NOOP = K)


def observe(tb: Tables, obs: jax.Array) -> Pre:
  bp = tb.bp
  p = bp.env
  T = p.cap.shape[-1]
  f = tb.api.split_obs(obs, p)
  v_max, v, score, useful, job = tb.api.predicted_moves(bp, f)
  good, _, _, n_contain, _ = tb.api.evidence(f, bp)
  # the limits as the limit-aware replanner predicts them (same physics: ballast-dependent GM)
  q, rates, lim_lo, lim_hi = tb.api.limit_tables(bp, f)
  dheel = rates[:, 0]
  re = p.route_edges.astype(jnp.float32)
  n_e = jnp.maximum(re.sum(-1), 1.0)
  step_vol = jnp.maximum(p.pump_rate[p.route_pump] * p.dt_h, 1.0)
  lvl = jnp.concatenate([jnp.clip(f["level"], 0, 1), jnp.array([0.5])])
  vol = jnp.clip(f["level"], 0.0, 1.0) * p.cap
  tgt = jnp.concatenate([f["target"] * p.cap, jnp.zeros(1)])
  v_ext = jnp.concatenate([vol, jnp.zeros(1)])
  give = jnp.where(p.route_src == T, 1e4, v_ext[p.route_src] - tgt[p.route_src])
  need = jnp.where(p.route_dst == T, 1e4, tgt[p.route_dst] - v_ext[p.route_dst])
  left = jnp.clip(jnp.minimum(give, need), 0.0, 5e3) / step_vol
  base = jnp.stack([
      v / step_vol, v_max / step_vol, v / jnp.maximum(v_max, 1e-3),
      jnp.minimum(n_contain, 3) / 3.0, p.route_transfer.astype(jnp.float32),
      p.route_len / 300.0, job.astype(jnp.float32), lvl[p.route_src], lvl[p.route_dst],
      jnp.minimum(left, 10.0) / 10.0, re @ good.astype(jnp.float32) / n_e,
      re @ (f["exercised"] > 0.5).astype(jnp.float32) / n_e,
      jnp.clip(dheel * v_max / p.heel_limit, -3.0, 3.0),
      p.route_pump.astype(jnp.float32) / MAX_PUMPS], -1)
  n_open = jnp.sum(f["need_fill"] + f["need_drain"])
  em = f["edge_mask"] > 0.5
  n_live = jnp.maximum(jnp.sum(f["last_info"] > -1), 1.0)
  step = jnp.stack([
      f["heel"][0], jnp.clip(f["trim"][0], -5, 5) / 5.0, f["time"][0], n_open / 10.0,
      jnp.sum(f["fail_kind"] > 0) / 16.0,
      jnp.sum(jnp.where(em, f["chat"], 0.0)) / jnp.maximum(em.sum(), 1.0),
      jnp.sum(f["last_ratio"]) / n_live, jnp.mean(f["last_info"]),
      jnp.sum(f["last_pumped"]) / MAX_PUMPS,
      jnp.mean(jnp.abs(f["dlevel"]) * f["tank_mask"])])
  free = useful & (v > 0.5)
  return Pre(base, v, v_max, score, free, q, step, edge_features(tb, f), rates, lim_lo, lim_hi)


def other_room(pre: Pre, lo, hi) -> jax.Array:
  """[...] the least room bands [lo, hi] ([..., 5]) leave to the trim and draught limits:
  trim in units of its admissible half-range, draughts in m; negative = a limit crossed."""
  unit = jnp.concatenate([jnp.ones(1), jnp.maximum(pre.lim_hi[1:2], 1e-3), jnp.ones(3)])
  room = jnp.minimum(pre.lim_hi - hi, lo - pre.lim_lo) / unit
  return jnp.clip(jnp.min(room[..., 1:], -1), -1.0, 1.0)


def edge_features(tb: Tables, f) -> jax.Array:
  """[E, N_EDGE_SCALAR + n_kinds] evidence of each pipe edge (zero rows on padding edges)."""
  p = tb.bp.env
  P = p.pump_rate.shape[-1]
  em = f["edge_mask"]
  kind = f["fail_kind"]
  sets = (f["fail_sets"] > 0.5) & (f["good"] < 0.5)[None, :] & (kind > 0)[:, None]  # [F, E]
  size = jnp.maximum(sets.sum(-1), 1)
  n_block = jnp.sum(sets & (kind == 1)[:, None], 0)
  n_part = jnp.sum(sets & (kind == 2)[:, None], 0)
  inv_size = jnp.max(jnp.where(sets, 1.0 / size[:, None], 0.0), 0)
  short = (1.0 - jnp.clip(f["last_ratio"], 0.0, 1.0)) * (f["last_info"] > 0.5)      # [P]
  last_short = jnp.sum(f["last_route"] * short[:, None], 0) / P                      # [E]
  kinds = jax.nn.one_hot(p.edge_kind, tb.api.n_edge_kinds)
  ef = jnp.concatenate([jnp.stack([
      f["good"], f["chat"], f["exercised"], jnp.minimum(n_block, 4) / 4.0,
      jnp.minimum(n_part, 4) / 4.0, inv_size, last_short, p.block_w / 3.0, p.partial_w / 2.0,
      em], -1), kinds], -1)
  return (ef * em[:, None]).astype(jnp.float32)


def head_feats(tb: Tables, pre: Pre, slot: int, taken: jax.Array, q, lo, hi,
               n_slots: int) -> Head:
  """Candidates and features of pump slot `slot` given the routes already taken (bool[K]
  mask of routes compatible with every earlier live command) and the limited quantities so
  far: q [5] predicted, [lo, hi] [5] their bands."""
  bp = tb.bp
  p = bp.env
  K, P = p.route_mask.shape[-1], p.pump_rate.shape[-1]
  lim = p.heel_limit
  cand = pre.free & (p.route_pump == slot) & taken
  key = jnp.where(cand, pre.v, -jnp.inf)
  _, order = jax.lax.top_k(key, n_slots)
  ok = cand[order]
  heel = q[0]
  dq = pre.rates * pre.v_max[:, None]
  h_after = heel + pre.rates[:, 0] * pre.v
  hi_k, lo_k = hi + jnp.maximum(dq, 0.0), lo + jnp.minimum(dq, 0.0)
  admissible = tb.api.band_admissible(lo_k, hi_k, pre.lim_lo, pre.lim_hi)
  dyn = jnp.stack([jnp.clip(h_after / lim, -3, 3), jnp.clip(hi_k[:, 0] / lim, -3, 3),
                   jnp.clip(lo_k[:, 0] / lim, -3, 3), other_room(pre, lo_k, hi_k),
                   admissible.astype(jnp.float32)], -1)
  route = jnp.concatenate([pre.base, dyn], -1)[order] * ok[:, None]
  adm_slot = admissible[order] & ok
  s = pre.score[order]
  any_adm = adm_slot.any()
  # The residual (the ablation) prefers what the replanner would: among this slot's admissible
  # candidates that avoid every known failure set (score < w_fail), the best-scored. A pump
  # whose candidates all run through known failures stays idle (NOOP preferred) when another
  # pump has a working route, as the replanner, whose first command is the best route of ANY
  # pump, leaves it idle; only when no pump has one does slot 0 have to move (the replanner's
  # "progress must go on"). Before, a pump-0 route through a known blocked pipe scored as
  # slot 0's best (its score relative to pump 0's own candidates) and, each step, locked the
  # shared pipes out of the other pumps' working routes: on a 3-pump layout the untrained
  # residual agent failed half of the 1-blocked episodes the replanner finished.
  working = adm_slot & (s < bp.w_fail)
  any_work = working.any()
  work_any_pump = (pre.free & taken & admissible & (pre.score < bp.w_fail)).any()
  s_min = jnp.min(jnp.where(working, s, jnp.inf))
  resid_r = jnp.where(working, -jnp.minimum(s - s_min, R_CLIP), -R_CLIP)
  resid_noop = jnp.where(any_work | ((slot == 0) & ~work_any_pump), -R_CLIP, 0.0)
  slot_oh = jax.nn.one_hot(slot, MAX_PUMPS)
  glob = jnp.concatenate([jnp.stack([
      heel / lim, hi[0] / lim, lo[0] / lim, other_room(pre, lo, hi), jnp.float32(slot < P) * p.pump_mask[min(slot, P - 1)],
      ok.sum() / n_slots, any_adm.astype(jnp.float32), jnp.float32(slot > 0),
      jnp.sum(~taken & p.route_mask) / jnp.maximum(p.route_mask.sum(), 1.0),
      pre.step[2]]), slot_oh])
  return Head(route.astype(jnp.float32), glob.astype(jnp.float32),
              jnp.concatenate([resid_r, resid_noop[None]]),
              jnp.concatenate([ok, jnp.array([True])]),
              jnp.concatenate([jnp.where(ok, order, K), jnp.array([K])]))


class HydroNet(nn.Module):
  """Shared slot scorer for every pump head, GRU core, value head."""
  hidden: int = 64
  gru: int = 64
  w_init: float = 3.0

  def setup(self):
    self.r1 = nn.Dense(self.hidden)
    self.r2 = nn.Dense(self.hidden)
    self.ctx = nn.Dense(self.hidden)
    self.s1 = nn.Dense(self.hidden)
    self.s_out = nn.Dense(1, kernel_init=orthogonal(0.01))
    self.n1 = nn.Dense(self.hidden)
    self.n_out = nn.Dense(1, kernel_init=orthogonal(0.01))
    self.x1 = nn.Dense(self.hidden)
    self.cell = nn.GRUCell(self.gru, recurrent_kernel_init=orthogonal())
    self.v1 = nn.Dense(self.hidden)
    self.v_out = nn.Dense(1, kernel_init=orthogonal(1.0))
    self.d1 = nn.Dense(self.hidden)
    self.d_ctx = nn.Dense(self.hidden)
    self.d2 = nn.Dense(self.hidden)
    self.d_out = nn.Dense(1)
    self.w = self.param("w_resid", nn.initializers.constant(self.w_init), ())

  def embed(self, route):
    return nn.tanh(self.r2(nn.tanh(self.r1(route))))

  def pooled(self, e, mask):
    m = mask[..., None]
    return (e * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)

  def core(self, h, step, head0: Head, reset):
    """One GRU step: returns (h', y, pooled head-0 embedding)."""
    h = jnp.where(reset[..., None], jnp.zeros_like(h), h)
    pool = self.pooled(self.embed(head0.route), head0.slot_mask[..., :-1])
    x = nn.tanh(self.x1(jnp.concatenate([step, pool], -1)))
    h, y = self.cell(h, x)
    return h, y, pool

  def value(self, y, pool):
    return self.v_out(nn.tanh(self.v1(jnp.concatenate([y, pool], -1))))[..., 0]

  def diagnose(self, y, edge):
    """y [..., G], edge [..., E, F] -> clog logits [..., E]."""
    z = nn.tanh(self.d1(edge) + self.d_ctx(y)[..., None, :])
    return self.d_out(nn.tanh(self.d2(z)))[..., 0]

  def logits(self, y, hd: Head, resid_on):
    """y [..., G] GRU output, head features [..., M, F] -> logits [..., M + 1]."""
    c = self.ctx(jnp.concatenate([y, hd.glob], -1))                      # [..., H]
    e = self.embed(hd.route)                                             # [..., M, H]
    s = self.s_out(nn.tanh(self.s1(e) + c[..., None, :]))[..., 0]
    n = self.n_out(nn.tanh(self.n1(jnp.concatenate([y, hd.glob], -1))))[..., 0]
    lg = jnp.concatenate([s, n[..., None]], -1) + resid_on * self.w * hd.resid
    return jnp.where(hd.slot_mask, lg, losses.MASKED_LOGIT)

  def __call__(self, h, step, head0: Head, reset, resid_on, edge):
    h, y, pool = self.core(h, step, head0, reset)
    return h, self.logits(y, head0, resid_on), self.value(y, pool), self.diagnose(y, edge)


def _take(x, i):
  return jnp.take_along_axis(x, i[..., None], -1)[..., 0]


def make_actor(cfg, tb: Tables):
  """(net, act_rows) for batched observations [B, D]: act_rows(params, h, obs, reset, key,
  greedy) -> (h', action int32[B, P], record, log_prob [B], value [B])."""
  net = HydroNet(cfg.hidden, cfg.gru, cfg.w_init)
  p = tb.bp.env
  K, P = p.route_mask.shape[-1], p.pump_rate.shape[-1]
  M = min(int(cfg.slots), K)
  obs_b = jax.vmap(observe, in_axes=(None, 0))
  head_b = jax.vmap(lambda pre, s, taken, q, lo, hi: head_feats(tb, pre, s, taken, q, lo, hi,
                                                                M),
                    in_axes=(0, None, 0, 0, 0, 0))

  def act_rows(params, h, obs, reset, key, greedy: bool = False):
    pre = obs_b(tb, obs)
    B = obs.shape[0]
    taken = jnp.ones((B, K), bool)
    q, lo, hi = pre.q, pre.q, pre.q
    hd0 = head_b(pre, 0, taken, q, lo, hi)
    h, y, pool = net.apply(params, h, pre.step, hd0, reset, method=HydroNet.core)
    value = net.apply(params, y, pool, method=HydroNet.value)
    heads, slots, cmds, lp = [], [], [], jnp.zeros(B)
    hd = hd0
    for s in range(P):
      if s:
        hd = head_b(pre, s, taken, q, lo, hi)
      lg = net.apply(params, y, hd, tb.resid_on, method=HydroNet.logits)
      key, k = jax.random.split(key)
      slot = jnp.argmax(lg, -1) if greedy else jax.random.categorical(k, lg)
      lp = lp + losses.categorical_log_prob(lg, slot)
      k_r = _take(hd.slot_route, slot)
      live = k_r < K
      kk = jnp.minimum(k_r, K - 1)
      r_k = jnp.take_along_axis(pre.rates, kk[:, None, None], 1)[:, 0]          # [B, 5]
      dq = r_k * jnp.take_along_axis(pre.v_max, kk[:, None], 1)
      v_k = jnp.take_along_axis(pre.v, kk[:, None], 1)
      on = live[:, None]
      q = jnp.where(on, q + r_k * v_k, q)
      hi = jnp.where(on, hi + jnp.maximum(dq, 0.0), hi)
      lo = jnp.where(on, lo + jnp.minimum(dq, 0.0), lo)
      taken = taken & jnp.where(live[:, None], p.pair_ok[kk, :K], True)
      heads.append(hd)
      slots.append(slot)
      cmds.append(jnp.where(live, kk, 2 * K))
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a, 1), *xs)
    record = (stack(heads), jnp.stack(slots, 1), pre.step, hd0, pre.edge)
    return h, jnp.stack(cmds, 1).astype(jnp.int32), record, lp, value

  return net, act_rows


def diagnosis_loss(net, params, y, edge, label, edge_mask):
  """Mean BCE(d_e, label_e) over steps x rows x real edges; y [T, B, G], edge [T, B, E, F],
  label [T, B, E], edge_mask [E]."""
  dlogit = net.apply(params, y, edge, method=HydroNet.diagnose)                # [T, B, E]
  bce = optax.sigmoid_binary_cross_entropy(dlogit, label)
  n = jnp.maximum(edge_mask.sum() * bce.shape[0] * bce.shape[1], 1.0)
  return jnp.sum(bce * edge_mask) / n


def make_agent(cfg, tb: Tables) -> Agent:
  """The Agent (algos/agent.py) for one layout's tables; record = (heads [B, P, ...], slots
  [B, P], step features, head-0 features, edge features); recurrent (carry h [B, gru]);
  label = the true clog mask 1[clog < 1] [B, E] (the diagnosis head's auxiliary loss)."""
  net, act_rows = make_actor(cfg, tb)
  edge_mask = tb.bp.env.edge_mask.astype(jnp.float32)

  def initial_carry(batch: int):
    return jnp.zeros((batch, cfg.gru), jnp.float32)

  def init(key, obs):
    b = obs.shape[0]
    pre = jax.vmap(observe, in_axes=(None, 0))(tb, obs)
    K = tb.bp.env.route_mask.shape[-1]
    hd = jax.vmap(lambda pr: head_feats(tb, pr, 0, jnp.ones(K, bool), pr.q, pr.q, pr.q,
                                        min(int(cfg.slots), K)))(pre)
    return net.init(key, initial_carry(b), pre.step, hd, jnp.ones(b, bool), tb.resid_on,
                    pre.edge)

  def act(params, carry, obs, done_prev, key, mask=None):
    del mask
    h, action, record, lp, value = act_rows(params, carry, obs, done_prev, key)
    return Step(h, action, lp, value, record, {})

  def evaluate(params, carry0, seq):
    """seq leaves [T, B, ...]: the GRU re-run over the sequences, heads from stored features."""
    heads, slots, step, hd0, edge = seq.record

    def core(h, x):
      st, h0, reset = x
      h, y, pool = net.apply(params, h, st, h0, reset, method=HydroNet.core)
      return h, (y, pool)

    _, (y, pool) = jax.lax.scan(core, carry0, (step, hd0, seq.done_prev))
    value = net.apply(params, y, pool, method=HydroNet.value)
    n_heads = slots.shape[-1]
    y_h = jnp.broadcast_to(y[:, :, None, :], y.shape[:2] + (n_heads, y.shape[-1]))
    lg = net.apply(params, y_h, heads, tb.resid_on, method=HydroNet.logits)
    lp = losses.categorical_log_prob(lg, slots).sum(-1)
    ent = losses.categorical_entropy(lg).sum(-1)
    if seq.label is None:   # re-scoring without labels (no auxiliary loss)
      return Eval(lp, ent, value, jnp.zeros(()))
    return Eval(lp, ent, value, diagnosis_loss(net, params, y, edge, seq.label, edge_mask))

  def value(params, carry, obs):
    pre = jax.vmap(observe, in_axes=(None, 0))(tb, obs)
    K = tb.bp.env.route_mask.shape[-1]
    hd = jax.vmap(lambda pr: head_feats(tb, pr, 0, jnp.ones(K, bool), pr.q, pr.q, pr.q,
                                        min(int(cfg.slots), K)))(pre)
    _, y, pool = net.apply(params, carry, pre.step, hd, jnp.zeros(obs.shape[0], bool),
                           method=HydroNet.core)
    return net.apply(params, y, pool, method=HydroNet.value)

  def label(state):
    return (state.clog < 1.0).astype(jnp.float32)

  return Agent(init, initial_carry, act, evaluate, value, label=label, recurrent=True,
               module=net)


def make_policy(cfg, greedy: bool = True):
  """step(pp, h [gru], obs [D], reset, key) -> (h', cmds int32[P]) for one observation, with
  pp = (net_params, Tables): the recurrent policy for envs.ballast.hydro_rollout's
  make_hydro_evaluate_recurrent (carry0 = zeros(cfg.gru))."""

  def step(pp, h, obs, reset, key):
    params, tb = pp
    _, act_rows = make_actor(cfg, tb)
    h2, a, *_ = act_rows(params, h[None], obs[None], jnp.asarray(reset)[None], key, greedy)
    return h2[0], a[0]

  return step


def make_diagnose(cfg):
  """diagnose(pp, h [gru], obs [D]) -> bool[E] predicted clogged edges (d_e > 0 on real edges)
  after one more GRU step on obs (the episode's final observation, h its carry); pp =
  (net_params, Tables)."""

  def diagnose(pp, h, obs):
    params, tb = pp
    net = HydroNet(cfg.hidden, cfg.gru, cfg.w_init)
    p = tb.bp.env
    K = p.route_mask.shape[-1]
    pre = observe(tb, obs)
    hd = head_feats(tb, pre, 0, jnp.ones(K, bool), pre.q, pre.q, pre.q,
                    min(int(cfg.slots), K))
    _, y, _ = net.apply(params, h, pre.step, hd, jnp.array(False), method=HydroNet.core)
    d = net.apply(params, y, pre.edge, method=HydroNet.diagnose)
    return (d > 0.0) & p.edge_mask

  return diagnose
