"""Config: one-GPU batching, RL (PPO, REINFORCE) vs tuned static / timeout / idle-only /
continuous-cap baselines (ServingBatch-v0).

COMMAND (from the repo root):
  .venv/bin/python -m experiments.serving_batching                 # full: ~10 min on 2 CPU cores
  .venv/bin/python -m experiments.serving_batching --quick         # quick: ~60 s
  .venv/bin/python -m experiments.serving_batching --eval_trace PATH   # saved policies, any trace
Writes results/serving_batching.{json,md,png}.
"""

import ml_collections

from jaxrl_suite.algos import ppo, reinforce


def get_config(arg=None):
  quick = arg == "quick"
  c = ml_collections.ConfigDict()
  c.trace = "azure_conv"
  c.train_frac = 0.6
  c.gpu = "A100-7B"
  c.max_batched_tokens = 2048
  c.slo_ttft = 2.0
  c.slo_tpot = 0.2
  c.pred_acc = 0.8
  c.modes = ("static", "continuous")
  c.loads = (0.5, 0.8, 0.95, 1.3)     # fractions of each mode's calibrated capacity
  c.train_table = 48 if quick else 96
  c.eval_table = 96 if quick else 192
  c.max_events = 64
  c.wait_dt = 0.05
  c.decision_dt = 0.25
  c.n_tune_windows = 3 if quick else 8
  c.n_eval_windows = 2 if quick else 5
  c.num_seeds = 2 if quick else 8
  c.max_eval_steps = 4000
  c.algos = ("ppo", "reinforce")
  c.ppo = ppo.default_config()
  c.reinforce = reinforce.default_config()
  for a in (c.ppo, c.reinforce):
    a.num_envs = 8 if quick else 16
    a.num_steps = 64
    a.total_timesteps = 512 if quick else 65_536
    a.hidden_sizes = (64, 64)
  c.continuous_timesteps = 512 if quick else 8_192   # RL budget in continuous mode (slower)
  c.ppo.lr = 3e-4
  c.reinforce.lr = 1e-3
  c.seed = 0
  return c


def validate(config):
  for f in ("train_table", "eval_table", "max_events", "n_tune_windows", "n_eval_windows",
            "num_seeds", "max_batched_tokens", "max_eval_steps", "continuous_timesteps"):
    if int(config[f]) <= 0:
      raise ValueError(f"config.{f} must be > 0, got {config[f]}")
  if not 0 < config.train_frac < 1:
    raise ValueError(f"config.train_frac must be in (0, 1), got {config.train_frac}")
  if not 0 <= config.pred_acc <= 1:
    raise ValueError(f"config.pred_acc must be in [0, 1], got {config.pred_acc}")
  if any(l <= 0 for l in config.loads):
    raise ValueError(f"config.loads must be positive, got {config.loads}")
  if config.wait_dt <= 0 or config.decision_dt <= 0:
    raise ValueError("config.wait_dt and config.decision_dt must be > 0")
  for m in config.modes:
    if m not in ("static", "continuous"):
      raise ValueError(f"config.modes has unknown mode {m!r}")
  for a in config.algos:
    if a not in ("ppo", "reinforce"):
      raise ValueError(f"config.algos has unknown algorithm {a!r}")
