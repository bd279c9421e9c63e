"""The BallastHydro-v0 study's episode banks: one padded env per layout, and the paired keys.

  build_banks(c, train, held_out, val, shipped, sizes) -> Banks
  episode_keys(key, names, offset, n) -> {name: keys [n, 2]}

Every layout is padded to `sizes` (routes.layout_sizes over all of them) so one compiled program
trains and scores each. Banks (episodes.make_bank through make_hydro: per-layout clog prior,
every episode oracle-finishable) are seed 0 with c.train_bank episodes for training layouts,
seed 1 with c.eval_episodes for evaluation layouts (shipped and held-out), seed 2 with
c.sweep_episodes_last for validation layouts. c is the study config (configs/ballast_hydro.py);
read here: train_bank, eval_episodes, sweep_episodes_last, reward_scale.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from jaxrl_suite.envs.ballast import make_hydro


class Banks(NamedTuple):
  """train [(env, params, report)] per training layout; evals {name: (group, env, params,
  report)} with group "shipped" | "held_out" (shipped first); vals {name: params}."""
  train: list
  evals: dict
  vals: dict

  @property
  def env(self):
    """The one env (every layout shares its padded sizes)."""
    return self.train[0][0]

  @property
  def max_steps(self) -> int:
    return int(self.train[0][1].max_steps_in_episode)

  @property
  def dt_h(self) -> float:
    """Decision step in hours."""
    return float(self.train[0][1].dt_h)

  def reports(self) -> dict[str, Any]:
    """{layout: bank report} of the training and evaluation banks."""
    return {**{e[2]["layout"]: e[2] for e in self.train},
            **{k: v[3] for k, v in self.evals.items()}}


def build_banks(c, train, held_out, val, shipped, sizes) -> Banks:
  """Banks of the study's layouts (lists of layout dicts), all padded to `sizes`."""
  hydro = lambda lay, n, seed: make_hydro(lay, n_bank=n, seed=seed, sizes=sizes,
                                          reward_scale=c.reward_scale)
  train_envs = [hydro(lay, c.train_bank, 0) for lay in train]
  evals = {}
  for group, lays in (("shipped", shipped), ("held_out", held_out)):
    for lay in lays:
      evals[lay["name"]] = (group,) + hydro(lay, c.eval_episodes, 1)
  vals = {lay["name"]: hydro(lay, c.sweep_episodes_last, 2)[1] for lay in val}
  return Banks(train_envs, evals, vals)


def episode_keys(key, names, offset: int, n: int) -> dict[str, jax.Array]:
  """{name: split(fold_in(key, offset + j), n)} for the j-th name: the same keys for every
  policy on a layout, so scores are paired by (bank index, key)."""
  return {name: jax.random.split(jax.random.fold_in(key, offset + j), n)
          for j, name in enumerate(names)}
