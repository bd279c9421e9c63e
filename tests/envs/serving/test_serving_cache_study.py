"""envs/serving/cache_study.py (experiments/serving_cache.py's measurement): the cluster for a
model, per-window statistics, the capacity probe, the tune-then-evaluate comparison with fake
evaluators and the printed table, with known answers (nothing compiled)."""

import math

import pytest

from jaxrl_suite.envs.serving import cache_study as cs
from jaxrl_suite.envs.serving import cost_model, heuristics


def test_cluster_for_the_default_model():
  names, mml = cs.cluster_for(cost_model.TRACE_MODELS["mooncake_conv"])
  assert names == ("H100-8B", "A100-8B", "L4-8B", "L4-8B")
  assert mml == 51792   # the L4's KV above the admission watermark (docs/serving.md)


def test_window_stats_and_capacity_index():
  ms = [{"goodput": 1.0}, {"goodput": 3.0}, {"goodput": 2.0}]
  assert cs.window_stats(ms, "goodput") == (2.0, 1.0, 3.0)
  assert all(math.isnan(x) for x in cs.window_stats(ms, "ttft_p50"))
  # attainment falls with the rate: the last i at or above 0.9, probed upwards from LOWEST
  probed = []
  att = lambda i: probed.append(i) or (0.95 if i <= -3 else 0.5)
  assert cs.capacity_index(att) == -3 and probed == list(range(cs.LOWEST, -1))
  assert cs.capacity_index(lambda i: 0.5) is None                  # even the lowest misses
  assert cs.capacity_index(lambda i: 1.0, lowest=0, highest=2) == 2   # capped at the highest
  assert cs.capacity_index(lambda i: 0.95 if i != 1 else 0.1, lowest=0, highest=5) == 0


def test_compare_tunes_on_training_windows_and_evaluates_every_policy():
  grid = heuristics.cache_grid()["cache_aware"]
  target = grid[len(grid) // 2]
  calls, seen = [], []

  def ev_train(knobs, starts, scale):   # goodput peaks at `target`
    calls.append(("train", scale, tuple(starts)))
    return [{"goodput": 1.0 if knobs == target else 0.0}]

  def ev(tag):
    def run(knobs, starts, scale):
      calls.append((tag, scale, tuple(starts)))
      return [{k: float(i) for i, k in enumerate(cs.KEYS)}, {k: 1.0 for k in cs.KEYS}]
    return run

  rows = cs.compare(ev_train, ev("test"), ev("test_nc"), [0, 5], [7], base=2.0, loads=[0.5],
                    on_load=lambda ld, best: seen.append((ld, best)))
  assert seen == [(0.5, target)]
  assert [r[0] for r in rows] == ["jsq, no cache", "jsq + cache", "cache_aware (tuned) + cache",
                                  "cache_aware (SGLang defaults) + cache"]
  assert {c for c in calls if c[0] == "train"} == {("train", 1.0, (0, 5))}   # scale = load x base
  assert [c[0] for c in calls if c[0] != "train"] == ["test_nc", "test", "test", "test"]
  assert rows[0][1] == 0.5 and rows[0][2]["goodput"] == (0.5, 0.0, 1.0)
  assert rows[0][2]["slo_attainment"] == (1.0, 1.0, 1.0)


def test_table_lines_known_answer():
  m = {k: (1.0, 0.5, 1.5) for k in cs.KEYS}
  lines = cs.table_lines([("jsq + cache", 0.7, m),
                          ("jsq, no cache", 1.0, {**m, "cache_hit_rate": (math.nan,) * 3})])
  assert lines[0].split() == ["policy", "load", "goodput", "r/s", "SLO", "att.", "cache", "hit",
                              "TTFT", "p50", "TTFT", "p99", "rej"]
  assert lines[1] == (f"{'jsq + cache':40s}  0.70    1.00 [0.50, 1.50] 1.000 [0.500, 1.500] "
                      "1.000 [0.500, 1.500]     1.00     1.00    1.0")
  assert lines[2] == (f"{'jsq, no cache':40s}  1.00    1.00 [0.50, 1.50] 1.000 [0.500, 1.500] "
                      f"{'-':>18s}     1.00     1.00    1.0")   # no cache: no hit rate
