"""End-to-end quick run of experiments/direct_opd.py (slow: compiles dominate on 2 cores)."""

import json
import os
import subprocess
import sys

import pytest

from jaxrl_suite.core import results as results_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lm_config_validate_rejects_bad_fields():
  sys.path.insert(0, REPO)
  from configs import direct_opd as cfg_mod
  c = cfg_mod.get_config()
  cfg_mod.validate(c)
  cfg_mod.validate(cfg_mod.get_config("quick"))
  c.grpo_group = 1
  with pytest.raises(ValueError, match="grpo_group"):
    cfg_mod.validate(c)
  c = cfg_mod.get_config()
  c.pretrain_steps.l = -1
  with pytest.raises(ValueError, match="pretrain_steps"):
    cfg_mod.validate(c)


def test_lm_direct_opd_quick_run_writes_valid_results_and_resumes(tmp_path):
  """`--quick` end to end; then the same command again resumes from the workdir cache and
  reports the costs measured by the first run (no flag lets a number be typed in)."""
  res_dir = tmp_path / "results"
  cmd = [sys.executable, "-m", "experiments.direct_opd", "--quick",
         f"--workdir={tmp_path / 'work'}", f"--results_dir={res_dir}"]
  subprocess.run(cmd, cwd=REPO, check=True, timeout=900)
  rec = json.load(open(res_dir / "direct_opd.json"))
  results_lib.validate_record(rec)
  assert rec["mode"] == "quick" and (res_dir / "direct_opd.png").exists()
  acc = rec["runs"]["carry_add"]["acc"]
  assert set(acc) >= {"base", "decode", "decode_shuffled", "direct_opd", "vanilla_opd", "grpo"}
  # Decode-time delta on the teacher itself is the RL model: equal accuracy per seed when the
  # evaluation keys match (same model, same samples).
  assert acc["decode"]["xs"] == pytest.approx(acc["grpo"]["xs"], abs=0.02)
  assert rec["wall"]["stages_from_cache"] == [] and rec["wall"]["from_cache_s"] == 0
  costs = rec["runs"]["carry_add"]
  assert costs["wall_s"]["direct_opd"]["s"] > 0 and costs["flops"]["grpo"]["xs"] > 0
  # Resume: nothing is recomputed, the numbers are the stored ones, wall time includes the
  # stored stage times.
  subprocess.run(cmd, cwd=REPO, check=True, timeout=900)
  rec2 = json.load(open(res_dir / "direct_opd.json"))
  assert rec2["runs"]["carry_add"]["acc"] == acc
  assert set(rec2["wall"]["stages_from_cache"]) == {"pretrain_xs", "pretrain_s",
                                                    "task_carry_add"}
  assert rec2["provenance"]["wall_time_s"] >= rec2["wall"]["from_cache_s"] > 0
  assert "--analyse_only" not in open(os.path.join(REPO, "experiments", "direct_opd.py")).read()
