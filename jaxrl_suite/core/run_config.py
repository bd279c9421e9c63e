"""The host-loop fields of a run config: how a training run is chunked, checkpointed and logged.

A learner's `default_config()` (algos/) holds what the jitted update reads; the driver
(`jaxrl_suite.train`) also reads the fields below. Every learner's default config carries them
(`add_host_defaults`), so `ppo.default_config()` trains as is, from the command line or from code:

  updates_per_chunk   updates per jitted call; the progress bar and metrics move between calls
  checkpoint_every    updates between checkpoints (a multiple of updates_per_chunk)
  log_every           one metric row every this many updates (plus the first update)
  max_to_keep         checkpoints kept in <workdir>/checkpoints

Why these defaults: 976 updates (the default 500k steps / (4 envs x 128 steps)) = 61 chunks of 16,
so no second, shorter chunk (a second compile) runs; a checkpoint every 8 chunks costs < 1% of
the run; a row per update is ~1000 rows.
"""

from __future__ import annotations

HOST_DEFAULTS = {
    "updates_per_chunk": 16,
    "checkpoint_every": 128,
    "log_every": 1,
    "max_to_keep": 2,
}

HOST_FIELDS = {
    "updates_per_chunk": "updates per jitted call (progress bar and metrics between calls)",
    "checkpoint_every": "updates between checkpoints (a multiple of updates_per_chunk)",
    "log_every": "metric rows every this many updates",
    "max_to_keep": "checkpoints kept",
}


def add_host_defaults(config):
  """Adds each host-loop field `config` lacks (or holds as None) with its default; returns it."""
  with config.unlocked():
    for name, value in HOST_DEFAULTS.items():
      if config.get(name) is None:
        if name in config:   # a None field is typed None: replace it by an int field
          del config[name]
        config[name] = value
  return config
