"""Episode banks for BallastHydro-v0: per-layout clog prior, every episode oracle-finishable.

`make_bank(layout, graph, params, n, seed)` draws n episodes (start volumes, plan targets,
cargo moments, hidden clogs) for one layout:

  1. Clog prior of the layout: `clog_prior` in the layout file, else the documented default
     P(#blocked = 0..3) = .3/.4/.2/.1 on can_block edges (strainers 3x the weight of mains),
     P(#partial = 0..2) = .6/.3/.1 on any edge (double-bottom branches 2x), severity
     c ~ U[0.15, 0.5]. The bank is stratified: exactly round(n * P(#blocked = b)) episodes (by
     largest remainder) have b blocked edges, so the documented law of #blocked holds on ANY
     layout (BallastNet-v0's rejection sampling let it drift with the layout: .36/.49/.14/.02
     on direct10). Conditional on b, the placement, partial clogs and plan are drawn, then
     accepted only if finishable (2, 3).
  2. Plan: 2-5 tanks change by 200-800 m3 (fill or deballast), plus with probability 0.5 one
     listed transfer pair; the cargo moments make the plan end upright and at even trim; the
     start heel must lie within heel_init_max (default half the heel limit), the start trim
     within half the ship's trim limit, and the start's and the target's draughts within the
     draught limits (stability.ship_limits). Each job must keep a route that avoids the
     blocked edges.
  3. Finishable: the heel-aware oracle (hydro_baselines, true clogs, one route at a time,
     noiseless soundings) must complete the plan within the step limit without crossing a
     limit (heel, GM, trim, draught); candidates it fails are rejected and counted.
  The report gives, per #blocked stratum, candidates drawn, rejections (no route / oracle failed)
  and accepted episodes, plus counts per regime (none / 1 blocked / >=2 blocked / partial only).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.ballast import stability as S

DEFAULT_PRIOR = {"p_blocked": [0.3, 0.4, 0.2, 0.1], "p_partial": [0.6, 0.3, 0.1],
                 "partial_lo": 0.15, "partial_hi": 0.5}
PLAN = {"jobs_min": 2, "jobs_max": 5, "amount_lo": 200.0, "amount_hi": 800.0,
        "p_transfer": 0.5}
REGIMES = ("none", "1 blocked", ">=2 blocked", "partial only")


def layout_prior(layout: Mapping[str, Any]) -> dict[str, Any]:
  """The layout's clog prior (its `clog_prior` block over the documented defaults)."""
  return {**DEFAULT_PRIOR, **layout.get("clog_prior", {})}


def quotas(n: int, p: np.ndarray) -> np.ndarray:
  """Integer counts summing to n closest to n * p (largest remainder)."""
  raw = n * np.asarray(p, np.float64)
  q = np.floor(raw).astype(int)
  q[np.argsort(-(raw - q), kind="stable")[:n - q.sum()]] += 1
  return q


def draw_clog(rng: np.random.Generator, g: Mapping[str, np.ndarray], prior, n_blocked: int):
  """clog[E] with exactly n_blocked blocked edges (weighted, without replacement)."""
  E = g["edge_mask"].shape[0]
  clog = np.ones(E, np.float32)
  w = np.asarray(g["block_w"], np.float64)
  if (w > 0).sum() < n_blocked:
    raise ValueError(f"only {(w > 0).sum()} blockable edges for {n_blocked} blocked")
  blocked = rng.choice(E, n_blocked, replace=False, p=w / w.sum()) if n_blocked else []
  clog[blocked] = 0.0
  pw = np.asarray(g["partial_w"], np.float64) * g["edge_mask"]
  pw[blocked] = 0.0
  n_p = min(int(rng.choice(len(prior["p_partial"]), p=prior["p_partial"])), int((pw > 0).sum()))
  if n_p:
    part = rng.choice(E, n_p, replace=False, p=pw / pw.sum())
    clog[part] = rng.uniform(prior["partial_lo"], prior["partial_hi"], n_p)
  return clog


def plan_within_limits(vol0, target, g, hydro, limits) -> bool:
  """The start trim within half the trim limit, the start's and the target's draughts
  (stability.condition's equations; the plan ends at even trim) within the draught limits."""
  T = int(g["n_tanks"])
  rho, lcf, L = hydro["rho_t_per_m3"], hydro["lcf_m"], limits["length"]
  trim0 = rho * np.sum((vol0[:T] - target[:T]) * (g["lcg"][:T] - lcf)) / (
      100.0 * hydro["mctc_tm_per_cm"])
  ok = abs(trim0) <= 0.5 * limits["trim_max"]
  for vol, trim in ((vol0, trim0), (target, 0.0)):
    mean = limits["draught0"] + rho * np.sum(vol[:T]) / (100.0 * limits["tpc"])
    ends = (mean + trim * (0.5 * L - lcf) / L, mean - trim * (0.5 * L + lcf) / L)
    ok &= mean >= limits["draught_min"] and max(ends) <= limits["draught_max"]
  return bool(ok)


def draw_plan(rng: np.random.Generator, g: Mapping[str, np.ndarray], hydro: Mapping[str, float],
              heel_init_max: float, tries: int = 200, limits: Mapping[str, float] | None = None):
  """(vol0[T], target[T], m_heel0, m_trim0) with |start heel| <= heel_init_max (deg) and,
  given the ship's `limits` (stability.ship_limits), plan_within_limits."""
  T_pad = g["cap"].shape[0]
  T = int(g["n_tanks"])
  cap, tcg, lcg = g["cap"][:T], g["tcg"][:T], g["lcg"][:T]
  rho, lcf = hydro["rho_t_per_m3"], hydro["lcf_m"]
  m_lim = np.tan(np.radians(heel_init_max)) * hydro["displacement_t"] * hydro["gm_m"]
  pairs = sorted({(int(s), int(d)) for s, d, t, m in zip(g["route_src"], g["route_dst"],
                                                        g["route_transfer"], g["route_mask"])
                  if t and m})
  for _ in range(tries):
    vol0 = (0.1 + 0.8 * rng.random(T)) * cap
    target = vol0.copy()
    busy = np.zeros(T, bool)
    if pairs and rng.random() < PLAN["p_transfer"]:
      s, d = pairs[rng.integers(len(pairs))]
      a = min(rng.uniform(PLAN["amount_lo"], PLAN["amount_hi"]), 0.9 * min(cap[s], cap[d]))
      vol0[s] = a + rng.random() * (cap[s] - a)
      target[s] = vol0[s] - a
      vol0[d] = rng.random() * (cap[d] - a)
      target[d] = vol0[d] + a
      busy[[s, d]] = True
    n_jobs = int(rng.integers(PLAN["jobs_min"], PLAN["jobs_max"] + 1))
    free = np.flatnonzero(~busy)
    for t in rng.choice(free, min(n_jobs, len(free)), replace=False):
      a = min(rng.uniform(PLAN["amount_lo"], PLAN["amount_hi"]), 0.9 * cap[t])
      if rng.random() < 0.5:        # fill: starts lower
        vol0[t] = rng.random() * (cap[t] - a)
        target[t] = vol0[t] + a
      else:
        vol0[t] = a + rng.random() * (cap[t] - a)
        target[t] = vol0[t] - a
    m0 = rho * np.sum((vol0 - target) * tcg)   # start heel moment (plan ends upright)
    if abs(m0) <= m_lim and (limits is None or plan_within_limits(vol0, target, g, hydro,
                                                                   limits)):
      pad = lambda x: np.pad(x, (0, T_pad - T)).astype(np.float32)
      return (pad(vol0), pad(target), float(-rho * np.sum(target * tcg)),
              float(-rho * np.sum(target * (lcg - lcf))))
  raise ValueError(f"no plan with start heel <= {heel_init_max} deg" +
                   (" within the trim and draught limits" if limits else "") +
                   f" in {tries} draws")


def jobs_routable(g, vol0, target, clog, tol: float) -> bool:
  """Every fill (deballast) job keeps a fill (deballast) route avoiding the blocked edges."""
  T = g["cap"].shape[0]
  alive = g["route_mask"] & ~(g["route_edges"] & (clog <= 0)[None, :]).any(-1)
  for t in range(int(g["n_tanks"])):
    if target[t] - vol0[t] > tol and not (alive & (g["route_dst"] == t) &
                                          (g["route_src"] == T)).any():
      return False
    if vol0[t] - target[t] > tol and not (alive & (g["route_src"] == t) &
                                          (g["route_dst"] == T)).any():
      return False
  return True


def regime_of(clog: np.ndarray) -> np.ndarray:
  """Regime index per episode (REGIMES order) from clog[N, E]."""
  nb = (clog <= 0).sum(-1)
  npart = ((clog > 0) & (clog < 1)).sum(-1)
  return np.where(nb >= 2, 2, np.where(nb == 1, 1, np.where(npart > 0, 3, 0)))


def oracle_check(params, evaluate=None) -> Callable[[list, int], np.ndarray]:
  """The finishability check make_bank applies: check(batch, seed) -> bool[len(batch)], True
  where the heel-aware oracle (true clogs, noiseless soundings) completes candidate
  (vol0, target, clog, m_heel0, m_trim0) within the step limit and the heel limit. `evaluate`
  (hydro_rollout.make_hydro_evaluate with hydro_policy) may be passed in so that a caller
  re-checking a bank with it compiles the oracle rollout once."""
  from jaxrl_suite.envs.ballast import hydro_baselines as HB  # local: it imports hydro_env
  from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank
  from jaxrl_suite.envs.ballast.hydro_rollout import make_hydro_evaluate

  if evaluate is None:
    evaluate = make_hydro_evaluate(BallastHydro(), HB.hydro_policy,
                                   int(params.max_steps_in_episode))
  oracle = HB.make_hydro_baseline(params, "oracle")
  return lambda batch, seed: _finished(evaluate, params, oracle, batch, seed, EpisodeBank)


def make_bank(layout: Mapping[str, Any], graph: Mapping[str, np.ndarray], params, n: int = 1024,
              seed: int = 0, heel_init_max: float | None = None, max_rounds: int = 8,
              check: Callable[[list, int], np.ndarray] | None = None):
  """(EpisodeBank, report) for one layout; `params` a HydroParams (any bank) of that layout.

  `check(batch, seed) -> bool[len(batch)]` decides which routable candidates are finishable
  (default `oracle_check(params)`); only candidates it accepts are emitted.
  Raises ValueError naming the layout and stratum if a stratum cannot be filled (too few
  blockable edges, or the oracle cannot finish such episodes) after max_rounds batches.
  """
  from jaxrl_suite.envs.ballast.hydro_env import EpisodeBank  # local, as in oracle_check

  rng = np.random.default_rng(seed)
  prior = layout_prior(layout)
  hydro = layout["hydrostatics"]
  limits = S.ship_limits(layout) if params.stab is not None else None
  heel0 = 0.5 * float(params.heel_limit) if heel_init_max is None else heel_init_max
  want = quotas(n, prior["p_blocked"])
  check = oracle_check(params) if check is None else check
  keep: list[tuple] = []
  # one batch size for every stratum and round: one compiled oracle rollout
  m_batch = int(np.clip(1 << int(np.ceil(np.log2(max(n, 2) / 2))), 16, 256))
  report = {"layout": layout["name"], "n": n, "prior": prior, "strata": []}
  for b, quota in enumerate(want):
    got: list[tuple] = []
    stats = {"n_blocked": b, "quota": int(quota), "drawn": 0, "no_route": 0, "oracle_failed": 0}
    for _ in range(max_rounds if quota else 0):
      batch = []
      while len(batch) < m_batch:
        stats["drawn"] += 1
        vol0, target, mh, mt = draw_plan(rng, graph, hydro, heel0, limits=limits)
        try:
          clog = draw_clog(rng, graph, prior, b)
        except ValueError as err:
          raise ValueError(f"{layout['name']}: cannot place {b} blocked edges ({err}); lower "
                           "clog_prior.p_blocked for this layout") from None
        if not jobs_routable(graph, vol0, target, clog, float(params.tol)):
          stats["no_route"] += 1
          continue
        batch.append((vol0, target, clog, mh, mt))
      ok = np.asarray(check(batch, seed + b), bool)
      stats["oracle_failed"] += int((~ok).sum())
      got += [e for e, o in zip(batch, ok) if o]
      if len(got) >= quota:
        break
    if len(got) < quota:
      raise ValueError(f"{layout['name']}: only {len(got)} of {quota} episodes with {b} "
                       f"blocked edges are finishable by the oracle after {stats['drawn']} "
                       "draws; lower clog_prior.p_blocked or raise max_steps_in_episode")
    stats["accepted"] = int(quota)
    tried = stats["drawn"] - stats["no_route"]
    stats["rejection_rate"] = (stats["no_route"] + stats["oracle_failed"]) / max(stats["drawn"], 1)
    stats["oracle_fail_rate"] = stats["oracle_failed"] / max(tried, 1)
    report["strata"].append(stats)
    keep += [e + (b,) for e in got[:quota]]
  order = rng.permutation(len(keep))
  bank = _stack([keep[i][:5] for i in order], np.array([keep[i][5] for i in order]), EpisodeBank)
  drawn = sum(s["drawn"] for s in report["strata"])
  rejected = sum(s["no_route"] + s["oracle_failed"] for s in report["strata"])
  report["rejection_rate"] = rejected / max(drawn, 1)
  report["oracle_fail_rate"] = (sum(s["oracle_failed"] for s in report["strata"]) /
                                max(drawn - sum(s["no_route"] for s in report["strata"]), 1))
  reg = regime_of(np.asarray(bank.clog))
  report["regimes"] = {name: int((reg == i).sum()) for i, name in enumerate(REGIMES)}
  return bank, report


def _stack(eps, n_blocked, bank_cls):
  vol0, target, clog, mh, mt = (np.stack([e[i] for e in eps]) for i in range(5))
  nb = np.broadcast_to(np.asarray(n_blocked, np.int32), (len(eps),))
  return bank_cls(vol0=jnp.asarray(vol0), target=jnp.asarray(target), clog=jnp.asarray(clog),
                  m_heel0=jnp.asarray(mh, jnp.float32), m_trim0=jnp.asarray(mt, jnp.float32),
                  n_blocked=jnp.asarray(nb))


def _finished(evaluate, params, oracle, batch, seed: int, bank_cls):
  """bool[len(batch)]: the oracle completes candidate i within the step and heel limits."""
  n = len(batch)
  m = 1 << max(int(np.ceil(np.log2(n))), 4)   # = the fixed batch size (one compile)
  cand = _stack(list(batch) + [batch[-1]] * (m - n), 0, bank_cls)
  # noiseless soundings: "finishable" means the oracle can do it; noise is the policy's problem
  p = params.replace(bank=cand, reveal_clog=True, sigma_level=0.0)
  keys = jax.random.split(jax.random.PRNGKey(seed), m)
  out = evaluate(p, oracle.replace(env=p), jnp.arange(m), keys)
  return np.asarray(out["success"])[:n]
