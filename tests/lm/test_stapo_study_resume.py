"""A STAPO training run stopped part-way resumes from the workdir's stage cache with the data a
run without the stop computes (lm/stapo_study.py `lr_sweep`, `train_until_flat`)."""

import glob
import os

import jax
import numpy as np

from configs import stapo as stapo_config
from jaxrl_suite.lm import stapo_study
from tests.lm import jitted


class _Flat:
  """A last-doubling rule that never calls the curve flat (every budget runs)."""

  def to_dict(self):
    return {"state": "rising"}


def _tiny():
  c = stapo_config.get_config("quick")
  c.methods, c.flat_methods = ["grpo"], ["grpo"]
  c.num_seeds, c.sweep_seeds, c.sweep_steps, c.lr_grid = 2, 2, 1, [1e-3]
  c.group_size, c.train_envs, c.val_envs, c.eval_envs = 2, 4, 4, 4
  c.first_budget, c.max_budget, c.chunk = 1, 2, 1
  env, p, cfg, rcfg = stapo_study.setup(c)
  params = jitted.init_params(cfg, jax.random.PRNGKey(0))
  return c, stapo_study.Programs(c, env, p, cfg, rcfg), params


def _train(progs, params, workdir):
  timing = {}
  tr = stapo_study.train_until_flat(progs, params, {"grpo": 1e-3}, jax.random.PRNGKey(1),
                                    timing, lambda s, b: _Flat(), workdir)
  return tr, timing


def test_a_stopped_run_resumes_from_its_stored_stages(tmp_path):
  c, progs, params = _tiny()
  wd = str(tmp_path)
  full, _ = _train(progs, params, wd)
  assert full["budgets"] == [1, 2]
  # drop the second segment, as if the run had stopped after the first: the rerun reads
  # segment 0 (train state included) and trains segment 1 from it
  seg1 = glob.glob(os.path.join(wd, "stages", "stapo", "train", "grpo_seg1.*.npz"))
  assert len(seg1) == 1
  os.remove(seg1[0])
  resumed, timing = _train(progs, params, wd)
  assert timing.get("cached_s", 0) > 0 and timing.get("run_s", 0) + timing.get("compile_s", 0) > 0
  for m in ("val", "curves"):
    for k, v in full[m]["grpo"].items():
      np.testing.assert_array_equal(resumed[m]["grpo"][k], v, err_msg=f"{m}/{k}")
  for k, v in full["ev"]["grpo"].items():
    np.testing.assert_array_equal(resumed["ev"]["grpo"][k], v, err_msg=f"ev/{k}")
  # and a run without a workdir computes the same numbers
  plain, _ = _train(progs, params, None)
  for m in ("val", "curves"):
    for k, v in full[m]["grpo"].items():
      np.testing.assert_array_equal(plain[m]["grpo"][k], v, err_msg=f"no workdir: {m}/{k}")
  # a larger max_budget reads every stored segment back and trains only the new one
  c.max_budget = 4
  longer, timing = _train(progs, params, wd)
  assert longer["budgets"] == [1, 2, 4] and timing["cached_s"] > 0
  np.testing.assert_array_equal(longer["val"]["grpo"]["success"][:2],
                                full["val"]["grpo"]["success"])
  assert len(glob.glob(os.path.join(wd, "stages", "stapo", "train", "grpo_seg*.npz"))) == 3
  c.max_budget = 2
  # the sweep's runs (same compiled step) are stages too: a second sweep trains nothing
  pick = lambda m, s: sorted(s)[0]
  t1, t2 = {}, {}
  a, _ = stapo_study.lr_sweep(progs, params, jax.random.PRNGKey(2), t1, pick, wd)
  b, _ = stapo_study.lr_sweep(progs, params, jax.random.PRNGKey(2), t2, pick, wd)
  assert "cached_s" not in t1 and t2["cached_s"] > 0 and "run_s" not in t2
  np.testing.assert_array_equal(a["grpo"]["0.001"], b["grpo"]["0.001"])
