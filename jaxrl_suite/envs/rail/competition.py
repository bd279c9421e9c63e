"""Competition benchmarks: one-shot Nash and joint-monopoly static fares, and the collusion index.

The one-shot game: each player (an operator, or a train when every train keeps its own revenue)
picks one fare bucket per train it controls, fixed for the whole horizon; its payoff is its
expected revenue in the fluid model (expected arrivals, MNL choice, leg rationing, no shock).

  Nash:      iterated best response; a player's best response is found by coordinate ascent over
             its trains (each train's bucket in turn, the others fixed), until no player moves.
  monopoly:  one player owning every train maximises total revenue (coordinate ascent from
             several starts).
  collusion index (Calvano et al. 2020):  Delta = (pi - pi_N) / (pi_M - pi_N), pi the total
             revenue of the policy under study and pi_N, pi_M those of the Nash and monopoly
             fares, all measured on the same episodes. 0 = competitive (Nash), 1 = full collusion.

Static fares are a restriction: a dynamic policy can exceed pi_M, so Delta > 1 is possible and
means "more than the best static cartel", not an error.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.rail import evaluate
from jaxrl_suite.envs.rail.env import EnvParams


def fluid_payoffs(env, params: EnvParams):
  """jitted f(levels [C, A] int) -> revenue [C, A] per train in the fluid model."""
  fp = params.replace(stochastic=0.0)

  def one(levels):
    pol = lambda key, obs, state: levels
    return evaluate.run_episode(env, fp, pol, jax.random.PRNGKey(0))["revenue"]

  return jax.jit(jax.vmap(one))


def _player_payoff(rev: np.ndarray, players: np.ndarray, who: int) -> np.ndarray:
  return rev[:, players == who].sum(-1)


def best_response(pay, levels: np.ndarray, players: np.ndarray, who: int, n_levels: int,
                  sweeps: int = 4) -> np.ndarray:
  """Coordinate ascent of player `who` over its trains' buckets, others fixed."""
  lv = levels.copy()
  mine = np.flatnonzero(players == who)
  for _ in range(sweeps):
    moved = False
    for a in mine:
      cand = np.repeat(lv[None], n_levels, 0)
      cand[:, a] = np.arange(n_levels)
      val = _player_payoff(np.asarray(pay(jnp.asarray(cand))), players, who)
      best = int(np.argmax(val))
      if best != lv[a] and val[best] > val[lv[a]] + 1e-6:
        lv[a], moved = best, True
    if not moved:
      break
  return lv


def nash(env, params: EnvParams, players: np.ndarray, start: int = 2, max_rounds: int = 30):
  """(levels [A], converged) by iterated best response from all trains at bucket `start`.

  players [A] int: the player controlling each train (padding slots: -1).
  """
  pay = fluid_payoffs(env, params)
  n_levels = int(params.levels.shape[0])
  lv = np.full(players.shape, start, np.int64)
  ids = [int(p) for p in np.unique(players) if p >= 0]
  for _ in range(max_rounds):
    old = lv.copy()
    for who in ids:
      lv = best_response(pay, lv, players, who, n_levels)
    if np.array_equal(old, lv):
      return lv, True
  return lv, False


def monopoly(env, params: EnvParams, real: np.ndarray, starts=(2, 5, 7)):
  """Levels [A] maximising total fluid revenue (one player owning every real train)."""
  pay = fluid_payoffs(env, params)
  n_levels = int(params.levels.shape[0])
  players = np.where(real, 0, -1)
  best, best_v = None, -np.inf
  for s in starts:
    lv = best_response(pay, np.full(real.shape, s, np.int64), players, 0, n_levels, sweeps=8)
    v = float(np.asarray(pay(jnp.asarray(lv[None])))[0].sum())
    if v > best_v:
      best, best_v = lv, v
  return best


def collusion_index(pi, pi_nash, pi_mono):
  """Delta = (pi - pi_N) / (pi_M - pi_N) (elementwise; inputs broadcast)."""
  return (np.asarray(pi) - pi_nash) / (pi_mono - pi_nash)


def benchmark_fares(env, params: EnvParams, reward_mode: str):
  """(Nash levels [A], Nash converged, monopoly levels [A]) at `params`. The Nash players are
  the operators, or every train when each keeps its own revenue (reward_mode "agent"); padding
  slots play no part."""
  real = np.asarray(params.agent_mask) > 0
  players = np.where(real, np.asarray(params.operator) if reward_mode != "agent"
                     else np.arange(real.size), -1)
  nash_lv, converged = nash(env, params, players)
  return nash_lv, converged, monopoly(env, params, real)
