"""Experiment plumbing shared by `experiments/serving_{batching,routing}.py`.

calibrate -> tune baselines -> train RL (jaxrl_suite.algos) -> evaluate everything on later,
unseen windows -> per-seed metrics -> CIs, ratios and verdicts. Every policy, heuristic or
learned, goes through `evaluate.rollout` with the same windows.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import stats
from jaxrl_suite.envs.serving import evaluate

METRICS = ("throughput", "goodput", "token_throughput", "slo_attainment", "ttft_p50", "ttft_p99",
           "e2e_p50", "e2e_p99", "unfinished", "preemptions", "segregation", "long_share_fast",
           "long_share_slow")


def window_starts(n_trace: int, k: int, n: int, rng: np.random.Generator | None = None
                  ) -> np.ndarray:
  """n window starts: evenly spaced (deterministic) or random if `rng` is given."""
  hi = max(n_trace - k, 0)
  if rng is not None:
    return rng.integers(0, hi + 1, n)
  return np.linspace(0, hi, n).round().astype(np.int64)


def make_runner(env, policy: Callable, max_steps: int):
  """jitted fn(pparams, env_params, starts [W], rate [], keys [W]) -> batched final states.

  Env params are an argument (not a closure) so train and test traces padded to one length
  (`workload.pad_trace`) share one compilation.
  """

  def one(pparams, params, start, rate, key):
    p = params.replace(window_start=start, rate_scale=rate, rate_mults=(1.0,))
    state, _, _ = evaluate.rollout(env, p, policy, pparams, key, max_steps)
    return state

  return jax.jit(jax.vmap(one, in_axes=(None, None, 0, None, 0)))


def run_metrics(runner, pparams, params, starts, rate, key, slo, type_id=None):
  keys = jax.random.split(key, len(starts))
  st = runner(pparams, params, jnp.asarray(starts), jnp.asarray(rate, jnp.float32), keys)
  return evaluate.batch_metrics(st, slo[0], slo[1], type_id)


def slo_capacity(runner, candidates: Sequence[Any], params, starts, key, slo, trace_rate: float,
                 target: float = 0.9, type_id=None, lo: int = -8) -> tuple[float, float]:
  """SLO capacity: the largest arrival rate at which the best candidate baseline still meets the
  SLO for >= `target` of requests (DistServe-style), on a grid of rate scales 2^(i/4), i >= lo.
  Returns (capacity in req/s, its rate scale)."""
  best_scale = None
  for i in range(lo, 25):
    scale = 2.0 ** (i / 4)
    att = max(mean_metrics(run_metrics(runner, pp, params, starts, scale, key, slo, type_id))[
        "slo_attainment"] for pp in candidates)
    if att >= target:
      best_scale = scale
    elif best_scale is not None:
      break
  best_scale = best_scale or 2.0 ** (lo / 4)
  return best_scale * trace_rate, best_scale


def mean_metrics(ms: Sequence[dict[str, float]]) -> dict[str, float]:
  keys = ms[0].keys()
  return {k: float(np.nanmean([m[k] for m in ms])) for k in keys}


def tune(runner, grid: Sequence[Any], params, starts, rate, key, slo, type_id=None):
  """Grid search on training windows; returns (best params, best goodput, all scores)."""
  scores = []
  for pp in grid:
    ms = run_metrics(runner, pp, params, starts, rate, key, slo, type_id)
    scores.append(mean_metrics(ms)["goodput"])
  best = int(np.nanargmax(scores))
  return grid[best], scores[best], scores


def summarize(per_seed: Sequence[dict[str, float]]) -> dict[str, list[float]]:
  """{metric: [mean, lo, hi]} over seeds (95% Student-t CI)."""
  out = {}
  for k in per_seed[0]:
    vals = np.array([m[k] for m in per_seed], np.float64)
    vals = vals[np.isfinite(vals)]
    out[k] = list(stats.mean_ci(vals)) if vals.size else [float("nan")] * 3
  return out


def ratio_verdict(ratio: tuple[float, float, float], paper: float) -> str:
  """Verdict for a claimed improvement ratio `paper` (e.g. 1.48) given (ratio, lo, hi)."""
  r, lo, hi = ratio
  if lo <= paper <= hi or lo >= paper:
    return "reproduced"
  if hi < 1.0:
    return "contradicted"
  if lo > 1.0:
    return "partly reproduced"
  return "not reproduced"


def save_policy(path: str, obj: Any) -> None:
  with open(path, "wb") as f:
    pickle.dump(jax.tree.map(np.asarray, obj), f)


def load_policy(path: str) -> Any:
  with open(path, "rb") as f:
    return pickle.load(f)


def fmt(ci: Sequence[float], digits: int = 3) -> str:
  m, lo, hi = ci
  return f"{m:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"
