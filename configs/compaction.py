# CompactionRL reproduction (arXiv 2607.05378) on StreamLedger-v0.
#
# COMMAND (full): .venv/bin/python -m experiments.compaction
# COMMAND (quick, smoke test): .venv/bin/python -m experiments.compaction --quick
# The warm start is cached in --workdir (default workdirs/compaction); rerunning reuses it.
# Budget: 2400 warm-start steps x 64 rows; all 9 variants (the 2x3 grid token/segment
# normalisation x cross-segment GAE / independent GAE / group advantage, the frozen summariser,
# agent-triggered COMPACT under both normalisations) x 4 seeds x 30 RL iterations x 16
# trajectories, iterations alternating between H=16 and H=32. Sized to finish on a shared 2-core
# machine; the measured wall times are in results/compaction.md.
"""Config for experiments/compaction.py."""

import ml_collections

# Training variants: name -> (harness, loss normalisation, advantage, GAE across boundaries).
VARIANTS = {
    "token_cross": ("compaction", "token", "gae", True),      # CompactionRL as claimed
    "token_indep": ("compaction", "token", "gae", False),
    "token_grpo": ("compaction", "token", "grpo", True),       # SUPO-style broadcast
    "segment_cross": ("compaction", "segment", "gae", True),
    "segment_indep": ("compaction", "segment", "gae", False),
    "segment_grpo": ("compaction", "segment", "grpo", True),
    "frozen_summariser": ("frozen", "token", "gae", True),     # RL on answers only
    "agent_token": ("agent", "token", "gae", True),            # agent-triggered COMPACT
    "agent_segment": ("agent", "segment", "gae", True),
}
# Evaluation-only baselines of the warm-started model: name -> harness.
BASELINES = {"truncation": "truncation", "no_rl_summariser": "compaction",
             "oracle_summary": "oracle", "full_context": "full"}


def get_config(arg=None):
  c = ml_collections.ConfigDict()
  c.quick = arg == "quick"
  c.seed = 0
  c.num_seeds = 4
  # Environment (StreamLedger-v0 EnvParams; H is set per phase).
  c.env = ml_collections.ConfigDict(dict(
      max_events=128, events_per_obs=4, num_items=4, max_amount=1, mid_query_prob=0.5,
      mid_reward=0.25, final_reward=1.0))
  # W: the policy's context window. 52 tokens hold the whole H=8 episode (the no-compaction
  # control) in the first window; every later window holds [task][<sum> s] and one block, so
  # an answer is the incoming total plus the few events of one block.
  c.window = 52
  # H during RL: iterations alternate between these horizons (2 and 6 compactions per episode
  # at W=52), so the summariser is trained on streams as long as 32 events. 64 and 128 are
  # never seen in training (128: the extrapolation horizon of the verdicts).
  c.train_events = (16, 32)
  c.eval_events = (8, 16, 32, 64, 128)
  c.full_context_events = (8,)           # where the whole episode fits the model's max_len
  # Model (tokenizer v2): a 2-layer decoder; max_len holds the longest corpus row.
  c.model = ml_collections.ConfigDict(dict(d_model=64, num_layers=2, num_heads=4, d_ff=256,
                                           max_len=56))
  # Warm start: corpus mix (lm.compaction.CorpusMix) and pretraining budget.
  # p_query: more mid-stream queries than the environment asks (0.5), i.e. more examples of
  # answering from an incoming summary plus the events since.
  c.corpus = ml_collections.ConfigDict(dict(p_drop=0.15, p_corrupt=0.25, p_first=0.3,
                                            p_last=0.3, p_agent=0.1, p_query=0.75))
  c.warm_steps = 2400
  c.warm_batch = 64
  c.warm_lr = 3e-3
  # Corpus rows have 1..warm_turns blocks and warm_row_len tokens: the windows the rollout
  # writes (at W=52: two blocks in the first window, one after a compaction) and no longer.
  c.warm_turns = 2
  c.warm_row_len = 56
  # RL (lm.token_ppo), identical for every variant: same trajectories per iteration, same
  # iterations, same seeds. GRPO variants use groups of `group_size` rollouts of one stream.
  # Every variant, identical budgets and seeds. Run order: the rows verdicts (a) and (b) read
  # first, then the rest of the 2x3 grid.
  c.variants = ("token_cross", "frozen_summariser", "segment_cross", "agent_token",
                "agent_segment", "token_indep", "segment_indep", "token_grpo", "segment_grpo")
  c.iterations = 30
  c.num_envs = 16
  c.group_size = 4
  c.epochs = 2
  c.num_minibatches = 2
  c.lr = 3e-4
  c.critic_lr = 1e-3
  c.gamma = 1.0
  c.lam = 0.95
  c.clip_eps = 0.2
  c.chunk = 10
  # Gradient mass on summary vs action tokens is measured for these variants (one program each).
  c.grad_mass_variants = ("token_cross", "segment_cross")
  # Evaluation: episodes per seed and horizon, sampling temperature.
  c.eval_envs = 32
  c.temperature = 1.0
  if c.quick:
    c.num_seeds = 2
    c.model = ml_collections.ConfigDict(dict(d_model=32, num_layers=1, num_heads=2, d_ff=64,
                                             max_len=56))
    c.warm_steps = 40
    c.warm_batch = 16
    c.train_events = (8, 16)
    c.eval_events = (8, 16, 32)
    c.full_context_events = (8,)
    c.variants = ("token_cross", "agent_token")
    c.grad_mass_variants = ("token_cross",)
    c.iterations = 2
    c.num_envs = 8
    c.chunk = 2
    c.eval_envs = 8
  return c


def validate(c) -> None:
  """Raises ValueError naming the field."""
  for v in c.variants:
    if v not in VARIANTS:
      raise ValueError(f"config.variants: unknown variant {v!r}; known {sorted(VARIANTS)}")
  if "token_cross" not in c.variants:
    raise ValueError("config.variants must include 'token_cross' (the CompactionRL row)")
  if c.num_seeds < 1:
    raise ValueError(f"config.num_seeds must be >= 1, got {c.num_seeds}")
  if c.num_envs % c.group_size or c.num_envs % c.num_minibatches:
    raise ValueError(f"config.num_envs={c.num_envs} must divide by group_size={c.group_size} "
                     f"and num_minibatches={c.num_minibatches}")
  if not c.train_events or any(h < 1 for h in c.train_events):
    raise ValueError(f"config.train_events must be a non-empty tuple of horizons >= 1, got "
                     f"{c.train_events}")
  if max(c.train_events) > c.env.max_events or max(c.eval_events) > c.env.max_events:
    raise ValueError(f"config.train_events/eval_events exceed config.env.max_events="
                     f"{c.env.max_events}")
  if c.warm_row_len > c.model.max_len:
    raise ValueError(f"config.warm_row_len={c.warm_row_len} exceeds config.model.max_len="
                     f"{c.model.max_len}")
  if c.window > c.model.max_len:
    raise ValueError(f"config.window={c.window} exceeds config.model.max_len={c.model.max_len}")
  if c.iterations % c.chunk:
    raise ValueError(f"config.iterations={c.iterations} must be a multiple of chunk={c.chunk}")
  if any(h not in c.eval_events for h in c.train_events):
    raise ValueError(f"config.train_events={c.train_events}: each must be one of eval_events")
  if max(c.eval_events) <= max(c.train_events):
    raise ValueError(f"config.eval_events={c.eval_events} must include a horizon longer than "
                     f"every train_events={c.train_events} (the unseen extrapolation horizon)")
  if c.iterations % len(c.train_events):
    raise ValueError(f"config.iterations={c.iterations} must be a multiple of "
                     f"len(train_events)={len(c.train_events)} (equal iterations per horizon)")
