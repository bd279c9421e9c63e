"""The Direct-OPD study on one task: teacher RL, every transfer row per size, GRPO ceilings.

  run_task(config, task, family, seed_keys, rules) -> out (JSON-able dict)

family[size] = (params [S, ...], info) from `opd_ladder.pretrain_family` (S = config.num_seeds,
seed i's pretrained model); seed_keys [S] PRNG keys. Steps, in order:
  1. GRPO on the teacher (config.teacher, the smallest size): the recorded delta is
     (ref[seed], rl[seed]), one per seed;
  2. for every size M: base; decode-time delta log pi_M + beta r with beta chosen per size on
     TRAINING prompts among config.betas (`rules.pick_beta`) and, on the main task, its
     shuffled-vocabulary control; the distillation rows of DISTILL_MODES on M's own rollouts;
     GRPO on M itself (the ceiling), doubled until the last doubling is flat on VALIDATION
     prompts (`rules.last_doubling`); the teacher's own RL run is its ceiling.
Every number is per seed: out["acc"][method][size] = held-out accuracy [S] (temperature
config.eval_temperature), out["sqrt_kl"][method][size] [S] (sequence-level sqrt KL to the start),
measured costs out["wall_s" | "compile_s" | "flops"][method][size], reward / alpha curves (mean
over seeds), out["beta_train"][size] = {beta: training-prompt accuracy [S]}, out["beta"][size],
out["ceiling"][size] = {budgets, val_scores [K][S], state, reason}.

The selection and flatness rules live in jaxrl_suite.repro, which lm/ may not import (see
ARCHITECTURE.md, "Layers"): the caller passes them in as a `Rules`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import results as results_lib
from jaxrl_suite.lm import direct_opd
from jaxrl_suite.lm import grpo as lm_grpo
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import tasks as lm_tasks

METHODS = ("base", "decode", "decode_shuffled", "direct_opd", "direct_opd_fixed", "vanilla_opd",
           "shuffled_opd", "grpo")
# Distillation rows: result name -> (direct_opd.train mode, adaptive alpha?). The shuffled
# control runs at fixed alpha, so it is compared with direct_opd_fixed on equal terms.
DISTILL_MODES = {"direct_opd": ("direct_opd", True), "direct_opd_fixed": ("direct_opd", False),
                 "vanilla_opd": ("vanilla_opd", None), "shuffled_opd": ("shuffled", False)}
# The ceiling sweep stops at a doubling in one of these flatness states (repro.flatness).
_SWEEP_DONE = ("flat", "degrading")


@dataclasses.dataclass(frozen=True)
class Rules:
  """The study's registered choices, computed by the caller (jaxrl_suite.repro):
  pick_beta(size, {beta name: training accuracy [S]}) -> the chosen beta name;
  last_doubling(val_scores [K][S], budgets [K]) -> an object with .state and .reason
  (repro.flatness.Flatness at config.ceiling_flat_delta)."""
  pick_beta: Callable[[str, dict], str]
  last_doubling: Callable[[list, list], Any]


def make_tasks(config) -> dict[str, lm_tasks.AdditionTask]:
  """{name: task} of config.tasks (carry_add: config.carry_add_digits digits with bug rate
  config.carry_add_bug_rate; add_three: config.add_three_digits digits)."""
  nd, nd3 = config.carry_add_digits, config.add_three_digits
  all_tasks = {
      "carry_add": lm_tasks.carry_add(num_digits=nd, min_value=10 ** max(nd - 2, 0),
                                      bug_rate=config.carry_add_bug_rate),
      "add_three": lm_tasks.add_three(num_digits=nd3, min_value=10 ** (nd3 - 1)),
  }
  return {k: all_tasks[k] for k in config.tasks}


def rl_configs(config) -> tuple[lm_grpo.GRPOConfig, direct_opd.DistillConfig]:
  """(GRPOConfig, DistillConfig) of the study and of the folder-mode run."""
  gcfg = lm_grpo.GRPOConfig(steps=config.grpo_steps, prompts_per_step=config.grpo_prompts,
                            group_size=config.grpo_group, lr=config.grpo_lr,
                            kl_coef=config.grpo_kl)
  dcfg = direct_opd.DistillConfig(
      kl_estimator=config.kl_estimator, steps=config.distill_steps,
      prompts_per_step=config.distill_prompts, rollouts_per_prompt=config.distill_rollouts,
      lr=config.distill_lr, alpha_init=config.alpha_init, alpha_min=config.alpha_min,
      alpha_max=config.alpha_max, alpha_eps=config.alpha_eps, estimator=config.estimator,
      top_k=int(config.get("top_k", 0)))
  return gcfg, dcfg


# One jitted program per (size, task): `direct_opd.evaluate` takes every parameter set, beta,
# the vocabulary permutation and the problems as arguments, so base, decode-time delta at every
# beta, its shuffled control, distilled students and GRPO models of one size, on held-out,
# training and validation problems (same count), share a single compilation.
_JIT_CACHE: dict = {}


def evaluator(cfg, pair_cfg, task, temperature):
  """f(params, start, ref, rl [S,...], beta, perm, ops, keys [S]) -> (acc [S], kl [S])."""
  key = (cfg, pair_cfg, task, temperature)
  if key not in _JIT_CACHE:
    def one(p, start, ref, rl, beta, perm, ops, k):
      return direct_opd.evaluate(cfg, p, start, direct_opd.DeltaPair(pair_cfg, ref, rl), beta,
                                 perm, task, ops, k, temperature)
    _JIT_CACHE[key] = jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, None, None, None, 0)))
  return _JIT_CACHE[key]


@dataclasses.dataclass
class TaskRun:
  """Everything the stages of one task share (built once by `setup`); `out` collects results."""
  config: Any
  task: Any
  family: dict
  seed_keys: Any
  problems: dict        # {"heldout" | "training" | "validation": int32 [N, operands]}
  eval_keys: Any
  teacher_cfg: Any
  ref: Any
  gcfg: Any
  dcfg: Any
  perm: Any
  out: dict
  rules: Rules
  rl: Any = None
  full: bool = True     # the main task gets every method; the other fewer


def setup(config, task, family, seed_keys, rules: Rules) -> TaskRun:
  """The shared state of one task: config.eval_problems held-out, training and validation
  problems each, evaluation keys, the teacher's reference models and the control permutation."""
  n = config.eval_problems
  base_key = jax.random.PRNGKey(config.seed)
  problems = {"heldout": jnp.asarray(task.heldout_set(n, seed=1000 + config.seed)),
              "training": task.sample_train(jax.random.fold_in(base_key, 555), n),
              "validation": task.sample_train(jax.random.fold_in(base_key, 556), n)}
  gcfg, dcfg = rl_configs(config)
  out = {"acc": {}, "sqrt_kl": {}, "wall_s": {}, "compile_s": {}, "flops": {}, "curves": {},
         "eval_wall_s": 0.0, "grpo_flops_at_teacher_steps": {}, "beta_train": {}, "beta": {},
         "ceiling": {}}
  return TaskRun(config, task, family, seed_keys, problems,
                 jax.vmap(lambda k: jax.random.fold_in(k, 7))(seed_keys),
                 lm_model.FAMILY[config.teacher], family[config.teacher][0], gcfg, dcfg,
                 direct_opd.control_permutation(jax.random.PRNGKey(config.seed + 99)), out,
                 rules, full=task.name == config.main_task)


def put(run: TaskRun, kind: str, method: str, size: str, value) -> None:
  """out[kind][method][size] = value as a (nested) list."""
  run.out[kind].setdefault(method, {})[size] = np.asarray(value).tolist()


def evaluate(run: TaskRun, size, method, p, beta=0.0, perm=None, split="heldout") -> np.ndarray:
  """Per-seed accuracy [S] of `p` [S, ...] (with the delta at weight beta) on `split`; held-out
  rows are stored under out["acc"][method][size] (and their sqrt KL to the start)."""
  start = run.family[size][0]
  perm = jnp.arange(run.teacher_cfg.vocab_size) if perm is None else perm
  ev = evaluator(lm_model.FAMILY[size], run.teacher_cfg, run.task, run.config.eval_temperature)
  t0 = time.time()
  acc, kl = ev(p, start, run.ref, run.rl, jnp.float32(beta), perm, run.problems[split],
               run.eval_keys)
  acc = np.asarray(acc, np.float64)
  run.out["eval_wall_s"] += time.time() - t0
  if split == "heldout":
    put(run, "acc", method, size, acc)
    put(run, "sqrt_kl", method, size, np.sqrt(np.maximum(np.asarray(kl), 0.0)))
  return acc


def teacher_rl(run: TaskRun) -> None:
  """GRPO on the teacher: the recorded delta is (ref[seed], rl[seed])."""
  timing = {}
  run.rl, m = lm_grpo.train(run.teacher_cfg, run.ref, run.task, run.gcfg, run.seed_keys,
                            run.config.chunk, desc=f"grpo {run.config.teacher} {run.task.name}",
                            params_per_seed=True, timing=timing)
  run.out["teacher_rl"] = {"wall_s": timing["run_s"], "compile_s": timing["compile_s"],
                           "flops": lm_grpo.train_flops(run.teacher_cfg, run.task, run.gcfg)}
  run.out["curves"]["teacher_grpo_reward"] = m["reward"].mean(0).tolist()


def beta_selection(run: TaskRun, size: str) -> float:
  """Decode-time accuracy at every beta of config.betas on TRAINING prompts (stored in
  out["beta_train"][size]); the beta `rules.pick_beta` chooses (stored in out["beta"][size])."""
  scores = {f"{b:g}": evaluate(run, size, "decode", run.family[size][0], b, split="training")
            for b in run.config.betas}
  run.out["beta_train"][size] = {k: v.tolist() for k, v in scores.items()}
  run.out["beta"][size] = float(run.rules.pick_beta(size, scores))
  return run.out["beta"][size]


def distill(run: TaskRun, size: str, mode: str) -> None:
  """One distillation row (a DISTILL_MODES key) into `size` on its own rollouts: measured cost,
  reward (and alpha) curves, held-out accuracy of the student."""
  c, cfg = run.config, lm_model.FAMILY[size]
  timing, (train_mode, adaptive) = {}, DISTILL_MODES[mode]
  student, m = direct_opd.train(
      cfg, run.family[size][0], direct_opd.DeltaPair(run.teacher_cfg, run.ref, run.rl),
      run.task, run.dcfg, jax.vmap(lambda k: jax.random.fold_in(k, 11))(run.seed_keys),
      mode=train_mode, perm=run.perm, start_per_seed=True, chunk=c.chunk,
      desc=f"{mode} {size} {run.task.name}", timing=timing, adaptive=adaptive)
  put(run, "wall_s", mode, size, timing["run_s"])
  put(run, "compile_s", mode, size, timing["compile_s"])
  put(run, "flops", mode, size, direct_opd.train_flops(
      cfg, run.teacher_cfg, run.task, run.dcfg,
      "vanilla_opd" if mode == "vanilla_opd" else "direct_opd"))
  run.out["curves"][f"{mode}_{size}_reward"] = m["reward"].mean(0).tolist()
  if train_mode != "vanilla_opd":
    run.out["curves"][f"{mode}_{size}_alpha"] = m["alpha"].mean(0).tolist()
  evaluate(run, size, mode, student)


def ceiling_sweep(run: TaskRun, size: str) -> Any:
  """GRPO on `size` itself in doublings b, 2b, 4b, ... (b = config.ceiling_first_steps), scored
  on validation prompts after each; stops once the last doubling is flat or degrading
  (`rules.last_doubling`) or at config.ceiling_max_steps. One optimiser state runs through (no
  restart): budget k is the same run as budget k-1, longer.
  Returns the final params [S, ...]; the sweep goes to out["ceiling"][size]."""
  c, cfg = run.config, lm_model.FAMILY[size]
  init, step = lm_grpo.make_step(cfg, run.task, run.gcfg)
  params = run.family[size][0]
  state = jax.vmap(init)(params, params)
  keys = jax.vmap(lambda k: jax.random.fold_in(k, 13))(run.seed_keys)
  budgets, scores, reward, cost = [], [], [], {"wall_s": 0.0, "compile_s": 0.0}
  done, budget, flat = 0, int(c.ceiling_first_steps), None
  while True:
    timing = {}
    seg = jax.vmap(lambda k: jax.random.fold_in(k, done))(keys)  # fresh stream per segment
    state, m = lm_grpo.run_seeds(step, state, seg, budget - done, c.chunk,
                                 f"grpo {size} {run.task.name} ->{budget}", timing=timing)
    cost["wall_s"] += timing["run_s"]
    cost["compile_s"] += timing["compile_s"]
    reward += m["reward"].mean(0).tolist()
    done = budget
    budgets.append(budget)
    scores.append(evaluate(run, size, "grpo", state[0], split="validation").tolist())
    if len(budgets) >= 2:
      flat = run.rules.last_doubling(scores, budgets)
      if flat.state in _SWEEP_DONE:
        break
    if 2 * budget > c.ceiling_max_steps:
      break
    budget *= 2
  _record_ceiling(run, size, cost, reward, done, budgets, scores, flat)
  return state[0]


def _record_ceiling(run, size, cost, reward, steps, budgets, scores, flat) -> None:
  """The ceiling's costs (FLOPs at the steps it ran and at the teacher's GRPO steps), reward
  curve and sweep (state "unknown" when only one budget ran)."""
  cfg = lm_model.FAMILY[size]
  put(run, "wall_s", "grpo", size, cost["wall_s"])
  put(run, "compile_s", "grpo", size, cost["compile_s"])
  put(run, "flops", "grpo", size,
      lm_grpo.train_flops(cfg, run.task, dataclasses.replace(run.gcfg, steps=steps)))
  run.out["curves"][f"grpo_{size}_reward"] = reward
  run.out["grpo_flops_at_teacher_steps"][size] = lm_grpo.train_flops(cfg, run.task, run.gcfg)
  run.out["ceiling"][size] = {"budgets": budgets, "val_scores": scores,
                              "state": flat.state if flat else "unknown",
                              "reason": flat.reason if flat else "one budget only"}


def _teacher_ceiling(run: TaskRun, size: str) -> None:
  """The teacher's own RL run is its ceiling: its costs and curve, and its held-out row."""
  for k in ("wall_s", "compile_s", "flops"):
    put(run, k, "grpo", size, run.out["teacher_rl"][k])
  run.out["curves"][f"grpo_{size}_reward"] = run.out["curves"]["teacher_grpo_reward"]
  run.out["grpo_flops_at_teacher_steps"][size] = run.out["teacher_rl"]["flops"]
  evaluate(run, size, "grpo", run.rl)


def distill_modes(run: TaskRun) -> list[str]:
  """The distillation rows of this task: all of them on the main task, config.control_modes on
  the other; the shuffled control where config.control_distill asks for it (main task)."""
  c = run.config
  return (["direct_opd", "direct_opd_fixed", "vanilla_opd"] if run.full
          else list(c.control_modes)) + (["shuffled_opd"] if c.control_distill and run.full
                                         else [])


def run_size(run: TaskRun, size: str) -> None:
  """Every row of one size: base, decode-time delta (beta chosen on training prompts) and its
  shuffled control, the distillation modes, and the GRPO ceiling."""
  c, params = run.config, run.family[size][0]
  evaluate(run, size, "base", params)
  beta = beta_selection(run, size)
  evaluate(run, size, "decode", params, beta)
  if run.full:
    evaluate(run, size, "decode_shuffled", params, beta, run.perm)
  for mode in distill_modes(run):
    distill(run, size, mode)
  if size == c.teacher:
    _teacher_ceiling(run, size)
  elif (run.full and c.grpo_ceiling) or (not run.full and c.control_ceiling):
    evaluate(run, size, "grpo", ceiling_sweep(run, size))
  acc = run.out["acc"]
  print(f"[{run.task.name}] {size}: " + ", ".join(
      f"{k}={np.mean(acc[k][size]):.3f}" for k in acc if size in acc[k]), flush=True)


def run_task(config, task, family, seed_keys, rules: Rules) -> dict[str, Any]:
  """All methods on one task: a JSON-able dict of per-seed numbers and measured costs (module
  docstring). family[size][0] carries a leading seed axis (seed i's pretrained model)."""
  t0 = time.time()
  run = setup(config, task, family, seed_keys, rules)
  teacher_rl(run)
  for size in config.sizes:
    run_size(run, size)
  run.out["task_wall_s"] = time.time() - t0
  return results_lib.to_jsonable(run.out)
