"""Final scoring of the BallastHydro-v0 study: every policy on every evaluation bank.

  score_layout(c, ev, p, keys, rl_params, heel_aware, max_steps, dt_h) -> (scores, diag)
  score_all(c, ev, banks, ep_keys, rl_params, heel_aware, log) -> ({layout: scores},
                                                                   {layout: diag})

On one layout the first c.eval_episodes bank episodes are played with the same keys by the
baselines (hydro_scoring.BASELINES) and the greedy RL policies of every seed (c.variants), so
scores are paired by episode. scores {policy: episode_metrics ([N]; RL [S, N]), "_n_blocked":
[N], "heel_aware": the chosen heel-aware form's metrics, "_heel_aware_is": its name}. diag
{variant: {"head" | "reference": counts [S, N]}, "heel_aware": {"reference": counts [1, N]}}:
confusion counts on the edges each episode exercised (hydro_scoring.exercised_counts); the head
and the reference diagnoser read the same final observation of each RL episode, and the
reference also reads the heel-aware replanner's own episodes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.envs.ballast.hydro_scoring import (episode_metrics, exercised_counts,
                                                    reference_on, score_baselines)


def _score_variant(ev, p, idx, keys, params, resid: bool, max_steps: int, dt_h: float):
  """One variant's seeds [S] on episodes idx: (metrics [S, N], {"head", "reference"} counts)."""
  tb = A.make_tables(p, resid, ev.api)
  out = jax.device_get(ev.rl(p, (params, tb), idx, keys))
  head = np.asarray(ev.diagnose((params, tb), out["final_carry"], out["final_obs"]))
  counts = {"head": exercised_counts(head, out, p, idx),
            "reference": exercised_counts(reference_on(ev.reference, out, p), out, p, idx)}
  return episode_metrics(out, max_steps, dt_h), counts


def score_layout(c, ev, p, keys, rl_params, heel_aware: str, max_steps: int, dt_h: float):
  """Every policy on the layout with params p, episodes arange(c.eval_episodes) with keys
  [N, 2]; heel_aware names the comparator form (hydro_scoring.HEEL_AWARE_FORMS)."""
  idx = jnp.arange(c.eval_episodes)
  sc, outs = score_baselines(ev.base, p, idx, keys, max_steps, dt_h)
  dg = {}
  for var in c.variants:
    sc[var], dg[var] = _score_variant(ev, p, idx, keys, rl_params[var], var == "rl_gru_resid",
                                      max_steps, dt_h)
  sc["_n_blocked"] = np.asarray(p.bank.n_blocked)
  sc["heel_aware"] = sc[heel_aware]
  sc["_heel_aware_is"] = heel_aware
  ha = {k: outs[heel_aware][k][None] for k in ("exercised", "final_obs")}
  dg["heel_aware"] = {"reference": exercised_counts(reference_on(ev.reference, ha, p), ha, p,
                                                    idx)}
  return sc, dg


def score_all(c, ev, banks, ep_keys, rl_params, heel_aware: str, log):
  """score_layout on every evaluation bank (banks.evals, keys ep_keys {layout: [N, 2]})."""
  scores, diag = {}, {}
  for n, (_, _, p, _) in banks.evals.items():
    scores[n], diag[n] = score_layout(c, ev, p, ep_keys[n], rl_params, heel_aware,
                                      banks.max_steps, banks.dt_h)
    log(f"scored {n}")
  return scores, diag
