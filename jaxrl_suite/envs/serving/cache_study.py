"""Prefix caching and the cache-aware router on the Mooncake conversation sample (a measurement).

`experiments/serving_cache.py` prints it (no results record: the study has no claim from the
paper to test); docs/serving.md, "Prefix caching", has the protocol and the numbers. Here:

  cluster_for(model)        the default 4-GPU cluster's spec names for a model and its context
  make_eval(trace, ...)     f(knobs, starts, scale) -> per-window metrics of the cache_aware
                            router (JSQ knobs make it plain JSQ), with or without the cache
  window_stats(ms, key)     mean, min, max of one metric over windows
  capacity_index(att)       the largest i with attainment >= 0.9 at rate scale 2^(i/4)
  compare(...)              per load: the cache-aware router tuned on the training windows, then
                            every policy of POLICIES on the evaluation windows
  table_lines(rows)         the printed table
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import cost_model, evaluate, harness, heuristics, routing, traces

WARMUP = 0.1
LOWEST = -16          # lowest probed rate scale: 2^(LOWEST/4)
JSQ = {"thr": 2.0, "bal_abs": 0.0, "bal_rel": 1.5}   # share >= 2 never holds: plain JSQ
SGLANG_DEFAULTS = {"thr": 0.3, "bal_abs": 64.0, "bal_rel": 1.5}
KEYS = ("goodput", "slo_attainment", "cache_hit_rate", "ttft_p50", "ttft_p99", "rejected")
TARGET = 0.9          # SLO attainment that defines the capacity

Evaluator = Callable[[dict, Sequence[int], float], list]


def cluster_for(model: str) -> tuple[tuple[str, ...], int]:
  """(GPU spec names, max_model_len) of the default cluster serving `model`: each GPU type's
  spec for that model (cost_model.spec_for), the context capped at the smallest KV capacity
  left above the admission watermark (routing.context_of: every request must fit on every GPU
  the router may pick; an L4 holds ~52k tokens of Llama-3.1-8B KV)."""
  specs = [cost_model.spec_for(g, model) for g in routing.DEFAULT_CLUSTER]
  names = tuple(s.name for s in specs)
  return names, routing.context_of(names)


def make_eval(tr: traces.Trace, k: int, window: int, cache: bool, model: str,
              slo: tuple[float, float]) -> Evaluator:
  """f(knobs, starts, scale) -> list of per-window metric dicts, cache_aware policy (JSQ knobs
  make it plain JSQ); one compiled, window-vmapped program per (trace part, cache on/off)."""
  cluster, mml = cluster_for(model)
  eng = routing.engine_settings(cluster, "per_gpu", 0, 0, 0.2)
  env, p = routing.make_routing(table_size=k, trace=tr, train_frac=None, window=window,
                                max_events=4096, cache_blocks="auto" if cache else None,
                                pred_acc=0.8, cluster=cluster, max_model_len=mml, **eng)
  if not cache:    # same decisions as JSQ: the router never sees prefix features
    pol = heuristics.make_router("jsq", env.n_gpus)
  else:
    pol = heuristics.make_router("cache_aware", env.n_gpus)

  def one(knobs, start, scale, key):
    pp = p.replace(window_start=start, rate_scale=scale)
    st, _, _ = evaluate.rollout(env, pp, pol, knobs, key, 20 * k)
    return evaluate.episode_arrays(st, as_numpy=False), st.eng.cap_hits

  f = jax.jit(jax.vmap(one, in_axes=(None, 0, None, 0)))
  warm = int(WARMUP * k)

  def run(knobs, starts, scale):
    kn = {a: jnp.float32(b) for a, b in knobs.items()}
    keys = jax.random.split(jax.random.PRNGKey(0), len(starts))
    arr, hits = f(kn, jnp.asarray(starts, jnp.int32), jnp.float32(scale), keys)
    if int(hits.sum()):
      raise RuntimeError("an evaluation step hit max_events")
    arr = {a: np.asarray(b) for a, b in arr.items()}
    return [evaluate.metrics({a: b[i] for a, b in arr.items()}, *slo, warmup=warm)
            for i in range(len(starts))]

  return run


def window_stats(ms: Sequence[dict], key: str) -> tuple[float, float, float]:
  """(mean, min, max) of metric `key` over per-window metric dicts (NaN where one lacks it)."""
  v = np.array([m.get(key, np.nan) for m in ms])
  return float(np.mean(v)), float(np.min(v)), float(np.max(v))


def capacity_index(attainment: Callable[[int], float], lowest: int = LOWEST,
                   highest: int = harness.CAPACITY_HI) -> int | None:
  """The largest i in [lowest, highest] such that attainment(j) >= TARGET for every j from
  `lowest` up to i (probed upwards, stopping at the first miss); None when even `lowest` misses.
  The rate scale is 2^(i/4)."""
  i = lowest
  if attainment(i) < TARGET:
    return None
  while i < highest and attainment(i + 1) >= TARGET:
    i += 1
  return i


def compare(ev_train: Evaluator, ev_test: Evaluator, ev_test_nc: Evaluator,
            tr_starts: Sequence[int], ev_starts: Sequence[int], base: float,
            loads: Sequence[float], on_load: Callable[[float, dict], Any] = lambda ld, kn: None
            ) -> list[tuple[str, float, dict]]:
  """Per load (a fraction of the capacity rate scale `base`): tunes the cache-aware router on
  the training windows (goodput, `heuristics.cache_grid`), calls on_load(load, tuned knobs), and
  evaluates JSQ without and with the cache, the tuned and SGLang's default cache-aware router on
  the evaluation windows. Returns [(policy, load, {metric: (mean, min, max)})]."""
  rows = []
  grid = heuristics.cache_grid()["cache_aware"]
  for ld in loads:
    scale = ld * base
    scores = [window_stats(ev_train(g, tr_starts, scale), "goodput")[0] for g in grid]
    best = grid[int(np.argmax(scores))]
    for name, ev, kn in (("jsq, no cache", ev_test_nc, JSQ), ("jsq + cache", ev_test, JSQ),
                         ("cache_aware (tuned) + cache", ev_test, best),
                         ("cache_aware (SGLang defaults) + cache", ev_test, SGLANG_DEFAULTS)):
      ms = ev(kn, ev_starts, scale)
      rows.append((name, ld, {key: window_stats(ms, key) for key in KEYS}))
    on_load(ld, best)
  return rows


def table_lines(rows: Sequence[tuple[str, float, dict]]) -> list[str]:
  """The printed table: one line per (policy, load), mean [min, max] over windows."""
  lines = [f"{'policy':40s} {'load':>5s} {'goodput r/s':>20s} {'SLO att.':>18s} "
           f"{'cache hit':>18s} {'TTFT p50':>8s} {'TTFT p99':>8s} {'rej':>6s}"]
  fmt = lambda t, d=2: f"{t[0]:.{d}f} [{t[1]:.{d}f}, {t[2]:.{d}f}]"
  for name, ld, m in rows:
    hit = fmt(m["cache_hit_rate"], 3) if np.isfinite(m["cache_hit_rate"][0]) else "-"
    lines.append(f"{name:40s} {ld:5.2f} {fmt(m['goodput']):>20s} "
                 f"{fmt(m['slo_attainment'], 3):>18s} {hit:>18s} {m['ttft_p50'][0]:8.2f} "
                 f"{m['ttft_p99'][0]:8.2f} {m['rejected'][0]:6.1f}")
  return lines
