# BallastHydro-v0 reproduction: a recurrent RL agent trained across generated ship layouts vs
# the plain and the heel-aware replanner (Dijkstra on believed time), per clog regime.
#
# COMMAND (full; budget in the header of results/ballast_hydro.md):
#   .venv/bin/python -m experiments.ballast_hydro
# COMMAND (quick, tests, ~1 CPU-min):
#   .venv/bin/python -m experiments.ballast_hydro --quick
"""Config for experiments/ballast_hydro.py."""

import ml_collections

from jaxrl_suite.agents import ballast_hydro as A

VARIANTS = ("rl_gru", "rl_gru_resid")


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.quick = arg == "quick"
  c.seed = 0
  # RL seeds (vmapped), CIs over seeds x paired episodes. Issue #37 asked >= 5 (3 seeds' noise was
  # as large as one budget doubling's change); at 5 the last doubling's per-seed change had SD
  # 0.039 (record 04a0b33: the seeds genuinely disagree, 2,048 validation episodes each), so a t
  # interval fits inside the +-0.05 flat band only from about 8 seeds.
  c.n_seeds = 8
  # Layouts: "family" draws them from the parameterised family (envs/ballast/family.py: ring
  # mains with 0-3 crossovers, split mains, branch trees, 8-20 tanks, 1-3 pumps, pipe friction
  # and diameter), training / validation / held-out from disjoint key streams of family_seed
  # (hydro_layouts.family_layouts); "generator" is the earlier scan of generator.py seeds from
  # train_seed0 / val_seed0 / heldout_seed0. Either way a layout is used only if its route
  # library fits max_routes, it has >= 3 blockable pipes and its plans can start upright, and
  # every layout is padded to the set's sizes, so one program trains and scores them all.
  c.layout_source = "family"
  c.family_seed = 0
  c.family = ml_collections.ConfigDict(dict(
      n_tanks=(8, 20), n_pumps=(1, 3), topologies=("ring", "direct", "branch"),
      topology_p=(0.5, 0.25, 0.25), n_cross=(0, 3), friction_factor=(0.015, 0.03),
      pipe_diameter_m=(0.25, 0.4)))
  c.train_seed0 = 1000
  c.n_train = 6
  # Pump counts of the training layouts (one per layout; () = as drawn). As drawn, 5 of the 6
  # training layouts have 1 pump while every held-out and shipped layout has 2-3, and the
  # residual agent's multi-pump commands fail blocked episodes on a 3-pump layout already at
  # initialisation (docs/ballast.md, "rl_gru_resid"); so the full run trains on the mix
  # (override with n_train: give n_train counts, or () for the layouts as drawn).
  c.train_pumps = (1, 2, 3, 1, 2, 3)
  c.heldout_seed0 = 5000
  c.n_heldout = 3
  # Validation layouts (a third disjoint seed range): RL's budget sweep, whose last doubling is
  # the fair-chance test (jaxrl_suite.repro.flatness), is scored on them, never on the held-out
  # evaluation layouts; their banks are drawn with seed 2.
  c.val_seed0 = 3000
  c.n_val = 2
  c.shipped = ("ring14", "direct10")
  c.max_routes = 256
  c.train_bank = 128                 # episodes per training layout bank
  c.eval_episodes = 256              # per evaluation layout (its own bank, seed 1)
  c.sweep_episodes = 64              # per held-out layout at each budget checkpoint
  # ... and at each variant's last two checkpoints (the last doubling, whose paired change is
  # the flattening test): the 1efacac run's last doubling, on 64 x 3 episodes x 3 seeds, had a
  # CI 12.8 steps wide (-2.09 [-8.05, +4.72]), too wide to show a flat curve even where one is
  # flat (rl_gru_resid, +0.02 [-1.37, +1.37], failed the -1 step bound); every evaluation
  # episode (256) quarters the episode part of the variance for ~1 min of extra scoring.
  # The c5d8a1f record's last doubling (320 -> 640, +0.021 [-0.038, +0.079] per-seed log change,
  # band +-0.05) had a per-seed SD of 0.047: about what 2 x 256 paired episodes of a policy with
  # ~5% failures (each counted at the step limit) give from episode noise alone, so the test
  # could not show a flat curve even if the seeds agreed. The rule and its band are unchanged;
  # the last two checkpoints are scored on 2,048 validation episodes per layout (8x: the
  # episode part of the SD ~0.017; ~5 min more of scoring, in chunks of rl_stage.SWEEP_CHUNK).
  # Measured (4ca6691 record): SD 0.039, -0.007 [-0.056, +0.042]: the seeds themselves disagree
  # (one seed 7% worse, three flat), so ~8 seeds, not episodes, would show the curve flat.
  c.sweep_episodes_last = 2048
  c.variants = VARIANTS
  # Budget sweep: checkpoints (in PPO updates) of one constant-lr run; the last is the budget.
  # Flattened = the last doubling's change in held-out decision steps has a CI inside
  # +/- flat_tol steps (or is not an improvement).
  # The c5c7f5c run stopped at 80 updates and its last doubling (40 -> 80) had not flattened;
  # the 1efacac run went to 160 (983,040 env steps per seed) and its last doubling had not
  # either (-2.09 [-8.05, +4.72] steps), so rl_gru now runs to 320 (1,966,080 env steps per
  # seed). Time: 1efacac took 3,755 s wall on the shared 2-core box (banks 384 s, rl_gru 2,228 s
  # for 160 updates, rl_gru_resid 848 s for 80, scoring 269 s); rl_gru at 320 alone is ~4,500 s,
  # so the residual ablation stops at 40 updates (`resid_max_updates`, ~430 s instead of 848 s):
  # its sweep was flat at 40.0-40.4 steps from 10 to 80 updates (changes +0.33, -0.39, +0.02),
  # and the full run must fit in ~95 minutes (~5,700 s estimated).
  # The 8aad2b7 run (1,811 s wall, rl_gru 1,439 s for 320 updates) had still not flattened at
  # 320 (last doubling -2.67 [-7.05, +2.06] steps): rl_gru now runs to 640 (3,932,160 env steps
  # per seed, ~1,450 s more); the checkpoints up to 320 are the same run's.
  # The family run (5 seeds, ballast-dependent stability) costs 5.7 s per update on the 2-core
  # box (c8cf7ac: rl_gru 1,828 s for 320 updates), so 640 would add ~30 min; the budget is 320
  # updates (1,966,080 env steps per seed): the 8aad2b7 record's next doubling (320 -> 640) made
  # it worse (+1.62 [+0.27, +2.99] steps), and c8cf7ac's last doubling (160 -> 320) is flat on
  # the validation layouts (-0.009 [-0.042, +0.024] per-seed log change, threshold +-0.05).
  # With the trim and draught limits (3c01019, 2,262 s wall) the same doubling is not shown flat
  # (+0.019 [-0.057, +0.095]: the seeds disagree), so the budget doubles once more, to 640
  # updates (3,932,160 env steps per seed, ~30 min more; the checkpoints up to 320 are the same
  # run's, the learning rate being constant).
  c.budget_updates = (10, 20, 40, 80, 160, 320, 640)
  c.resid_max_updates = 40           # rl_gru_resid's budget: its sweep stops at this checkpoint
  c.chunk_updates = 5                # updates per layout before switching to the next one
  c.flat_tol = 1.0
  # Diagnosis non-inferior to the reference diagnoser = the paired F1 difference's CI above
  # -diag_margin F1 (experiments/ballast_hydro.diagnosis_verdict).
  c.diag_margin = 0.05
  # Reward units: an episode return is ~-20..+10 at the env's scale; PPO's value clip (0.2 per
  # update) then keeps the critic far from its targets (value loss ~25, KL ~1e-7 at lr 3e-4: no
  # learning in a 40-update probe). At 0.1 returns are O(1): value loss ~0.3, KL ~5e-3, and the
  # same probe's training success rose 0.71 -> 0.96 on ring14 (lr 1e-3).
  c.reward_scale = 0.1
  c.ppo = ml_collections.ConfigDict(dict(
      num_envs=64, num_steps=32, update_epochs=4, num_minibatches=4, lr=1e-3, gamma=0.99,
      gae_lambda=0.95, ent_coef=0.01, vf_coef=0.5, clip_eps=0.2, max_grad_norm=0.5,
      # weight of the diagnosis head's BCE on the true clog mask (the learner's aux hook)
      aux_coef=0.5))
  c.agent = A.default_config()
  c.n_boot = 2000
  if c.quick:
    c.n_seeds = 2
    c.family.n_tanks = (8, 12)
    c.n_train = 2
    c.train_pumps = (2, 3)
    c.n_heldout = 1
    c.n_val = 1
    c.shipped = ("direct10",)
    c.max_routes = 128
    c.train_bank = 32
    c.eval_episodes = 16
    c.sweep_episodes = 16
    c.sweep_episodes_last = 16
    c.budget_updates = (1, 2)
    c.resid_max_updates = 1
    c.chunk_updates = 1
    c.ppo.num_envs = 8
    c.ppo.num_steps = 16
    c.ppo.update_epochs = 1
    c.ppo.num_minibatches = 2
    c.agent.hidden = 16
    c.agent.gru = 16
    c.agent.slots = 8
    c.n_boot = 200
  return c


def family_params(c):
  """config.family (+ max_routes) as envs/ballast/family.FamilyParams; ValueError naming the
  field when it is not a valid family."""
  from jaxrl_suite.envs.ballast import family as F
  f = c.family
  conv = lambda v, kind: tuple(kind(x) if isinstance(x, (int, float)) else x for x in v)
  try:
    fp = F.FamilyParams(
        n_tanks=conv(f.n_tanks, int), n_pumps=conv(f.n_pumps, int),
        topologies=tuple(f.topologies), topology_p=conv(f.topology_p, float),
        n_cross=conv(f.n_cross, int), friction_factor=conv(f.friction_factor, float),
        pipe_diameter_m=conv(f.pipe_diameter_m, float), max_routes=int(c.max_routes))
    F.validate_family(fp)
  except (TypeError, ValueError) as e:
    raise ValueError(str(e).replace("FamilyParams.", "config.family.")) from None
  return fp


def validate(c) -> None:
  """Raises ValueError naming the first bad field."""
  from configs import checks
  checks.positive_ints(c, ("n_seeds", "n_train", "n_heldout", "n_val", "max_routes",
                           "train_bank",
                           "eval_episodes", "sweep_episodes", "sweep_episodes_last",
                           "chunk_updates", "n_boot"))
  checks.positive_ints(c.ppo, ("num_envs", "num_steps", "update_epochs", "num_minibatches"),
                       prefix="ppo")
  checks.positive_ints(c.agent, ("hidden", "gru", "slots"), prefix="agent")
  checks.subset_of(c, "variants", VARIANTS)
  if c.layout_source not in ("family", "generator"):
    raise ValueError(f"config.layout_source must be 'family' or 'generator', got "
                     f"{c.layout_source!r}")
  if c.layout_source == "family":
    family_params(c)       # raises naming the bad config.family field
  tp = tuple(c.train_pumps)
  if tp and (len(tp) != c.n_train or any(not isinstance(x, int) or not 1 <= x <= 3 for x in tp)):
    raise ValueError(f"config.train_pumps must be () or n_train={c.n_train} pump counts in "
                     f"1..3, got {tp}")
  if c.n_seeds < 2:
    raise ValueError(f"config.n_seeds must be >= 2 for a confidence interval, got {c.n_seeds}")
  b = tuple(c.budget_updates)
  if not b or any(not isinstance(x, int) or x <= 0 for x in b) or list(b) != sorted(set(b)):
    raise ValueError(f"config.budget_updates must be increasing positive integers, got {b}")
  if c.resid_max_updates not in b:
    raise ValueError(f"config.resid_max_updates={c.resid_max_updates} must be one of "
                     f"config.budget_updates {b}")
  if any(x % c.chunk_updates for x in b):
    raise ValueError(f"config.chunk_updates={c.chunk_updates} must divide every "
                     f"config.budget_updates {b}")
  if c.ppo.num_envs % c.ppo.num_minibatches:
    raise ValueError(f"config.ppo.num_minibatches={c.ppo.num_minibatches} must divide "
                     f"config.ppo.num_envs={c.ppo.num_envs} (the agent is recurrent)")
  if not 0.0 < c.diag_margin < 1.0:
    raise ValueError(f"config.diag_margin must be in (0, 1) F1, got {c.diag_margin!r}")
  if not c.ppo.aux_coef >= 0:
    raise ValueError(f"config.ppo.aux_coef must be >= 0, got {c.ppo.aux_coef!r}")
  for name in ("lr", "max_grad_norm", "clip_eps"):
    if not c.ppo[name] > 0:
      raise ValueError(f"config.ppo.{name} must be > 0, got {c.ppo[name]!r}")
  for name in ("gamma", "gae_lambda"):
    if not 0.0 <= c.ppo[name] <= 1.0:
      raise ValueError(f"config.ppo.{name} must be in [0, 1], got {c.ppo[name]!r}")
  if not c.reward_scale > 0:
    raise ValueError(f"config.reward_scale must be > 0, got {c.reward_scale!r}")
  if not c.flat_tol > 0:
    raise ValueError(f"config.flat_tol must be > 0, got {c.flat_tol!r}")
  seeds = sorted((c.train_seed0, c.val_seed0, c.heldout_seed0))
  if any(b - a < 500 for a, b in zip(seeds[:-1], seeds[1:])):
    raise ValueError(f"config.train_seed0 / val_seed0 / heldout_seed0 must be >= 500 apart (the "
                     f"layout seed ranges must not overlap), got {seeds}")
  from jaxrl_suite.repro import Claim
  for d in claims():
    Claim.from_dict(d)   # a malformed registration fails here, before any compute


# ------------------------------------------------------------------------------------------------
# Registered claims (jaxrl_suite.repro): fixed before the run, judged by the layer from per-seed
# samples; a changed rule gets a new id. The unit is the RL seed (its greedy policy on the same
# paired evaluation episodes as the baselines; episodes averaged per seed). Decision steps count
# a failed episode at the step limit (steps_eff). "32% fewer" is a ratio 0.68, better = lower.
# The fair-chance sweep: rl_gru's validation-layout steps_eff per seed at each budget; the last
# doubling must change them by under FLAT_DELTA (log scale) for a negative verdict to stand.
FLAT_DELTA = 0.05
_FLAT_WHY = ("flat_delta 0.05: the earlier rule's 1 step on ~20 decision steps; a last doubling "
             "that moves validation steps by under 5% cannot close a 32% gap")
_GROUPS = {"held_out": "held-out generated layouts (never trained on)",
           "shipped": "the shipped layouts ring14 / direct10 (never trained on)"}
_COMP = {"heel_aware": ("the heel-aware replanner", "the better of heel_replan with one command "
                        "and with a command per pump by mean steps_eff on the training layouts' "
                        "bank episodes with >= 1 blocked pipe (training data, the headline's "
                        "regime; never the evaluation episodes)"),
         "replan": ("the plain replanner (B-replan, heel ignored)", "none (a fixed rule)")}


def _steps_ratio(cid: str, text: str, paper: str, reference: str, **rule) -> dict:
  """A claim on rl_gru's steps_eff / a reference's on the blocked episodes (per RL seed)."""
  return dict(id=cid, text=text, paper=paper,
              statistic=f"per RL seed, mean steps_eff of rl_gru / mean steps_eff of {reference} "
                        "on the episodes with >= 1 blocked pipe, pooled over the group's "
                        "layouts, as a log-ratio",
              unit="seed x episode", better="lower", scale="log_ratio", **rule)


def _steps(group: str) -> dict:
  who, sel = _COMP["heel_aware"]
  return _steps_ratio(
      f"ballast_hydro.rl_vs_heel_aware_32_{group}.v1",
      f"RL needs 32% fewer decision steps than Dijkstra when pipes are blocked (vs {who}, "
      f"{_GROUPS[group]})",
      "'beats Dijkstra by 32% on decision steps when pipes get blocked' (blog claim)",
      "the comparator", kind="superiority", size=0.68, fair_chance=True, flat_delta=FLAT_DELTA,
      why=f"size 0.68: the blog's '32% fewer decision steps' as a ratio of means; {_FLAT_WHY}",
      selection=f"comparator: {sel}; RL: its action mode (greedy / sampled) by mean steps_eff "
                "on the training layouts' blocked episodes, the last budget's policy (no "
                "checkpoint chosen)")


def _vs_heel_blind(group: str) -> dict:
  # v1 of this id was a superiority claim against the heel-blind replanner, which crosses the
  # heel limit in most episodes (a strawman, issue #37): v2 reports the ratio without a verdict.
  return _steps_ratio(
      f"ballast_hydro.rl_vs_replan_{group}.v2",
      f"RL's decision steps relative to the heel-blind replanner (B-replan, which ignores the "
      f"heel limit) when pipes are blocked ({_GROUPS[group]})",
      "context for the blog's '32% fewer decision steps than Dijkstra'", "B-replan",
      kind="descriptive",
      why="descriptive: B-replan ignores stability and fails most blocked episodes at the heel "
          "limit, so beating it says nothing about routing; the heel-aware replanner is the "
          "comparator of the 32% claim",
      selection=_COMP["replan"][1])


def _violations(group: str) -> dict:
  return dict(
      id=f"ballast_hydro.rl_fewer_limit_violations_{group}.v2",
      text=f"RL crosses the ship's limits (heel, GM, trim, draught) less often than the "
           f"heel-aware replanner ({_GROUPS[group]}, all regimes)",
      paper="issue #21: where RL could help under the heel limit",
      statistic="per RL seed, rl_gru's violation rate minus the heel-aware replanner's on the "
                "same episodes, pooled over the group's layouts",
      unit="seed x episode", kind="superiority", better="lower", min_effect=0.01,
      fair_chance=True, flat_delta=FLAT_DELTA,
      why=f"min_effect 0.01: one violation in a hundred operations is the smallest rate "
          f"difference an operator would notice; {_FLAT_WHY} (on steps_eff, which counts "
          "violations as failures)",
      selection=_COMP["heel_aware"][1])


def _diagnosis(group: str, form: str) -> dict:
  # Both forms are registered before the run (issue #37: the v1 study switched to
  # non-inferiority after an inconclusive run): "noninferior" (within diag_margin F1 of the
  # reference) and "superior" (better than the reference).
  common = dict(
      paper="'diagnoses clogs with no extra flow sensors' (blog claim); issue #21",
      statistic="per RL seed, micro F1 of rl_gru's head minus the reference's F1 on the edges "
                "each episode exercised, pooled over the group's layouts and episodes",
      unit="seed", better="higher", fair_chance=True, flat_delta=FLAT_DELTA,
      selection="RL's action mode (training episodes); the reference runs on the head's own "
                "final observations")
  if form == "noninferior":
    return dict(
        id=f"ballast_hydro.diagnosis_noninferior_{group}.v1",
        text=f"RL diagnoses clogs without flow sensors: the head is no worse than the "
             f"reference consistency diagnoser on the same final observations "
             f"({_GROUPS[group]}, >= 1 blocked)",
        kind="non_inferiority", margin=0.05,
        why=f"margin 0.05 F1 (config.diag_margin): the head within 0.05 F1 of the level-only "
            f"reference diagnoses as well as soundings allow; {_FLAT_WHY}", **common)
  return dict(
      id=f"ballast_hydro.diagnosis_superior_{group}.v1",
      text=f"RL's head diagnoses clogs better than the reference consistency diagnoser on the "
           f"same final observations ({_GROUPS[group]}, >= 1 blocked)",
      kind="superiority", min_effect=0.02,
      why=f"min_effect 0.02 F1: a smaller F1 gain changes no repair decision on ~40 pipes; "
          f"{_FLAT_WHY}", **common)


CLAIMS = tuple(f(g) for g in ("held_out", "shipped") for f in (
    _steps, _vs_heel_blind, _violations, lambda g: _diagnosis(g, "noninferior"),
    lambda g: _diagnosis(g, "superior")))


def claims() -> list[dict]:
  """The registered claims as plain dicts (repro.claims.Claim.from_dict reads each)."""
  return [dict(d) for d in CLAIMS]
