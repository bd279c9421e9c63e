"""Evaluation harness for BallastHydro-v0: one episode per (bank index, key), vmapped.

`make_hydro_evaluate(env, policy, num_steps)` returns evaluate(env_params, policy_params, idx[N],
keys[N]) -> dict of per-episode arrays: steps (decision steps until the episode ended, or the
limit), success, violated (a limit exceeded at some step), broke (int32 bit mask of the limits
exceeded, stability.HEEL | GM | TRIM | DRAUGHT), max_heel (deg), energy_kwh,
plan_done (every tank at its target, heel aside), n_blocked, exercised [N, E], final_obs [N, D],
final_carry (the policy's carry when the episode ended; () for a memoryless policy).
Paired episodes: the same (idx, key) gives the same plan, clogs and sounding noise to every
policy (noise is drawn from the step key, independent of the action).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, HydroParams


def make_hydro_evaluate(env: BallastHydro, policy: Callable, num_steps: int = 96):
  """num_steps (static) should equal env_params.max_steps_in_episode. A memoryless
  policy(pp, obs, key) -> action is the recurrent case with an empty carry."""
  step = lambda pp, carry, obs, reset, key: (carry, policy(pp, obs, key))
  return make_hydro_evaluate_recurrent(env, step, (), num_steps)


def make_hydro_evaluate_recurrent(env: BallastHydro, step: Callable, carry0: Any,
                                  num_steps: int = 96):
  """As make_hydro_evaluate for a recurrent policy step(pp, carry, obs, reset, key) ->
  (carry', action); carry0 the carry of a new episode (reset=True on the first step)."""

  def episode(params: HydroParams, policy_params: Any, idx, key):
    kr, ks = jax.random.split(key)
    obs, state = env.reset_to(kr, idx, params)

    def body(carry, k):
      obs, state, h, done, steps, first = carry
      ka, ke = jax.random.split(k)
      h2, action = step(policy_params, h, obs, first, ka)
      obs2, state2, _, term, _ = env.step_env(ke, state, action, params)
      keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(done, b, a), new, old)
      obs_n, state_n, h_n = keep((obs2, state2, h2), (obs, state, h))
      return (obs_n, state_n, h_n, done | term, steps + (~done), jnp.array(False)), None

    init = (obs, state, carry0, jnp.array(False), jnp.int32(0), jnp.array(True))
    (obs, state, h, _, steps, _), _ = jax.lax.scan(body, init, jax.random.split(ks, num_steps))
    plan_done = jnp.all((jnp.abs(state.vol - state.target) < params.tol) | ~params.tank_mask)
    return {"steps": steps, "success": state.success, "violated": state.violated,
            "broke": state.broke,
            "max_heel": state.max_heel, "energy_kwh": state.energy_kwh, "plan_done": plan_done,
            "n_blocked": params.bank.n_blocked[idx], "exercised": state.exercised,
            "final_obs": obs, "final_carry": h}

  @jax.jit
  def evaluate(params: HydroParams, policy_params: Any, idx, keys):
    return jax.vmap(episode, in_axes=(None, None, 0, 0))(params, policy_params, idx, keys)

  return evaluate
