# CuRe-style claim-level rewards vs holistic rewards on SceneCap (issue 18).
#
# COMMAND (full):  .venv/bin/python -m experiments.cure
# COMMAND (quick, CI smoke test): .venv/bin/python -m experiments.cure --quick
# The pretrained captioner, the verifier and the holistic RM are cached in --workdir
# (default workdirs/cure), keyed by their configs.
# Budget: sized for a heavily shared 2-core machine (load ~15 during the recorded runs): one
# GRPO step of 5 seeds x 2 scenes x 8 captions took ~8-15 s wall there. 50 GRPO steps per
# reward (evaluated every 10); results/cure.md reports whether claim-F1's curve flattened.
"""Config for experiments/cure.py."""

import ml_collections

from configs import checks

REWARDS = ("claim_f1", "precision_only", "token_recall", "holistic_rm", "qa_utility")


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
