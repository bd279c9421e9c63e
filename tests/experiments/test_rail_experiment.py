"""--quick end-to-end run of experiments/rail_pricing.py and its config validation."""

import json
import os

import pytest

from conftest import assert_config_rejects

from jaxrl_suite.core import results


@pytest.mark.parametrize("field,value,match", [
    ("shift_level", lambda c: c.demand_level, None),
    ("variants", ("mappo_transformer",), None),
    ("budget_updates", (12, 24), None),        # must end at the full budget
    ("main_updates", 50, "main_updates"),      # must be a sweep point
    ("rel_max_updates", 48, "rel_max_updates"),  # must be >= main_updates
    ("rl.anneal_lr", True, None),              # a sweep over one run needs a constant lr
    ("rl.gae_lambda", 1.5, "rl.gae_lambda"),
    ("reward_scale", 0.0, None)])
def test_config_validation_names_the_field(field, value, match):
  import configs.rail_pricing as cfg
  cfg.validate(cfg.get_config())
  assert_config_rejects(cfg, field, value, match)


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
  uk = [cl for cl in rec["claims"] if "UK rail network" in cl["claim"]][0]
  assert uk["verdict"] == "not reproduced" and "LNER" in uk["detail"]
  for sc in ("train_level", "shift"):
    pols = rec["table"][sc]
    assert {"static", "emsr_b", "emsr_b_mr", "cdlp", "myopic", "cdlp_known", "nash", "monopoly",
            "mappo_rel", "mappo_mlp", "ippo_rel_delta"} <= set(pols)
    # the upper bound is above every policy on the same episodes
    assert rec["upper_bound"][sc]["holds"]
  # MLP variants sweep to the full budget, relational ones to rel_max_updates; all compared at
  # main_updates, with a plateau test in the record
  full = list(c.budget_updates)
  rel = [b for b in full if b <= c.rel_max_updates]
  assert rec["sweep"]["mappo_mlp"]["updates"] == full
  sw = rec["sweep"]["ippo_rel_delta"]
  assert sw["updates"] == rel and len(sw["greedy"][0]) == len(rel)
  for v, m in rec["rl"].items():
    f = m["flattening"]
    lo, hi = f["slope_per_doubling"][1:]
    assert m["updates"] == c.main_updates and lo <= hi
    assert f["flattened"] == (hi < c.flat_tol)
  assert "last_vs_main" in rec["rl"]["mappo_mlp"]["flattening"]
  assert "mappo_rel_vs_mlp" in rec["comparisons"]
  assert set(rec["comparisons"]["collusion_index_by_variant"]) == set(c.variants)
  assert os.path.exists(os.path.join(str(tmp_path), "rail_pricing.png"))


def test_plateau_test_separates_a_rising_from_a_flat_sweep():
  """_flattening: slope of relative revenue per doubling, CI over seeds, flat iff upper < tol."""
  import numpy as np
  import configs.rail_pricing as cfg
  from experiments import rail_pricing
  c = cfg.get_config()
  u = np.asarray(c.budget_updates, np.float64)                 # 12 .. 192, main 96
  rng = np.random.default_rng(0)
  noise = 1 + 0.002 * rng.standard_normal((5, u.size))
  base = 250e3 * (1 + 0.02 * rng.standard_normal((5, 1)))     # seed-level offsets cancel
  rising = base * (1 + 0.05 * np.log2(u / 12)) * noise         # +5% of revenue per doubling
  flat = base * noise
  f_up = rail_pricing._flattening(rising, u, c)
  f_flat = rail_pricing._flattening(flat, u, c)
  assert f_up["points"] == [24.0, 48.0, 96.0, 192.0]
  assert not f_up["flattened"] and f_up["slope_per_doubling"][1] > 0.03
  assert f_flat["flattened"] and abs(f_flat["slope_per_doubling"][0]) < 0.005
  r, lo, hi = f_up["last_vs_main"]                             # 192 vs 96 updates
  expected = (1 + 0.05 * np.log2(16)) / (1 + 0.05 * np.log2(8))  # 1.2 / 1.15 = +4.35%
  np.testing.assert_allclose(r, expected, rtol=1.5e-3)      # 96 vs 48 would be 1.0455
  assert lo < expected < hi and hi - lo < 0.005               # a tight CI around it
  falling = base * (1 - 0.05 * np.log2(u / 12)) * noise        # more budget would not help
  assert rail_pricing._flattening(falling, u, c)["flattened"]


def test_a_loss_is_contradicted_only_once_the_losers_sweep_has_flattened():
  """The fair-chance gate on both loss verdicts: a rising sweep -> inconclusive, a flat one ->
  contradicted (relational vs MLP, and RL vs the best tuned baseline)."""
  import numpy as np
  import configs.rail_pricing as cfg
  from experiments import rail_pricing
  c = cfg.get_config()
  u = np.asarray(c.budget_updates, np.float64)
  rng = np.random.default_rng(1)
  base = 250e3 * (1 + 0.02 * rng.standard_normal((5, 1)))
  noise = 1 + 0.002 * rng.standard_normal((5, u.size))
  rising = rail_pricing._flattening(base * (1 + 0.05 * np.log2(u / 12)) * noise, u, c)
  flat = rail_pricing._flattening(base * noise, u, c)
  assert not rising["flattened"] and flat["flattened"]
  loss, win, tie = (0.93, 0.97), (1.02, 1.06), (0.98, 1.03)
  abl = rail_pricing.ablation_verdict
  assert abl(loss, rising, flat)[0] == "inconclusive"           # relational still rising
  assert "not flattened" in abl(loss, rising, flat)[1]
  assert abl(loss, flat, rising)[0] == "contradicted"           # relational flat: a fair chance
  assert abl(win, flat, rising)[0] == "inconclusive"            # the MLP had no fair chance
  assert abl(win, rising, flat)[0] == "reproduced"
  assert abl(tie, flat, flat)[0] == "inconclusive"
  rm = rail_pricing.beats_rm_verdict
  assert rm(loss, loss, rising)[0] == "inconclusive"
  assert rm(loss, loss, flat)[0] == "contradicted"
  assert rm(win, win, rising)[0] == "reproduced"
  assert rm(win, loss, flat)[0] == "inconclusive"                # must win under the shift too
