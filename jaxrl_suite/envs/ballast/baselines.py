"""Dijkstra-family baselines for BallastNet v1, as policies `policy(params, obs, key) -> action`.

All of them read the same evidence from the observation (the shared belief update of design doc
4.5, maintained by the env from commands and soundings): confirmed-good edges, believed
conductances chat_e, and a ring buffer of failure sets. Jobs are served in plan order (the first
tank whose plan lamp is on); candidate routes are the library routes that make progress on that
job (`useful_routes`). Because the library holds every simple path, Dijkstra on the believed
graph is exactly an argmin over candidate routes of believed cost. Steps depend on conductance,
not on pipe length, so the competent metric is believed time per unit of plan progress; with
additive edge weights (Dijkstra-compatible) w_e = -log chat_e + eps * length_e:

    cost_k = sum_{e in k} w_e - log(gain_k)        gain_k = 2 for a transfer (serves two jobs)

i.e. -log of the believed progress rate, ties broken by length, then by the lowest route index.
(The design doc's sum length_e / chat_e is available as `cost_metric="length"`; it prefers short
routes over transfers and is strictly worse when nothing is clogged.)
Variants:
  B-oracle  knows clog (obs field `clog_revealed`, env built with reveal_clog=True); picks the
            route with the largest true progress rate g_k (x2 for a transfer), then the shortest.
            A lower bound on steps for this job order.
  B-replan  (headline) adds `w_fail` for every recorded failure set f (minus good edges) with
            f subset of edges(k) (k_fail = 1: one failure makes a route known-bad). Over-exclusion
            (every candidate known-bad, e.g. after a noisy reading) degrades gracefully to the
            route contained in the fewest failure sets instead of forgetting the evidence.
  B-tabu    (weak) bans only the exact routes that failed.
  B-pess    B-replan plus a per-edge penalty: length_e * (1 + w_pess * #failure sets holding e).
  B-Bayes   exact posterior over blocked-edge sets of size <= 3 on can_block edges (prior of the
            env, partial clogs ignored), myopic: maximise P(route unblocked) * prod chat_e (x2 for
            a transfer), ties by believed cost. Separates better inference from planning.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl_suite.envs.ballast.params import EnvParams, split_obs
from jaxrl_suite.envs.ballast.routes import E_MAX, K_MAX, T_MAX

BASELINES = ("oracle", "replan", "tabu", "pess", "bayes")


@struct.dataclass
class BaselineParams:
  """Route tables (copied from EnvParams) and tunable knobs; a pytree, vmappable."""
  route_edges: jax.Array
  route_src: jax.Array
  route_dst: jax.Array
  route_mask: jax.Array
  route_len: jax.Array
  route_transfer: jax.Array
  edge_len: jax.Array
  edge_mask: jax.Array
  route_words: jax.Array  # [K, EW] uint32: route k's edge set packed into EW = ceil(E/32) words
  hyp: jax.Array          # [H, E] bool blocked-edge hypotheses (B-Bayes)
  hyp_logw: jax.Array     # [H] log prior weight
  hyp_clear: jax.Array    # [H, K] bool: hypothesis leaves route k unblocked
  w_fail: float = 1e4
  w_pess: float = 0.5
  transfer_gain: float = 2.0
  eps_len: float = 1e-4
  length_metric: bool = False


def pack_edges(sets):
  """bool[..., E] -> uint32[..., ceil(E/32)]: bit j of word w is edge 32*w + j (numpy or jax)."""
  xp = jnp if isinstance(sets, jax.Array) else np
  n_w = -(-sets.shape[-1] // 32)
  pad = [(0, 0)] * (sets.ndim - 1) + [(0, 32 * n_w - sets.shape[-1])]
  b = xp.pad(sets, pad).reshape(sets.shape[:-1] + (n_w, 32)).astype(xp.uint32)
  return (b << xp.arange(32, dtype=xp.uint32)).sum(-1, dtype=xp.uint32)


def make_hypotheses(env_params: EnvParams, max_blocked: int = 3):
  """Blocked-set hypotheses with prior weights P(n) * prod w_e / Z_n (numpy, config time).

  The env samples n ~ p_blocked then n edges without replacement with weights block_w; the
  product-of-weights form is the standard approximation of that (exact for equal weights). The
  env's rejection of infeasible plans is ignored.
  """
  w = np.asarray(env_params.block_w, np.float64)
  p_n = np.asarray(env_params.p_blocked, np.float64)
  cand = [int(e) for e in np.flatnonzero(w > 0)]
  hyps, logw = [], []
  for n in range(max_blocked + 1):
    sets = list(itertools.combinations(cand, n))
    if not sets:
      continue
    ws = np.array([np.prod([w[e] for e in s]) for s in sets])
    for s, wi in zip(sets, ws):
      h = np.zeros(E_MAX, bool)
      h[list(s)] = True
      hyps.append(h)
      logw.append(np.log(p_n[n]) + np.log(wi / ws.sum()))
  hyp = np.stack(hyps)
  re = np.asarray(env_params.route_edges)
  clear = ~(hyp[:, None, :] & re[None, :, :]).any(-1)
  return hyp, np.asarray(logw, np.float32), clear


def make_params(env_params: EnvParams, bayes: bool = True, cost_metric: str = "time",
                **knobs: Any) -> BaselineParams:
  """Baseline params for one layout. bayes=False skips the hypothesis tables (saves memory).

  cost_metric: "time" (default, -log believed rate) or "length" (sum length / chat).
  """
  if cost_metric not in ("time", "length"):
    raise ValueError(f"cost_metric must be 'time' or 'length', got {cost_metric!r}")
  if bayes:
    hyp, logw, clear = make_hypotheses(env_params)
  else:
    hyp, logw, clear = (np.zeros((1, E_MAX), bool), np.zeros(1, np.float32),
                        np.ones((1, K_MAX), bool))
  return BaselineParams(
      route_edges=env_params.route_edges, route_src=env_params.route_src,
      route_dst=env_params.route_dst, route_mask=env_params.route_mask,
      route_len=env_params.route_len, route_transfer=env_params.route_transfer,
      edge_len=env_params.edge_len, edge_mask=env_params.edge_mask,
      route_words=jnp.asarray(pack_edges(np.asarray(env_params.route_edges))),
      hyp=jnp.asarray(hyp),
      hyp_logw=jnp.asarray(logw), hyp_clear=jnp.asarray(clear),
      length_metric=cost_metric == "length", **knobs)


def useful_routes(f: dict[str, jax.Array], bp: BaselineParams) -> jax.Array:
  """bool[K]: library routes that make plan progress (sink needs water or is SEA, source needs
  draining or is SEA)."""
  nf = jnp.concatenate([f["need_fill"] > 0.5, jnp.array([True])])
  nd = jnp.concatenate([f["need_drain"] > 0.5, jnp.array([True])])
  return bp.route_mask & nf[bp.route_dst] & nd[bp.route_src]


def job_candidates(f: dict[str, jax.Array], bp: BaselineParams) -> jax.Array:
  """bool[K]: useful routes serving the first open job in plan order (tank index order)."""
  need = (f["need_fill"] > 0.5) | (f["need_drain"] > 0.5)
  job = jnp.argmax(need)
  cand = useful_routes(f, bp) & ((bp.route_src == job) | (bp.route_dst == job))
  return cand & need.any()


def evidence(f: dict[str, jax.Array], bp: BaselineParams):
  """Shared belief read from the observation.

  Returns (good[E] bool, chat[E], fail[F,E] bool blocked failure sets minus good edges (empty
  rows dropped), n_contain[K] = #failure sets contained in route k, edge_count[E] = #failure sets
  holding edge e).
  """
  good = f["good"] > 0.5
  fail = (f["fail_sets"] > 0.5) & ~good[None, :] & (f["fail_kind"] == 1)[:, None]
  nonempty = fail.any(-1)
  n_contain = jnp.sum(routes_containing(fail, bp) & nonempty[:, None], axis=0)
  edge_count = jnp.sum(fail, axis=0)
  return good, f["chat"], fail, n_contain, edge_count


def routes_containing(sets: jax.Array, bp: BaselineParams) -> jax.Array:
  """bool[F, K]: edge set f (row of sets[F, E]) is a subset of route k's edges.

  With edge sets packed into uint32 words, f subset of k <=> (f & ~k) == 0 word by word: O(F*K*EW)
  word ops, vectorised over the minor axis, instead of an [F,E]x[E,K] float product (the dominant
  cost of a baseline step on CPU). An empty set is contained in every route.
  """
  fw = pack_edges(sets)                                                         # [F, EW]
  return jnp.all((fw[:, None, :] & ~bp.route_words[None, :, :]) == 0, axis=-1)


def believed_cost(chat: jax.Array, bp: BaselineParams, edge_pen: jax.Array | None = None):
  """cost[K]: -log believed progress rate + eps*length (see module docstring).

  edge_pen[E] >= 0 multiplies the believed resistance of an edge: w_e += log(1 + edge_pen_e).
  With length_metric: sum_{e in k} len_e / chat_e * (1 + edge_pen_e), divided by the gain.
  """
  chat = jnp.maximum(chat, 0.05)
  pen = jnp.zeros_like(chat) if edge_pen is None else edge_pen
  re = bp.route_edges.astype(jnp.float32)
  gain = jnp.where(bp.route_transfer, bp.transfer_gain, 1.0)
  time_cost = re @ (-jnp.log(chat) + jnp.log1p(pen) + bp.eps_len * bp.edge_len) - jnp.log(gain)
  len_cost = (re @ (bp.edge_len / chat * (1.0 + pen))) / gain
  return jnp.where(bp.length_metric, len_cost, time_cost)


def _pick(score: jax.Array, cand: jax.Array) -> jax.Array:
  """argmin of score over candidates (lowest index on ties); NOOP if there is none."""
  return argmin_first(jnp.where(cand, score, jnp.inf), K_MAX)


def argmin_first(x: jax.Array, none: int) -> jax.Array:
  """First index of min(x) over the last axis, or `none` if the min is +inf.

  Two plain reductions: jnp.argmin is a variadic (value, index) reduce that XLA:CPU does not
  vectorise, and it was the largest single cost of a baseline step under vmap.
  """
  m = jnp.min(x, axis=-1, keepdims=True)
  idx = jnp.arange(x.shape[-1], dtype=jnp.int32)
  a = jnp.min(jnp.where(x == m, idx, x.shape[-1]), axis=-1)
  return jnp.where(jnp.isfinite(m[..., 0]), a, none).astype(jnp.int32)


def oracle_policy(bp: BaselineParams, obs: jax.Array, key=None) -> jax.Array:
  f = split_obs(obs)
  clog = jnp.maximum(f["clog_revealed"], 0.0)
  # log g_k = sum_{e in k} log clog_e as a [K,E]x[E] product (a GEMM under vmap; a masked
  # product-reduce is several times slower on CPU); blocked edges give log g ~ -69 (clipped below)
  log_g = bp.route_edges.astype(jnp.float32) @ jnp.log(jnp.maximum(clog, 1e-30))
  log_rate = log_g + jnp.log(jnp.where(bp.route_transfer, bp.transfer_gain, 1.0))
  score = -jnp.maximum(log_rate, jnp.log(1e-12)) + bp.eps_len * bp.route_len
  return _pick(score, job_candidates(f, bp))


def replan_policy(bp: BaselineParams, obs: jax.Array, key=None) -> jax.Array:
  f = split_obs(obs)
  _, chat, _, n_contain, _ = evidence(f, bp)
  score = believed_cost(chat, bp) + bp.w_fail * n_contain
  return _pick(score, job_candidates(f, bp))


def tabu_policy(bp: BaselineParams, obs: jax.Array, key=None) -> jax.Array:
  f = split_obs(obs)
  banned_ids = jnp.where(f["fail_kind"] == 1, f["fail_route"], -1).astype(jnp.int32)
  banned = jnp.any(jnp.arange(K_MAX)[:, None] == banned_ids[None, :], axis=1)
  score = believed_cost(f["chat"], bp) + bp.w_fail * banned
  return _pick(score, job_candidates(f, bp))


def pess_policy(bp: BaselineParams, obs: jax.Array, key=None) -> jax.Array:
  f = split_obs(obs)
  _, chat, _, n_contain, edge_count = evidence(f, bp)
  score = believed_cost(chat, bp, bp.w_pess * edge_count) + bp.w_fail * n_contain
  return _pick(score, job_candidates(f, bp))


def bayes_posterior(f: dict[str, jax.Array], bp: BaselineParams):
  """Posterior weights over hypotheses [H] (normalised; zeros if no hypothesis is consistent)."""
  good, _, fail, _, _ = evidence(f, bp)
  nonempty = fail.any(-1)
  hyp = bp.hyp.astype(jnp.float32)
  hits = (hyp @ fail.astype(jnp.float32).T) > 0.5                          # [H, F]
  consistent = ((hyp @ good.astype(jnp.float32)) < 0.5) & jnp.all(hits | ~nonempty[None, :], 1)
  logw = jnp.where(consistent, bp.hyp_logw, -jnp.inf)
  z = jax.nn.logsumexp(logw)
  return jnp.where(jnp.isfinite(z), jnp.exp(logw - z), 0.0)


def bayes_policy(bp: BaselineParams, obs: jax.Array, key=None) -> jax.Array:
  f = split_obs(obs)
  post = bayes_posterior(f, bp)
  p_clear = post @ bp.hyp_clear.astype(jnp.float32)                          # [K]
  _, chat, _, n_contain, _ = evidence(f, bp)
  exp_g = jnp.exp(bp.route_edges.astype(jnp.float32) @ jnp.log(jnp.maximum(chat, 0.05)))
  progress = p_clear * exp_g * jnp.where(bp.route_transfer, bp.transfer_gain, 1.0)
  cost = believed_cost(chat, bp)
  # no consistent hypothesis (noise) -> fall back to the replan score
  score = jnp.where(post.sum() > 0, -jnp.log(jnp.maximum(progress, 1e-12)) +
                    bp.eps_len * bp.route_len, cost + bp.w_fail * n_contain)
  return _pick(score, job_candidates(f, bp))


POLICIES: dict[str, Callable] = {"oracle": oracle_policy, "replan": replan_policy,
                                 "tabu": tabu_policy, "pess": pess_policy,
                                 "bayes": bayes_policy}


def get_policy(name: str) -> Callable:
  if name not in POLICIES:
    raise ValueError(f"unknown baseline {name!r}; valid: {sorted(POLICIES)}")
  return POLICIES[name]


# ---------------------------------------------------------------------------------- task v2
@struct.dataclass
class V2Params:
  """Tables for the v2 (stability target) greedy baselines."""
  bp: BaselineParams
  pair_ok: jax.Array        # [K+1, K+1]
  route_pump: jax.Array     # [K]
  dheel: jax.Array          # [K] heel change (deg) per m3 moved along route k (small angle)
  dtrim: jax.Array          # [K] trim change (m) per m3
  cap: jax.Array            # [T]
  step_vol: jax.Array       # [P] pump rate * dt (m3)
  heel_tol: float = 0.5
  trim_tol: float = 0.1
  oracle: bool = False


def make_v2_params(env_params: EnvParams, oracle: bool = False) -> V2Params:
  p = env_params
  tcg = jnp.concatenate([p.tcg, jnp.zeros(1)])
  lcg_arm = jnp.concatenate([p.lcg - p.lcf, jnp.zeros(1)])
  d_mh = p.rho * (tcg[p.route_dst] - tcg[p.route_src])
  d_mt = p.rho * (lcg_arm[p.route_dst] - lcg_arm[p.route_src])
  return V2Params(bp=make_params(p, bayes=False), pair_ok=p.pair_ok, route_pump=p.route_pump,
                  dheel=d_mh / (p.displacement * p.gm) / (np.pi / 180.0),
                  dtrim=d_mt / (100.0 * p.mctc), cap=p.cap,
                  step_vol=p.pump_rate * p.dt_h, heel_tol=p.heel_tol, trim_tol=p.trim_tol,
                  oracle=oracle)


def v2_predict(vp: V2Params, f: dict[str, jax.Array]):
  """Greedy controller's one-step model from an observation's fields f.

  Returns (heel deg, trim error m, v[K] predicted m3 moved along each route this step,
  g[K] conductance used: the true one if vp.oracle, else the believed prod chat_e, 0 if
  known-bad). V_k = min(rate_p * dt * g_k, water at the source, room at the sink).
  """
  bp = vp.bp
  heel = f["heel"][0] * 2.0  # obs stores heel / heel_warn (2 deg)
  trim = f["trim_err"][0]
  if_oracle = jnp.maximum(f["clog_revealed"], 0.0)
  g_true = jnp.prod(jnp.where(bp.route_edges, if_oracle[None, :], 1.0), axis=-1)
  _, chat, _, n_contain, _ = evidence(f, bp)
  g_bel = jnp.exp(bp.route_edges.astype(jnp.float32) @ jnp.log(jnp.maximum(chat, 0.05)))
  g_bel = jnp.where(n_contain > 0, 0.0, g_bel)
  g = jnp.where(vp.oracle, g_true, g_bel)
  vol = jnp.concatenate([f["level"] * vp.cap, jnp.array([jnp.inf])])
  cap = jnp.concatenate([vp.cap, jnp.array([jnp.inf])])
  avail = jnp.maximum(vol[bp.route_src], 0.0)
  room = jnp.maximum(cap[bp.route_dst] - vol[bp.route_dst], 0.0)
  v = jnp.minimum(jnp.minimum(vp.step_vol[vp.route_pump] * g, avail), room)
  return heel, trim, jnp.where(bp.route_mask, v, 0.0), g


def v2_error(vp: V2Params, heel, trim):
  """Normalised squared stability error (heel/heel_tol)^2 + (trim_err/trim_tol)^2."""
  return (heel / vp.heel_tol) ** 2 + (trim / vp.trim_tol) ** 2


def v2_after(vp: V2Params, heel, trim, v, k):
  """(heel, trim) after the predicted move v[k] on route k (unchanged if k is NOOP = K_MAX)."""
  kk = jnp.minimum(k, K_MAX - 1)
  vk = jnp.where(k < K_MAX, v[kk], 0.0)
  return heel + vp.dheel[kk] * vk, trim + vp.dtrim[kk] * vk


def v2_pump_errors(vp: V2Params, heel, trim, v, pump: int, partner=K_MAX):
  """err[K+1]: error after each route of `pump` (inf if it moves <= 1 m3 or clashes with the
  partner route), last entry NOOP (the current error)."""
  bp = vp.bp
  e = v2_error(vp, heel + vp.dheel * v, trim + vp.dtrim * v)
  ok = bp.route_mask & (vp.route_pump == pump) & (v > 1.0) & vp.pair_ok[partner, :K_MAX]
  return jnp.concatenate([jnp.where(ok, e, jnp.inf), v2_error(vp, heel, trim)[None]])


def v2_greedy_policy(vp: V2Params, obs: jax.Array, key=None) -> jax.Array:
  """Greedy two-pump stability controller (the v2 baseline; B-oracle-v2 if vp.oracle).

  Predicted move on route k (`v2_predict`): V_k = min(rate*dt*g_k, water at the source, room at
  the sink) with g_k the true conductance (oracle) or the believed one (prod chat_e, 0 if
  known-bad: the B-replan evidence). Pump 0 takes the route (or NOOP) minimising the normalised
  squared error (heel/heel_tol)^2 + (trim_err/trim_tol)^2 after the move; pump 1 then does the
  same given pump 0's move, among routes that share no edge with it.
  """
  heel, trim, v, _ = v2_predict(vp, split_obs(obs))
  k0 = argmin_first(v2_pump_errors(vp, heel, trim, v, 0), K_MAX)
  h1, t1 = v2_after(vp, heel, trim, v, k0)
  k1 = argmin_first(v2_pump_errors(vp, h1, t1, v, 1, k0), K_MAX)
  return jnp.stack([k0, k1]).astype(jnp.int32)
