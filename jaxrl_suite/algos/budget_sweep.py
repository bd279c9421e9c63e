"""S seeds of one on-policy learner trained through a sweep of update budgets, in one jit.

  plan(budgets, lr_decay) -> [Run]      the runs that cover every budget
  train(runs, learner_for, seeds, on_budget) -> curve [S, U]
  entropy_collapse(entropy [S, B], n_actions, frac) -> dict

Two ways to reach every budget b of an increasing sweep:
  * lr_decay False: one constant-lr run to the last budget, in chunks of gcd(budgets) updates,
    scored whenever it has done a budget's updates (its first b updates are a run of budget b);
  * lr_decay True: one run per budget with the lr decayed to 0 over exactly b updates (one
    chunk each), all from the same initialisation; cost the sum of the budgets.
`learner_for(decay_over)` builds the learner (anything with the on-policy Learner's `init(key)`
and `run(state, n) -> (state, metrics {name: [n]})`): decay_over None for the constant-lr run,
else the budget to decay over. Seeds are vmapped: the state and the metrics carry a leading [S].
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import numpy as np


class Run(NamedTuple):
  """One training run: `chunks` chunks of `chunk` updates, scored after the chunks whose update
  count is in `scored`; `decay_over` the budget its lr decays over (None: constant lr)."""
  chunk: int
  chunks: int
  scored: tuple[int, ...]
  decay_over: int | None


def plan(budgets, lr_decay: bool) -> list[Run]:
  """The runs that reach every budget (increasing update counts; see the module docstring)."""
  budgets = [int(b) for b in budgets]
  if lr_decay:
    return [Run(b, 1, (b,), b) for b in budgets]
  step = int(np.gcd.reduce(np.asarray(budgets)))
  return [Run(step, budgets[-1] // step, tuple(budgets), None)]


def train(runs: list[Run], learner_for: Callable[[int | None], Any], seeds: jax.Array,
          on_budget: Callable[[int, Any, dict], None]) -> np.ndarray:
  """Runs `runs` in order on the seed keys [S]; after each scored chunk calls
  on_budget(updates done, runner state [S, ...], that chunk's metrics {name: [S, chunk]}).
  Returns the last run's training curve (returned_episode_returns) [S, total updates]."""
  curve = []
  for r in runs:
    lrn = learner_for(r.decay_over)
    rs = jax.jit(jax.vmap(lrn.init))(seeds)
    run = jax.jit(jax.vmap(lambda s, lrn=lrn, chunk=r.chunk: lrn.run(s, chunk)))
    done, curve = 0, []          # the curve kept is the last (longest) run's
    for _ in range(r.chunks):
      rs, met = run(rs)
      done += r.chunk
      curve.append(np.asarray(met["returned_episode_returns"]))
      if done in r.scored:
        on_budget(done, rs, met)
  return np.concatenate(curve, 1)


def entropy_collapse(entropy: np.ndarray, n_actions: int, frac: float) -> dict:
  """Entropy-collapse check of a sweep: entropy [S, B] in nats at each budget (e.g. PPO's
  minibatch mean over the last update before it). A seed has collapsed when its entropy at the
  last budget is below `frac` of the uniform policy's log(n_actions): it then plays (nearly) one
  action path, whatever its score. Returns the entropies and fractions ([S][B] lists), the
  threshold, the number of collapsed seeds and of seeds."""
  f = entropy / np.log(n_actions)
  collapsed = f[:, -1] < frac
  return {"entropy": entropy.tolist(), "fraction_of_uniform": f.tolist(), "threshold": frac,
          "collapsed_seeds": int(collapsed.sum()), "n_seeds": int(collapsed.size)}
