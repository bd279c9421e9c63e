"""The jitted evaluators of the BallastHydro-v0 study, built once for every layout.

  make_evaluators(agent_cfg, env, max_steps) -> Evaluators

Every layout is padded to the same sizes, so one compiled program of each serves all of them.
S seeds of RL parameters are vmapped; N episodes are bank indices idx [N] with keys [N, 2].
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast.hydro_rollout import (make_hydro_evaluate,
                                                    make_hydro_evaluate_recurrent)
from jaxrl_suite.envs.ballast.hydro_scoring import make_reference_rows


class Evaluators(NamedTuple):
  """base(p, baseline, idx, keys) -> out [N]: a heuristic (hydro_baselines) on bank episodes;
  rl(p, (params [S], tables), idx, keys) -> out [S, N]: the greedy GRU policy of every seed;
  rl_sampled: the same with actions sampled from the policy (RL's other action mode; which
  mode is scored is chosen on training episodes, rl_stage.pick_mode);
  diagnose((params [S], tables), final_carry [S, N, H], final_obs [S, N, O]) -> bool [S, N, E]:
  the head's clogged set after one GRU step on the final observation;
  reference(obs [B, O], p) -> bool [B, E]: the reference consistency diagnoser;
  api: env.agent_api, the env-side functions the agent's tables are built with (injected)."""
  base: Callable
  rl: Callable
  rl_sampled: Callable
  diagnose: Callable
  reference: Callable
  api: Any


def make_evaluators(agent_cfg, env, max_steps: int) -> Evaluators:
  """The evaluators for config.agent `agent_cfg` on env (episodes cut at max_steps)."""
  diag_seeds = jax.jit(jax.vmap(jax.vmap(A.make_diagnose(agent_cfg), in_axes=((None, None), 0, 0)),
                                in_axes=((0, None), 0, 0)))
  def rl_seeds(greedy: bool):
    ev_rl = make_hydro_evaluate_recurrent(env, A.make_policy(agent_cfg, greedy=greedy),
                                          jnp.zeros(agent_cfg.gru), max_steps)
    return jax.jit(jax.vmap(ev_rl, in_axes=(None, (0, None), None, None)))

  ev_base = make_hydro_evaluate(env, HB.hydro_policy, max_steps)
  return Evaluators(ev_base, rl_seeds(True), rl_seeds(False), diag_seeds,
                    make_reference_rows(env), env.agent_api)


def rl_evaluator(ev: Evaluators, mode: str) -> Callable:
  """ev.rl for mode "greedy", ev.rl_sampled for "sampled"."""
  if mode not in ("greedy", "sampled"):
    raise ValueError(f"RL action mode must be 'greedy' or 'sampled', got {mode!r}")
  return ev.rl if mode == "greedy" else ev.rl_sampled
