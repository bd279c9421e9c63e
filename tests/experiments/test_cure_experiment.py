"""experiments/cure.py on the reproduction layer: config validation, the registered claims
(configs/cure.py), known-answer judgements of `judge_claims` on synthetic per-seed curves, no
typed verdict, and the --quick end-to-end run (pretrain, scorers, GRPO under two rewards, noise
check, claim rows that re-judge, results record + plot; slow)."""

import json
import os

import numpy as np
import pytest

from conftest import assert_config_rejects

from configs import cure as cure_config
from jaxrl_suite.core import results as results_lib
from jaxrl_suite.repro import Claim, records, verdicts



@pytest.mark.parametrize("field,value,match", [
    ("grpo_steps", lambda c: c.eval_every * 3 + 1, None),
    ("rewards", ("token_recall",), "claim_f1"),
    ("noise_reject", 1.5, None),
    ("noise_eps_grpo", (0.9, 0.9), "noise_eps_grpo")])
def test_validate_names_the_field(field, value, match):
  cure_config.validate(cure_config.get_config())
  assert_config_rejects(cure_config, field, value, match)


def test_registered_claims_are_valid():
  full, quick = cure_config.get_config(), cure_config.get_config("quick")
  for c in (full, quick):
    cure_config.validate(c)
    regs = [Claim.from_dict(d) for d in cure_config.claims(c)]
    assert len({r.id for r in regs}) == len(regs)
    for r in regs:
      assert r.unit == "seed" and r.id.endswith(".v1") and r.why.strip()
    by_id = {r.id: r for r in regs}
    for h in cure_config.HOLISTIC:
      for cid in (f"cure.final_f1_vs_{h}.v1", f"cure.fall_vs_{h}.v1"):
        assert by_id[cid].kind == "superiority" and by_id[cid].min_effect == 0.02
    assert by_id["cure.precision_only_claims_fall.v1"].min_effect == 0.25
    assert by_id["cure.noise_analytic_agreement.v1"].kind == "descriptive"
  ids = {d["id"] for d in cure_config.claims(full)}   # eps 0.9 above 1 - r = 0.7, eps 0.3 below
  assert {"cure.noisy_eps0.9_adds_false_claims.v1",
          "cure.noisy_eps0.3_no_added_false_claims.v1"} <= ids
  below = Claim.from_dict([d for d in cure_config.claims(full) if "eps0.3" in d["id"]][0])
  assert below.kind == "non_inferiority" and below.margin == 0.1 and below.better == "lower"
  ids = {d["id"] for d in cure_config.claims(quick)}  # no noisy run: one claim per side
  assert {"cure.noisy_above_threshold.v1", "cure.noisy_below_threshold.v1"} <= ids


def _curve(start, end, n_seeds=5, n_eval=6, peak=None, sd=0.005, seed=0):
  """[S, n_eval] curves from `start` to `end` (through `peak` halfway, if given), seed noise."""
  rng = np.random.default_rng(seed)
  mid = (start + end) / 2 if peak is None else peak
  base = np.interp(np.arange(n_eval), [0, n_eval // 2, n_eval - 1], [start, mid, end])
  c = np.broadcast_to(base, (n_seeds, n_eval)) + rng.normal(0, sd, (n_seeds, n_eval))
  c[:, 0] = start   # every run starts from the same captioner
  return c


def _run(f1, recall=(0.6, 0.6), claims=(3.4, 3.4), false=(0.5, 0.5), seed=0):
  return {"curves": {"f1": f1, "recall": _curve(*recall, seed=seed + 1),
                     "claims": _curve(*claims, seed=seed + 2),
                     "false_claims": _curve(*false, seed=seed + 3),
                     "precision": _curve(0.7, 0.7, seed=seed + 4)}}


def _noise():
  rows = [{"eps": e, "measured": 0.3 * (e - 0.7) + 0.001, "measured_ci": [0.3 * (e - 0.7) - 0.01,
                                                                         0.3 * (e - 0.7) + 0.01],
           "analytic": 0.3 * (e - 0.7), "captions": 30, "verified_precision": 0.7}
          for e in (0.0, 0.5, 1.0)]
  return {"rows": rows, "reject": 0.3, "threshold": 0.7}


def test_judge_claims_known_answers():
  """claim_f1 clearly beats token_recall (hacked: peaks then falls) and clearly loses to
  holistic_rm (higher final F1, no fall) -> reproduced / contradicted; qa_utility was not run ->
  inconclusive (cannot express, with its reason); precision-only omits (recall and claim count
  fall); the noisy run above 1 - r adds false claims, the one below does not. Every row
  re-judges from its stored samples."""
  from experiments import cure
  c = cure_config.get_config()
  runs = {"claim_f1": _run(_curve(0.6, 0.7, peak=0.7), seed=10),
          "token_recall": _run(_curve(0.6, 0.45, peak=0.68), seed=20),
          "holistic_rm": _run(_curve(0.6, 0.8, peak=0.8), seed=30),
          "precision_only": _run(_curve(0.6, 0.5), recall=(0.6, 0.3), claims=(3.4, 1.2),
                                 seed=40),
          cure.noisy_name(0.9): _run(_curve(0.6, 0.5), false=(0.5, 2.0), seed=50),
          cure.noisy_name(0.3): _run(_curve(0.6, 0.65), false=(0.5, 0.5), seed=60)}
  rows = cure.judge_claims(c, runs, _noise())
  by_id = {r["repro"]["rule"]["id"]: r for r in rows}
  assert set(by_id) == {d["id"] for d in cure_config.claims(c)}
  v = {k: r["verdict"] for k, r in by_id.items()}
  assert v["cure.final_f1_vs_token_recall.v1"] == verdicts.REPRODUCED
  assert v["cure.fall_vs_token_recall.v1"] == verdicts.REPRODUCED
  assert v["cure.final_f1_vs_holistic_rm.v1"] == verdicts.CONTRADICTED
  for cid in ("cure.final_f1_vs_qa_utility.v1", "cure.fall_vs_qa_utility.v1"):
    assert v[cid] == verdicts.INCONCLUSIVE
    assert verdicts.CANNOT_EXPRESS in by_id[cid]["detail"] and "qa_utility" in by_id[cid]["detail"]
    assert by_id[cid]["repro"]["samples"] == {"x": []}
  assert v["cure.precision_only_recall_falls.v1"] == verdicts.REPRODUCED
  assert v["cure.precision_only_claims_fall.v1"] == verdicts.REPRODUCED
  assert v["cure.noisy_eps0.9_adds_false_claims.v1"] == verdicts.REPRODUCED
  assert v["cure.noisy_eps0.3_no_added_false_claims.v1"] == verdicts.REPRODUCED
  assert v["cure.noise_analytic_agreement.v1"] == verdicts.DESCRIPTIVE
  # the noisy run below the threshold adding false claims after all -> contradicted
  runs[cure.noisy_name(0.3)] = _run(_curve(0.6, 0.5), false=(0.5, 1.5), seed=70)
  worse = cure.judge_claims(c, runs, _noise())
  bad = [r for r in worse if r["repro"]["rule"]["id"] ==
         "cure.noisy_eps0.3_no_added_false_claims.v1"][0]
  assert bad["verdict"] == verdicts.CONTRADICTED
  # no noisy GRPO run on either side -> both rows inconclusive, saying why
  c.noise_eps_grpo = ()
  none = cure.judge_claims(c, runs, _noise())
  sides = [r for r in none if r["repro"]["rule"]["id"] in ("cure.noisy_above_threshold.v1",
                                                          "cure.noisy_below_threshold.v1")]
  assert len(sides) == 2
  for r in sides:
    assert r["verdict"] == verdicts.INCONCLUSIVE and "noise_eps_grpo" in r["detail"]
  for row in rows + worse + none:
    assert records.check_row(row) is None, row["repro"]["rule"]["id"]
    assert set(row) >= {"claim", "paper", "ours", "verdict", "ci95", "detail", "note", "repro"}


@pytest.mark.slow
def test_quick_end_to_end(tmp_path):
  from experiments import cure
  config = cure_config.get_config("quick")
  path, runs, noise = cure.run(config, str(tmp_path / "work"), str(tmp_path / "res"), "quick",
                               progress=False)
  rec = json.load(open(path))
  results_lib.validate_record(rec)
  assert os.path.exists(tmp_path / "res" / "cure.png")
  n_eval = config.grpo_steps // config.eval_every + 1
  assert set(runs) == set(config.rewards)
  for r in runs.values():
    for k in ("f1", "precision", "recall", "claims", "length", "sqrt_kl"):
      assert r["curves"][k].shape == (config.num_seeds, n_eval)
    # evaluated at the start, policy == reference: KL is float32 rounding between the sampler's
    # incremental log-probs and the full-sequence pass (~1e-6), which sqrt magnifies to ~1e-3
    assert np.all(r["curves"]["sqrt_kl"][:, 0] < 1e-2)
    assert np.all((r["curves"]["f1"] >= 0) & (r["curves"]["f1"] <= 1))
  # every run starts from the same captioner, scenes and eval keys: identical step-0 metrics
  f0 = [r["curves"]["f1"][:, 0] for r in runs.values()]
  np.testing.assert_allclose(f0[0], f0[1])
  # the measured noise check follows the analytic expectation (sampling error only)
  for row in noise["rows"]:
    assert abs(row["measured"] - row["analytic"]) < 0.05
  # every registered claim has a row, judged by the layer, that re-judges from its samples
  ids = [d["id"] for d in cure_config.claims(config)]
  assert [r["repro"]["rule"]["id"] for r in rec["claims"]] == ids
  for row in rec["claims"]:
    assert records.check_row(row) is None, row["repro"]["rule"]["id"]
  by_id = {r["repro"]["rule"]["id"]: r for r in rec["claims"]}
  assert len(by_id["cure.final_f1_vs_token_recall.v1"]["repro"]["samples"]["a"]) == \
      config.num_seeds
  assert verdicts.CANNOT_EXPRESS in by_id["cure.final_f1_vs_holistic_rm.v1"]["detail"]
