r"""REINFORCE with a value baseline on gymnax CartPole-v1.

COMMAND:
  python -m jaxrl_suite.train --config=configs/reinforce_cartpole.py
Expected: ~10 s compile + a few s per seed on 2 CPU cores.
"""

from jaxrl_suite.algos import reinforce


def get_config(arg: str | None = None):
  config = reinforce.default_config()
  config.env_name = "CartPole-v1"
  config.num_envs = 16
  config.num_steps = 64
  config.updates_per_chunk = 61
  config.checkpoint_every = 244
  config.log_every = 4
  config.max_to_keep = 2
  if arg == "quick":
    config.total_timesteps = 16 * 64 * 20
    config.updates_per_chunk = 10
    config.checkpoint_every = 20
  return config
