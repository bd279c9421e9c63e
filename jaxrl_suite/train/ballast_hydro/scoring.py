"""Final scoring of the BallastHydro-v0 study: every policy on every evaluation bank.

  score_layout(c, ev, p, keys, rl_params, heel_aware, max_steps, dt_h, modes=None)
      -> (scores, diag)
  score_all(c, ev, banks, ep_keys, rl_params, heel_aware, log, modes=None)
      -> ({layout: scores}, {layout: diag})
  mode_scores(ev, train, rl_params, variants, key, max_steps) -> {variant: {mode: [S]}}

On one layout the first c.eval_episodes bank episodes are played with the same keys by the
baselines (hydro_scoring.BASELINES) and the RL policies of every seed (c.variants; each in the
action mode `modes[variant]`, "greedy" | "sampled", chosen on training episodes from
mode_scores; greedy when modes is None), so
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
from jaxrl_suite.envs.ballast.hydro_scoring import (eff_steps, episode_metrics,
                                                    exercised_counts, reference_on,
                                                    score_baselines)
from jaxrl_suite.train.ballast_hydro.evaluators import rl_evaluator


def _score_variant(ev, p, idx, keys, params, resid: bool, max_steps: int, dt_h: float,
                   mode: str = "greedy"):
  """One variant's seeds [S] on episodes idx: (metrics [S, N], {"head", "reference"} counts)."""
  tb = A.make_tables(p, resid, ev.api)
  out = jax.device_get(rl_evaluator(ev, mode)(p, (params, tb), idx, keys))
  head = np.asarray(ev.diagnose((params, tb), out["final_carry"], out["final_obs"]))
  counts = {"head": exercised_counts(head, out, p, idx),
            "reference": exercised_counts(reference_on(ev.reference, out, p), out, p, idx)}
  return episode_metrics(out, max_steps, dt_h), counts


def score_layout(c, ev, p, keys, rl_params, heel_aware: str, max_steps: int, dt_h: float,
                 modes=None):
  """Every policy on the layout with params p, episodes arange(c.eval_episodes) with keys
  [N, 2]; heel_aware names the comparator form (hydro_scoring.HEEL_AWARE_FORMS)."""
  idx = jnp.arange(c.eval_episodes)
  sc, outs = score_baselines(ev.base, p, idx, keys, max_steps, dt_h)
  dg = {}
  for var in c.variants:
    sc[var], dg[var] = _score_variant(ev, p, idx, keys, rl_params[var], var == "rl_gru_resid",
                                      max_steps, dt_h, (modes or {}).get(var, "greedy"))
  sc["_n_blocked"] = np.asarray(p.bank.n_blocked)
  sc["heel_aware"] = sc[heel_aware]
  sc["_heel_aware_is"] = heel_aware
  ha = {k: outs[heel_aware][k][None] for k in ("exercised", "final_obs")}
  dg["heel_aware"] = {"reference": exercised_counts(reference_on(ev.reference, ha, p), ha, p,
                                                    idx)}
  return sc, dg


def score_all(c, ev, banks, ep_keys, rl_params, heel_aware: str, log, modes=None):
  """score_layout on every evaluation bank (banks.evals, keys ep_keys {layout: [N, 2]})."""
  scores, diag = {}, {}
  for n, (_, _, p, _) in banks.evals.items():
    scores[n], diag[n] = score_layout(c, ev, p, ep_keys[n], rl_params, heel_aware,
                                      banks.max_steps, banks.dt_h, modes)
    log(f"scored {n}")
  return scores, diag


def mode_scores(ev, train, rl_params, variants, key, max_steps: int, min_blocked: int = 1
                ) -> dict[str, dict[str, list[float]]]:
  """{variant: {"greedy" | "sampled": per-seed mean steps_eff [S]}} on the training layouts'
  bank episodes with >= min_blocked blocked pipes (the headline's regime; training data only),
  train = [(env, params, report)] (hydro_banks.Banks.train), each whole bank played with keys
  split(fold_in(key, layout index), bank size) and masked afterwards, so every layout (same
  bank size) runs the one compiled evaluator. RL's action mode is chosen on these."""
  out: dict[str, dict[str, list[float]]] = {}
  for var in variants:
    per_mode = {}
    for mode in ("greedy", "sampled"):
      sums, counts = 0.0, 0
      for j, (_, p, _) in enumerate(train):
        n = int(p.bank.vol0.shape[0])
        keep = np.asarray(p.bank.n_blocked) >= min_blocked
        tb = A.make_tables(p, var == "rl_gru_resid", ev.api)
        res = jax.device_get(rl_evaluator(ev, mode)(
            p, (rl_params[var], tb), jnp.arange(n), jax.random.split(jax.random.fold_in(key, j),
                                                                     n)))
        sums = sums + eff_steps(res, max_steps)[:, keep].sum(-1)
        counts += int(keep.sum())
      per_mode[mode] = (np.asarray(sums, np.float64) / max(counts, 1)).tolist()
    out[var] = per_mode
  return out
