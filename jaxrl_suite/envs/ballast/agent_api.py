"""What the ballast agents (agents/ballast*.py) need from the environment, injected as arguments.

Agents may not import `envs/` (library layering): the environment side builds these NamedTuples
of pure functions and sizes, and the agent factories take them as an argument (the BallastNet
and BallastHydro envs also expose theirs as `env.agent_api`, so the generic `agents.make`
dispatch, which passes the env, needs no change). Every field is a module-level function or an
int, so an api is hashable and can sit in a static (non-pytree) field of the agents' tables.

  BallastNetApi  BallastNet-v0 (v1 route scorer, v2 pump-pair agent): the observation splitter,
                 the replanner's evidence / cost / useful-route functions (baselines.py), the
                 reference diagnoser (diagnosis.py), replan-v2's prediction functions and the
                 padded sizes (K_MAX routes, T_MAX tanks, H_HIST history, #edge kinds).
  HydroApi       BallastHydro-v0 (the recurrent agent): the observation splitter, the
                 heel-aware replanner's tables and predicted moves (hydro_baselines.py), the
                 evidence summary, the reference diagnoser on a hydro observation, #edge kinds.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import diagnosis as D
from jaxrl_suite.envs.ballast import hydro_baselines as HB
# The envs hand these out (`env.agent_api`, a lazy import there), so nothing imported here may
# import env.py or hydro_env.py: the observation layouts come from params.py.
from jaxrl_suite.envs.ballast import params as P
from jaxrl_suite.envs.ballast.layout import EDGE_KINDS
from jaxrl_suite.envs.ballast.routes import K_MAX, T_MAX


class BallastNetApi(NamedTuple):
  split_obs: Callable           # obs [D] -> {field: array} (env.split_obs)
  make_params: Callable         # (env_params, bayes=...) -> baselines.BaselineParams
  evidence: Callable            # (fields, bp) -> (good, chat, cand, n_contain, edge_count)
  useful_routes: Callable       # (fields, bp) -> bool[K]
  job_candidates: Callable      # (fields, bp) -> bool[K]
  believed_cost: Callable       # (chat, bp) -> [K]
  replan_policy: Callable       # (bp, obs) -> route index
  reference_diagnosis: Callable  # (obs, env_params) -> bool[E]
  make_v2_params: Callable      # (env_params, oracle=...) -> baselines.V2Params
  v2_predict: Callable
  v2_after: Callable
  v2_pump_errors: Callable
  v2_error: Callable
  v2_greedy_policy: Callable
  argmin_first: Callable
  k_max: int                    # routes (padded); index k_max = NOOP
  t_max: int                    # tanks (padded); index t_max = the sea
  h_hist: int                   # commanded-route history length in the observation
  n_edge_kinds: int


def ballast_net_api() -> BallastNetApi:
  return BallastNetApi(
      split_obs=P.split_obs, make_params=B.make_params, evidence=B.evidence,
      useful_routes=B.useful_routes, job_candidates=B.job_candidates,
      believed_cost=B.believed_cost, replan_policy=B.replan_policy,
      reference_diagnosis=D.reference_diagnosis, make_v2_params=B.make_v2_params,
      v2_predict=B.v2_predict, v2_after=B.v2_after, v2_pump_errors=B.v2_pump_errors,
      v2_error=B.v2_error, v2_greedy_policy=B.v2_greedy_policy, argmin_first=B.argmin_first,
      k_max=K_MAX, t_max=T_MAX, h_hist=P.H_HIST, n_edge_kinds=len(EDGE_KINDS))


class HydroApi(NamedTuple):
  split_obs: Callable            # (obs [..., D], HydroParams) -> {field: array}
  make_baseline: Callable        # (HydroParams, name) -> hydro_baselines.HydroBaselineParams
  predicted_moves: Callable      # (bp, fields) -> (v_max, v, score, useful, job) [K] each
  evidence: Callable             # (fields, bp) -> (good, chat, cand, n_contain, edge_count)
  reference_diagnosis: Callable  # (obs [D], HydroParams) -> bool[E] predicted clogged edges
  n_edge_kinds: int
  limit_tables: Callable         # (bp, fields) -> (q [5], rates [K, 5], lo [5], hi [5]): the
                                 # limited quantities (hydro_baselines.LIMITS) now, per m3
                                 # along each route, and their admissible ranges
  band_admissible: Callable      # (lo_band [..., 5], hi_band [..., 5], lo [5], hi [5]) -> bool[...]
                                 # the band lies inside the ranges (the replanner's own test)


def hydro_api() -> HydroApi:
  return HydroApi(split_obs=P.split_hydro_obs, make_baseline=HB.make_hydro_baseline,
                  predicted_moves=HB.predicted_moves, evidence=B.evidence,
                  reference_diagnosis=D.reference_diagnosis_hydro,
                  n_edge_kinds=len(EDGE_KINDS), limit_tables=HB.limit_tables,
                  band_admissible=HB.band_admissible)
