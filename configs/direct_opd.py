# Direct-OPD reproduction (arXiv 2607.05394): "RL once on a small model, transfer the delta to
# every size, same margin at a fraction of the cost".
#
# COMMAND (full; estimate ~80-90 CPU min alone on the 2-core machine, see below):
#   .venv/bin/python -m experiments.direct_opd
# COMMAND (quick, CI smoke test, a few minutes alone):
#   .venv/bin/python -m experiments.direct_opd --quick
# Every stage stores its output and its measured cost in --workdir (default
# workdirs/direct_opd): pretrained params and per-task results (stages of core.stage_cache);
# rerunning the same command resumes (nothing to pass by hand).
# Budget estimate (per-stage costs measured by the previous full run, 600 problems, 150 steps:
# pretraining s/m/l 27/91/132 s per family at 1200 steps; per 150 steps x 4 seeds GRPO
# 31/58/115 s, each distillation mode 15/28/60 s; ~7 s per evaluation of one method at one
# size; that run took 3,363 s): 4 families at 1200/1500/1800 steps (~1,400 s, +~200 s per l
# rerun), the beta sweep (4 betas x 3 sizes x 2 tasks on training prompts, ~250 s), ceilings
# doubled from 100 steps until flat (as before if flat at 200; +~700 s if m and l need 800):
# ~4,600-5,300 s.
"""Config for experiments/direct_opd.py."""

import ml_collections


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.quick = arg == "quick"
  c.seed = 0
  c.num_seeds = 4                       # seeds of RL / distillation / evaluation sampling
  # jaxrl_suite.lm.model.FAMILY keys; the first is the RL teacher. xs is left out of the full
  # run: at the shared pretraining budget below it stays at ~2% CarryAdd accuracy (loss 0.54 at
  # lr 5e-3, 0.39 at lr 1e-2; 100 GRPO steps moved it 0.02 -> 0.03: no RL signal to transfer).
  c.sizes = ("s", "m", "l")
  c.teacher = "s"
  # Tasks (pretraining mixes them in this order, as in the earlier runs). `main_task` gets every
  # method and carries the verdicts: the capacity-limited three-operand addition (all
  # pretraining solutions correct), where base accuracy rises with size (previous full run:
  # 0.27 / 0.33 / 0.42), as in the paper's family. CarryAdd (a systematic carry-dropping bug in
  # 40% of pretraining solutions) has base accuracy flat across sizes (0.27 / 0.31 / 0.27), so
  # equal margins are built into it: its same-margin rows are reported as not informative.
  c.tasks = ("carry_add", "add_three")
  c.main_task = "add_three"
  c.carry_add_digits = 3
  c.carry_add_bug_rate = 0.4
  c.add_three_digits = 2
  c.mixture = (0.5, 0.5)
  # Pretraining ladder: ONE pretraining family per seed (seed i's models of every size come from
  # PRNG key fold_in(PRNGKey(seed), 100 + size index + 1000 i)), so the seeds are independent
  # replicates of the whole pipeline (the earlier 2 families for 4 seeds were pseudo-replicates).
  # Per-size lr and budget: larger models get a lower lr and more steps (at one shared lr 5e-3,
  # one family of l diverged: final loss 0.306 vs 0.176, add_three base 0.05 vs 0.40).
  c.pretrain_steps = ml_collections.ConfigDict({"xs": 1200, "s": 1200, "m": 1500, "l": 1800})
  c.pretrain_batch = ml_collections.ConfigDict({"xs": 64, "s": 64, "m": 64, "l": 64})
  c.pretrain_lr = ml_collections.ConfigDict({"xs": 5e-3, "s": 5e-3, "m": 3e-3, "l": 2e-3})
  # Divergence rule (registered; lm.pretrain.diverged): a family whose final loss (mean of the
  # last 20 steps) exceeds diverge_factor x the best family's at the same size is rerun with its
  # lr halved, at most max_reruns times; of its attempts the lowest final training loss is kept;
  # every attempt is recorded (results JSON "pretrain": attempts, kept, still_diverged).
  c.diverge_factor = 1.5
  c.max_reruns = 2
  # GRPO on the teacher (the recorded delta), and on every target as the ceiling. The ceiling is
  # trained in doublings ceiling_first_steps, 2x, 4x, ... and scored on validation prompts after
  # each; it stops when the last doubling is flat (repro.flatness.last_doubling at
  # ceiling_flat_delta) or at ceiling_max_steps. The sweep is the recovery claims' fair chance.
  c.grpo_steps = 150
  c.ceiling_first_steps = 100
  c.ceiling_max_steps = 800
  c.ceiling_flat_delta = 0.02
  # Training / validation prompts: eval_problems each, drawn with sample_train (never a
  # held-out problem; same count as the held-out set, so one evaluation program serves all):
  # beta is chosen on training prompts, the ceiling's flatness is judged on validation prompts.
  c.grpo_prompts = 8
  c.grpo_group = 8
  c.grpo_lr = 3e-4                      # 3e-3 collapsed xs (reward 0.41 -> 0.2): measured
  c.grpo_kl = 0.02
  # Distillation (Direct-OPD, vanilla OPD, shuffled control) into every size.
  c.distill_steps = 150
  c.distill_prompts = 8
  c.distill_rollouts = 4                # paper: n = 4
  c.distill_lr = 3e-4
  # alpha: every transfer row runs twice, with the paper's adaptive alpha (1%/step in
  # [alpha_min, alpha_max]; the release script starts it at 2.5, we start at alpha_init) and
  # with alpha fixed at alpha_init = 1 ("direct_opd_fixed"). The same-size consistency check
  # uses the fixed run only: at alpha = 1 and pi_S = pi_ref the optimum is pi_RL, while adaptive
  # alpha climbs to 2.5 once the reward turns positive (target pi_ref^0.6 pi_RL^0.4).
  c.alpha_init = 1.0
  c.alpha_min = 0.5
  c.alpha_max = 2.5
  c.alpha_eps = 0.01
  c.estimator = "full"
  # KL to the student's start: "full" = exact reverse KL per visited state (V=32 makes it cheap);
  # "k3" = the paper's sampled k3 (verl low_var_kl). k3 collapsed xs (reward 0.31 -> 0.81 -> 0.25,
  # KL 2.0 in 40 steps: its gradient is the forward KL's, which does not bound E_p[r]). Measured.
  c.kl_estimator = "full"
  # Decode-time delta weight: the spec's sweep; each size's beta is chosen on training prompts
  # (repro.selection.pick_best), then evaluated on held-out problems. Folder mode (no training
  # split of its own) uses `beta`.
  c.betas = (0.5, 1.0, 1.5, 2.0)
  c.beta = 1.0
  c.top_k = 0                           # student top-k candidates (paper: 16; 0 = all V=32)
  # Registered margins (accuracy points, fixed before the run; their why is in `claims`).
  c.same_margin = 0.05
  c.consistency_margin = 0.05
  c.recovery_margin = 0.05
  c.control_margin = 0.02
  c.vanilla_min_effect = 0.02
  c.control_distill = True              # distil the shuffled delta too (fixed alpha), main task
  # main_task gets every method; the other task only base and the decode-time delta (+ the
  # teacher's GRPO), the distillation modes in control_modes, and the per-size GRPO ceiling
  # only if control_ceiling.
  c.control_ceiling = False
  c.grpo_ceiling = True                 # GRPO on every target of the main task (the ceiling)
  # On the flat-base task only the fixed-alpha run (the consistency check; CPU budget).
  c.control_modes = ("direct_opd_fixed",)
  # Evaluation: held-out problems per seed, sampled at temperature 1 (the policy's accuracy).
  c.eval_problems = 400
  c.eval_temperature = 1.0
  c.chunk = 25                          # steps per jitted scan (a divisor of the step counts)
  if c.quick:  # CI smoke test: 2 sizes, 2-digit CarryAdd, one compile per (stage, size)
    c.num_seeds = 2
    c.sizes = ("xs", "s")
    c.teacher = "xs"
    c.tasks = ("carry_add",)
    c.main_task = "carry_add"
    c.mixture = (1.0,)
    c.carry_add_digits = 2
    c.pretrain_steps = ml_collections.ConfigDict({"xs": 300, "s": 300})
    c.pretrain_batch = ml_collections.ConfigDict({"xs": 64, "s": 64})
    c.pretrain_lr = ml_collections.ConfigDict({"xs": 1e-2, "s": 1e-2})
    c.grpo_steps = 8
    c.max_reruns = 1                    # the rule runs; one rerun keeps the smoke test short
    c.ceiling_first_steps = 4
    c.ceiling_max_steps = 8
    c.betas = (0.5, 1.0)
    c.grpo_prompts = 4
    c.distill_steps = 8
    c.distill_prompts = 4
    c.eval_problems = 128
    c.control_distill = False
    c.chunk = 4
  return c


def validate(config) -> None:
  """Raises ValueError naming the first bad field."""
  for size in config.sizes:
    for f in ("pretrain_steps", "pretrain_batch", "pretrain_lr"):
      if size not in config[f] or config[f][size] <= 0:
        raise ValueError(f"config.{f}.{size} must be set and positive")
  for f in ("num_seeds", "grpo_steps", "ceiling_first_steps", "ceiling_max_steps", "grpo_prompts",
            "grpo_group", "distill_steps", "distill_prompts", "distill_rollouts", "eval_problems",
            "chunk", "carry_add_digits", "add_three_digits"):
    if int(config[f]) <= 0:
      raise ValueError(f"config.{f} must be positive, got {config[f]}")
  if config.grpo_group < 2:
    raise ValueError(f"config.grpo_group must be >= 2, got {config.grpo_group}")
  for f in ("grpo_lr", "distill_lr", "eval_temperature"):
    if float(config[f]) <= 0:
      raise ValueError(f"config.{f} must be > 0, got {config[f]}")
  if not 0.0 <= config.carry_add_bug_rate <= 1.0:
    raise ValueError(f"config.carry_add_bug_rate must be in [0, 1], got {config.carry_add_bug_rate}")
  if not 0 < config.alpha_min <= config.alpha_init <= config.alpha_max:
    raise ValueError("config.alpha_init must lie in [alpha_min, alpha_max] with alpha_min > 0")
  if len(config.mixture) != len(config.tasks) or abs(sum(config.mixture) - 1.0) > 1e-6:
    raise ValueError(f"config.mixture must have one weight per task and sum to 1, got "
                     f"{config.mixture}")
  if config.main_task not in config.tasks:
    raise ValueError(f"config.main_task={config.main_task!r} must be one of config.tasks")
  if config.teacher not in config.sizes or config.sizes[0] != config.teacher:
    raise ValueError(f"config.teacher={config.teacher!r} must be the first of config.sizes")
  if config.kl_estimator not in ("full", "k3"):
    raise ValueError(f"config.kl_estimator must be 'full' or 'k3', got {config.kl_estimator!r}")
  if config.num_seeds < 2:
    raise ValueError(f"config.num_seeds must be >= 2 (a CI over seeds), got {config.num_seeds}")
  if config.ceiling_max_steps < config.ceiling_first_steps:
    raise ValueError("config.ceiling_max_steps must be >= config.ceiling_first_steps")
  if config.diverge_factor <= 1.0 or int(config.max_reruns) < 0:
    raise ValueError(f"config.diverge_factor must be > 1 and config.max_reruns >= 0, got "
                     f"{config.diverge_factor}, {config.max_reruns}")
  if not config.betas or any(float(b) <= 0 for b in config.betas):
    raise ValueError(f"config.betas must be a non-empty tuple of positive weights, got "
                     f"{config.betas}")
  if int(config.top_k) < 0:
    raise ValueError(f"config.top_k must be >= 0 (0 = full vocabulary), got {config.top_k}")
  for f in ("same_margin", "consistency_margin", "recovery_margin", "control_margin",
            "vanilla_min_effect", "ceiling_flat_delta"):
    if float(config[f]) <= 0:
      raise ValueError(f"config.{f} must be > 0 (a registered margin), got {config[f]}")
  for m in config.control_modes:
    if m not in ("direct_opd", "direct_opd_fixed", "vanilla_opd"):
      raise ValueError(f"config.control_modes has unknown mode {m!r}")
  if config.estimator not in ("full", "sampled"):
    raise ValueError(f"config.estimator must be 'full' or 'sampled', got {config.estimator!r}")


# ---- registered claims (judged by jaxrl_suite.repro; experiments/direct_opd.py `judge_claims`) --
TRANSFER = {"direct_opd": "Direct-OPD distillation, adaptive alpha",
            "direct_opd_fixed": "Direct-OPD distillation, alpha fixed at 1",
            "decode": "decode-time delta, beta chosen on training prompts"}
_SEL_BETA = "beta per size: best mean decode-time accuracy on training prompts (config.betas)"
_SEL_NONE = "none (every number fixed in the config before the run)"


def claims(config) -> list[dict]:
  """The registered claims of the main task as plain dicts (Claim.from_dict): per size and
  transfer form, unit = seed (one pretraining family, one teacher delta, one distillation run
  and one evaluation draw per seed; pairs are taken within a seed)."""
  t, others = config.teacher, [s for s in config.sizes if s != config.teacher]
  out = [dict(
      id="direct_opd.consistency.v2",
      text=f"Direct-OPD on the teacher's own size ({t}) gives the same result as full RL "
           "(alpha fixed at 1)",
      paper="blog: 'exactly the same result as full RL' (a consistency check, not in the paper)",
      statistic=f"held-out accuracy, Direct-OPD alpha=1 on {t} minus GRPO on {t}, per seed",
      unit="seed", kind="equivalence", margin=float(config.consistency_margin),
      why="at alpha = 1 and pi_S = pi_ref the objective's optimum is pi_RL (unit-tested); 5 "
          "accuracy points is the largest gap we would still call 'the same result'",
      selection=_SEL_NONE)]
  for m, label in TRANSFER.items():
    for s in others:
      out.append(dict(
          id=f"direct_opd.same_margin.{m}.{s}.v2",
          text=f"almost the same margin at size {s} as at the teacher's size {t} ({label})",
          paper="paper Table 1: +14.1 (1.7B), +5.1 (4B), +6.4 (7B)",
          statistic=f"Delta_{s} - Delta_{t} per seed, Delta = acc(transfer) - acc(base) "
                    "(paired TOST on the per-seed difference)",
          unit="seed", kind="equivalence", margin=float(config.same_margin),
          why="a fixed band of +-5 accuracy points, registered before the run and not scaled "
              "with the noise (the old max(0.25 Delta_S, CI) rule widened with noise); the "
              "paper's own margins differ by up to 9 points",
          selection=_SEL_BETA if m == "decode" else _SEL_NONE))
  for m in ("direct_opd", "direct_opd_fixed"):
    for s in others:
      out.append(dict(
          id=f"direct_opd.recovery.{m}.{s}.v2",
          text=f"delta transfer ({m}) is not worse than GRPO on {s} itself",
          paper="paper: at matched RL steps, small-RL + transfer matches direct RL on R1-7B",
          statistic=f"acc({m}, {s}) - acc(GRPO ceiling, {s}) per seed",
          unit="seed", kind="non_inferiority", margin=float(config.recovery_margin),
          why="5 accuracy points below the per-size RL ceiling still counts as matching it; "
              "the ceiling must be flat on validation prompts for a negative verdict",
          selection="GRPO ceiling budget: doubled until flat on validation prompts",
          fair_chance=True, flat_delta=float(config.ceiling_flat_delta)))
      out.append(dict(
          id=f"direct_opd.vanilla_worse.{m}.{s}.v2",
          text=f"vanilla OPD toward the small RL teacher is worse than {m} on {s}",
          paper="paper: vanilla OPD drags R1-7B from 56.7 to ~50 (below the teacher)",
          statistic=f"acc({m}, {s}) - acc(vanilla OPD, {s}) per seed",
          unit="seed", kind="superiority", min_effect=float(config.vanilla_min_effect),
          why="2 accuracy points: the smallest gap that changes which method one would use",
          selection=_SEL_NONE))
  out.append(dict(
      id="direct_opd.shuffled_control.v2",
      text="the shuffled-delta control gives no gain (decode time, mean over sizes)",
      paper="spec section 1.3: a vocabulary-permuted delta keeps its size, loses its meaning",
      statistic="acc(shuffled decode) - acc(base), mean over sizes, per seed",
      unit="seed", kind="non_inferiority", better="lower", margin=float(config.control_margin),
      why="a gain above 2 points from a meaningless delta would mean the margin is not the "
          "delta's content",
      selection=_SEL_BETA))
  return out
