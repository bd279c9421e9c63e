"""Configs validate; the two reproductions run end to end in --quick mode (slow)."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import configs.serving_batching as cfg_b  # noqa: E402
import configs.serving_routing as cfg_r  # noqa: E402


@pytest.mark.parametrize("cfg", [cfg_b, cfg_r])
def test_configs_validate(cfg):
  for arg in (None, "quick"):
    c = cfg.get_config(arg)
    cfg.validate(c)
    assert c.num_seeds >= (2 if arg else 8)
  c = cfg.get_config("quick")
  c.eval_table = -1
  with pytest.raises(ValueError, match="eval_table"):
    cfg.validate(c)
  c = cfg.get_config("quick")
  c.loads = (0.5, -1.0)
  with pytest.raises(ValueError, match="loads"):
    cfg.validate(c)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["serving_routing", "serving_batching"])
def test_quick_reproduction_end_to_end(tmp_path, name, monkeypatch):
  import importlib
  from absl import flags
  from jaxrl_suite.core import results
  # Both experiment scripts define the same absl flags (--config, --quick, ...): drop the other
  # script's definitions so that both can be imported in one test process.
  for f in ("config", "quick", "workdir", "eval_trace", "reuse_policies"):
    if f in flags.FLAGS:
      delattr(flags.FLAGS, f)
  for m in ("experiments.serving_routing", "experiments.serving_batching"):
    sys.modules.pop(m, None)
  exp = importlib.import_module(f"experiments.{name}")
  cfg = importlib.import_module(f"configs.{name}")
  c = cfg.get_config("quick")
  c.num_seeds = 2
  monkeypatch.setattr(results, "REPO_ROOT", str(tmp_path))
  out = exp.run(c, True, str(tmp_path / "wd"))
  rec = json.load(open(tmp_path / "results" / f"{name}.json"))
  results.validate_record(rec)
  assert rec["mode"] == "quick" and len(rec["claims"]) >= 1
  assert all(cl["verdict"] in results.VERDICTS for cl in rec["claims"])
  assert (tmp_path / "results" / f"{name}.png").exists()
  # --eval_trace: the saved policy is evaluated on any trace file.
  trace = os.path.join(ROOT, "jaxrl_suite", "envs", "serving", "data", "azure2023_code_sample.csv")
  exp.run(c, True, str(tmp_path / "wd"), eval_trace=trace)
  assert (tmp_path / "results" / f"{name}_eval.json").exists()
