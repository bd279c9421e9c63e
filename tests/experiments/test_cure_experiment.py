"""The --quick end-to-end run of experiments/cure.py (pretrain, scorers, GRPO under two rewards,
noise check, verdicts, results record + plot) and config validation."""

import json
import os

import numpy as np
import pytest

from conftest import assert_config_rejects

from configs import cure as cure_config
from jaxrl_suite.core import results as results_lib


@pytest.mark.parametrize("field,value,match", [
    ("grpo_steps", lambda c: c.eval_every * 3 + 1, None),
    ("rewards", ("token_recall",), "claim_f1"),
    ("noise_reject", 1.5, None)])
def test_validate_names_the_field(field, value, match):
  cure_config.validate(cure_config.get_config())
  assert_config_rejects(cure_config, field, value, match)


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
  assert len(rec["claims"]) >= 2
