"""FORE (linear MWL / IV-LSTDQ) off-policy evaluation reproduction.

COMMAND (full, ~5 CPU-minutes; ~6-10 min wall on a shared 2-core box):
  python -m experiments.fore
COMMAND (quick, <= 90 s; what CI runs):
  python -m experiments.fore --quick
Writes results/fore.{json,md,png}. Override any field, e.g. --config.hub_seeds=500.
"""

from __future__ import annotations

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  # hub-and-spoke MDP: estimates vs n (multinomial cell counts == law of n i.i.d. transitions)
  c.ns = [100, 1_000, 10_000, 100_000, 1_000_000]
  c.hub_seeds = 2000
  c.fqe_iters = 200
  c.iid_check_n = 10_000          # explicit per-sample i.i.d. draws (vs cell counts) at this n
  c.iid_check_seeds = 200
  c.boot_ns = [1_000, 10_000]     # Poisson-bootstrap percentile-CI coverage at these n
  c.boot_seeds = 200
  c.num_boot = 400
  # random families
  c.family_population_mdps = 300
  c.family_mdps = 20
  c.family_seeds = 200
  # support diagnostic of the fitted ratio (fore.support_diagnostic), thresholds set a priori:
  # flag when ESS/n < support_min_ess_frac or more than support_max_rare_share of the fitted
  # target mass sits on (s, a) cells with fewer than support_k samples
  c.support_k = 10
  c.support_min_ess_frac = 0.01
  c.support_max_rare_share = 0.05
  # interval under heavy ratio tails (ope/interval.py): studentized t on the influence values plus
  # refusal rules. The thresholds were chosen on development pools drawn with seeds 12345 and 777
  # (10 and 20 severe MDPs; the critical value's df = nu^0.5 on 12345 with 20 MDPs and 777 with
  # 20 and 40, all x 200 data seeds); the
  # full run judges them on a pool drawn with fresh_family_seed, never run before the full record
  # (issue 39). Quick mode reuses a development seed.
  # 39_039_001 was SPENT at record 91cf67f (rules without interval_min_df: inconclusive, one MDP
  # covered 0.47 at its worst n; docs/fore.md keeps it as the first attempt). It was looked at, so
  # it is never used to choose rules again; 39_039_002 was drawn for the second attempt.
  c.fresh_family_seed = 39_039_002
  # 40, not 20: on the development pools ~15% of severe MDPs reach fresh_min_pass passing seeds
  # at some n, so 20 MDPs leave ~3 units for the claim's interval (too few to decide anything)
  c.fresh_family_mdps = 40
  c.fresh_family_seeds = 200
  c.fresh_min_pass = 10           # an MDP's coverage at an n counts when >= this many pass there
  c.interval_max_cond = 1e10
  c.interval_min_ident_t = 2.0
  c.interval_min_cell_count = 1.0   # every (s, a) cell visited at least once
  c.interval_max_cell_excess = 4.0  # no (s, a) cell carries > 4/num_cells of the fitted target mass
  # critical value t_{0.975, nu^p} (interval.RefusalRules.crit_df_power): on the development pools
  # the worst MDP's coverage among passing estimates over n was 0.84 with p = 1 (the first
  # attempt's form) and >= 0.92 with p = 0.5; the under-covering cells had small nu
  c.interval_crit_df_power = 0.5
  # refuse when nu < interval_min_df: off (0). On the development pools refusing nu < 4 or < 30
  # lowered worst-MDP coverage: the low-nu estimates are the ones the wide t interval covers
  c.interval_min_df = 0.0
  # ill-conditioning sweep (ratio stays realizable, A -> singular)
  c.sweep_fracs = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0]
  c.sweep_n = 10_000
  c.sweep_seeds = 1000
  # DOPE-style table: one MDP, several target policies, trajectory data from mu
  c.dope_policies = 10
  c.dope_traj = 200
  c.dope_horizon = 50
  c.dope_seeds = 200
  c.dope_fqe_iters = 1000
  # RLDS CartPole round trip through tensorflow-datasets
  c.cartpole_episodes = 500
  c.cartpole_gamma = 0.98
  c.cartpole_mu_temp = 0.2
  c.cartpole_pi_temp = 0.3
  c.cartpole_mc_episodes = 2000
  c.cartpole_boot = 200
  if arg == "quick":
    c.ns = [100, 1_000, 10_000, 100_000, 1_000_000]
    c.hub_seeds = 200
    c.iid_check_seeds = 100
    c.boot_seeds = 100
    c.num_boot = 200
    c.family_population_mdps = 40
    c.family_mdps = 3
    c.family_seeds = 100
    c.fresh_family_seed = 777       # a development seed: quick mode is a smoke check
    c.fresh_family_mdps = 4
    c.fresh_family_seeds = 100
    c.sweep_seeds = 100
    c.dope_traj = 100
    c.dope_seeds = 12
    c.dope_fqe_iters = 300
    c.cartpole_episodes = 40
    c.cartpole_mc_episodes = 300
    c.cartpole_boot = 100
  return c


def validate(c: ml_collections.ConfigDict) -> None:
  """Raises ValueError naming the first bad field."""
  positive = ["hub_seeds", "fqe_iters", "iid_check_n", "iid_check_seeds", "boot_seeds", "num_boot",
              "family_population_mdps", "family_mdps", "family_seeds", "sweep_n", "sweep_seeds",
              "fresh_family_mdps", "fresh_family_seeds", "fresh_min_pass",
              "interval_max_cond", "interval_max_cell_excess", "dope_policies", "dope_traj", "dope_horizon", "dope_seeds", "dope_fqe_iters",
              "cartpole_episodes", "cartpole_mc_episodes", "cartpole_boot", "support_k"]
  for f in positive:
    if int(c[f]) <= 0:
      raise ValueError(f"config.{f} must be positive, got {c[f]}")
  if len(c.ns) < 3 or any(n < 10 for n in c.ns) or list(c.ns) != sorted(c.ns):
    raise ValueError(f"config.ns must be >= 3 increasing sample sizes >= 10, got {c.ns}")
  if c.hub_seeds < 2 or c.sweep_seeds < 2 or c.family_seeds < 2 or c.dope_seeds < 2:
    raise ValueError("config.*_seeds must be >= 2 to form confidence intervals")
  if c.dope_policies < 5:
    raise ValueError(f"config.dope_policies must be >= 5 (regret@5), got {c.dope_policies}")
  if not 0.0 < c.cartpole_gamma < 1.0:
    raise ValueError(f"config.cartpole_gamma must be in (0, 1), got {c.cartpole_gamma}")
  if any(not 0.0 <= f <= 1.0 for f in c.sweep_fracs):
    raise ValueError(f"config.sweep_fracs must lie in [0, 1], got {c.sweep_fracs}")
  if not 0.0 < float(c.interval_crit_df_power) <= 1.0:
    raise ValueError(f"config.interval_crit_df_power must lie in (0, 1] (1 = t with nu degrees "
                     f"of freedom), got {c.interval_crit_df_power}")
  if not float(c.interval_min_df) >= 0.0:
    raise ValueError(f"config.interval_min_df must be >= 0 (0 turns the rule off), got "
                     f"{c.interval_min_df}")
  for f in ("support_min_ess_frac", "support_max_rare_share"):
    if not 0.0 <= float(c[f]) <= 1.0:
      raise ValueError(f"config.{f} must lie in [0, 1], got {c[f]}")
  if c.cartpole_mu_temp <= 0 or c.cartpole_pi_temp <= 0:
    raise ValueError("config.cartpole_mu_temp / cartpole_pi_temp must be positive")
  from jaxrl_suite.repro import Claim
  for d in claims():
    Claim.from_dict(d)   # a malformed registration fails here, before any compute


# ------------------------------------------------------------------------------------------------
# Registered claims (jaxrl_suite.repro): fixed before the run, judged by the layer from per-unit
# samples. Plain dicts (Claim.from_dict reads them) so the registry is data, not code; a changed
# rule must get a new id. The numbers are in the design's units; each `why` says where they come
# from. "MDP" units: each random MDP is drawn from the family's generator with its own seed, so
# the MDP is the independent replicate of a claim about the family (its data seeds are averaged
# within it first).
_NO_SELECTION = "none: estimator, features, n grid and seeds fixed before the run"
CLAIMS = (
    dict(id="fore.population_exact.v1",
         text="Ratio realizable in span(phi) (Q not realizable, no completeness) => FORE exact "
              "in the population",
         paper="blog: converges with only ratio realizability; design: hub J = 45/38 exactly",
         statistic="signed relative error (J_FORE - J) / |J| of the population FORE value, per "
                   "random MDP (moderate and severe families pooled)",
         unit="seed", kind="equivalence", margin=1e-6,
         why="exact means equal up to float64 round-off: solves at cond(A) up to ~1e5 lose at "
             "most ~1e-10 relative; a misspecified class is off by >= 1e-2 (the control "
             "LSTDQ), so +-1e-6 separates the two by four orders of magnitude",
         selection=_NO_SELECTION + "; every population MDP drawn is used"),
    dict(id="fore.root_n_slope.v1",
         text="FORE is root-n consistent (RMSE ~ n^-1/2)",
         paper="design prototype slope -0.519 (n=1e3..1e6); theory -1/2",
         statistic="per hub data seed, OLS slope of log10 |J_hat - J| on log10 n over n >= 1e3 "
                   "(independent draws at each n); E log|err| has the same slope in n as log "
                   "RMSE",
         unit="seed", kind="target", better="lower", size=-0.5, tolerance=0.1,
         why="theory's -1/2 with a 10% band [-0.55, -0.455]: it holds the design's -0.519 and "
             "excludes the neighbouring rates n^-1/3 (-0.33) and n^-1 (-1)",
         selection=_NO_SELECTION),
    dict(id="fore.hub_coverage.v1",
         text="Sandwich 95% CI covers at the nominal rate (hub, n >= 1e3)",
         paper="design: 0.925-0.965",
         statistic="per hub data seed, the share of n >= 1e3 (independent draws) whose Wald "
                   "interval covers J, minus 0.95",
         unit="seed", kind="equivalence", margin=0.025,
         why="the design's nominal band 0.925-0.965 around 0.95; +-0.025 is its wider side",
         selection=_NO_SELECTION),
    dict(id="fore.severe_undercoverage.v1",
         text="Under severe shift the Wald CI under-covers below the largest n",
         paper="design: Wald under-covers (0.65-0.73) until n = 1e6",
         statistic="per severe-family MDP, Wald coverage over its data seeds averaged over every "
                   "n below the largest, minus 0.95 (lower is worse coverage)",
         unit="seed", kind="superiority", better="lower", size=-0.25,
         why="the design's 0.65-0.73 is a shortfall of 0.22-0.30 from 0.95; its middle, 0.25, is "
             "the claimed size",
         selection="the severe pool keeps random MDPs whose population FQE diverges (rho > 1), "
                   "chosen from the population model, never from coverage"),
    dict(id="fore.severe_recovery.v1",
         text="Under severe shift the Wald CI recovers to nominal coverage at the largest n",
         paper="design: coverage reaches 0.94 at n = 1e6",
         statistic="per severe-family MDP, Wald coverage over its data seeds at the largest n, "
                   "minus 0.95",
         unit="seed", kind="non_inferiority", margin=0.025,
         why="recovery = inside the hub's nominal band, whose lower end is 0.925 (the design's "
             "0.94 is inside it)",
         selection="the severe pool keeps random MDPs whose population FQE diverges (rho > 1), "
                   "chosen from the population model, never from coverage"),
    dict(id="fore.diagnostics_cannot_certify.v1",
         text="In-sample diagnostics cannot certify coverage (severe family, largest n)",
         paper="(not in the blog; audit: coverage < 0.5 at n = 1e6 while the diagnostics pass)",
         statistic="per severe-family MDP, Wald coverage among the data seeds that pass every "
                   "in-sample diagnostic (identified, ident_t >= 2, support not flagged) at the "
                   "largest n, minus 0.95 (MDPs where no seed passes have no value)",
         unit="seed", kind="superiority", better="lower", min_effect=0.025,
         why="a shortfall under 0.025 is within the hub's nominal band (0.925-0.965), i.e. "
             "what a working interval shows; the claim is that passing intervals fall short of "
             "that",
         selection="the severe pool (rho > 1) as above; diagnostic thresholds (support_k, "
                   "support_min_ess_frac, support_max_rare_share) set a priori in this config"),
    dict(id="fore.honest_interval_coverage.v1",
         text="The studentized interval with refusal rules covers >= 0.90 among the estimates it "
              "does not refuse, at every n, on fresh severe-shift MDPs",
         paper="(not in the blog; issue 39: the Wald interval's all-pass coverage is far below "
               "nominal under severe shift)",
         statistic="per fresh severe-family MDP (seed fresh_family_seed, never used while "
                   "choosing the rules), the lowest coverage of the studentized interval among "
                   "its passing estimates over the n at which at least fresh_min_pass of its "
                   "data seeds pass, minus 0.95 (MDPs with no such n have no value)",
         unit="seed", kind="non_inferiority", margin=0.05,
         why="margin 0.05 below 0.95 is the issue's bar (coverage >= 0.90); the lowest value "
             "over n makes it an 'at every n' statement per MDP",
         selection="rules (interval_* fields) chosen on development pools (seeds 12345, 777) "
                   "before the fresh pool was drawn; the severe pool keeps MDPs with "
                   "population FQE rho > 1, chosen from the population model"),
    dict(id="fore.fqe_diverges.v1",
         text="Plain iterative FQE diverges on the same data (infinite data)",
         paper="design: rho = 1.1516 on the hub",
         statistic="spectral radius rho of the population FQE iteration on the hub (> 1 "
                   "diverges)",
         unit="seed", kind="descriptive",
         why="a population (infinite-data) computation: one exact number, no replicate to put "
             "an interval on, so the layer reports it without a verdict (the finite-n "
             "divergence share is in the row's note)",
         selection=_NO_SELECTION),
    dict(id="fore.brm_bias.v1",
         text="BRM on the hub is biased even with (nearly) infinite data",
         paper="design: BRM 0.684147 (-42%) in the population",
         statistic="per hub data seed, the BRM estimate at the largest n",
         unit="seed", kind="target", size=0.684147, tolerance=0.01,
         why="the design's population value; +-1% holds the O(1/n) finite-sample bias at n = 1e6 "
             "and is 40x narrower than the -42% bias the claim is about (J = 1.1842)",
         selection=_NO_SELECTION),
    dict(id="fore.lstdq_psi_bias.v1",
         text="LSTDQ on a class without w (psi) is biased even with (nearly) infinite data",
         paper="design: LSTDQ(psi) 2.271293 (+92%) in the population",
         statistic="per hub data seed, the LSTDQ(psi) estimate at the largest n",
         unit="seed", kind="target", size=2.271293, tolerance=0.01,
         why="the design's population value; +-1% holds the O(1/n) finite-sample bias at n = 1e6 "
             "and is 90x narrower than the +92% bias the claim is about (J = 1.1842)",
         selection=_NO_SELECTION),
    dict(id="fore.linear_equivalence.v1",
         text="Linear MWL = DualDICE = GradientDICE = LSTDQ = FORE (same features)",
         paper="design: identical (4e-16)",
         statistic="per DOPE data seed, max over target policies and over LSTDQ / MWL / DualDICE "
                   "/ GradientDICE of |estimate - FORE| / value range (a non-finite estimate "
                   "counts as 1, the whole range)",
         unit="seed", kind="equivalence", margin=1e-9,
         why="the algebra says 0; float64 solves at these cond(A) differ by <= 1e-12 of the "
             "range, while any real difference between estimators (e.g. FQE's iteration) is "
             ">= 1e-4; 1e-9 is the tie tolerance the DOPE table merges estimators at",
         selection=_NO_SELECTION),
    dict(id="fore.single_condition.v1",
         text="'Only one condition': ratio realizability alone suffices, no operator stability "
              "needed",
         paper="blog: ratio realizability is the single condition",
         statistic="hub sweep C1 (ratio exactly realizable throughout), |J_hat - J| at the "
                   "singular point t = t* over |J_hat - J| at t = 0, per data seed pair "
                   "(independent draws at each t, n = sweep_n); seeds whose estimate is "
                   "non-finite at either point are left out (that favours the claim)",
         unit="seed", kind="non_inferiority", better="lower", scale="log_ratio", margin=1.0,
         why="if realizability alone sufficed, conditioning would not matter: allow the error "
             "at the singular point to be up to 2x (margin 100%) the well-conditioned one",
         selection=_NO_SELECTION + "; the t grid is fixed by the population model (t* where "
                   "sigma_min(B_t) = 0)"),
    dict(id="fore.dope_table.v1",
         text="DOPE-style table (descriptive: the features contain every target's ratio by "
              "design)",
         paper="(no paper number; DOPE found FQE/model-based best, IS/DICE worse)",
         statistic="per DOPE data seed, FORE's normalised absolute error (mean over target "
                   "policies, / value range); the ranking of every method is in the note",
         unit="seed", kind="descriptive",
         why="not a test: the features contain every target policy's ratio by construction, "
             "which favours the ratio-realizable family, so no verdict is registered",
         selection=_NO_SELECTION),
    dict(id="fore.rlds_roundtrip.v1",
         text="RLDS round trip (gymnax CartPole -> TFDS array_record -> FORE)",
         paper="issue: round trip + estimate",
         statistic="FORE estimate minus the Monte-Carlo truth on the one round-tripped dataset",
         unit="seed", kind="descriptive",
         why="one dataset (one seed): the layer's intervals need replicate seeds, and the Wald "
             "and bootstrap CIs in the note are within-dataset; the round trip being identical "
             "is a deterministic check (the tests assert it)",
         selection="none: polynomial features and the behaviour / target temperatures fixed "
                   "in this config"),
)


def claims() -> list[dict]:
  """The registered claims as plain dicts (repro.claims.Claim.from_dict reads each)."""
  return [dict(d) for d in CLAIMS]
