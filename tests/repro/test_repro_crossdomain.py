"""The cross-domain table at the top of SUMMARY.md, on synthetic records: legacy rows marked,
layer rows read from their stored interval / sweep / verdict, aggregates with known answers."""

import os

import numpy as np
import pytest

from jaxrl_suite.core import results
from jaxrl_suite.repro import aggregate, crossdomain as cd, records
from jaxrl_suite.repro.claims import Claim


def _routing_claim(trace: str) -> Claim:
  return Claim(id=f"routing.{trace}.rl_vs_heuristic", text=f"RL beats the best tuned heuristic "
               f"[{trace}]", paper="Fig. 5", statistic="goodput ratio RL / heuristic per seed",
               unit="seed", kind="superiority", scale="log_ratio", min_effect=0.02,
               why="2% is the smallest goodput gain an operator acts on",
               fair_chance=True, flat_delta=0.01)


def _layer_record(name: str, trace: str, ratio: float, seed: int) -> dict:
  rng = np.random.default_rng(seed)
  b = 100 + rng.normal(0, 1, 5)
  a = b * ratio * np.exp(rng.normal(0, 0.005, 5))
  sweep = {"scores": [list(a * 0.999), list(a)], "budgets": [1e5, 2e5]}
  row = records.claim_record(_routing_claim(trace), a, b, sweep=sweep)
  return {"name": name, "_file": name, "mode": "full", "claims": [row]}


def _legacy_record() -> dict:
  rows = [results.claim("relational MARL beats revenue-management heuristics (best tuned)",
                        "-", "mappo_rel / static revenue 0.975", "contradicted",
                        ci95=[0.94, 0.999]),
          results.claim("demand calibrated to UK elasticities", "-", "-0.5", "reproduced")]
  return {"name": "rail_pricing", "_file": "rail_pricing", "mode": "full", "claims": rows}


def test_legacy_rows_are_marked_and_kept_as_written():
  rows, missing = cd.collect([_legacy_record()])
  assert [r.domain.label for r in rows] == ["rail"]
  (r,) = rows
  assert r.legacy and r.effect is None and r.scores is None
  assert r.verdict == "contradicted" and "0.975" in r.ours and "0.94" in r.ours
  text = cd.table(rows, missing)
  assert cd.LEGACY_NOTE in text
  assert {d.record for d in missing} == {d.record for d in cd.DOMAINS} - {"rail_pricing"}
  assert text.count("no record") == len(cd.DOMAINS) - 1


def test_layer_rows_read_interval_budget_and_verdict():
  recs = [_layer_record("serving_routing_azure_code", "azure_code", 1.10, 1)]
  (r,), _ = cd.collect(recs)
  assert not r.legacy and r.ratio
  stored = recs[0]["claims"][0]
  est, lo, hi = r.effect
  assert est == pytest.approx(np.exp(stored["repro"]["interval"]["result"]["estimate"]))
  assert [lo, hi] == pytest.approx(stored["ci95"])
  assert lo < 1.10 < hi or abs(est - 1.10) < 0.01
  assert r.budget == stored["repro"]["fair_chance"]["result"]["state"]
  assert r.verdict == stored["repro"]["verdict"]["label"]
  # per-seed scores are RL / heuristic of each seed
  a, b = (np.asarray(stored["repro"]["samples"][k]) for k in ("a", "b"))
  np.testing.assert_allclose(r.scores, a / b)


def test_rule_id_finds_a_migrated_claim_whatever_its_text():
  rec = _layer_record("serving_routing", "azure_conv", 1.0, 2)
  rec["claims"][0]["claim"] = "some new wording"
  rows, _ = cd.collect([rec])
  assert len(rows) == 1 and rows[0].domain.record == "serving_routing"


def test_a_keyed_claim_is_the_only_row_of_its_record():
  # batching's per-load claims share the domain's legacy text ("RL within ~1% of"); once the
  # record names its rl_vs_heuristic claim, that one alone is the domain's row.
  rec = _layer_record("serving_batching", "azure_conv", 1.0, 4)
  keyed = rec["claims"][0]
  other = records.claim_record(
      Claim(id="serving_batching.azure_conv.static.within_1pct@0.5.v1",
            text="azure_conv, static, load 0.5: RL within ~1% of tuned static batching",
            paper="p", statistic="s", unit="seed", kind="equivalence", margin=0.01,
            scale="log_ratio", why="w"), [1.0, 1.01, 0.99], [1.0, 1.0, 1.0])
  rec["claims"] = [other, keyed, other]
  rows, missing = cd.collect([rec])
  assert [r.claim for r in rows] == [keyed["claim"]] and all(
      m.record != "serving_batching" for m in missing)
  rec["claims"] = [other]                       # no keyed claim: the legacy text still finds it
  rows, _ = cd.collect([rec])
  assert [r.claim for r in rows] == [other["claim"]]


def test_aggregates_over_tasks_sharing_a_metric_match_rliable_functions():
  recs = [_layer_record("serving_routing", "azure_conv", 1.30, 3),
          _layer_record("serving_routing_azure_code", "azure_code", 1.20, 4),
          _layer_record("serving_routing_mooncake_conv", "mooncake_conv", 1.25, 5),
          _legacy_record()]
  rows, _ = cd.collect(recs)
  (agg,) = cd.aggregates(rows)          # rail is alone on its metric: no aggregate
  assert agg.metric == cd.GOODPUT and agg.n_tasks == 3 and agg.n_without == 0
  scores = [r.scores for r in rows if not r.legacy]
  ref = aggregate.iqm_ci(scores, seed=0)
  assert agg.iqm.estimate == pytest.approx(ref.estimate)
  # the three tasks' ratios are 1.30, 1.20, 1.25 for every run: the IQM sits between them
  assert min(1.20, 1.25, 1.30) <= agg.iqm.estimate <= max(1.20, 1.25, 1.30)
  # every RL run beats every heuristic run by 20-30%: P(RL > heuristic) = 1
  assert agg.p_improve.estimate == pytest.approx(1.0)
  text = cd.section(recs, figure="crossdomain.png")
  assert "P(RL > heuristic)" in text and "crossdomain.png" in text


def test_aggregate_needs_two_tasks_with_samples():
  recs = [_layer_record("serving_routing", "azure_conv", 1.1, 6),
          {"name": "serving_routing_azure_code", "_file": "serving_routing_azure_code",
           "claims": [results.claim("RL beats the best tuned heuristic [azure_code]", "-",
                                    "0.91x", "not reproduced")]}]
  rows, _ = cd.collect(recs)
  (agg,) = cd.aggregates(rows)
  assert agg.iqm is None and agg.p_improve is None and "1 of 2" in agg.note


def test_effects_only_samples_compare_against_no_effect():
  """A row storing only per-seed log-ratios (samples {"x"}) gives P(improvement) from
  d_u > 0: all positive -> 1, all negative -> 0."""
  c = _routing_claim("azure_conv")
  up = records.claim_record(c, np.log([1.1, 1.2, 1.15]), sweep={
      "scores": [[1.0, 1.0, 1.0], [1.001, 1.0, 0.999]], "budgets": [1, 2]})
  down = records.claim_record(_routing_claim("azure_code"), np.log([0.9, 0.8, 0.85]))
  recs = [{"name": "serving_routing", "claims": [up]},
          {"name": "serving_routing_azure_code", "claims": [down]}]
  rows, _ = cd.collect(recs)
  np.testing.assert_allclose(rows[0].scores, [1.1, 1.2, 1.15])
  assert rows[1].budget == "not registered"
  (agg,) = cd.aggregates(rows)
  assert agg.p_improve.estimate == pytest.approx(0.5)    # (1 + 0) / 2 tasks


def test_figure_is_drawn_for_layer_rows_only(tmp_path):
  path = str(tmp_path / "x.png")
  assert cd.figure([_legacy_record()], path) is None and not os.path.exists(path)
  recs = [_layer_record("serving_routing", "azure_conv", 1.1, 7), _legacy_record()]
  assert cd.figure(recs, path) == path and os.path.getsize(path) > 1000
