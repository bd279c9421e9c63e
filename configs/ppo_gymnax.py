r"""Reproduction `ppo_gymnax`: our PPO and REINFORCE on gymnax's own environments.

COMMAND:
  python -m experiments.ppo_gymnax            # full: ~6 CPU minutes
  python -m experiments.ppo_gymnax --quick    # ~1 minute
"""

import ml_collections


def get_config(arg: str | None = None):
  c = ml_collections.ConfigDict()
  c.seeds = 8
  c.cartpole_timesteps = 500_000
  c.reinforce_timesteps = 500_000
  c.minatar_env = "Breakout-MinAtar"
  c.minatar_timesteps = 1_000_000
  c.minatar_seeds = 2
  if arg == "quick":
    c.seeds = 2
    c.cartpole_timesteps = 100_000
    c.reinforce_timesteps = 50_000
    c.minatar_timesteps = 8 * 32 * 4
    c.minatar_seeds = 1
  return c


def validate(c) -> None:
  for name in ("seeds", "cartpole_timesteps", "reinforce_timesteps", "minatar_timesteps",
               "minatar_seeds"):
    if not isinstance(c[name], int) or c[name] <= 0:
      raise ValueError(f"config.{name} must be a positive integer, got {c[name]!r}")
