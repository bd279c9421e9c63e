r"""PPO on gymnax CartPole-v1 with purejaxrl's configuration.

COMMAND:
  python -m jaxrl_suite.train --config=configs/ppo_cartpole.py --workdir=workdirs/ppo_cartpole
  python -m jaxrl_suite.train --config=configs/ppo_cartpole.py:quick   # 20k steps, seconds
Expected: ~10 s compile + ~5 s per seed on 2 CPU cores; return ~500 after 5e5 steps.
"""

from jaxrl_suite.algos import ppo


def get_config(arg: str | None = None):
  config = ppo.default_config()
  config.env_name = "CartPole-v1"
  config.updates_per_chunk = 61   # 976 updates = 16 chunks
  config.checkpoint_every = 244
  config.log_every = 4
  config.max_to_keep = 2
  if arg == "quick":
    config.total_timesteps = 4 * 128 * 40
    config.updates_per_chunk = 10
    config.checkpoint_every = 20
  return config
