"""Scoring on BallastHydro-v0 banks: per-episode metrics, the baselines, diagnosis counts.

  BASELINES                                    the four baselines every evaluation bank plays
  eff_steps(out, max_steps) -> [..., N]        decision steps, a failure at the step limit
  episode_metrics(out, max_steps, dt_h)        {metric: float64 [..., N]} (METRICS' fields)
  score_baselines(ev_base, p, idx, keys, max_steps, dt_h) -> (scores, outs)
  heel_aware_means(ev_base, banks, key, max_steps, min_blocked=0) -> {form: [mean steps_eff]}
  make_reference_rows(env) -> fn(obs [B, O], p) -> bool [B, E]
  exercised_counts(pred, out, p, idx) -> {"tp"|"fp"|"fn"|"tn"|"exact": [S, N]}

`out` is an evaluator's output (hydro_rollout.make_hydro_evaluate[_recurrent], host arrays):
steps, success, violated, broke, max_heel, energy_kwh [..., N], exercised [..., N, E], final_obs
[..., N, O]. ev_base(p, policy, idx [N], keys [N, 2]) plays a baseline policy on bank episodes
idx with keys; episodes are paired across policies by (bank index, key).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast import oracle as OR
from jaxrl_suite.envs.ballast import stability as S
from jaxrl_suite.envs.ballast.diagnosis import confusion

BASELINES = ("oracle", "replan", "heel_replan_1", "heel_replan_multi")
HEEL_AWARE_FORMS = ("heel_replan_1", "heel_replan_multi")


def eff_steps(out, max_steps: int) -> np.ndarray:
  """steps where the episode succeeded, else max_steps (a failure costs the whole limit)."""
  return np.where(np.asarray(out["success"]), np.asarray(out["steps"]), max_steps)


def episode_metrics(out, max_steps: int, dt_h: float) -> dict[str, np.ndarray]:
  """Per-episode metrics, float64 arrays with the episode axis last."""
  return {"steps": np.asarray(out["steps"], np.float64),
          "steps_eff": eff_steps(out, max_steps).astype(np.float64),
          "hours": np.asarray(out["steps"], np.float64) * dt_h,
          "success": np.asarray(out["success"], np.float64),
          "violated": np.asarray(out["violated"], np.float64),
          "max_heel": np.asarray(out["max_heel"], np.float64),
          "energy_kwh": np.asarray(out["energy_kwh"], np.float64),
          **broken_limits(out)}


def broken_limits(out) -> dict[str, np.ndarray]:
  """{"broke_<limit>": float64 [..., N] 1 where the episode exceeded that limit} for the limits
  of stability.LIMIT_BITS, from the evaluator's `broke` mask (zeros where it has none)."""
  broke = np.asarray(out.get("broke", np.zeros(np.shape(out["success"]), np.int32)))
  return {f"broke_{name}": ((broke & bit) != 0).astype(np.float64)
          for name, bit in S.LIMIT_BITS.items()}


def _baseline(p, b: str):
  """The heuristic of baseline b on params p: heel_replan with one command or one per pump."""
  name = "heel_replan" if b in HEEL_AWARE_FORMS else b
  n_cmds = int(p.pump_mask.sum()) if b == "heel_replan_multi" else 1
  return HB.make_hydro_baseline(p, name, n_cmds=n_cmds)


def score_baselines(ev_base, p, idx, keys, max_steps: int, dt_h: float):
  """Every baseline of BASELINES on the same episodes: ({name: episode_metrics [N]}, {name:
  raw out}). The oracle plays every pump, the best of its 1..P-command forms (oracle.py)."""
  scores, outs = {}, {}
  for b in BASELINES:
    if b == "oracle":
      outs[b] = OR.run_oracle(ev_base, p, idx, keys, max_steps)
    else:
      outs[b] = jax.device_get(ev_base(p, _baseline(p, b), idx, keys))
    scores[b] = episode_metrics(outs[b], max_steps, dt_h)
  return scores, outs


def heel_aware_means(ev_base, params_list, key, max_steps: int, min_blocked: int = 0
                     ) -> dict[str, list[float]]:
  """{form: [mean steps_eff on each params' bank]} of both heel-aware forms, every bank played
  with keys split(key, bank size) and averaged over its episodes with >= min_blocked blocked
  pipes (0: all; 1: the blocked regime a headline is read on): the comparator is chosen on
  these (training data)."""
  means: dict[str, list[float]] = {b: [] for b in HEEL_AWARE_FORMS}
  for p in params_list:
    n = int(p.bank.vol0.shape[0])
    idx, ks = jnp.arange(n), jax.random.split(key, n)
    keep = (np.asarray(p.bank.n_blocked) >= min_blocked) if min_blocked else np.ones(n, bool)
    for b in means:
      out = jax.device_get(ev_base(p, _baseline(p, b), idx, ks))
      means[b].append(float(eff_steps(out, max_steps)[keep].mean()) if keep.any()
                      else float("nan"))
  return means


def make_reference_rows(env):
  """The reference consistency diagnoser on a batch of final observations [B, O] -> bool [B, E]
  (jitted; env.agent_api.reference_diagnosis per row)."""
  return jax.jit(jax.vmap(env.agent_api.reference_diagnosis, in_axes=(0, None)))


def reference_on(ref_rows, out, p) -> np.ndarray:
  """The reference diagnoser on out["final_obs"] [..., O] -> bool [..., E]."""
  obs = np.asarray(out["final_obs"])
  return np.asarray(ref_rows(obs.reshape(-1, obs.shape[-1]), p)).reshape(obs.shape[:-1] + (-1,))


def exercised_counts(pred, out, p, idx):
  """Confusion counts {tp, fp, fn, tn, exact} [S, N] of pred [S, N, E] against the true clog mask
  1[clog_e < 1] of bank episodes idx, on the real edges each episode exercised."""
  label = np.asarray(p.bank.clog[idx] < 1.0)[None]                       # [1, N, E]
  mask = (np.asarray(out["exercised"]) > 0.5) & np.asarray(p.edge_mask, bool)
  return confusion(pred, np.broadcast_to(label, mask.shape), mask)
