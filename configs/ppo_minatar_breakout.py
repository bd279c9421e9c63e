r"""PPO on gymnax Breakout-MinAtar (observations flattened to 400 inputs).

COMMAND:
  python -m jaxrl_suite.train --config=configs/ppo_minatar_breakout.py
Expected: ~30 s compile, ~17k steps/s on 2 CPU cores (1e6 steps in about a minute).
"""

from jaxrl_suite.algos import ppo


def get_config(arg: str | None = None):
  config = ppo.default_config()
  config.env_name = "Breakout-MinAtar"
  config.num_envs = 64
  config.num_steps = 128
  config.total_timesteps = 1_000_000
  config.lr = 5e-4
  config.activation = "relu"
  config.hidden_sizes = (128, 128)
  config.updates_per_chunk = 12
  config.checkpoint_every = 60
  config.log_every = 1
  config.max_to_keep = 2
  if arg == "quick":
    config.num_envs = 8
    config.num_steps = 32
    config.total_timesteps = 8 * 32 * 8
    config.updates_per_chunk = 4
    config.checkpoint_every = 4
  return config
