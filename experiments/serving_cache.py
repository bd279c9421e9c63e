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
The measurement is `jaxrl_suite.envs.serving.cache_study`; this script sets it up and prints.

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

from configs import serving_routing as routing_config
from jaxrl_suite.envs.serving import cache_study as cs
from jaxrl_suite.envs.serving import cost_model, harness, routing, traces

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


def main(argv):
  del argv
  t0 = time.time()
  k, w = _TABLE.value, _WINDOW.value
  mc = traces.load_shipped("mooncake_conv")
  train, test = mc.split(0.6)
  tr_starts = harness.window_starts(len(train), k, _N_TRAIN.value)
  ev_starts = harness.window_starts(len(test), k, _N_EVAL.value)
  model = _MODEL.value
  cluster, mml = cs.cluster_for(model)
  print(f"model {model}: cluster {cluster}, max_model_len {mml}; clipping: "
        + "; ".join(f"{n} {traces.clip_stats(t, mml)}" for n, t in (("train", train),
                                                                   ("eval", test))), flush=True)
  slo = (_SLO_TTFT.value, _SLO_TPOT.value)
  ev_train = cs.make_eval(train, k, w, True, model, slo)
  ev_test = cs.make_eval(test, k, w, True, model, slo)
  ev_test_nc = cs.make_eval(test, k, w, False, model, slo)

  # 1. Capacity: largest rate scale 2^(i/4) at which JSQ with the cache meets the SLO for 90%
  #    of requests (mean over the training windows).
  i = cs.capacity_index(lambda i: cs.window_stats(
      ev_train(cs.JSQ, tr_starts, 2.0 ** (i / 4)), "slo_attainment")[0])
  if i is None:
    raise SystemExit(f"JSQ with the cache misses the SLO (TTFT <= {slo[0]} s, TPOT <= {slo[1]} s)"
                     f" for more than 10% of requests even at 2^({cs.LOWEST}/4) x the trace rate:"
                     f" no capacity to take loads from; loosen --slo_ttft or check --model")
  base = 2.0 ** (i / 4)
  print(f"capacity: rate scale {base:.3f} = {base * train.rate:.2f} req/s (trace "
        f"{train.rate:.2f} req/s; SLO TTFT <= {slo[0]} s, TPOT <= {slo[1]} s) "
        f"({time.time() - t0:.0f} s)", flush=True)

  # 2. Tune the cache-aware router on the training windows (goodput), 3. evaluate on the later
  #    part.
  rows = cs.compare(ev_train, ev_test, ev_test_nc, tr_starts, ev_starts, base,
                    [float(x) for x in _LOADS.value],
                    on_load=lambda ld, best: print(f"load {ld}: tuned cache_aware {best} "
                                                   f"({time.time() - t0:.0f} s)", flush=True))

  print(f"\nMooncake conversation sample: train {len(train)} / eval {len(test)} requests; "
        f"replays of {k} requests, window {w}, warm-up {cs.WARMUP:.0%} excluded; "
        f"{len(ev_starts)} evaluation windows (mean [min, max]); cache entries per GPU "
        f"{routing.default_cache_blocks(cluster)} (512-token blocks); model {model}")
  print("\n".join(cs.table_lines(rows)))
  print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
  app.run(main)
