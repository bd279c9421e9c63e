"""The script side shared by `experiments/serving_batching.py` and `experiments/serving_routing.py`:
their CLI (flags), config lookup, the persistent compilation cache and the body of `main`.

The pipeline itself is the library's: calibrate the load -> tune every baseline family on
TRAINING windows (envs/serving/protocol.py) -> train RL (PPO, REINFORCE; seeds vmapped in one
jit; jaxrl_suite/train/serving/training.py) -> evaluate baselines and learned policies on later,
unseen windows with ONE compiled evaluator per environment (envs/serving/replay.py,
`harness.Evaluator` over a universal policy) -> per-seed metrics, paired ratios; the scripts
judge the claims through jaxrl_suite.repro.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from absl import flags
import jax
from ml_collections import config_flags

from experiments import cli
from jaxrl_suite.repro import workers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FLAG_NAMES = ("config", "quick", "workdir", "eval_trace", "reuse_policies", "workers")


def define_flags(name: str) -> dict[str, Any]:
  """The CLI of a serving reproduction. Both scripts define the same flag names, so a second
  import in one process (tests) replaces the first one's definitions."""
  cli.replace_flags(_FLAG_NAMES)
  return {
      "config": config_flags.DEFINE_config_file(
          "config", os.path.join(ROOT, "configs", f"{name}.py"), "experiment config"),
      "quick": flags.DEFINE_bool("quick", False, "small, fast run (CI)"),
      "workdir": flags.DEFINE_string(
          "workdir", None, f"work directory (default workdirs/{name}, per trace for routing)"),
      "eval_trace": flags.DEFINE_string(
          "eval_trace", None, "evaluate the saved policies (and tuned baselines) on this trace"),
      "reuse_policies": flags.DEFINE_bool(
          "reuse_policies", False, "evaluate the policies saved in --workdir instead of training"),
      "workers": flags.DEFINE_integer(
          "workers", 1, "processes sharing the workdir (routing: > 1 trains RL variants side "
          "by side; jaxrl_suite.repro.workers)"),
  }


def config_module(name: str):
  if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
  import importlib  # pylint: disable=g-import-not-at-top
  return importlib.import_module(f"configs.{name}")


def get_config(name: str, fl: dict[str, Any]):
  """--config, or with --quick the config's quick variant plus any --config.x overrides."""
  return cli.config_for(config_module(name), fl["config"].value, fl["quick"].value)


def enable_compilation_cache() -> None:
  """Persistent XLA cache (as `make`/reproduce.py do): re-runs skip most compilation."""
  jax.config.update("jax_compilation_cache_dir", os.environ.get(
      "JAX_COMPILATION_CACHE_DIR", os.path.join(ROOT, ".jax_cache")))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def main(name: str, run, fl: dict[str, Any], workdir_of=None) -> None:
  """Body of each script's absl `main`: config from flags, compilation cache, helpers
  (--workers, where `workdir_of(config)` names the default workdir: the script shares its
  stages), run."""
  enable_compilation_cache()
  with cli.user_errors():
    c = get_config(name, fl)
    config_module(name).validate(c)   # before any helper starts
    workdir = fl["workdir"].value or (workdir_of(c) if workdir_of else None)
    helpers = workers.start(int(fl["workers"].value), sys.argv, workdir or ".",
                            splits_stages=workdir_of is not None, results_flag=False)
    try:
      run(c, fl["quick"].value, workdir, fl["eval_trace"].value, fl["reuse_policies"].value)
    finally:
      workers.stop(helpers, workdir or ".")
