# BallastNet reproduction: "RL-Ballast beats Dijkstra by 32% on decision steps when pipes get
# blocked, and diagnoses clogs with no extra flow sensors" (blog claim, no public paper).
#
# COMMAND (full, ~25 min on 2 cores (budget 30): measured 1,492 s from a clean tree at 0e21159,
# 5 seeds and both half-budget sweeps, with another run sharing the cores; writes
# results/ballast.{json,md,png} AND results/ballast_dt_sweep.{json,md} from the same evaluation):
#   .venv/bin/python -m experiments.ballast
#   (where the time went with 3 seeds: v1 PPO 3 seeds x 200k steps ~280 s, v2 PPO 3 seeds x 200k ~300 s,
#   v1 evaluation in 2 action modes + baselines + dt sweep + v2 evaluation + generalisation, the rest)
# COMMAND (quick, CI smoke test, ~60-90 CPU-s, mostly XLA compilation; v2 and the
# generalisation test are off, tests/ballast covers the v2 agent):
#   .venv/bin/python -m experiments.ballast --quick
# dt sweep alone (oracle vs B-replan / B-tabu at 2, 5, 15, 30 min) -> results/ballast_dt_sweep.*:
#   .venv/bin/python -m experiments.ballast --config.sweep_only=True
# Generalisation test of the trained agent on a layout it was not trained on:
#   .venv/bin/python -m experiments.ballast --layout jaxrl_suite/envs/ballast/layouts/direct10.json
# Published with every number: baseline variant (B-replan, k_fail=1, time metric), dt, clog prior.
"""Config for experiments/ballast.py."""

import ml_collections

from jaxrl_suite.algos import ballast as _algo   # the ballast PPO configs (v1 and v2)


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.quick = arg == "quick"
  c.seed = 0
  c.layout = "ring14"                    # training / headline layout
  c.eval_layout = "direct10"             # generalisation layout ("" to skip); --layout overrides
  c.dt_minutes = 5.0                     # decision step length (design doc default)
  c.t_limit = 96                         # steps per episode (8 h at 5 min)
  c.sigma_level = 0.0025                 # sounding noise, fraction of capacity
  c.n_episodes = 2000                    # paired evaluation episodes (same keys for every policy)
  c.baselines = ("oracle", "replan", "tabu", "pess", "bayes")
  c.dt_sweep = (2.0, 15.0, 30.0)         # extra step lengths for the oracle-vs-replan gap
                                         # (same n_episodes keys; also -> results/ballast_dt_sweep.*)
  c.n_boot = 2000
  c.sweep_only = False                   # run only the dt sweep -> results/ballast_dt_sweep.*
  # RL agents train through the one on-policy learner (algos/on_policy.py) with
  # config.agent = "ballast_v1" / "ballast_v2" (agents/ballast.py, agents/ballast_v2.py).
  # RL agent (PPO + route scorer + diagnosis head with aux BCE on privileged clog labels);
  # evaluated greedy and sampled, headline mode chosen on separate selection episodes
  c.rl = _algo.default_config("v1")
  # per seed; 98 updates of 64 x 32 steps (~200k): an even number of updates, so the
  # fair-chance sweep's half budget is exactly half (a doubling, as repro.flatness requires)
  c.rl.total_timesteps = 200_704
  c.rl_seeds = 5                         # PPO seeds, vmapped in one jit (>= 5: issue 37;
  # with 3 the flatness CI of the last doubling was wider than +-0.02)
  # v2 (stability target, two pumps): PPO pump-pair agent vs greedy controllers with true
  # (oracle-v2) and believed (replan-v2) conductances, on the same paired episodes
  c.v2 = True
  c.v2_episodes = 1000
  # v2 episodes from checked banks (envs/ballast/net_bank.py: every episode finishable by the
  # true-clog v2 controller within t_limit, #blocked at the prior's exact quotas, rejection rate
  # reported): one bank for training, one for evaluation, this many episodes each (reset draws a
  # row uniformly). 0 = BallastNet-v0's unchecked generator (the results before issue #21's fix:
  # ~36% of direct10's >= 2-blocked v2 episodes were not finishable).
  c.v2_bank = 2048
  c.rl_v2 = _algo.default_config("v2")
  c.rl_v2.total_timesteps = 200_704      # per seed; 98 updates (even: see c.rl above)
  c.rl_v2_seeds = 5                      # vmapped in one jit
  # Units of the baseline-only claims (oracle vs a replanner): the evaluation episodes are cut
  # into this many groups of independent keys, each group one unit (an evaluation seed).
  c.eval_groups = 10
  # RL's fair-chance sweep (jaxrl_suite.repro.flatness): the v1 and v2 agents are also trained
  # at half their budgets (a complete run of that budget, same seeds) and both are scored on
  # their selection episodes (validation keys, never the evaluation ones).
  c.fair_chance_sweep = True
  if c.quick:
    c.n_episodes = 150
    c.baselines = ("oracle", "replan", "tabu")
    c.dt_sweep = (15.0,)
    c.n_boot = 300
    c.rl.total_timesteps = 64 * 32 * 4
    c.rl_seeds = 2          # >= 2 seeds: the RL claim's interval is over seeds
    c.eval_groups = 5
    c.eval_layout = ""      # quick mode skips the generalisation test (compile time) ...
    c.v2 = False            # ... and v2; the full run and the tests cover both
  return c


def validate(c) -> None:
  """Raises ValueError naming the first bad field."""
  for f in ("n_episodes", "t_limit", "n_boot", "rl_seeds", "v2_episodes", "rl_v2_seeds"):
    if int(c[f]) <= 0:
      raise ValueError(f"config.{f} must be positive, got {c[f]}")
  if not isinstance(c.eval_groups, int) or not 2 <= c.eval_groups <= c.n_episodes // 5:
    raise ValueError(f"config.eval_groups must be an int in 2..n_episodes/5 (>= 5 episodes "
                     f"per group), got {c.eval_groups!r} with n_episodes={c.n_episodes}")
  from jaxrl_suite.repro import Claim
  for d in claims():
    Claim.from_dict(d)   # a malformed registration fails here, before any compute
  if not isinstance(c.v2_bank, int) or c.v2_bank < 0:
    raise ValueError(f"config.v2_bank must be an int >= 0 (0 = unchecked generator), got "
                     f"{c.v2_bank!r}")
  if not c.dt_minutes > 0:
    raise ValueError(f"config.dt_minutes must be positive, got {c.dt_minutes}")
  if any(not d > 0 for d in c.dt_sweep):
    raise ValueError(f"config.dt_sweep entries must be positive, got {c.dt_sweep}")
  if not 0 <= c.sigma_level < 0.2:
    raise ValueError(f"config.sigma_level must be in [0, 0.2), got {c.sigma_level}")
  from jaxrl_suite.envs.ballast.baselines import BASELINES
  for b in c.baselines:
    if b not in BASELINES:
      raise ValueError(f"config.baselines has unknown {b!r}; valid: {BASELINES}")
  for b in ("oracle", "replan"):
    if b not in c.baselines:
      raise ValueError(f"config.baselines must include {b!r} (the headline comparison)")
  for name in ("rl", "rl_v2"):
    r = c[name]
    for f in ("num_envs", "num_steps", "total_timesteps", "update_epochs", "num_minibatches"):
      if int(r[f]) <= 0:
        raise ValueError(f"config.{name}.{f} must be positive, got {r[f]}")
    if (r.num_envs * r.num_steps) % r.num_minibatches:
      raise ValueError(f"config.{name}.num_minibatches must divide num_envs * num_steps")
    if r.total_timesteps < r.num_envs * r.num_steps:
      raise ValueError(f"config.{name}.total_timesteps must cover at least one update")
    n_up = r.total_timesteps // (r.num_envs * r.num_steps)
    if c.fair_chance_sweep and n_up % 2:
      raise ValueError(
          f"config.{name}.total_timesteps gives {n_up} PPO updates of num_envs x num_steps = "
          f"{r.num_envs * r.num_steps}; the fair-chance sweep needs an even number (its half "
          f"budget must be exactly half), e.g. {(n_up + 1) * r.num_envs * r.num_steps}")


# ------------------------------------------------------------------------------------------------
# Registered claims (jaxrl_suite.repro): fixed before the run, judged by the layer from per-unit
# samples; a changed rule gets a new id. "32% fewer decision steps" is a ratio of mean steps
# ours / reference = 0.68 (better = lower), judged on log-ratios. Units: an RL training seed
# (with its own greedy / sampled evaluation on the shared episodes, averaged per seed), or, for
# claims without RL, an evaluation group (config.eval_groups groups of independent episode keys).
CLAIM_RATIO = 0.68
FLAT_DELTA = 0.02
_FLAT_WHY = ("flat_delta 0.02: a last budget doubling that cuts validation decision steps by "
             "under 2% cannot close a gap to 32%")
_SIZE_WHY = ("size 0.68: the blog's '32% fewer decision steps' as a ratio of mean steps; "
             "publish baseline variant, dt and clog prior with it (docs/ballast.md)")
_BLOCKED = "blocked episodes (1 or >= 2 blocked pipes) of the paired evaluation episodes"
_COMPARATOR_SEL = ("the comparator: the Dijkstra-family replanner (B-replan, B-tabu, B-pess, "
                   "B-Bayes as configured) with the fewest mean steps on the selection episodes "
                   "(training distribution, other keys), never on the evaluation episodes")


def _ceiling(cid: str, what: str, reference: str) -> dict:
  return dict(
      id=cid, text=f"full clog knowledge (B-oracle) needs 32% fewer decision steps than "
                   f"{reference} {what}",
      paper="'beats Dijkstra by 32% on decision steps when pipes get blocked' (blog claim)",
      statistic=f"per evaluation group, mean B-oracle steps / mean {reference} steps on its "
                f"{_BLOCKED}, as a log-ratio",
      unit="seed", kind="superiority", better="lower", scale="log_ratio", size=CLAIM_RATIO,
      why=f"{_SIZE_WHY}. B-oracle knows every clog and takes the plan order: a lower bound on "
          "any v1 policy's steps, so when even its saving is below 32% no level-only policy "
          "reaches 32% under these settings",
      selection="none: B-oracle and the reference are fixed rules")


CLAIMS = (
    dict(id="ballast.rl_vs_dijkstra_32_blocked.v1",
         text="RL needs 32% fewer decision steps than Dijkstra when pipes are blocked (v1)",
         paper="'beats Dijkstra by 32% on decision steps when pipes get blocked' (blog claim)",
         statistic=f"per RL seed, its mean steps / the comparator's mean steps on the "
                   f"{_BLOCKED}, as a log-ratio (episodes averaged per seed)",
         unit="seed x episode", kind="superiority", better="lower", scale="log_ratio",
         size=CLAIM_RATIO, fair_chance=True, flat_delta=FLAT_DELTA,
         why=f"{_SIZE_WHY}; {_FLAT_WHY}",
         selection=f"{_COMPARATOR_SEL}; RL's action mode (greedy / sampled) on the same "
                   "selection episodes"),
    _ceiling("ballast.oracle_ceiling_32_blocked.v1", "on blocked episodes",
             "the comparator replanner"),
    _ceiling("ballast.oracle_vs_tabu_32_blocked.v1",
             "on blocked episodes (B-tabu bans only the failed route: a weak baseline)",
             "B-tabu"),
    _ceiling("ballast.oracle_coarse_dt_32_blocked.v1",
             "on blocked episodes at the coarsest step length of the dt sweep", "B-replan"),
    dict(_ceiling("ballast.oracle_32_only_weak_or_coarse_grid.v1", "", "the replanner"),
         text="32% fewer decision steps is reachable only against a weak baseline or at a "
              "coarse step: B-oracle's saving over B-replan / B-tabu on one grid of baseline x "
              "step length",
         statistic=f"per evaluation group and grid cell (baseline x dt of the dt sweep), mean "
                   f"B-oracle steps / mean baseline steps on its {_BLOCKED}, as a log-ratio",
         why=f"{_SIZE_WHY}. One grid (repro.grid), registered before the run: the cells of the "
             "strong baseline (B-replan) at a fine step (dt <= config.dt_minutes, the design "
             "default) are expected to miss 32%, every cell with the weak baseline (B-tabu, "
             "which bans only the failed route) or a coarse step (dt > config.dt_minutes) may "
             "reach it; reproduced when every expected miss misses and some other cell reaches",
         selection="none: B-oracle and the baselines are fixed rules; the grid is config.dt_sweep "
                   "+ config.dt_minutes"),
    dict(id="ballast.v2_rl_vs_replan_32_blocked.v1",
         text="v2 (stability target, two pumps, free tank choice): RL needs 32% fewer decision "
              "steps than the replanner when pipes are blocked",
         paper="'beats Dijkstra by 32% on decision steps' (blog claim), under v2's freedoms",
         statistic=f"per v2 RL seed, its mean steps / greedy replan-v2's mean steps on the "
                   f"{_BLOCKED}, as a log-ratio (episodes averaged per seed)",
         unit="seed x episode", kind="superiority", better="lower", scale="log_ratio",
         size=CLAIM_RATIO, fair_chance=True, flat_delta=FLAT_DELTA,
         why=f"{_SIZE_WHY}; {_FLAT_WHY}. v2 is also trained at half its budget (the same "
             "half-budget sweep as v1, on the v2 selection episodes)",
         selection="RL-v2's action mode on the v2 selection bank episodes"),
    dict(id="ballast.diagnosis_level_only.v1",
         text="diagnoses clogs with no extra flow sensors (level-only): the RL head is no worse "
              "than the reference consistency diagnoser",
         paper="'diagnoses clogs with no extra flow sensors' (blog claim, no number)",
         statistic="per RL seed, micro F1 of the RL head's clogged set on the edges its own "
                   "episodes exercised, minus the reference diagnoser's F1 on B-replan's "
                   "episodes (exercised edges), all episodes",
         unit="seed", kind="non_inferiority", better="higher", margin=0.1,
         why="margin 0.1 F1: edges never used cannot be identified from levels, so the "
             "reference consistency diagnoser (failure sets, confirmed-good edges) is the "
             "level-only yardstick; a head within 0.1 F1 of it diagnoses as well as levels allow",
         selection="none beyond RL's action mode (selection episodes)"),
    dict(id="ballast.deployed.v1",
         text="deployed on commercial container ships",
         paper="blog claim",
         statistic="public papers, repositories or deployments found (a count)",
         unit="seed", kind="descriptive",
         why="a claim about a deployment, which no simulation can test: the row reports the "
             "source check without a verdict (design doc section 1)",
         selection="none"),
)


GRID_STRONG = "replan"      # the strong baseline of the grid claim; B-tabu is the weak one


def grid_expected(baseline: str, dt_min: float, dt_fine_max: float) -> bool:
  """Whether the grid claim says 32% is reachable in the cell (baseline, dt): yes against the
  weak baseline or at a coarse step (dt > dt_fine_max), no for the strong one at a fine step."""
  return baseline != GRID_STRONG or float(dt_min) > float(dt_fine_max)


def claims() -> list[dict]:
  """The registered claims as plain dicts (repro.claims.Claim.from_dict reads each)."""
  return [dict(d) for d in CLAIMS]
