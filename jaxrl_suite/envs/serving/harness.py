"""Evaluation plumbing shared by `experiments/serving_{batching,routing}.py` and the notebook.

One compiled program per environment evaluates every policy: heuristics and learned networks go
through a single *universal* policy whose params pick the family (`which`), its knobs and (for
learned policies) the network weights, and `Evaluator` vmaps `evaluate.rollout` over a fixed
number of lanes of (policy params, window start, load, key). So tuning a whole baseline grid at
every load, or evaluating all seeds of all policies, is a few calls of one compiled function
(compile time dominates quick runs on 2 CPU cores; the lanes also amortise XLA's per-op cost).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import stats, tree_io
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


# ------------------------------------------------------------------------------ universal policy

def universal_policy(heuristic: Callable, n_heuristics: int, net_policy: Callable) -> Callable:
  """policy(pp, obs, key) for params {"which": int, **knobs, "net": network params}.

  which < n_heuristics: `heuristic(pp, obs, key)` (itself a `lax.switch` over families);
  which == n_heuristics: the greedy network `net_policy(pp["net"], obs, key)`.
  Under vmap both are computed and selected (both are cheap next to an env event).
  """

  def policy(pp, obs, key):
    a_h = heuristic(pp, obs, key).astype(jnp.int32)
    a_n = net_policy(pp["net"], obs, key).astype(jnp.int32)
    return jnp.where(pp["which"] >= n_heuristics, a_n, a_h)

  return policy


def with_net(knobs: dict, net_template: Any, net: Any = None, which: int | None = None) -> dict:
  """Universal params: heuristic `knobs` (must hold "which" unless given) + network params (zeros
  of `net_template`'s structure for heuristics)."""
  d = dict(knobs)
  if which is not None:
    d["which"] = jnp.asarray(which, jnp.int32)
  d["net"] = net if net is not None else jax.tree.map(jnp.zeros_like, net_template)
  return d


def stack(trees: Sequence[Any]) -> Any:
  return jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *trees)


# ------------------------------------------------------------------------------ batched evaluation

class Evaluator:
  """Evaluates jobs (policy params, window start, rate scale, key) `lanes` at a time with ONE
  compiled vmapped rollout (the last batch is padded), returning per-episode metrics."""

  def __init__(self, env, policy: Callable, max_steps: int, lanes: int = 32, warmup: int = 0):
    self.lanes = lanes
    self.warmup = warmup     # leading requests of each episode excluded from its metrics

    def one(pp, params, start, rate, key):
      p = params.replace(window_start=start, rate_scale=rate, rate_mults=(1.0,))
      state, _, _ = evaluate.rollout(env, p, policy, pp, key, max_steps)
      return evaluate.episode_arrays(state, as_numpy=False)

    self._fn = jax.jit(jax.vmap(one, in_axes=(0, None, 0, 0, 0)))

  def episodes(self, pps: Sequence[Any], params, starts, rates, keys) -> dict[str, np.ndarray]:
    """Per-request arrays [J, K] of J episodes (all sequences of length J)."""
    j = len(pps)
    out = []
    for lo in range(0, j, self.lanes):
      idx = [min(i, j - 1) for i in range(lo, lo + self.lanes)]
      res = self._fn(stack([pps[i] for i in idx]), params,
                     jnp.asarray([starts[i] for i in idx], jnp.int32),
                     jnp.asarray([rates[i] for i in idx], jnp.float32),
                     jnp.stack([keys[i] for i in idx]))
      n = min(self.lanes, j - lo)
      out.append({k: np.asarray(v)[:n] for k, v in res.items()})
    return {k: np.concatenate([o[k] for o in out]) for k in out[0]}

  def metrics(self, pps, params, starts, rates, keys, slo, type_id=None) -> list[dict]:
    """Per-episode metrics of jobs, in job order. Jobs run grouped by (load, window): lanes of
    one batch then need similar numbers of events, and the vmapped loop runs as long as its
    longest lane."""
    order = sorted(range(len(pps)), key=lambda i: (float(rates[i]), int(starts[i])))
    arr = self.episodes([pps[i] for i in order], params, [starts[i] for i in order],
                        [rates[i] for i in order], [keys[i] for i in order])
    out = [None] * len(pps)
    for j, i in enumerate(order):
      out[i] = evaluate.metrics({k: v[j] for k, v in arr.items()}, slo[0], slo[1], type_id,
                                self.warmup)
    return out

  def grid(self, pps: Sequence[Any], params, starts, rates: Sequence[float], key, slo,
           type_id=None) -> np.ndarray:
    """Mean metrics over `starts` for every (policy, rate) pair: array [P, R] of dicts. Every
    pair sees the same windows and keys (common random numbers)."""
    keys = jax.random.split(key, len(starts))
    jobs = [(p, r, w) for p in range(len(pps)) for r in range(len(rates))
            for w in range(len(starts))]
    ms = self.metrics([pps[p] for p, _, _ in jobs], params, [starts[w] for *_, w in jobs],
                      [rates[r] for _, r, _ in jobs], [keys[w] for *_, w in jobs], slo, type_id)
    out = np.empty((len(pps), len(rates)), object)
    for p in range(len(pps)):
      for r in range(len(rates)):
        sel = [m for (pp, rr, _), m in zip(jobs, ms) if pp == p and rr == r]
        out[p, r] = mean_metrics(sel)
    return out


def slo_capacity(ev: Evaluator, candidates: Sequence[Any], params, starts, key, slo,
                 trace_rate: float, target: float = 0.9, type_id=None, lo: int = -8,
                 hi: int = 24) -> tuple[float, float]:
  """SLO capacity: the largest arrival rate at which the best candidate still meets the SLO for
  >= `target` of requests (DistServe-style), on the grid of rate scales 2^(i/4), lo <= i <= hi.
  Bisection over the grid (attainment falls with load), each probe one batched call.
  `candidates` is every grid point of every tuned family: "the best candidate" is then the
  best tuned heuristic at that rate (a family tuned per probe, e.g. SITA's threshold).
  Returns (capacity in req/s, its rate scale)."""
  return slo_capacity_best(ev, candidates, params, starts, key, slo, trace_rate, target,
                           type_id, lo, hi)[:2]


CAPACITY_HI = 24   # highest probed rate: 2^(24/4) = 64 x the trace rate


def slo_capacity_best(ev: Evaluator, candidates: Sequence[Any], params, starts, key, slo,
                      trace_rate: float, target: float = 0.9, type_id=None, lo: int = -8,
                      hi: int = CAPACITY_HI) -> tuple[float, float, int]:
  """`slo_capacity` plus the index of the candidate with the best attainment at the capacity
  (the heuristic that sets it; -1 if none meets the target even at the lowest rate). A scale of
  2^(hi/4) means the target held at every probed rate: the capacity is only a lower bound.

  Pruned: after a probe that some candidates pass, only those are probed at the (higher) rates
  that follow. Under the bisection's own premise (a candidate's attainment falls with load) a
  candidate below the target at rate r is below it at every rate above r, so the capacity and
  the candidate that sets it are those of probing every candidate every time, for a fraction of
  the cost (most of a grid, e.g. random routing or a bad threshold, fails early)."""
  best: dict[int, tuple[float, int]] = {}
  alive = list(range(len(candidates)))

  def ok(i):
    nonlocal alive
    g = ev.grid([candidates[j] for j in alive], params, starts, [2.0 ** (i / 4)], key, slo,
                type_id)
    att = np.array([m["slo_attainment"] for m in g[:, 0]], np.float64)
    best[i] = (float(att.max()), alive[int(np.argmax(att))])
    passed = [j for j, a in zip(alive, att) if a >= target]
    if passed:        # every later probe is at a higher rate than this one
      alive = passed
    return bool(passed)

  if not ok(lo):
    return 2.0 ** (lo / 4) * trace_rate, 2.0 ** (lo / 4), -1
  a, b = lo, hi + 1                      # ok(a) holds; b is treated as failing
  while b - a > 1:
    m = (a + b) // 2
    a, b = (m, b) if ok(m) else (a, m)
  return 2.0 ** (a / 4) * trace_rate, 2.0 ** (a / 4), best[a][1]


def mean_metrics(ms: Sequence[dict[str, float]]) -> dict[str, float]:
  keys = ms[0].keys()
  out = {}
  for k in keys:
    v = np.array([m[k] for m in ms], np.float64)
    out[k] = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
  return out


class Cells(list):
  """Per-seed mean metrics (a list of dicts, what `summarize` always took) that also keeps the
  per-(seed, window) metrics `cells` [S][W], so CIs can count the evaluation windows as
  independent units next to the seeds (deterministic heuristics differ across windows even
  when every seed gives them the same result)."""

  def __init__(self, cells: Sequence[Sequence[dict[str, float]]]):
    super().__init__(mean_metrics(list(row)) for row in cells)
    self.cells = [list(row) for row in cells]

  def grid(self, metric: str) -> np.ndarray:
    """[S, W] float64 of one metric."""
    return np.array([[m[metric] for m in row] for row in self.cells], np.float64)


def summarize(per_seed: Sequence[dict[str, float]]) -> dict[str, list[float]]:
  """{metric: [mean, lo, hi]}: over seeds x windows (two-way bootstrap, `stats.crossed_ci`) when
  `per_seed` is a `Cells`, else over seeds (95% Student-t CI)."""
  out = {}
  for k in per_seed[0]:
    if isinstance(per_seed, Cells):
      out[k] = list(stats.crossed_ci(per_seed.grid(k)))
      continue
    vals = np.array([m[k] for m in per_seed], np.float64)
    vals = vals[np.isfinite(vals)]
    out[k] = list(stats.mean_ci(vals)) if vals.size else [float("nan")] * 3
  return out


def save_policy(path: str, obj: Any) -> None:
  """Stores a policy cache (nested dicts of arrays and JSON values) as npz + JSON structure.

  No pickle: `load_policy` can only produce arrays and JSON values from a workdir file.
  """
  # Device arrays to numpy; Python values (the run key, curves as lists) stay JSON values.
  tree_io.save_tree(path, jax.tree.map(lambda x: np.asarray(x) if hasattr(x, "shape") else x,
                                       obj))


def load_policy(path: str) -> Any:
  """Reads a cache written by `save_policy`; tree_io.TreeFileError (naming the file) if the file
  is anything else, e.g. a pickle cache of an older version: delete it to retrain."""
  return tree_io.load_tree(path)


def fmt(ci: Sequence[float], digits: int = 3) -> str:
  m, lo, hi = ci
  return f"{m:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"
