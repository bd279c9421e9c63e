# CuRe-style claim-level rewards vs holistic rewards on SceneCap (issue 18).
#
# COMMAND (full):  .venv/bin/python -m experiments.cure
# COMMAND (quick, CI smoke test): .venv/bin/python -m experiments.cure --quick
# The pretrained captioner and the learned scorers are stages of the stage cache in --workdir
# (default workdirs/cure; core.stage_cache), keyed by their configs and the library.
# Budget: sized for a heavily shared 2-core machine (load ~15 during the recorded runs): one
# GRPO step of 5 seeds x 2 scenes x 8 captions took ~8-15 s wall there. 50 GRPO steps per
# reward (evaluated every 10); results/cure.md reports whether claim-F1's curve flattened.
"""Config for experiments/cure.py."""

import ml_collections

from configs import checks

REWARDS = ("claim_f1", "precision_only", "token_recall", "holistic_rm", "qa_utility")
# The holistic proxies claim-F1 is compared with (one pair of registered claims each).
HOLISTIC = ("token_recall", "holistic_rm", "qa_utility")


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.quick = arg == "quick"
  c.seed = 0
  c.num_seeds = 5
  # SceneCap sizes (static) and probabilities (SceneCapParams).
  c.env = ml_collections.ConfigDict(dict(num_entities=3, num_frames=4, num_colors=4,
                                         num_shapes=4, num_actions=4, max_events=6,
                                         max_claims=7, num_halluc=3))
  c.env_params = ml_collections.ConfigDict(dict(min_entities=2, event_prob=0.3,
                                                occlusion_prob=0.15, drop_prob=0.15,
                                                halluc_prob=0.25, attr_error_prob=0.3))
  # The label pool of both learned rewards: noisier captions, so both see many errors.
  c.pool_drop_prob = 0.3
  c.pool_halluc_prob = 0.5
  # Captioner (tiny DecoderLM, tokenizer v2) pretrained on the noisy-caption corpus.
  c.captioner = ml_collections.ConfigDict(dict(d_model=48, num_layers=2, num_heads=3))
  c.pretrain_steps = 1500
  c.pretrain_batch = 64
  c.pretrain_lr = 3e-3
  # The three learned scorers (claim verifier, holistic RM, QA reader): the SAME label budget
  # (label_budget labels each: claims / caption F1s / answered questions from one pool), the
  # same size and the same optimiser steps. 6000 labels at 32d x 2 layers x 1500 steps gave a
  # verifier at 0.73 held-out accuracy (0.61 majority); the improvement (a third layer; the
  # CPU budget of the shared machine allowed no more) is given to all three alike.
  c.label_budget = 6000
  c.scorer = ml_collections.ConfigDict(dict(d_model=32, num_layers=3, num_heads=2))
  c.scorer_steps = 1500
  c.scorer_batch = 64
  c.scorer_lr = 3e-3
  # GRPO: identical for every reward (steps, prompts, group, lr, KL coefficient, seeds).
  c.rewards = REWARDS
  c.grpo_steps = 50        # 30 left claim-F1's true F1 still rising (recorded run at cccbc92)
  c.grpo_prompts = 2
  c.grpo_group = 8
  c.grpo_lr = 1e-3
  c.grpo_kl = 0.02
  c.eval_every = 10
  c.eval_scenes = 32
  c.fluency = 0.1          # token-recall's length-free well-formedness bonus
  c.beta = 1.0             # F-beta of the claim reward
  # Verifier-noise sweep: exact verifier with false-reject rate r and false-accept rate eps;
  # predicted hacking threshold eps > 1 - r.
  c.noise_reject = 0.3
  c.noise_eps_grpo = (0.3, 0.9)   # one run below and one above the threshold 1 - r = 0.7
  c.noise_eps_grid = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
  c.noise_draws = 64
  if c.quick:
    c.num_seeds = 2
    c.pretrain_steps = 150
    c.label_budget = 256
    c.scorer = ml_collections.ConfigDict(dict(d_model=32, num_layers=2, num_heads=2))
    c.scorer_steps = 40
    c.rewards = ("claim_f1", "token_recall")
    c.grpo_steps = 4
    c.eval_every = 2
    c.eval_scenes = 16
    c.noise_eps_grpo = ()
    c.noise_eps_grid = (0.0, 0.5, 1.0)
    c.noise_draws = 8
  return c


def validate(config) -> None:
  """Raises ValueError naming the first bad field."""
  checks.positive_ints(config, ("num_seeds", "pretrain_steps", "pretrain_batch", "label_budget",
                                "scorer_steps", "scorer_batch", "grpo_steps", "grpo_prompts",
                                "eval_every", "eval_scenes", "noise_draws"))
  checks.positive_ints(config.scorer, ("d_model", "num_layers", "num_heads"), "scorer.")
  checks.positive_ints(config.captioner, ("d_model", "num_layers", "num_heads"), "captioner.")
  if config.grpo_group < 2:
    raise ValueError(f"config.grpo_group must be >= 2, got {config.grpo_group}")
  if config.grpo_steps % config.eval_every:
    raise ValueError(f"config.grpo_steps={config.grpo_steps} must be a multiple of "
                     f"config.eval_every={config.eval_every}")
  checks.positive_floats(config, ("pretrain_lr", "scorer_lr", "grpo_lr", "beta"))
  checks.positive_floats(config, ("grpo_kl", "fluency"), allow_zero=True)
  checks.subset_of(config, "rewards", REWARDS)
  if "claim_f1" not in config.rewards:
    raise ValueError("config.rewards must include 'claim_f1' (the verdicts compare against it)")
  checks.probabilities(config, ("pool_drop_prob", "pool_halluc_prob", "noise_reject",
                                "noise_eps_grpo", "noise_eps_grid"))
  checks.probabilities(config.env_params, [k for k in config.env_params.keys()
                                           if not k.endswith("entities")], "env_params.")
  from jaxrl_suite.repro import Claim
  ids = [Claim.from_dict(d).id for d in claims(config)]   # a malformed one fails here
  if len(set(ids)) != len(ids):
    raise ValueError(f"config.noise_eps_grpo must not repeat a value, got "
                     f"{tuple(config.noise_eps_grpo)}")


# ------------------------------------------------------------------------------------------------
# Registered claims (jaxrl_suite.repro): fixed before the run, judged by the layer from per-seed
# samples (the unit is a GRPO seed: every reward's run i uses the same seed i, so the samples are
# paired); a changed rule gets a new id. Rows of a run that was not made are still emitted, as
# "testbed cannot express the claim".
_HACKING_PAPER = ("blog: claim decomposition + verification 'reduces reward hacking "
                  "substantially' (no paper; ClaimDiff-RL / CapRL++ report hacking of holistic "
                  "rewards)")
_F1_WHY = ("min_effect 0.02: two points of true F1; a smaller gain is not a substantial "
           "reduction of reward hacking")
_SELECTION = ("none: identical GRPO (steps, prompts, group, lr, KL, seeds) under every reward, "
              "evaluated on fixed held-out scenes; nothing is chosen on evaluation data")
_OMISSION_PAPER = ("FActScore reports facts per response because precision alone rewards short "
                   "outputs; ClaimDiff-RL: holistic rewards cut hallucination by omitting facts")
_NOISE_PAPER = ("prediction: with false-accept rate eps and false-reject rate r, an unverifiable "
                "claim raises expected verified precision iff eps > 1 - r")
_NOISE_WHY = ("0.1 false claims per caption: a tenth of one appended claim, below which GRPO "
              "has not learnt to add unverifiable claims")


def noise_claim_id(eps, above: bool) -> str:
  """The registered id of the noisy-verifier GRPO claim at `eps` (None: no run on that side)."""
  side = "adds_false_claims" if above else "no_added_false_claims"
  return f"cure.noisy_eps{float(eps):g}_{side}.v1" if eps is not None else \
      f"cure.noisy_{'above' if above else 'below'}_threshold.v1"


def _hacking_claims(h: str) -> list[dict]:
  fall = "fall = max over eval points of true F1 minus the final true F1"
  common = dict(paper=_HACKING_PAPER, unit="seed", kind="superiority", scale="difference",
                min_effect=0.02, selection=_SELECTION)
  return [
      dict(id=f"cure.final_f1_vs_{h}.v1",
           text=f"claim-level reward ends with higher true F1 than {h}",
           statistic=f"per seed, final true F1 (exact scene-graph) of the claim_f1 run minus "
                     f"that of the {h} run",
           better="higher", why=_F1_WHY, **common),
      dict(id=f"cure.fall_vs_{h}.v1",
           text=f"claim-level reward falls less from its peak than {h}",
           statistic=f"per seed, claim_f1's fall of true F1 from its peak minus {h}'s ({fall}); "
                     f"lower is better, so d = {h}'s fall minus claim_f1's",
           better="lower", why=_F1_WHY.replace("gain", "difference of falls"), **common)]


def _omission_claims() -> list[dict]:
  common = dict(paper=_OMISSION_PAPER, unit="seed", kind="superiority", better="higher",
                scale="difference", selection=_SELECTION)
  return [
      dict(id="cure.precision_only_recall_falls.v1",
           text="precision alone invites omission: true recall falls under the precision-only "
                "reward",
           statistic="per seed, true recall at the start minus at the end of the precision_only "
                     "GRPO run",
           min_effect=0.02, why="min_effect 0.02: two points of recall, the smallest omission "
                                "worth calling one", **common),
      dict(id="cure.precision_only_claims_fall.v1",
           text="precision alone invites omission: claims per caption fall under the "
                "precision-only reward",
           statistic="per seed, claims per caption at the start minus at the end of the "
                     "precision_only GRPO run",
           min_effect=0.25, why="min_effect 0.25 claims: a quarter of a claim per caption "
                                "(captions hold about 3.4 at the start), the smallest drop "
                                "worth calling omission", **common)]


def _noise_side(config, eps, above: bool) -> dict:
  """The claim on one noisy-verifier GRPO run at `eps` (None: no run on that side)."""
  t = 1.0 - config.noise_reject
  where = "above" if above else "at or below"
  what = f"eps = {eps:g}" if eps is not None else "eps"
  stat = ("per seed, false claims per caption (exact evaluator) at the end minus at the start "
          f"of claim_f1 GRPO with the noisy exact verifier ({what} {where} 1 - r, "
          f"r = {config.noise_reject:g})")
  if above:
    rule = dict(kind="superiority", better="higher", min_effect=0.1,
                why="min_effect " + _NOISE_WHY)
    does = "adds false claims"
  else:   # d = -(change): non-inferior when the change stays below +0.1
    rule = dict(kind="non_inferiority", better="lower", margin=0.1, why="margin " + _NOISE_WHY)
    does = "adds at most 0.1 false claims per caption"
  return dict(id=noise_claim_id(eps, above),
              text=f"claim-F1 GRPO with a verifier false-accept rate {what} {where} the "
                   f"threshold 1 - r = {t:.2f} {does}",
              paper=_NOISE_PAPER, statistic=stat, unit="seed", scale="difference",
              selection=_SELECTION, **rule)


def noise_sides(config) -> tuple[list, list]:
  """(eps of the GRPO runs above 1 - r, eps at or below it), from the config."""
  t = 1.0 - config.noise_reject
  eps = [float(e) for e in config.noise_eps_grpo]
  return [e for e in eps if e > t], [e for e in eps if not e > t]


def _noise_claims(config) -> list[dict]:
  above, below = noise_sides(config)
  out = [_noise_side(config, e, True) for e in above or [None]]
  out += [_noise_side(config, e, False) for e in below or [None]]
  out.append(dict(
      id="cure.noise_analytic_agreement.v1",
      text="the implemented noisy verifier's mean precision change from one appended false "
           "claim follows the analytic expectation",
      paper=_NOISE_PAPER,
      statistic="per eps of config.noise_eps_grid (the unit here: a grid point, not a seed), "
                "measured minus analytic mean change of verified precision on the base "
                "captioner's captions with a free slot",
      unit="seed", kind="descriptive",
      why="a check of the implementation against the formula: reported, not judged",
      selection="none"))
  return out


def claims(config) -> list[dict]:
  """The registered claims as plain dicts (repro.claims.Claim.from_dict reads each). The
  noisy-verifier claims follow config.noise_eps_grpo and config.noise_reject (fixed before the
  run): one per eps run, on its side of the threshold 1 - r, or one per side with no run."""
  out = []
  for h in HOLISTIC:
    out += _hacking_claims(h)
  return out + _omission_claims() + _noise_claims(config)
