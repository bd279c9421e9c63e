"""The clog-aware oracle of BallastHydro-v0: a bound on every policy's decision steps.

The oracle sees the true clogs (obs field `clog_revealed`, HydroParams.reveal_clog=True) and plans
over the SAME action set as every comparator: one command per pump (int32[P]), heel-aware
(hydro_baselines.hydro_policy with the real resistances). Earlier records used one command per
step for the oracle while the heel-aware replanner commanded every pump, so the "oracle" took
21.0 steps where the replanner took 13.9 (issue #37): no bound.

Forms: `oracle_params(p, n_cmds)` commands up to n_cmds pumps (1 <= n_cmds <= P). The bound is
the portfolio over the forms n_cmds = 1..P: with full information the oracle can simulate each
form on the episode (sounding noise is drawn from the step key, independent of the action, so
the simulation is the episode) and keep the fastest,

    steps_oracle(i) = min_{n=1..P} steps_eff(form n, episode i),

steps_eff counting a failed episode at the step limit. By construction it is <= each oracle
form on every episode; that it is <= every other policy's mean is an empirical property, tested
(tests/envs/ballast/test_ballast_oracle.py, per episode with `bound_check`) and checked on
every ballast_hydro record (`hydro_tables.oracle_bound`: per group x regime, the oracle's mean
at most every policy's upper CI end; the record's "oracle_bound").
"""

from __future__ import annotations

from typing import Callable, Mapping

import jax
import numpy as np

from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast.hydro_env import HydroParams


def n_pumps(p: HydroParams) -> int:
  """Pumps the layout has (static: sets the oracle's forms)."""
  return int(np.asarray(p.pump_mask).sum())


def oracle_params(p: HydroParams, n_cmds: int | None = None):
  """(env params with the clogs revealed, the oracle's baseline params) commanding up to n_cmds
  pumps (default: every pump)."""
  P = n_pumps(p)
  n = P if n_cmds is None else int(n_cmds)
  if not 1 <= n <= max(P, 1):
    raise ValueError(f"oracle n_cmds={n_cmds} must be in 1..{P} (the layout's pumps)")
  pp = p.replace(reveal_clog=True)
  return pp, HB.make_hydro_baseline(pp, "oracle", n_cmds=n)


def steps_eff(out: Mapping[str, np.ndarray], max_steps: int) -> np.ndarray:
  """Decision steps with a failed episode counted at the step limit, float64 [..., N]."""
  return np.where(np.asarray(out["success"]), np.asarray(out["steps"]),
                  max_steps).astype(np.float64)


def run_oracle(evaluate: Callable, p: HydroParams, idx, keys, max_steps: int) -> dict:
  """Scores every oracle form on the paired episodes (idx, keys) with `evaluate`
  (hydro_rollout.make_hydro_evaluate(env, hydro_policy, max_steps)) and returns the portfolio:
  per episode the outputs of the fastest form ("form": its n_cmds, int [N]), numpy arrays."""
  outs = []
  for n in range(1, max(n_pumps(p), 1) + 1):
    pp, bp = oracle_params(p, n)
    outs.append(jax.device_get(evaluate(pp, bp, idx, keys)))
  eff = np.stack([steps_eff(o, max_steps) for o in outs])             # [F, N]
  best = np.argmin(eff, axis=0)                                       # first form on ties
  pick = lambda k: np.take_along_axis(np.stack([np.asarray(o[k]) for o in outs]),
                                      best.reshape((1, -1) + (1,) * (np.ndim(outs[0][k]) - 1)),
                                      0)[0]
  res = {k: pick(k) for k in outs[0] if k != "final_carry"}
  res["form"] = best + 1
  return res


def bound_check(oracle_eff: np.ndarray, others: Mapping[str, np.ndarray], n_boot: int = 2000,
                seed: int = 0) -> dict[str, dict]:
  """Whether the oracle is a bound on each policy, on the same episodes.

  d_i = (others[name] averaged over seeds, [N] or [S, N]) - oracle_eff[i]: how many steps the
  policy needs beyond the oracle on episode i. The bound holds for `name` when the percentile
  bootstrap 95% CI of mean(d) reaches 0 or above (hi >= 0): the oracle is not significantly
  slower. Returns {name: {"mean", "lo", "hi", "bound"}}.
  """
  rng = np.random.default_rng(seed)
  o = np.asarray(oracle_eff, np.float64)
  res = {}
  for name, x in others.items():
    d = np.atleast_2d(np.asarray(x, np.float64)).mean(0) - o
    b = d[rng.integers(0, d.size, (n_boot, d.size))].mean(1)
    lo, hi = np.quantile(b, [0.025, 0.975])
    res[name] = {"mean": float(d.mean()), "lo": float(lo), "hi": float(hi),
                 "bound": bool(hi >= 0.0)}
  return res
