"""--quick end-to-end run of experiments/rail_pricing.py and its config validation."""

import json
import os

import pytest

from jaxrl_suite.core import results


def test_config_validation_names_the_field():
  import configs.rail_pricing as cfg
  c = cfg.get_config()
  cfg.validate(c)
  c.shift_level = c.demand_level
  with pytest.raises(ValueError, match="shift_level"):
    cfg.validate(c)
  c = cfg.get_config()
  c.variants = ("mappo_transformer",)
  with pytest.raises(ValueError, match="variants"):
    cfg.validate(c)
  c = cfg.get_config()
  c.budget_updates = (12, 24)          # must end at the full budget
  with pytest.raises(ValueError, match="budget_updates"):
    cfg.validate(c)
  c = cfg.get_config()
  c.rl.anneal_lr = True                # a sweep over one run needs a constant learning rate
  with pytest.raises(ValueError, match="anneal_lr"):
    cfg.validate(c)
  c = cfg.get_config()
  c.rl.gae_lambda = 1.5
  with pytest.raises(ValueError, match="rl.gae_lambda"):
    cfg.validate(c)
  c = cfg.get_config()
  c.reward_scale = 0.0
  with pytest.raises(ValueError, match="reward_scale"):
    cfg.validate(c)


@pytest.mark.slow   # ~4-5 CPU-min: ~30 XLA compiles (6 baseline families, 3 RL variants)
def test_quick_run_writes_a_valid_record(tmp_path):
  import configs.rail_pricing as cfg
  from experiments import rail_pricing
  c = cfg.get_config("quick")
  out = rail_pricing.run(c, quick=True, workdir=str(tmp_path), results_dir=str(tmp_path))
  with open(out["path"]) as f:
    rec = json.load(f)
  results.validate_record(rec)
  assert rec["mode"] == "quick"
  names = [cl["claim"] for cl in rec["claims"]]
  assert any("UK" in n for n in names) and any("collusion" in n for n in names)
  uk = [cl for cl in rec["claims"] if "UK" in cl["claim"]][0]
  assert uk["verdict"] == "not reproduced" and "LNER" in uk["detail"]
  for sc in ("train_level", "shift"):
    pols = rec["table"][sc]
    assert {"static", "emsr_b", "emsr_b_mr", "cdlp", "myopic", "cdlp_known", "nash", "monopoly",
            "mappo_rel", "mappo_mlp", "mappo_rel_delta"} <= set(pols)
    # the upper bound is above every policy on the same episodes
    assert rec["upper_bound"][sc]["holds"]
  sw = rec["sweep"]["mappo_rel_delta"]
  assert sw["updates"] == list(c.budget_updates) and len(sw["greedy"][0]) == len(c.budget_updates)
  assert os.path.exists(os.path.join(str(tmp_path), "rail_pricing.png"))
