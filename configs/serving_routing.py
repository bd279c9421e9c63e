"""Config: heterogeneous-GPU routing, RL (PPO, REINFORCE) vs tuned routers (ServingRoute-v0).

COMMAND (from the repo root):
  .venv/bin/python -m experiments.serving_routing                 # full: ~12 min on 2 CPU cores
  .venv/bin/python -m experiments.serving_routing --quick         # quick: ~60 s
  .venv/bin/python -m experiments.serving_routing --eval_trace PATH   # saved policy on any trace
Writes results/serving_routing.{json,md,png}.
"""

import ml_collections

from jaxrl_suite.algos import ppo, reinforce


def get_config(arg=None):
  quick = arg == "quick"
  c = ml_collections.ConfigDict()
  c.trace = "azure_conv"
  c.train_frac = 0.6                  # train on the early 60% of the trace, evaluate on the rest
  c.cluster = ("H100-7B", "A100-7B", "L4-7B", "L4-7B")
  c.cap = 16                          # max_num_seqs of every engine, same for every policy
  c.max_batched_tokens = 2048
  c.slo_ttft = 2.0                    # s
  c.slo_tpot = 0.2                    # s per output token after the first
  c.pred_acc = 0.8
  c.loads = (0.5, 0.8, 0.95, 1.3)     # fractions of the calibrated cluster capacity
  c.train_table = 48 if quick else 96
  c.eval_table = 96 if quick else 192
  c.max_events = 64
  c.drain_dt = 0.5
  c.n_tune_windows = 3 if quick else 8
  c.n_eval_windows = 2 if quick else 4
  c.num_seeds = 2 if quick else 8
  c.max_eval_steps = 3000
  c.algos = ("ppo", "reinforce")
  c.ppo = ppo.default_config()
  c.reinforce = reinforce.default_config()
  for a in (c.ppo, c.reinforce):
    a.num_envs = 8 if quick else 16
    a.num_steps = 64
    a.total_timesteps = 512 if quick else 32_768
    a.hidden_sizes = (64, 64)
    a.gamma = 0.99
  c.ppo.lr = 3e-4
  c.ppo.ent_coef = 0.01
  c.reinforce.lr = 1e-3
  c.seed = 0
  return c


def validate(config):
  for f in ("train_table", "eval_table", "max_events", "n_tune_windows", "n_eval_windows",
            "num_seeds", "cap", "max_batched_tokens", "max_eval_steps"):
    if int(config[f]) <= 0:
      raise ValueError(f"config.{f} must be > 0, got {config[f]}")
  if not 0 < config.train_frac < 1:
    raise ValueError(f"config.train_frac must be in (0, 1), got {config.train_frac}")
  if not 0 <= config.pred_acc <= 1:
    raise ValueError(f"config.pred_acc must be in [0, 1], got {config.pred_acc}")
  if any(l <= 0 for l in config.loads):
    raise ValueError(f"config.loads must be positive, got {config.loads}")
  if config.slo_ttft <= 0 or config.slo_tpot <= 0:
    raise ValueError("config.slo_ttft and config.slo_tpot must be > 0")
  if config.cap > config.max_batched_tokens:
    raise ValueError("config.cap must be <= config.max_batched_tokens")
  for a in config.algos:
    if a not in ("ppo", "reinforce"):
      raise ValueError(f"config.algos has unknown algorithm {a!r}")
    if int(config[a].total_timesteps) < int(config[a].num_envs) * int(config[a].num_steps):
      raise ValueError(f"config.{a}.total_timesteps is smaller than one rollout")
