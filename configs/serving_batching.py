"""Config: one-GPU batching, RL (PPO, REINFORCE) vs tuned static / timeout / idle-only /
continuous-cap baselines (ServingBatch-v0).

COMMAND (from the repo root):
  .venv/bin/python -m experiments.serving_batching                 # full: ~3-6 min on 2 CPU cores
  .venv/bin/python -m experiments.serving_batching --quick         # quick: ~75 s
  .venv/bin/python -m experiments.serving_batching --eval_trace PATH   # saved policies, any trace
Writes results/serving_batching.{json,md,png}. Shared fields: configs/serving_common.py.
"""

from configs import serving_common


def get_config(arg=None):
  quick = arg == "quick"
  c = serving_common.experiment(quick)
  c.gpu = "A100-7B"
  c.modes = ("static", "continuous")
  c.wait_dt = 0.05                    # s, one "wait" action in static mode
  c.decision_dt = 0.25                # s between cap decisions in continuous mode
  c.max_eval_steps = 4000
  for a in (c.ppo, c.reinforce):
    a.total_timesteps = 512 if quick else 393_216   # static mode (6x the first session)
  c.continuous_timesteps = 512 if quick else 131_072  # continuous mode (16x the first session)
  return c


def validate(config):
  serving_common.validate(config, positive=("continuous_timesteps",))
  if config.engine_settings != "uniform":
    raise ValueError("config.engine_settings must be 'uniform' for batching (one GPU whose "
                     "max_num_seqs is the action)")
  if config.wait_dt <= 0 or config.decision_dt <= 0:
    raise ValueError("config.wait_dt and config.decision_dt must be > 0")
  for m in config.modes:
    if m not in ("static", "continuous"):
      raise ValueError(f"config.modes has unknown mode {m!r}")
