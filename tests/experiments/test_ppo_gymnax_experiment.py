"""experiments/ppo_gymnax.py on the reproduction layer: registered claims, rows re-judged from their
samples (never asserted as constants), the stage cache, and a bad config stopped before compiling.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from configs import ppo_gymnax as cfg_module
from experiments import ppo_gymnax as exp
from jaxrl_suite.repro import records
from jaxrl_suite.repro import verdicts as vd
from jaxrl_suite.repro.claims import Claim

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _runs(cartpole_final, reinforce, minatar, u=12):
  """Synthetic stage outputs: `returned` ends at cartpole_final [S]; `episode` curves are the
  given [S, U] arrays (first/last windows are what the claims read)."""
  ret = np.tile(np.linspace(20, 1, u), (len(cartpole_final), 1))
  ret[:, -1] = cartpole_final
  base = {"env": "x", "timesteps": 1, "wall_s": 0.0, "cached": False}
  return {"ppo_cartpole": dict(base, seeds=len(cartpole_final), returned=ret,
                               episode=np.full_like(ret, np.nan)),
          "reinforce_cartpole": dict(base, seeds=len(reinforce), returned=reinforce,
                                     episode=reinforce),
          "ppo_minatar": dict(base, seeds=len(minatar), returned=minatar, episode=minatar)}


def _t_ci(x):
  """float64 Student-t 95% CI of the mean (independent of the layer's code)."""
  x = np.asarray(x, np.float64)
  h = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
  return x.mean() - h, x.mean() + h


def test_every_claim_is_registered_and_valid():
  cfg = cfg_module.get_config()
  cfg_module.validate(cfg)
  ids = [Claim.from_dict(d).id for d in cfg_module.claims()]
  assert len(ids) == len(set(ids)) == 3
  for d in cfg_module.claims():
    c = Claim.from_dict(d)
    assert c.why.strip() and c.selection.strip() and c.kind != "descriptive"


def test_rows_rejudge_and_follow_the_rule_on_known_answers():
  cfg = cfg_module.get_config()
  k = cfg.window_updates
  rng = np.random.default_rng(0)
  # CartPole solved on 8 seeds; REINFORCE rises by ~60; MinAtar does not move.
  solved = np.array([500.0, 500, 498, 500, 497, 500, 500, 499])
  learn = np.concatenate([rng.normal(22, 2, (8, k)), rng.normal(50, 2, (8, 2)),
                          rng.normal(82, 3, (8, k))], 1)
  flat = rng.normal(0.4, 0.05, (4, 2 * k + 3))
  rows = exp.claim_rows(cfg, _runs(solved, learn, flat))
  assert len(rows) == 3
  for row in rows:   # every verdict is what the layer recomputes from the stored samples
    assert records.check_row(json.loads(json.dumps(row))) is None
  # the rule, by an independent float64 computation:
  lo, hi = _t_ci(solved)
  assert 500 / 1.05 <= lo and hi <= 500 * 1.05
  assert rows[0]["verdict"] == vd.REPRODUCED
  d = learn[:, -k:].mean(1) - learn[:, :k].mean(1)
  assert _t_ci(d)[0] > 0 and rows[1]["verdict"] == vd.REPRODUCED
  np.testing.assert_allclose(rows[1]["repro"]["samples"]["a"], learn[:, -k:].mean(1))
  d = flat[:, -k:].mean(1) - flat[:, :k].mean(1)
  lo, hi = _t_ci(d)
  assert lo <= 0 < hi < 1.0 and rows[2]["verdict"] == vd.NOT_REPRODUCED


def test_a_seed_without_finished_episodes_cannot_express_the_claim():
  cfg = cfg_module.get_config()
  k = cfg.window_updates
  ep = np.full((3, 2 * k), 5.0)
  ep[:, k:] = 9.0
  ep[1, :k] = np.nan       # seed 1 finished no episode in its first window
  runs = _runs(np.full(3, 500.0), ep, ep)
  row = exp.claim_rows(cfg, runs)[1]
  assert row["verdict"] == vd.INCONCLUSIVE and vd.CANNOT_EXPRESS in row["detail"]
  assert "1 of 3 seeds" in row["detail"]
  assert records.check_row(row) is None


def test_no_verdict_is_typed_in_the_script():
  import ast
  words = set(vd.WORDS) | {vd.EXCEEDS}
  with open(exp.__file__) as f:
    tree = ast.parse(f.read())
  assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
              and isinstance(n.value, str) and n.value.strip() in words]


def test_window_updates_too_large_for_a_stage_is_refused_naming_the_field():
  cfg = cfg_module.get_config("quick")
  cfg.window_updates = 100
  with pytest.raises(ValueError, match="config.window_updates"):
    cfg_module.validate(cfg)


@pytest.mark.parametrize("args,names", [
    (("--config.seeds=0",), ("config.seeds", "positive integer")),
    (("--quick", "--config.minatar.num_envs=-3"), ("config.minatar.num_envs",)),
    (("--config.sedes=4",), ("--config.sedes", "seeds")),
])
def test_a_bad_config_stops_before_compiling(tmp_path, args, names):
  env = dict(os.environ, PYTHONPATH=REPO)
  p = subprocess.run([sys.executable, "-m", "experiments.ppo_gymnax", *args,
                      f"--workdir={tmp_path / 'wd'}"], cwd=REPO, env=env, capture_output=True,
                     text=True, timeout=120)
  assert p.returncode == 2, p.stderr[-2000:]
  assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 2, p.stderr
  for n in names:
    assert n in p.stderr
  assert not (tmp_path / "wd" / "stages").exists()   # no stage started


@pytest.mark.slow
def test_a_tiny_run_end_to_end_then_from_the_stage_cache(tmp_path):
  cfg = cfg_module.get_config("quick")
  cfg.seeds, cfg.minatar_seeds, cfg.window_updates = 2, 2, 1
  cfg.cartpole_timesteps = 4 * 128 * 2
  cfg.reinforce_timesteps = 16 * 64 * 2
  cfg.minatar_timesteps = 8 * 32 * 2
  cfg_module.validate(cfg)
  from jaxrl_suite.repro import entry
  e = entry.Entry("ppo_gymnax", cfg, True, str(tmp_path / "wd"), str(tmp_path / "out"), "-")
  first = exp.run(e)
  with open(tmp_path / "out" / "ppo_gymnax.json") as f:
    rec = json.load(f)
  assert rep_ok(str(tmp_path / "out"), len(rec["claims"]))
  assert all(not r["cached"] for r in first["runs"].values())
  again = exp.run(e)   # every stage from the workdir: same samples, same verdicts
  assert all(r["cached"] for r in again["runs"].values())
  for a, b in zip(first["claims"], again["claims"]):
    assert a["repro"]["samples"] == b["repro"]["samples"] and a["verdict"] == b["verdict"]
  assert os.path.exists(tmp_path / "out" / "ppo_gymnax.png")


def rep_ok(results_dir, n):
  rep = records.reanalyse(results_dir)
  return rep.ok and rep.checked == n == rep.agree
