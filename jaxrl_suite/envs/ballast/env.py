"""BallastNet-v0: ballast-water routing with hidden pipe clogs and level-only sensing.

Pure gymnax environment (docs/ballast.md). A ship's ballast
system is a pipe graph (layout JSON -> `routes.build_routes`); an action commands one library route
(pump + valve line-up) for one step of `dt` hours. Each pipe edge e has a hidden conductance
clog_e in {1 (clear), c in [0.15, 0.5] (partial), 0 (blocked)}; a route's conductance is the
product over its edges, g_k = prod_{e in k} clog_e, and it moves

  dV = min(rate_p * dt * g_k, water available at the source, room at the sink)      [m3]

where in task v1 the "available/room" limits stop at the plan targets (the per-tank setpoints of
the chief officer's plan; physical limits 0..cap always apply). There are no flow sensors: the
agent sees noisy soundings vol + N(0, (sigma*cap)^2), the level change between soundings, and the
observed ratio r = observed |dV| / commanded nominal dV on the route it commanded.

Hydrostatics are linear (design doc 3.3):
  heel  = atan((rho * sum_t vol_t * tcg_t + M_heel0) / (Delta * GM))              [deg]
  trim  = (rho * sum_t vol_t * (lcg_t - LCF) + M_trim0) / (100 * MCTC)             [m]

Evidence (shared belief of design doc 4.5, kept in the state because it is a pure function of the
observation history -- commands and soundings -- and put in the observation so that baselines,
which are stateless policies, and the agent see the same evidence):
  r < r_fail           -> record failure set  f = edges(k) minus confirmed-good edges (ring of F)
  r > r_good           -> edges(k) become confirmed good, believed conductance chat_e = 1
  otherwise            -> chat_e = min(chat_e, max(r, 0.05)) on unconfirmed edges of k, and a
                          "partial" set is recorded.
Only informative commands (commanded nominal dV >= info_vol m3, an absolute volume well above the
sounding noise, so the rule does not change with dt) update the evidence.

Tasks (the task is a constructor argument because it changes the action shape):
  v1 "ballast plan": per-tank targets; success when every |vol - target| < tol. Action:
     Discrete(K_MAX + 1), index K_MAX = NOOP.
  v2 "stability target": reach |heel| < heel_tol and |trim - trim*| < trim_tol using any tanks,
     two pumps at once. Action int32[2] = (route for pump 0, route for pump 1), each in
     [0, K_MAX] (K_MAX = NOOP); a second route that shares an edge with the first or uses the same
     pump is ignored (treated as NOOP) -- `action_mask` and `pair_ok` let a policy avoid that.

Reward: -1 per step + gamma*Phi(s') - Phi(s) - heel_pen*[|heel| > heel_warn] + success_bonus
  - capsize_pen*[|heel| > heel_max]; Phi_v1 = -sum|vol - target| / (rate * dt),
  Phi_v2 = -(|heel| / 1 deg + |trim - trim*| / 0.25 m).
Termination: success or |heel| > heel_max; truncation at max_steps_in_episode (T_limit).

Observation: flat float32 vector, fields and shapes in `obs_fields()`; use `split_obs` to slice.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_suite.envs.ballast.agent_api import ballast_net_api
# The params struct and the observation layout live in params.py (shared with hydro_env.py and
# imported by the baselines and the agent api, which must not import this module); named here too.
from jaxrl_suite.envs.ballast.params import (DEG, H_HIST, EnvParams, GraphParams,  # noqa: F401
                                             NetBank, graph_arrays, obs_fields, obs_size,
                                             split_obs)
from jaxrl_suite.envs.ballast.routes import E_MAX, F_MAX, K_MAX, P_MAX, T_MAX

NOOP = K_MAX
N_DRAWS = 4  # parallel rejection-sampling clog candidates at reset
JOBS_CAP = 5  # static upper bound of jobs_max
N_PLAN_U = 4 * T_MAX + 5  # uniforms consumed by one plan draw


@struct.dataclass
class EnvState(environment.EnvState):
  """Hidden and observed state of one ship.

  vol[T] m3, target[T] m3, clog[E] (hidden conductance), m_heel0/m_trim0 cargo moments (t*m),
  trim_star target trim (m), level[T] last noisy soundings (m3), dlevel[T] change of soundings,
  last_route[P,E] bool edges commanded last step, last_ratio[P], last_info[P] informative flags,
  good[E] bool, chat[E], exercised[E] bool, fail_sets[F,E] bool, fail_kind[F] int (0 empty,
  1 blocked, 2 partial), fail_route[F] int (-1 empty), fail_ptr int, max_heel deg,
  heel_steps int (steps with |heel| > heel_warn), success bool, history stack of the last H_HIST
  steps (newest first): hist_route[H,E] bool (pump-0 route), hist_ratio[H], hist_dlevel[H,T],
  time int.
  """
  vol: jax.Array
  target: jax.Array
  clog: jax.Array
  m_heel0: jax.Array
  m_trim0: jax.Array
  trim_star: jax.Array
  level: jax.Array
  dlevel: jax.Array
  last_route: jax.Array
  last_ratio: jax.Array
  last_info: jax.Array
  good: jax.Array
  chat: jax.Array
  exercised: jax.Array
  fail_sets: jax.Array
  fail_kind: jax.Array
  fail_route: jax.Array
  fail_ptr: jax.Array
  max_heel: jax.Array
  heel_steps: jax.Array
  success: jax.Array
  hist_route: jax.Array
  hist_ratio: jax.Array
  hist_dlevel: jax.Array
  time: int


def heel_trim(vol: jax.Array, m_heel0, m_trim0, params: EnvParams):
  """Linear hydrostatics: returns (heel deg, trim m) for tank volumes vol[T]."""
  m_heel = params.rho * jnp.sum(vol * params.tcg) + m_heel0
  m_trim = params.rho * jnp.sum(vol * (params.lcg - params.lcf)) + m_trim0
  heel = jnp.arctan(m_heel / (params.displacement * params.gm)) / DEG
  trim = m_trim / (100.0 * params.mctc)
  return heel, trim


def _categorical_icdf(u: jax.Array, w: jax.Array) -> jax.Array:
  """Index i with probability w_i / sum(w), from one uniform u ~ U[0, 1) (inverse CDF).

  Zero-weight entries are never chosen (when sum(w) > 0).
  """
  n = w.shape[0]
  # a prefix-sum matmul: a batched jnp.cumsum (associative scan) is ~10x slower under vmap on CPU
  cs = w @ jnp.asarray(np.triu(np.ones((n, n), np.float32))) if n <= 64 else jnp.cumsum(w)
  return jnp.minimum(jnp.sum(u * cs[-1] >= cs), n - 1)


def _draw_without_replacement(u: jax.Array, w: jax.Array, n: jax.Array):
  """The first n of len(u) sequential weighted draws without replacement (one uniform each).

  Same law as Gumbel-top-n, but it needs len(u) uniforms instead of one Gumbel per entry and no
  sort (XLA:CPU sorts are slow under vmap). Returns (chosen bool[E], idx int[n_max],
  on bool[n_max]).
  """
  chosen = jnp.zeros(w.shape, bool)
  idxs, ons = [], []
  for i in range(u.shape[0]):
    wi = jnp.where(chosen, 0.0, w)
    e = _categorical_icdf(u[i], wi)
    on = (i < n) & (wi[e] > 0)
    chosen = chosen | ((jnp.arange(w.shape[0]) == e) & on)
    idxs.append(e)
    ons.append(on)
  return chosen, jnp.stack(idxs), jnp.stack(ons)


def n_clog_uniforms(params: EnvParams) -> int:
  """Uniforms consumed by one clog draw: two counts, one per blocked/partial slot, one per c."""
  return 2 + (params.p_blocked.shape[-1] - 1) + 2 * (params.p_partial.shape[-1] - 1)


def _sample_clog_u(u: jax.Array, params: EnvParams):
  """clog[E] from `n_clog_uniforms(params)` uniforms; also the blocked edges (idx[NB], on[NB])."""
  nb, npar = params.p_blocked.shape[-1] - 1, params.p_partial.shape[-1] - 1
  n_b = _categorical_icdf(u[0], params.p_blocked)
  n_p = _categorical_icdf(u[1], params.p_partial)
  blocked, b_idx, b_on = _draw_without_replacement(u[2:2 + nb], params.block_w, n_b)
  partial_w = jnp.where(blocked, 0.0, params.partial_w)
  _, p_idx, p_on = _draw_without_replacement(u[2 + nb:2 + nb + npar], partial_w, n_p)
  c_draw = params.partial_lo + (params.partial_hi - params.partial_lo) * u[2 + nb + npar:]
  clog = jnp.where(blocked, 0.0, 1.0)
  for i in range(npar):
    clog = jnp.where((jnp.arange(E_MAX) == p_idx[i]) & p_on[i], c_draw[i], clog)
  return clog, b_idx, b_on


def sample_clog(key: chex.PRNGKey, params: EnvParams) -> jax.Array:
  """Draws clog[E] from the documented prior (design doc 4.3, [design]).

  #blocked ~ Cat(p_blocked) placed on can_block edges with weights block_w (strainers 3x);
  #partial ~ Cat(p_partial) on other edges with weights partial_w (DB branches 2x),
  conductance c ~ U[partial_lo, partial_hi]. Weighted sampling without replacement is done by
  sequential weighted draws (inverse CDF, one uniform per draw).
  """
  return _sample_clog_u(jax.random.uniform(key, (n_clog_uniforms(params),)), params)[0]


def route_conductance(clog: jax.Array, params: EnvParams) -> jax.Array:
  """g[K] = prod over route edges of clog_e (series valves, conductances multiply)."""
  return jnp.prod(jnp.where(params.route_edges, clog[None, :], 1.0), axis=-1)


def _onehot_tank(idx, n=T_MAX + 1):
  return jax.nn.one_hot(idx, n)[:T_MAX]  # SEA (index T) column dropped


def update_evidence(ev, kk, valid, ratio, informative, params):
  """Shared belief update (module docstring) after a command on route kk with observed ratio.

  ev = (good[E], chat[E], exercised[E], fail_sets[F,E], fail_kind[F], fail_route[F], fail_ptr);
  params needs route_edges, r_fail, r_good (BallastNet-v0 and BallastHydro share it).
  """
  good, chat, exercised, fsets, fkind, froute, ptr = ev
  route = params.route_edges[kk] & valid & informative
  fail = route.any() & (ratio < params.r_fail)
  ok = route.any() & (ratio > params.r_good)
  mid = route.any() & ~fail & ~ok
  f = route & ~good
  kind = jnp.where(fail, 1, 2)
  dup = jnp.any(jnp.all(fsets == f[None, :], axis=1) & (fkind == kind))
  add = (fail | mid) & f.any() & ~dup
  fsets = jnp.where(add, fsets.at[ptr].set(f), fsets)
  fkind = jnp.where(add, fkind.at[ptr].set(kind), fkind)
  froute = jnp.where(add, froute.at[ptr].set(kk), froute)
  ptr = jnp.where(add, (ptr + 1) % fsets.shape[0], ptr)
  good = good | (ok & route)
  chat = jnp.where(ok & route, 1.0, chat)
  chat = jnp.where(mid & route & ~good, jnp.minimum(chat, jnp.maximum(ratio, 0.05)), chat)
  exercised = exercised | route
  return good, chat, exercised, fsets, fkind, froute, ptr


class BallastNet(environment.Environment[EnvState, EnvParams]):
  """BallastNet-v0 (see module docstring). `task` is "v1" (ballast plan) or "v2" (stability)."""

  def __init__(self, graph: dict[str, np.ndarray], task: str = "v1", layout_name: str = ""):
    super().__init__()
    if task not in ("v1", "v2"):
      raise ValueError(f"task must be 'v1' or 'v2', got {task!r}")
    self.task = task
    self.layout_name = layout_name
    self._graph = graph

  # ------------------------------------------------------------------ params / spaces
  @property
  def default_params(self) -> EnvParams:
    return EnvParams(**graph_arrays(self._graph, EnvParams.__dataclass_fields__))

  @property
  def agent_api(self):
    """The env-side functions and sizes the agents need (agent_api.BallastNetApi),
    injected into the agent factories so that agents/ never imports envs/."""
    return ballast_net_api()

  @property
  def name(self) -> str:
    return "BallastNet-v0"

  @property
  def num_actions(self) -> int:
    return K_MAX + 1

  def action_space(self, params: EnvParams | None = None):
    if self.task == "v1":
      return spaces.Discrete(K_MAX + 1)
    return spaces.Box(0, K_MAX, (P_MAX,), jnp.int32)

  def observation_space(self, params: EnvParams | None = None):
    return spaces.Box(-jnp.inf, jnp.inf, (obs_size(self.task),), jnp.float32)

  # ------------------------------------------------------------------ reset
  def _draw_plan(self, uni: jax.Array, params: EnvParams):
    """Returns (vol0[T], target[T], m_heel0, m_trim0, trim_star) from N_PLAN_U uniforms `uni`.

    All randomness comes from one uniform vector (one PRNG call): at reset, which the gymnax
    auto-reset evaluates on every step, the PRNG is the dominant cost on CPU.
    """
    T = T_MAX
    u, u_score, u_amt, u_base = (uni[i * T:(i + 1) * T] for i in range(4))
    u_tk, u_tr, u_ta, u_n, u_c = (uni[4 * T + i] for i in range(5))
    cap, tmask = params.cap, params.tank_mask
    if self.task == "v1":
      # Optional transfer job (a listed tank pair, e.g. HP->HS or FPT->APT). Its amount is capped
      # so that it alone accounts for at most half of the start-heel budget (heeling tanks are far
      # apart: 500 m3 across 44 m would be 6 degrees).
      n_tr = jnp.sum(params.route_transfer)
      pick = _categorical_icdf(u_tk, params.route_transfer.astype(jnp.float32))
      s = jnp.minimum(params.route_src[pick], T_MAX - 1)
      d = jnp.minimum(params.route_dst[pick], T_MAX - 1)
      do_tr = (n_tr > 0) & (u_tr < params.p_transfer)
      lever = params.rho * jnp.abs(params.tcg[s] - params.tcg[d])
      a_heel = (jnp.tan(0.5 * params.heel_init_max * DEG) * params.displacement * params.gm /
                jnp.maximum(lever, 1e-6))
      a_tr = jnp.minimum(params.amount_lo + (params.amount_hi - params.amount_lo) * u_ta,
                         jnp.minimum(0.9 * jnp.minimum(cap[s], cap[d]), a_heel))
      m_tr = jnp.where(do_tr, params.rho * a_tr * (params.tcg[s] - params.tcg[d]), 0.0)
      # Up to jobs_max other tanks get a job of 200-800 m3. Directions (fill or deballast) are
      # drawn uniformly among the 2^jobs_max sign patterns whose start heel (relative to the
      # plan's end state, which has zero heel) is within heel_init_max: heel depends only on signs
      # and amounts, so this is exact rejection sampling done by enumeration, not by a loop.
      n_jobs = jnp.minimum(params.jobs_min + jnp.floor(
          u_n * (params.jobs_max - params.jobs_min + 1)).astype(jnp.int32), params.jobs_max)
      busy = do_tr & ((jnp.arange(T_MAX) == s) | (jnp.arange(T_MAX) == d))
      score = jnp.where(tmask & ~busy, u_score, -1.0)
      sel = jax.lax.top_k(score, JOBS_CAP)[1]          # [J] (top_k: no full sort, cheap on CPU)
      sel_on = (jnp.arange(JOBS_CAP) < n_jobs) & (score[sel] >= 0)
      amt = params.amount_lo + (params.amount_hi - params.amount_lo) * u_amt
      amt = jnp.minimum(amt, 0.9 * cap)
      # fill (sign +1) means the tank starts lower: start-minus-end heel moment -a*tcg*rho
      signs = 1.0 - 2.0 * ((jnp.arange(2 ** JOBS_CAP)[:, None] >> jnp.arange(JOBS_CAP)) & 1)
      m_job = params.rho * amt[sel] * params.tcg[sel] * sel_on                 # [J]
      m_combo = m_tr - (signs * m_job[None, :]).sum(-1)                       # [2^J]
      heel_combo = jnp.abs(jnp.arctan(m_combo / (params.displacement * params.gm)) / DEG)
      ok_combo = heel_combo <= params.heel_init_max
      pick_c = jnp.where(ok_combo.any(), _categorical_icdf(u_c, ok_combo.astype(jnp.float32)),
                         jnp.argmin(heel_combo))
      # if no pattern fits (one big wing-tank job), scale all amounts down to the heel budget
      m_lim = jnp.tan(params.heel_init_max * DEG) * params.displacement * params.gm
      shrink = jnp.minimum(1.0, 0.99 * m_lim / jnp.maximum(jnp.abs(m_combo[pick_c]), 1e-6))
      # Any-order heel bound: in v1 every tank's volume stays between its start and its target
      # (moves stop at the setpoints), and the end state has zero heel moment, so at any time
      # |heel moment| <= S = rho * sum_jobs amount * |tcg|. Scaling the plan so that S stays below
      # heel_plan_max (< heel_max) makes every policy's episode free of capsizes whatever the job
      # order. Without it ~4% of plans capsized under the fixed plan order of the baselines
      # (e.g. one 800 m3 heeling-tank fill alone is 5.2 deg), which also cut those episodes short.
      s_any = params.rho * (jnp.sum(amt[sel] * jnp.abs(params.tcg[sel]) * sel_on) +
                            do_tr * a_tr * (jnp.abs(params.tcg[s]) + jnp.abs(params.tcg[d])))
      m_any = jnp.tan(params.heel_plan_max * DEG) * params.displacement * params.gm
      shrink = shrink * jnp.minimum(1.0, 0.99 * m_any / jnp.maximum(shrink * s_any, 1e-6))
      amt, a_tr = amt * shrink, a_tr * shrink
      job = jnp.zeros(T_MAX, bool).at[sel].set(sel_on)
      fill = jnp.zeros(T_MAX, bool).at[sel].set(signs[pick_c] > 0)
      base = (0.1 + 0.8 * u_base) * cap
      vol0 = jnp.where(job, jnp.where(fill, u * (cap - amt), amt + u * (cap - amt)), base)
      target = jnp.where(job, jnp.where(fill, vol0 + amt, vol0 - amt), base)
      oh_s, oh_d = _onehot_tank(s), _onehot_tank(d)
      vs = a_tr + u * (cap - a_tr)       # source starts with at least a_tr
      vd = u * (cap - a_tr)              # sink has room for a_tr
      vol0 = jnp.where(do_tr, vol0 * (1 - oh_s - oh_d) + vs * oh_s + vd * oh_d, vol0)
      target = jnp.where(do_tr, target * (1 - oh_s - oh_d) + (vs - a_tr) * oh_s +
                         (vd + a_tr) * oh_d, target)
      vol0, target = vol0 * tmask, target * tmask
      trim_star = jnp.zeros(())
      m_heel0 = -params.rho * jnp.sum(target * params.tcg)
      m_trim0 = -params.rho * jnp.sum(target * (params.lcg - params.lcf))
    else:
      vol0 = (0.2 + 0.6 * u) * cap * tmask
      target = vol0
      sgn = jnp.where(u_score[:2] < 0.5, 1.0, -1.0)
      h0 = sgn[0] * (params.heel0_lo + (params.heel0_hi - params.heel0_lo) * u_amt[0])
      tr0 = sgn[1] * (params.trim0_lo + (params.trim0_hi - params.trim0_lo) * u_amt[1])
      trim_star = jnp.zeros(())
      m_heel0 = (jnp.tan(h0 * DEG) * params.displacement * params.gm -
                 params.rho * jnp.sum(vol0 * params.tcg))
      m_trim0 = (tr0 * 100.0 * params.mctc -
                 params.rho * jnp.sum(vol0 * (params.lcg - params.lcf)))
    return vol0, target, m_heel0, m_trim0, trim_star

  def _routes_ok(self, vol0, target, b_idx, b_on, params: EnvParams):
    """Every v1 job keeps a fill/deballast route avoiding the blocked edges b_idx[b_on].

    Uses the packed route bit sets of `routes.build_routes`: O(#blocked * K/32 + T * K/32) word
    ops instead of a [K, E] product, because reset runs on every auto-reset step.
    """
    bits = jnp.where(b_on[:, None], params.edge_route_bits[b_idx], jnp.uint32(0))  # [NB, W]
    dead = bits[0]
    for i in range(1, bits.shape[0]):
      dead = dead | bits[i]
    fill_ok = jnp.any((params.fill_bits & ~dead) != 0, axis=-1)     # [T]
    drain_ok = jnp.any((params.drain_bits & ~dead) != 0, axis=-1)
    need_fill = target - vol0 > params.tol
    need_drain = vol0 - target > params.tol
    return jnp.all((~need_fill | fill_ok) & (~need_drain | drain_ok))

  def _generate(self, key, params: EnvParams):
    """(vol0, target, m_heel0, m_trim0, trim_star, clog) from the generator (see reset_env)."""
    n_c = n_clog_uniforms(params)
    uni = jax.random.uniform(key, (N_PLAN_U + N_DRAWS * n_c,))
    vol0, target, mh, mt, ts = self._draw_plan(uni[:N_PLAN_U], params)
    clogs, b_idx, b_on = jax.vmap(_sample_clog_u, in_axes=(0, None))(
        uni[N_PLAN_U:].reshape(N_DRAWS, n_c), params)
    ok = jax.vmap(self._routes_ok, in_axes=(None, None, 0, 0, None))(vol0, target, b_idx, b_on,
                                                                       params)
    clog = jnp.where(ok.any(), clogs[jnp.argmax(ok)],
                     jnp.where(clogs[0] <= 0.0, 1.0, clogs[0]))
    return vol0, target, mh, mt, ts, clog

  def reset_env(self, key: chex.PRNGKey, params: EnvParams) -> tuple[jax.Array, EnvState]:
    # One plan, then rejection sampling of the clogs without a data-dependent loop: N_DRAWS clog
    # candidates in parallel, keep the first with which every job keeps a route (v1: about 93%
    # of single draws pass on ring14; v2 has no per-tank jobs, so all pass). If none passes
    # (p ~ 1e-5), keep candidate 0 with its blocked edges cleared (partial clogs kept), so every
    # episode is feasible. The start heel is within heel_init_max by construction of the plan.
    # Law: plan ~ generator, clogs ~ prior | plan feasible. A while_loop would be cheaper per ship
    # but, under vmap, runs until the unluckiest ship of the batch is done. Everything random
    # comes from one uniform vector: the gymnax auto-reset evaluates reset_env on every step, so
    # its cost (PRNG bits, sorts) bounds the vmapped step rate.
    key, knoise = jax.random.split(key)
    if params.bank is not None:   # a checked bank (net_bank): one row, uniformly
      i = jax.random.randint(key, (), 0, params.bank.vol0.shape[0])
      row = jax.tree.map(lambda x: x[i], params.bank)
      vol0, target, mh, mt, clog = row.vol0, row.target, row.m_heel0, row.m_trim0, row.clog
      ts = jnp.zeros(())
    else:
      vol0, target, mh, mt, ts, clog = self._generate(key, params)
    level = vol0 + params.sigma_level * params.cap * jax.random.normal(knoise, (T_MAX,))
    heel, _ = heel_trim(vol0, mh, mt, params)
    state = EnvState(
        vol=vol0, target=target, clog=clog, m_heel0=mh, m_trim0=mt, trim_star=ts,
        level=level * params.tank_mask, dlevel=jnp.zeros(T_MAX),
        last_route=jnp.zeros((P_MAX, E_MAX), bool), last_ratio=jnp.zeros(P_MAX),
        last_info=jnp.zeros(P_MAX, bool), good=jnp.zeros(E_MAX, bool),
        chat=jnp.ones(E_MAX), exercised=jnp.zeros(E_MAX, bool),
        fail_sets=jnp.zeros((F_MAX, E_MAX), bool), fail_kind=jnp.zeros(F_MAX, jnp.int32),
        fail_route=jnp.full(F_MAX, -1, jnp.int32), fail_ptr=jnp.int32(0),
        max_heel=jnp.abs(heel), heel_steps=jnp.int32(0), success=jnp.array(False),
        hist_route=jnp.zeros((H_HIST, E_MAX), bool), hist_ratio=jnp.zeros(H_HIST),
        hist_dlevel=jnp.zeros((H_HIST, T_MAX)), time=0)
    return self.get_obs(state, params), state

  # ------------------------------------------------------------------ step
  def _move(self, vol, target, k, clog, params: EnvParams):
    """Moves water along route k (NOOP if k == K_MAX or padded).

    Returns (vol', nominal dV, valid, clipped k, src, dst, rate*dt, moved dV).
    """
    valid = (k < K_MAX) & params.route_mask[jnp.minimum(k, K_MAX - 1)]
    kk = jnp.minimum(k, K_MAX - 1)
    src, dst = params.route_src[kk], params.route_dst[kk]
    g = jnp.prod(jnp.where(params.route_edges[kk], clog, 1.0))
    rate = params.pump_rate[params.route_pump[kk]] * params.dt_h
    vol_ext = jnp.concatenate([vol, jnp.array([jnp.inf])])
    if self.task == "v1":  # plan setpoints stop the transfer at the target level
      floor = jnp.concatenate([jnp.maximum(target, 0.0), jnp.array([-jnp.inf])])
      ceil = jnp.concatenate([jnp.minimum(target, params.cap), jnp.array([jnp.inf])])
    else:
      floor = jnp.concatenate([jnp.zeros(T_MAX), jnp.array([-jnp.inf])])
      ceil = jnp.concatenate([params.cap, jnp.array([jnp.inf])])
    avail = jnp.where(src == T_MAX, jnp.inf, vol_ext[src] - floor[src])
    room = jnp.where(dst == T_MAX, jnp.inf, ceil[dst] - vol_ext[dst])
    limit = jnp.maximum(jnp.minimum(avail, room), 0.0)
    nominal = jnp.where(valid, jnp.minimum(rate, limit), 0.0)
    dv = jnp.where(valid, jnp.minimum(rate * g, limit), 0.0)
    vol = vol + dv * (_onehot_tank(dst) - _onehot_tank(src))
    vol = jnp.clip(vol, 0.0, params.cap)  # float safety; dv already respects the limits
    return vol, nominal, valid, kk, src, dst, rate, dv

  def _update_evidence(self, ev, kk, valid, ratio, informative, params: EnvParams):
    return update_evidence(ev, kk, valid, ratio, informative, params)

  def step_env(self, key: chex.PRNGKey, state: EnvState, action, params: EnvParams):
    acts = jnp.reshape(jnp.asarray(action, jnp.int32), (-1,))
    if self.task == "v1":
      acts = acts[:1]
    else:  # a second route that clashes with the first becomes NOOP
      a0 = jnp.clip(acts[0], 0, K_MAX)
      a1 = jnp.clip(acts[1], 0, K_MAX)
      acts = jnp.stack([a0, jnp.where(params.pair_ok[a0, a1], a1, K_MAX)])
    vol = state.vol
    moves, dvs = [], []
    for k in acts:
      k = jnp.clip(k, 0, K_MAX)
      vol, nominal, valid, kk, src, dst, rate, dv = self._move(vol, state.target, k, state.clog,
                                                                params)
      moves.append((nominal, valid, kk, src, dst, rate))
      dvs.append(dv)
    level = vol + params.sigma_level * params.cap * jax.random.normal(key, (T_MAX,))
    level = level * params.tank_mask
    dlevel = level - state.level
    ev = (state.good, state.chat, state.exercised, state.fail_sets, state.fail_kind,
          state.fail_route, state.fail_ptr)
    ratios, infos, routes = [], [], []
    dlev_ext = jnp.concatenate([dlevel, jnp.zeros(1)])
    for nominal, valid, kk, src, dst, rate in moves:
      # observed moved volume: level rise at the sink, fall at the source (mean of both ends)
      up = jnp.where(dst < T_MAX, dlev_ext[dst], 0.0)
      down = jnp.where(src < T_MAX, -dlev_ext[src], 0.0)
      n_ends = (dst < T_MAX).astype(jnp.float32) + (src < T_MAX).astype(jnp.float32)
      obs_dv = (up + down) / jnp.maximum(n_ends, 1.0)
      informative = valid & (nominal >= params.info_vol)
      ratio = jnp.where(valid, jnp.abs(obs_dv) / jnp.maximum(nominal, 1.0), 0.0)
      ev = self._update_evidence(ev, kk, valid, ratio, informative, params)
      ratios.append(ratio)
      infos.append(informative)
      routes.append(params.route_edges[kk] & valid)
    pad = P_MAX - len(moves)
    ratios += [jnp.zeros(())] * pad
    infos += [jnp.array(False)] * pad
    routes += [jnp.zeros(E_MAX, bool)] * pad
    heel, trim = heel_trim(vol, state.m_heel0, state.m_trim0, params)
    success = self._success(vol, state.target, heel, trim, state.trim_star, params)
    capsized = jnp.abs(heel) > params.heel_max
    phi0 = self._potential(state.vol, state, params)
    new = state.replace(
        vol=vol, level=level, dlevel=dlevel, last_route=jnp.stack(routes),
        last_ratio=jnp.stack(ratios), last_info=jnp.stack(infos), good=ev[0], chat=ev[1],
        exercised=ev[2], fail_sets=ev[3], fail_kind=ev[4], fail_route=ev[5], fail_ptr=ev[6],
        max_heel=jnp.maximum(state.max_heel, jnp.abs(heel)),
        heel_steps=state.heel_steps + (jnp.abs(heel) > params.heel_warn),
        success=success,
        hist_route=jnp.concatenate([routes[0][None], state.hist_route[:-1]]),
        hist_ratio=jnp.concatenate([ratios[0][None], state.hist_ratio[:-1]]),
        hist_dlevel=jnp.concatenate([dlevel[None] / (params.pump_rate[0] * params.dt_h),
                                     state.hist_dlevel[:-1]]),
        time=state.time + 1)
    phi1 = jnp.where(success, 0.0, self._potential(vol, new, params))
    reward = (-1.0 + params.gamma * phi1 - phi0 -
              params.heel_pen * (jnp.abs(heel) > params.heel_warn) +
              params.success_bonus * success - params.capsize_pen * capsized)
    terminated = success | capsized
    dv = jnp.stack(dvs + [jnp.zeros(())] * pad)
    info = {"success": success, "heel": heel, "trim": trim, "clog": state.clog, "dv": dv,
            "route_src": jnp.stack([m[3] for m in moves] + [jnp.int32(T_MAX)] * pad),
            "route_dst": jnp.stack([m[4] for m in moves] + [jnp.int32(T_MAX)] * pad)}
    return self.get_obs(new, params), new, reward.astype(jnp.float32), terminated, info

  def _success(self, vol, target, heel, trim, trim_star, params: EnvParams):
    if self.task == "v1":
      return jnp.all((jnp.abs(vol - target) < params.tol) | ~params.tank_mask)
    return (jnp.abs(heel) < params.heel_tol) & (jnp.abs(trim - trim_star) < params.trim_tol)

  def _potential(self, vol, state: EnvState, params: EnvParams):
    if self.task == "v1":
      return -jnp.sum(jnp.abs(vol - state.target) * params.tank_mask) / (
          params.pump_rate[0] * params.dt_h)
    heel, trim = heel_trim(vol, state.m_heel0, state.m_trim0, params)
    return -(jnp.abs(heel) / 1.0 + jnp.abs(trim - state.trim_star) / 0.25)

  # ------------------------------------------------------------------ observation, masks
  def get_obs(self, state: EnvState, params: EnvParams | None = None, key=None) -> jax.Array:
    params = self.default_params if params is None else params
    cap = jnp.where(params.tank_mask, params.cap, 1.0)
    heel, trim = heel_trim(state.vol, state.m_heel0, state.m_trim0, params)
    need_fill, need_drain = self._needs(state, params)
    rate = params.pump_rate[0] * params.dt_h
    fields = {
        "level": state.level / cap, "target": state.target / cap * params.tank_mask,
        "dlevel": state.dlevel / rate, "need_fill": need_fill, "need_drain": need_drain,
        "tank_mask": params.tank_mask, "last_route": state.last_route,
        "last_ratio": state.last_ratio, "last_info": state.last_info,
        "heel": heel[None] / params.heel_warn, "trim_err": (trim - state.trim_star)[None],
        "time": jnp.array([state.time / params.max_steps_in_episode]),
        "good": state.good, "chat": state.chat, "exercised": state.exercised,
        "edge_mask": params.edge_mask, "fail_sets": state.fail_sets,
        "fail_kind": state.fail_kind, "fail_route": state.fail_route,
        "clog_revealed": jnp.where(params.reveal_clog, state.clog, -1.0),
        "hist_route": state.hist_route, "hist_ratio": state.hist_ratio,
        "hist_dlevel": state.hist_dlevel}
    return jnp.concatenate([jnp.ravel(fields[n]).astype(jnp.float32)
                            for n, _ in obs_fields(self.task)])

  def _needs(self, state: EnvState, params: EnvParams):
    """Plan status lamps (v1): tank below / above its target by more than `tol`."""
    if self.task == "v1":
      need_fill = (state.target - state.vol > params.tol) & params.tank_mask
      need_drain = (state.vol - state.target > params.tol) & params.tank_mask
    else:
      need_fill = jnp.zeros(T_MAX, bool)
      need_drain = jnp.zeros(T_MAX, bool)
    return need_fill, need_drain

  def action_mask(self, state: EnvState, params: EnvParams) -> jax.Array:
    """v1: bool[K+1], routes that make plan progress (plus NOOP, always valid).

    A route is useful when its sink tank needs filling (or is SEA) and its source tank needs
    draining (or is SEA). v2: bool[P, K+1], routes of pump p whose source is not empty and sink
    not full (plus NOOP); the pair constraint is `params.pair_ok`.
    """
    if self.task == "v1":
      need_fill, need_drain = self._needs(state, params)
      nf = jnp.concatenate([need_fill, jnp.array([True])])
      nd = jnp.concatenate([need_drain, jnp.array([True])])
      useful = params.route_mask & nf[params.route_dst] & nd[params.route_src]
      return jnp.concatenate([useful, jnp.array([True])])
    vol_ext = jnp.concatenate([state.vol, jnp.array([jnp.inf])])
    cap_ext = jnp.concatenate([params.cap, jnp.array([jnp.inf])])
    ok = (params.route_mask & (vol_ext[params.route_src] > 1.0) &
          (vol_ext[params.route_dst] < cap_ext[params.route_dst] - 1.0))
    per_pump = ok[None, :] & (params.route_pump[None, :] == jnp.arange(P_MAX)[:, None])
    return jnp.concatenate([per_pump, jnp.ones((P_MAX, 1), bool)], axis=1)

  def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
    heel, _ = heel_trim(state.vol, state.m_heel0, state.m_trim0, params)
    return state.success | (jnp.abs(heel) > params.heel_max)

  def is_terminal(self, state: EnvState, params: EnvParams) -> jax.Array:
    return self.is_terminated(state, params) | (state.time >= params.max_steps_in_episode)
