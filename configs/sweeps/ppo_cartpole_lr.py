r"""Sweep: PPO on CartPole-v1, learning rate x seed (a 3 x 3 grid, nine trials).

COMMAND:
  python -m experiments.sweep --sweep=configs/sweeps/ppo_cartpole_lr.py --parallel=2
  python -m experiments.sweep --sweep=configs/sweeps/ppo_cartpole_lr.py:quick   # 2 x 2, ~1 min
Expected: ~20-30 s per full trial on 2 CPU cores (mostly compile); the table lands in
workdirs/sweeps/ppo_cartpole_lr/results.md. Re-running skips finished trials and resumes the rest.
The same trials on a cluster (XManager, `pip install -e .[xm]`):
  xmanager launch experiments/launch_xm.py -- --sweep=configs/sweeps/ppo_cartpole_lr.py
"""

import itertools

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.name = "ppo_cartpole_lr" + ("_quick" if arg == "quick" else "")
  # The base config file (relative to the repository root) and its argument.
  config.base_config = "configs/ppo_cartpole.py" + (":quick" if arg == "quick" else "")
  # Overrides applied to every trial (config field -> value).
  config.overrides = ml_collections.ConfigDict({"log_every": 2} if arg == "quick" else {})
  return config


def get_sweep(arg: str | None = None) -> list[dict]:
  """One dict of config-field overrides per trial: the lr x seed grid, seed fastest.

  Plain itertools (a config imports no experiment code): the same list as
  jaxrl_suite.train.sweep.product(lr=..., seed=...).
  """
  lrs, seeds = ([1e-3, 2.5e-4], [0, 1]) if arg == "quick" else ([1e-3, 2.5e-4, 1e-4], [0, 1, 2])
  return [{"lr": lr, "seed": seed} for lr, seed in itertools.product(lrs, seeds)]
