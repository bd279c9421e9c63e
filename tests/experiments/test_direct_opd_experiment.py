"""End-to-end quick run of experiments/direct_opd.py (slow: compiles dominate on 2 cores)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import assert_config_rejects

from jaxrl_suite.core import results as results_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("field,value", [
    ("grpo_group", 1), ("pretrain_steps.l", -1),
    ("pretrain_seeds", lambda c: c.num_seeds + 1), ("grpo_ceiling_steps", 0)])
def test_lm_config_validate_rejects_bad_fields(field, value):
  sys.path.insert(0, REPO)
  from configs import direct_opd as cfg_mod
  cfg_mod.validate(cfg_mod.get_config())
  cfg_mod.validate(cfg_mod.get_config("quick"))
  assert_config_rejects(cfg_mod, field, value, field.split(".")[0])


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
  assert set(acc) >= {"base", "decode", "decode_shuffled", "direct_opd", "direct_opd_fixed",
                      "vanilla_opd", "grpo"}
  # The consistency stage keeps alpha at 1 for every step; the adaptive row moves it.
  curves = rec["runs"]["carry_add"]["curves"]
  assert curves["direct_opd_fixed_xs_alpha"] == [1.0] * rec["config"]["distill_steps"]
  assert max(abs(a - 1.0) for a in curves["direct_opd_xs_alpha"]) > 1e-3
  consistency = [c for c in rec["claims"] if "teacher's own size" in c["claim"]]
  assert len(consistency) == 1 and "alpha fixed at 1" in consistency[0]["claim"]
  # Per-seed pretraining families: 2 families, seeds 0 and 1 on different ones.
  pre = rec["pretrain"]["xs"]
  assert pre["family_of_seed"] == [0, 1] and len(set(pre["loss_last"])) == 2
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


def _synthetic_res(base_l, decode_l, grpo_curve_l):
  """A results dict with 4 seeds, sizes s (teacher) and l, for analyse()."""
  rng = np.random.default_rng(0)
  noisy = lambda m: (m + 0.005 * rng.standard_normal(4)).tolist()
  acc = {"base": {"s": noisy(0.3), "l": noisy(base_l)},
         "decode": {"s": noisy(0.6), "l": noisy(decode_l)},
         "direct_opd_fixed": {"s": noisy(0.58), "l": noisy(decode_l - 0.02)},
         "grpo": {"s": noisy(0.6), "l": noisy(0.8)}}
  return {"acc": acc, "sqrt_kl": {}, "wall_s": {"direct_opd_fixed": {"s": 1.0, "l": 2.0},
                                                "grpo": {"s": 2.0, "l": 4.0}},
          "flops": {"direct_opd_fixed": {"s": 1.0, "l": 2.0}, "grpo": {"s": 2.0, "l": 4.0}},
          "grpo_flops_at_teacher_steps": {"s": 2.0, "l": 4.0},
          "curves": {"grpo_s_reward": [0.5] * 8, "grpo_l_reward": grpo_curve_l,
                     "direct_opd_fixed_s_alpha": [1.0] * 8}}


def test_lm_analyse_flat_base_is_not_informative_and_beaten_ceiling_is_unreliable():
  sys.path.insert(0, REPO)
  from configs import direct_opd as cfg_mod
  from experiments import direct_opd as exp
  c = cfg_mod.get_config()
  c.sizes, c.teacher, c.tasks = ("s", "l"), "s", ("flat", "rising")
  c.mixture = (0.5, 0.5)
  res = {"flat": _synthetic_res(0.3, 0.6, [0.8] * 8),          # flat base, equal margins
         "rising": _synthetic_res(0.45, 0.85, [0.8] * 8)}      # rising base, decode beats GRPO
  claims, summary, md = exp.analyse(c, res)
  by = {c_["claim"]: c_ for c_ in claims}
  flat = [v for k, v in by.items() if k.startswith("[flat] almost the same margin")]
  assert flat and all(v["verdict"] == "inconclusive" and "not informative" in v["ours"]
                      for v in flat)
  rising = [v for k, v in by.items() if k.startswith("[rising] almost the same margin")]
  assert rising and all("not informative" not in v["ours"] for v in rising)
  assert not summary["rising"]["ceiling"]["l"]["reliable"]      # 0.85 > ceiling 0.8
  assert "beaten" in summary["rising"]["ceiling"]["l"]["why"]
  rec = [v for k, v in by.items() if k.startswith("[rising] delta transfer")]
  assert rec and rec[0]["verdict"] == "inconclusive" and "unreliable" in rec[0]["ours"]
  # A ceiling still rising over its last quarter is unreliable too (even when not beaten).
  r2 = _synthetic_res(0.3, 0.6, [0.1] * 4 + [0.5, 0.6, 0.7, 0.9])
  acc2 = {k: {s: np.asarray(v) for s, v in d.items()} for k, d in r2["acc"].items()}
  ok, why = exp.ceiling_status(c, r2, acc2, "l")
  assert not ok and "still rising" in why
  assert exp.plateaued([0.5] * 8, 0.02)[0] and not exp.plateaued([0, 0, 0, 0, 0, 0, 1, 1],
                                                                  0.02)[0]
