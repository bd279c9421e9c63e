# Rail pricing reproduction: "relational multi-agent RL prices trains (and is in trial on the UK
# rail network)" (blog; paper arXiv 2607.05179, code Kinrre/RelationalRailPricing-RL, Spain).
#
# COMMAND (full; budget stated in the header of results/rail_pricing.md):
#   .venv/bin/python -m experiments.rail_pricing
# COMMAND (quick, tests, ~1-2 CPU-min):
#   .venv/bin/python -m experiments.rail_pricing --quick
# COMMAND (issue #38 fair-chance rerun, NOT yet run; ~1.2M env steps per seed, 10 seeds, lr decay
# per budget; estimated ~74 h on the shared 2-core CPU, see the "fair" preset below):
#   .venv/bin/python -m experiments.rail_pricing --config=configs/rail_pricing.py:fair
"""Config for experiments/rail_pricing.py."""

import ml_collections

VARIANTS = tuple(f"{m}_{p}{a}" for m in ("mappo", "ippo") for p in ("rel", "mlp")
                 for a in ("", "_delta"))


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.quick = arg == "quick"
  c.seed = 0
  c.instance = "ecml"
  c.pad = 9                          # train slots (the instance has 9 trains)
  c.reward_mode = "operator"         # operators compete, an operator's trains cooperate
  # what the RM baselines may observe (envs/rail/information.py): "operator" = own operator's
  # bookings and seats, as the RL agents; the families in pooled_reference are also tuned and
  # evaluated with every operator's bookings ("<family>_pooled" rows), an upper reference for
  # shared information that never enters the "best tuned RM baseline" selection
  c.information = "operator"
  c.pooled_reference = ("myopic", "emsr_b", "emsr_b_mr", "cdlp")
  c.demand_level = 1.0               # training / tuning scenario
  c.shift_level = 1.25               # held-out demand-level shift (never trained or tuned on)
  c.n_seeds = 5                      # RL seeds = evaluation groups (CIs over these)
  # Reward units: operator revenue per episode is ~GBP 10k-200k; at the env default (GBP k) PPO's
  # value targets are ~200 and the clipped value loss (clip 0.2 per update) never reaches them,
  # so advantages were raw returns-to-go and the value gradient swamped the clipped policy
  # gradient (value loss ~3e3, KL ~1e-5: no learning in the first full run). At 5e-6 an episode
  # return is O(1) (docs/rail_pricing.md, "Why the first RL run did not learn").
  c.reward_scale = 5e-6
  # Budget: every baseline family is tuned on 8 values x 96 = 768 episodes, which is what its
  # one-parameter grid needs; RL gets 1,536 episodes per seed at main_updates (twice that), and
  # the MLP variants 3,072 in the sweep, stated in results/rail_pricing.md.
  c.eval_episodes = 96               # per seed and scenario, held-out keys
  c.tune_episodes = 96               # per baseline parameter value; equal to eval_episodes so
                                     # one compiled evaluator serves both
  c.elasticity_episodes = 256
  # Both learners with both policies, in both action forms: MAPPO/IPPO x relational/MLP (bucket
  # fares), and relational vs MLP in the paper's +-5% delta form (IPPO: the MAPPO relational
  # critic doubles the attention cost). Cheap variants first, so a resumed run redoes little.
  c.variants = ("ippo_mlp", "mappo_mlp", "ippo_mlp_delta", "ippo_rel", "ippo_rel_delta",
                "mappo_rel")
  # Budget sweep: the policies are scored on the tuning episodes at these update counts of one
  # constant-lr run. Measured cost of one update, 5 seeds vmapped (05:23 UTC, load ~3 on 2
  # cores): mappo_mlp 0.83 s, ippo_mlp 0.56 s, mappo_rel 4.5 s, ippo_rel 2.2-2.4 s, mostly the
  # rollout. The MLP variants run to the full budget (192 updates = 36,864 env steps = 3,072
  # episodes per seed); the relational ones too (rel_max_updates: ~13 quiet CPU-min for the three
  # to 96, twice that to 192; the first full runs stopped them at 96, where their sweep was still
  # rising, so a relational loss there could not count). The main
  # comparison uses every variant's policy at main_updates (the same budget for all); a negative
  # verdict about RL needs the sweep's last doubling to be flat (FLAT_DELTA, claims below).
  c.budget_updates = (12, 24, 48, 96, 192)
  c.main_updates = 96
  c.rel_max_updates = 192
  c.rl = ml_collections.ConfigDict(dict(
      total_timesteps=36_864, num_envs=16, num_steps=12, update_epochs=4, num_minibatches=2,
      lr=1e-3, gamma=1.0, gae_lambda=0.95, ent_coef=0.001, vf_coef=0.5, clip_eps=0.2,
      max_grad_norm=0.5, anneal_lr=False))
  # one attention layer (two in the first run): halves the relational agents' cost so the budget
  # sweep fits the shared machine; one layer already mixes every pair of typed train tokens
  c.agent = ml_collections.ConfigDict(dict(embed_dim=32, num_heads=2, num_layers=1))
  c.n_boot = 2000
  # False: one constant-lr run per seed scored at every budget; True: one run per budget with
  # the lr decayed linearly to 0 over it (the "fair" preset; cost = the sum of the budgets)
  c.lr_decay = False
  # a seed whose final policy entropy is under this fraction of log(n_actions) is reported as
  # collapsed (meta["entropy"]; the first runs collapsed 3/5 seeds onto the static fare)
  c.entropy_collapse_frac = 0.1
  if arg == "fair":
    _fair_chance(c)
  if c.quick:
    c.n_seeds = 2
    c.eval_episodes = 8
    c.tune_episodes = 8
    c.elasticity_episodes = 32
    c.variants = ("mappo_rel", "mappo_mlp", "ippo_rel_delta")
    c.rl.total_timesteps = 16 * 12 * 4
    c.budget_updates = (1, 2, 4)
    c.main_updates = 2
    c.rel_max_updates = 2
    c.agent.embed_dim = 16
    c.agent.num_layers = 1
    c.n_boot = 200
  return c


def _fair_chance(c) -> None:
  """Issue #38's fair chance for RL (config only; the record has not been run with it).

  Budget: doublings of 192 env steps per update from 192 to 6,144 updates, i.e. 36,864 to
  1,179,648 env steps (booking periods of the 9-train market) per seed, each budget its own run
  with the lr decayed linearly to 0 over it; every variant (relational ones included) compared
  at the largest budget, where the last doubling (3,072 -> 6,144) is the fair-chance test.
  10 seeds. Cost, from the measured per-update times above (5 seeds, load ~3 on 2 cores: 11.1 s
  for the six variants together, ~22 s at 10 seeds, rollouts vmapped over seeds): sum of the
  budgets 12,096 updates x ~22 s = ~266,000 s, ~74 h on the shared CPU machine; an accelerator
  run has not been timed. ent_coef stays 0.001 (a choice on the tuning episodes would need its
  own sweep); the entropy diagnostic reports collapsed seeds.
  """
  c.n_seeds = 10
  c.lr_decay = True
  c.budget_updates = (192, 384, 768, 1536, 3072, 6144)
  c.main_updates = 6144
  c.rel_max_updates = 6144
  c.rl.total_timesteps = 6144 * c.rl.num_envs * c.rl.num_steps


def validate(c) -> None:
  """Raises ValueError naming the first bad field."""
  from configs import checks
  from jaxrl_suite.envs.rail import INFORMATION_MODES, REWARD_MODES
  from jaxrl_suite.envs.rail.instance import INSTANCES
  checks.positive_ints(c, ("n_seeds", "eval_episodes", "tune_episodes", "elasticity_episodes",
                           "pad", "n_boot"))
  if c.n_seeds < 2:
    raise ValueError(f"config.n_seeds must be >= 2 for a confidence interval, got {c.n_seeds}")
  checks.one_of(c, "instance", sorted(INSTANCES))
  checks.one_of(c, "reward_mode", REWARD_MODES)
  checks.one_of(c, "information", INFORMATION_MODES)
  if not isinstance(c.lr_decay, bool):
    raise ValueError(f"config.lr_decay must be True or False, got {c.lr_decay!r}")
  if not 0.0 <= c.entropy_collapse_frac < 1.0:
    raise ValueError("config.entropy_collapse_frac must be in [0, 1) (a fraction of the "
                     f"uniform policy's entropy), got {c.entropy_collapse_frac!r}")
  checks.subset_of(c, "pooled_reference", ("myopic", "emsr_b", "emsr_b_mr", "cdlp"))
  checks.positive_floats(c, ("demand_level", "shift_level", "reward_scale"))
  if c.tune_episodes != c.eval_episodes:
    raise ValueError("config.tune_episodes must equal config.eval_episodes (one compiled "
                     "evaluator per policy family)")
  if c.shift_level == c.demand_level:
    raise ValueError("config.shift_level must differ from config.demand_level (held-out shift)")
  checks.subset_of(c, "variants", VARIANTS)
  r = c.rl
  checks.positive_ints(r, ("total_timesteps", "num_envs", "num_steps", "update_epochs",
                           "num_minibatches"), "rl.")
  checks.positive_floats(r, ("lr", "max_grad_norm", "clip_eps"), "rl.")
  checks.positive_floats(r, ("ent_coef", "vf_coef"), "rl.", allow_zero=True)
  checks.probabilities(r, ("gamma", "gae_lambda"), "rl.")
  if r.num_steps % 12:
    raise ValueError(f"config.rl.num_steps must be a multiple of the 12 booking periods, got "
                     f"{r.num_steps}")
  if (r.num_envs * r.num_steps * c.pad) % r.num_minibatches:
    raise ValueError("config.rl.num_minibatches must divide num_envs*num_steps*pad")
  if r.total_timesteps < r.num_envs * r.num_steps:
    raise ValueError("config.rl.total_timesteps is smaller than one rollout")
  updates = r.total_timesteps // (r.num_envs * r.num_steps)
  b = tuple(c.budget_updates)
  if not b or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in b) or list(
      b) != sorted(set(b)) or b[-1] != updates:
    raise ValueError(f"config.budget_updates must be increasing positive update counts ending at "
                     f"the full budget rl.total_timesteps // (num_envs * num_steps) = {updates}, "
                     f"got {b!r}")
  for f in ("main_updates", "rel_max_updates"):
    if c[f] not in b:
      raise ValueError(f"config.{f} must be one of config.budget_updates {b!r}, got {c[f]!r}")
  if c.rel_max_updates < c.main_updates:
    raise ValueError("config.rel_max_updates must be >= config.main_updates (every variant is "
                     "compared at main_updates)")
  if any(not hi == 2 * lo for lo, hi in zip(b[:-1], b[1:])) or len(b) < 2:
    raise ValueError(f"config.budget_updates must be a doubling sweep b, 2b, 4b, ... of >= 2 "
                     f"points (the fair-chance rule judges the last doubling), got {b!r}")
  if r.anneal_lr and len(b) > 1:
    raise ValueError("config.rl.anneal_lr must be False with several config.budget_updates (with "
                     "a constant learning rate the first b updates of the run ARE a run of budget "
                     "b; an annealed rate would make the sweep points different runs)")
  from jaxrl_suite.repro import Claim
  for d in claims():
    Claim.from_dict(d)   # a malformed registration fails here, before any compute
  checks.positive_ints(c.agent, ("embed_dim", "num_heads", "num_layers"), "agent.")
  if c.agent.embed_dim % c.agent.num_heads:
    raise ValueError("config.agent.num_heads must divide config.agent.embed_dim")


# ------------------------------------------------------------------------------------------------
# Registered claims (jaxrl_suite.repro): fixed before the run, judged by the layer from per-seed
# samples. Plain dicts (Claim.from_dict reads them); a changed rule must get a new id. The unit is
# the seed: one RL training seed and its own group of held-out evaluation episodes (baselines are
# evaluated on the same episodes, so each seed pairs RL with its comparator).
# The flatness threshold of "RL had a fair chance" (jaxrl_suite.repro.flatness), on the log of
# tuning-episode revenue: the last doubling of the budget gains less than ~1%.
FLAT_DELTA = 0.01
_FLAT_WHY = ("flat_delta 0.01: a last budget doubling that gains under ~1% of revenue (on the "
             "tuning episodes, never the held-out ones) cannot close a gap of the smallest "
             "effect that matters")
_PICKED = ("on the tuning episodes only (never the held-out ones): each RL variant's greedy or "
           "sampled mode at main_updates")
_RM_WHY = ("min_effect 0.01: revenue-management gains are quoted in low single-digit percent, "
           "so 1% of revenue is the smallest difference an operator would act on")


def _beats_rm(scenario: str, suffix: str, what: str) -> dict:
  return dict(
      id=f"rail.rl_beats_rm{suffix}.v1",
      text=f"relational MARL beats revenue-management heuristics (best tuned baseline{what})",
      paper="the paper compares RL methods only (no RM baseline)",
      statistic=f"per seed, held-out revenue of the best relational RL variant over the best "
                f"tuned RM baseline ({scenario}), as a log-ratio (geometric-mean ratio)",
      unit="seed", kind="superiority", scale="log_ratio", min_effect=0.01,
      fair_chance=True, flat_delta=FLAT_DELTA, why=f"{_RM_WHY}; {_FLAT_WHY}",
      selection=f"{_PICKED}; the relational variant with the best tuning revenue there; the RM "
                "family and its parameter with the best tuning revenue (cdlp_known excluded: a "
                "revenue manager does not know the demand shock)")


def _relational(learner: str, form: str) -> dict:
  what = "fare buckets" if not form else "+-5% delta form"
  return dict(
      id=f"rail.relational_helps_{learner}{form}.v1",
      text=f"relational structure helps ({learner}, {what}: attention over train tokens vs MLP "
           "on own features)",
      paper="attention (MAAC) helps with heterogeneous demand (arXiv 2501.08234)",
      statistic=f"per seed, held-out revenue of {learner}_rel{form} over {learner}_mlp{form} "
                "(same learner, budget, seeds and episodes; training demand level), log-ratio",
      unit="seed", kind="superiority", scale="log_ratio", min_effect=0.01,
      fair_chance=True, flat_delta=FLAT_DELTA,
      why=f"{_RM_WHY}; {_FLAT_WHY}. The fair-chance sweep is the effect's own: the per-seed "
          "relational / MLP revenue ratio at each budget both variants reached, so a loss "
          "stands only when more budget would not move the comparison",
      selection=_PICKED + " (both variants)")


CLAIMS = (
    dict(id="rail.elasticity_calibration.v1",
         text="demand calibrated to UK market-level fare elasticities (price-perturbation "
              "rollouts; a calibration check)",
         paper="full/walk-up -0.2..-0.7, leisure -0.65..-1.0, season -0.2..-0.5 (TRRL SR614, "
               "TRL LR993, Wardman 2014)",
         statistic="per seed (its own rollout keys), the largest |measured - target| arc "
                   "elasticity over the three segments (all trains 1.0 -> 1.1 x base fare, "
                   "capacity non-binding, common random numbers)",
         unit="seed", kind="descriptive",
         why="a calibration check of the simulator, not a claim of the paper: the demand "
             "model's elasticities are set to the UK targets by construction, so the row "
             "reports how closely rollouts recover them (each segment against its UK range in "
             "the note) and carries no verdict",
         selection="none: the targets are the instance's (envs/rail/instance.py)"),
    _beats_rm("training demand level", "", ""),
    _beats_rm("held-out demand-level shift", "_shift", ", held-out demand shift"),
    _relational("mappo", ""),
    _relational("ippo", ""),
    _relational("mappo", "_delta"),
    _relational("ippo", "_delta"),
    dict(id="rail.collusion.v1",
         text="competing RL operators learn supra-competitive prices (collusion index > 0)",
         paper="Calvano et al. 2020 (Q-learning pricing); not measured in the rail papers",
         statistic="per seed, Delta = (pi - pi_Nash) / (pi_monopoly - pi_Nash) of the best "
                   "relational variant's held-out revenue (static one-shot Nash and joint-"
                   "monopoly fares on the same episodes)",
         unit="seed", kind="superiority", min_effect=0.1, fair_chance=True,
         flat_delta=FLAT_DELTA,
         why="min_effect 0.1: a tenth of the way from Nash to monopoly profit; Calvano et al. "
             "report 0.7-0.9, and the fluid one-shot Nash benchmark is itself only approximate "
             f"below that; {_FLAT_WHY} (on the policy's own revenue sweep)",
         selection=_PICKED + "; the relational variant with the best tuning revenue there"),
    dict(id="rail.uk_trial.v1",
         text="relational MARL pricing 'is running in trial on the UK rail network'",
         paper="blog claim",
         statistic="UK multi-agent RL rail-pricing trials found in the cited public sources "
                   "(a count)",
         unit="seed", kind="descriptive",
         why="a claim about a deployment, which no simulation can test: the testbed cannot "
             "express it, so the layer reports the source check (in the note) without a verdict",
         selection="none"),
)


def claims() -> list[dict]:
  """The registered claims as plain dicts (repro.claims.Claim.from_dict reads each)."""
  return [dict(d) for d in CLAIMS]
