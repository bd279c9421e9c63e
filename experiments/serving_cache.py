"""Measurement: prefix caching and the cache-aware router on the Mooncake conversation sample.

Printed, not a results record (the study has no claim from the paper to test): what a per-GPU
LRU prefix cache (engine.py, keyed by Mooncake's hash_ids) buys a load-balancing router, and
whether routing by prefix match (SGLang's cache-aware router, `heuristics.cache_aware`, tuned)
buys more. Default 4-GPU cluster (H100 + A100 + 2 x L4, each GPU type's own engine settings),
cache entries per GPU = its KV capacity in 512-token blocks (`routing.default_cache_blocks`),
steady-state replays of `--table` consecutive requests through a `--window`-request engine
window, the first 10% excluded from the metrics.

Protocol: the sample's early 60% (by time) is the training part, the later 40% the evaluation
part. SLO: TTFT <= `--slo_ttft` (default: the routing study's Mooncake value, DistServe's
long-document 15 s, `configs/serving_routing.slo_ttft_by_trace`; a 2 s TTFT cannot be met by a
50k-token prefill), TPOT <= 0.2 s. Capacity = the largest rate scale 2^(i/4) at which JSQ *with*
the cache meets the SLO for 90% of requests (mean over the training windows, the rule of
`harness.slo_capacity_best`); loads are fractions of it. If even the lowest probed rate misses
the target, the script says so and stops rather than report a floor as a capacity. The cache-aware router's
knobs (`heuristics.cache_grid`) are chosen per load on the training windows by goodput, then
every policy runs on the evaluation windows. JSQ without the cache shows what caching alone
buys. Means over windows with the min and max (heuristics are deterministic given the window).

  python -m experiments.serving_cache [--table 400] [--window 128] [--loads 0.7,1.0]
      [--model Llama-3.1-8B]   (default: the model that holds Mooncake's prompts; Llama-2-7B
                                is the 4k-context run of earlier sessions)
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np

from configs import serving_routing as routing_config
from jaxrl_suite.envs.serving import cost_model, evaluate, harness, heuristics, routing, traces

_TABLE = flags.DEFINE_integer("table", 400, "requests per replay")
_WINDOW = flags.DEFINE_integer("window", 128, "engine window (requests in flight)")
_LOADS = flags.DEFINE_list("loads", ["0.7", "1.0"], "fractions of the measured capacity")
_N_TRAIN = flags.DEFINE_integer("n_train_windows", 3, "training windows (capacity, tuning)")
_N_EVAL = flags.DEFINE_integer("n_eval_windows", 3, "evaluation windows")
_MODEL = flags.DEFINE_string("model", cost_model.TRACE_MODELS["mooncake_conv"],
                             "served model (cost_model.MODELS); the default holds Mooncake's "
                             "prompts (Llama-3.1-8B, 128k context)")
_SLO_TTFT = flags.DEFINE_float(
    "slo_ttft", routing_config.get_config().slo_ttft_by_trace["mooncake_conv"],
    "TTFT SLO in seconds (default: the routing study's Mooncake SLO)")
_SLO_TPOT = flags.DEFINE_float("slo_tpot", 0.2, "TPOT SLO in seconds per output token")

WARMUP = 0.1
LOWEST = -16          # lowest probed rate scale: 2^(LOWEST/4)
JSQ = {"thr": 2.0, "bal_abs": 0.0, "bal_rel": 1.5}   # share >= 2 never holds: plain JSQ
KEYS = ("goodput", "slo_attainment", "cache_hit_rate", "ttft_p50", "ttft_p99", "rejected")


def cluster_for(model: str) -> tuple[tuple[str, ...], int]:
  """(GPU spec names, max_model_len) of the default cluster serving `model`: each GPU type's
  spec for that model (cost_model.spec_for), the context capped at the smallest KV capacity
  left above the admission watermark (routing.context_of: every request must fit on every GPU
  the router may pick; an L4 holds ~52k tokens of Llama-3.1-8B KV)."""
  specs = [cost_model.spec_for(g, model) for g in routing.DEFAULT_CLUSTER]
  names = tuple(s.name for s in specs)
  return names, routing.context_of(names)


def make_eval(tr: traces.Trace, k: int, window: int, cache: bool, model: str,
              slo: tuple[float, float]):
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


def _mean(ms, key):
  v = np.array([m.get(key, np.nan) for m in ms])
  return float(np.mean(v)), float(np.min(v)), float(np.max(v))


def main(argv):
  del argv
  t0 = time.time()
  k, w = _TABLE.value, _WINDOW.value
  mc = traces.load_shipped("mooncake_conv")
  train, test = mc.split(0.6)
  tr_starts = harness.window_starts(len(train), k, _N_TRAIN.value)
  ev_starts = harness.window_starts(len(test), k, _N_EVAL.value)
  model = _MODEL.value
  cluster, mml = cluster_for(model)
  print(f"model {model}: cluster {cluster}, max_model_len {mml}; clipping: "
        + "; ".join(f"{n} {traces.clip_stats(t, mml)}" for n, t in (("train", train),
                                                                   ("eval", test))), flush=True)
  slo = (_SLO_TTFT.value, _SLO_TPOT.value)
  ev_train = make_eval(train, k, w, True, model, slo)
  ev_test = make_eval(test, k, w, True, model, slo)
  ev_test_nc = make_eval(test, k, w, False, model, slo)

  # 1. Capacity: largest rate scale 2^(i/4) at which JSQ with the cache meets the SLO for 90%
  #    of requests (mean over the training windows).
  att = lambda i: _mean(ev_train(JSQ, tr_starts, 2.0 ** (i / 4)), "slo_attainment")[0]
  i = LOWEST
  if att(i) < 0.9:
    raise SystemExit(f"JSQ with the cache misses the SLO (TTFT <= {slo[0]} s, TPOT <= {slo[1]} s)"
                     f" for more than 10% of requests even at 2^({LOWEST}/4) x the trace rate: "
                     f"no capacity to take loads from; loosen --slo_ttft or check --model")
  while i < harness.CAPACITY_HI and att(i + 1) >= 0.9:
    i += 1
  base = 2.0 ** (i / 4)
  print(f"capacity: rate scale {base:.3f} = {base * train.rate:.2f} req/s (trace "
        f"{train.rate:.2f} req/s; SLO TTFT <= {slo[0]} s, TPOT <= {slo[1]} s) "
        f"({time.time() - t0:.0f} s)", flush=True)

  rows, knobs_by_load = [], {}
  grid = heuristics.cache_grid()["cache_aware"]
  for ld in [float(x) for x in _LOADS.value]:
    scale = ld * base
    # 2. Tune the cache-aware router on the training windows (goodput).
    scores = [_mean(ev_train(g, tr_starts, scale), "goodput")[0] for g in grid]
    best = grid[int(np.argmax(scores))]
    knobs_by_load[ld] = best
    # 3. Evaluate on the later part.
    for name, ev, kn in (("jsq, no cache", ev_test_nc, JSQ), ("jsq + cache", ev_test, JSQ),
                         ("cache_aware (tuned) + cache", ev_test, best),
                         ("cache_aware (SGLang defaults) + cache", ev_test,
                          {"thr": 0.3, "bal_abs": 64.0, "bal_rel": 1.5})):
      ms = ev(kn, ev_starts, scale)
      rows.append((name, ld, {key: _mean(ms, key) for key in KEYS}))
    print(f"load {ld}: tuned cache_aware {best} ({time.time() - t0:.0f} s)", flush=True)

  print(f"\nMooncake conversation sample: train {len(train)} / eval {len(test)} requests; "
        f"replays of {k} requests, window {w}, warm-up {WARMUP:.0%} excluded; "
        f"{len(ev_starts)} evaluation windows (mean [min, max]); cache entries per GPU "
        f"{routing.default_cache_blocks(cluster)} (512-token blocks); model {model}")
  print(f"{'policy':40s} {'load':>5s} {'goodput r/s':>20s} {'SLO att.':>18s} "
        f"{'cache hit':>18s} {'TTFT p50':>8s} {'TTFT p99':>8s} {'rej':>6s}")
  fmt = lambda t, d=2: f"{t[0]:.{d}f} [{t[1]:.{d}f}, {t[2]:.{d}f}]"
  for name, ld, m in rows:
    hit = fmt(m["cache_hit_rate"], 3) if np.isfinite(m["cache_hit_rate"][0]) else "-"
    print(f"{name:40s} {ld:5.2f} {fmt(m['goodput']):>20s} {fmt(m['slo_attainment'], 3):>18s} "
          f"{hit:>18s} {m['ttft_p50'][0]:8.2f} {m['ttft_p99'][0]:8.2f} "
          f"{m['rejected'][0]:6.1f}")
  print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
  app.run(main)
