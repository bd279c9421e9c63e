"""The Direct-OPD study stages in the library (lm/opd_ladder.py, opd_study.py, opd_report.py),
with known answers and no model training: the runs they call are replaced by fakes."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxrl_suite.core import stage_cache
from jaxrl_suite.lm import opd_ladder, opd_report, opd_study
from jaxrl_suite.lm import tasks as lm_tasks
from jaxrl_suite.repro import flatness, selection

TASKS = {"carry_add": lm_tasks.carry_add(num_digits=2, min_value=1, bug_rate=0.4)}


def _config(**kw):
  c = ml_collections.ConfigDict(dict(
      seed=3, num_seeds=2, sizes=("xs",), mixture=(1.0,), diverge_factor=1.5, max_reruns=1,
      pretrain_steps={"xs": 300}, pretrain_batch={"xs": 64}, pretrain_lr={"xs": 1e-2}))
  c.update(kw)
  return c


# ---- the pretraining ladder ---------------------------------------------------------------------

def test_loss_key_puts_missing_and_non_finite_losses_last():
  assert opd_ladder.loss_key({"loss_last": 0.25}) == 0.25
  for bad in (None, float("nan"), float("inf")):
    assert opd_ladder.loss_key({"loss_last": bad}) == float("inf")


def test_pretrain_key_names_every_input_of_the_run():
  c = _config()
  assert opd_ladder.pretrain_key(c, TASKS, 0, "xs", 0, 1e-2) == {
      "size": "xs", "size_index": 0, "family": 0, "lr": 0.01, "seed": 3, "steps": 300,
      "batch": 64, "mixture": [1.0], "tasks": [["carry_add", 2, 0.4]]}
  keys = {stage_cache.stage_key(opd_ladder.pretrain_key(c, TASKS, *a), "fp") for a in (
      (0, "xs", 0, 1e-2), (0, "xs", 1, 1e-2), (0, "xs", 0, 5e-3), (1, "xs", 0, 1e-2))}
  assert len(keys) == 4                      # family, lr and size index each make another run


def _fake_runs(monkeypatch, losses):
  """pretrain_one replaced by a table {(family, lr): final loss}; params = a [2] vector."""
  calls = []

  def fake(config, tasks, workdir, i, size, f, lr):
    calls.append((f, lr))
    info = {"lr": float(lr), "loss_last": losses[(f, lr)], "wall_s": 1.0, "compile_s": 0.5,
            "cached": False}
    return {"w": jnp.full((2,), 10.0 * f + lr)}, info

  monkeypatch.setattr(opd_ladder, "pretrain_one", fake)
  return calls


def test_a_diverged_family_is_rerun_at_half_lr_and_the_better_attempt_kept(monkeypatch):
  # Family 1 ends at 0.5 > 1.5 x 0.2: rerun at lr 0.005, which ends at 0.25 (not diverged).
  calls = _fake_runs(monkeypatch, {(0, 0.01): 0.2, (1, 0.01): 0.5, (1, 0.005): 0.25})
  params, info = opd_ladder.pretrain_size(_config(), TASKS, "/w", 0, "xs")
  assert calls == [(0, 0.01), (1, 0.01), (1, 0.005)]
  assert info["kept"] == [0, 1] and info["still_diverged"] == []
  assert info["loss_last"] == [0.2, 0.25] and info["lr"] == [0.01, 0.005]
  assert [[a["diverged"] for a in at] for at in info["attempts"]] == [[False], [True, False]]
  assert info["wall_s"] == 3.0 and info["compile_s"] == 1.5 and not info["cached"]
  np.testing.assert_allclose(params["w"], [[0.01, 0.01], [10.005, 10.005]])


def test_a_family_the_rule_cannot_fix_keeps_its_lowest_loss(monkeypatch):
  # The rerun is worse (0.6): attempt 0 stays kept; max_reruns=1 stops there, still diverged.
  _fake_runs(monkeypatch, {(0, 0.01): 0.2, (1, 0.01): 0.5, (1, 0.005): 0.6})
  _, info = opd_ladder.pretrain_size(_config(), TASKS, "/w", 0, "xs")
  assert info["kept"] == [0, 0] and info["still_diverged"] == [1]
  assert info["loss_last"] == [0.2, 0.5] and len(info["attempts"][1]) == 2


# ---- the per-task study -------------------------------------------------------------------------

def test_make_tasks_and_rl_configs_read_the_config():
  from configs import direct_opd as cfg_mod
  c = cfg_mod.get_config("quick")
  tasks = opd_study.make_tasks(c)
  assert list(tasks) == ["carry_add"] and tasks["carry_add"].num_digits == 2
  gcfg, dcfg = opd_study.rl_configs(c)
  assert (gcfg.steps, gcfg.group_size, dcfg.steps, dcfg.top_k) == (8, 8, 8, 0)


def _run(config, full=True, scores=None):
  """A TaskRun without models; `evaluate` is replaced by the per-call `scores` [S] in order."""
  out = {"acc": {}, "sqrt_kl": {}, "wall_s": {}, "compile_s": {}, "flops": {}, "curves": {},
         "eval_wall_s": 0.0, "grpo_flops_at_teacher_steps": {}, "beta_train": {}, "beta": {},
         "ceiling": {}}
  rules = opd_study.Rules(
      pick_beta=lambda size, s: selection.pick_best(f"beta ({size})", s, data="test").choice,
      last_doubling=lambda s, b: flatness.last_doubling(s, b, config.ceiling_flat_delta))
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  return opd_study.TaskRun(config, TASKS["carry_add"], {"xs": (jnp.zeros((2, 3)), {})}, keys,
                           {}, keys, None, None, None, None, None, out, rules, full=full)


def test_distill_modes_of_the_main_and_the_control_task():
  c = ml_collections.ConfigDict(dict(control_modes=("direct_opd_fixed",), control_distill=True))
  assert opd_study.distill_modes(_run(c)) == [
      "direct_opd", "direct_opd_fixed", "vanilla_opd", "shuffled_opd"]
  assert opd_study.distill_modes(_run(c, full=False)) == ["direct_opd_fixed"]
  c.control_distill = False
  assert opd_study.distill_modes(_run(c)) == ["direct_opd", "direct_opd_fixed", "vanilla_opd"]


def _fake_evaluate(monkeypatch, scores):
  seen = []

  def fake(run, size, method, p, beta=0.0, perm=None, split="heldout"):
    seen.append((method, beta, split))
    return np.asarray(scores[len(seen) - 1], np.float64)

  monkeypatch.setattr(opd_study, "evaluate", fake)
  return seen


def test_beta_is_chosen_by_the_rule_on_training_prompts(monkeypatch):
  seen = _fake_evaluate(monkeypatch, [[0.2, 0.4], [0.5, 0.5], [0.1, 0.1]])
  run = _run(ml_collections.ConfigDict(dict(betas=(0.5, 1.0, 2.0))))
  assert opd_study.beta_selection(run, "xs") == 1.0
  assert [s for _, _, s in seen] == ["training"] * 3 and [b for _, b, _ in seen] == [0.5, 1, 2]
  assert run.out["beta"] == {"xs": 1.0}
  assert run.out["beta_train"]["xs"] == {"0.5": [0.2, 0.4], "1": [0.5, 0.5], "2": [0.1, 0.1]}


def _fake_grpo(monkeypatch):
  """GRPO that does nothing: params pass through, one reward per step, FLOPs = steps."""
  monkeypatch.setattr(opd_study.lm_grpo, "make_step",
                      lambda cfg, task, gcfg: (lambda p, r: (p,), None))

  def run_seeds(step, state, keys, steps, chunk, desc, timing):
    timing.update(run_s=1.0, compile_s=0.0)
    return state, {"reward": np.zeros((2, steps))}

  monkeypatch.setattr(opd_study.lm_grpo, "run_seeds", run_seeds)
  monkeypatch.setattr(opd_study.lm_grpo, "train_flops", lambda cfg, task, gcfg: gcfg.steps)


@pytest.mark.parametrize("val,budgets,state", [
    # 0.5 -> 0.5 at the first doubling: flat, the sweep stops at 2b.
    ([[0.5, 0.51], [0.5, 0.51]], [4, 8], "flat"),
    # Still rising by 0.3 at every doubling: runs to ceiling_max_steps (32), state rising.
    ([[0.1, 0.11], [0.4, 0.41], [0.7, 0.7], [1.0, 1.01]], [4, 8, 16, 32], "rising"),
])
def test_the_ceiling_doubles_until_flat_or_the_budget_cap(monkeypatch, val, budgets, state):
  _fake_grpo(monkeypatch)
  seen = _fake_evaluate(monkeypatch, val)
  c = ml_collections.ConfigDict(dict(ceiling_first_steps=4, ceiling_max_steps=32,
                                     ceiling_flat_delta=0.02, chunk=4))
  run = _run(c)
  run.gcfg = opd_study.lm_grpo.GRPOConfig(steps=8)
  opd_study.ceiling_sweep(run, "xs")
  ceil = run.out["ceiling"]["xs"]
  assert ceil["budgets"] == budgets and ceil["state"] == state
  assert ceil["val_scores"] == val and all(s == "validation" for _, _, s in seen)
  assert run.out["flops"]["grpo"]["xs"] == budgets[-1]          # FLOPs at the steps that ran
  assert run.out["grpo_flops_at_teacher_steps"]["xs"] == 8      # at the teacher's GRPO steps
  assert len(run.out["curves"]["grpo_xs_reward"]) == budgets[-1]
  assert run.out["wall_s"]["grpo"]["xs"] == len(budgets)


# ---- the report -------------------------------------------------------------------------------

def test_margin_and_fmt_known_answers():
  acc = {"base": {"s": np.array([0.2, 0.4])}, "decode": {"s": np.array([0.5, 0.5])}}
  np.testing.assert_allclose(opd_report.margin(acc, "decode", "s"), [0.3, 0.1])
  assert opd_report.fmt([0.5, 0.5]) == "0.500 [0.500, 0.500]"
