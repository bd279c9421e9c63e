"""Which trainer the CLI runs for an environment, and the host loop's view of any trainer.

Every registered environment goes to one of three trainers:

  on_policy   algos/on_policy (PPO or REINFORCE) with a generic agent: discrete actions (mlp, gru,
              entities) or Box actions (gaussian, tanh-squashed); every gymnax env, the probes,
              BallastNet, RailRM, ServingBatch, ServingRoute
  hydro       algos/ballast.make_trainer: PPO with the recurrent route-entity agent of
              agents/ballast_hydro.py on one layout's tables (BallastHydro-v0, whose Box action
              is one command per pump, not a Gaussian policy's vector)
  token_ppo   lm/token_ppo: token-level PPO of a small decoder LM on a text environment (dict
              observations of token blocks, actions token sequences)

The host loop (`jaxrl_suite.train.host.run_training`) sees any of them as a `Plan`: init, run a
chunk of n updates, the number of updates and the env steps per update. Its chunks, checkpoints,
resume, Ctrl-C and metrics are the same for all three.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from jaxrl_suite.core import cli

ON_POLICY, HYDRO, TOKEN_PPO = "on_policy", "hydro", "token_ppo"
HYDRO_ENVS = ("BallastHydro-v0",)
# The registry's text environments (tests/user_path/test_user_path_train_routes.py checks that
# this is exactly the set of registered envs whose instances are text environments).
TEXT_ENVS = ("GoalHouse-v0", "KVLookup-v0", "SceneCap-v0", "StreamLedger-v0")
# gymnax builds MNISTBandit from the MNIST data set, downloaded when the env is made.
DOWNLOAD_ENVS = ("MNISTBandit-bsuite",)


class Plan(NamedTuple):
  """A trainer as the host loop drives it (S seeds, every leaf batched over seeds first).

  init(keys [S]) -> state;  run(state, n, done) -> (state, metrics {name: [S, n]}) runs updates
  done .. done + n - 1 (a pure function of its arguments, so a resumed run repeats an
  uninterrupted one); `total` updates in all; `per_update` env steps per update and seed.
  Metrics hold `returned_episode_returns` (the progress bar and the learning curve read it).
  """
  init: Callable[[Any], Any]
  run: Callable[[Any, int, int], tuple[Any, dict]]
  total: int
  per_update: int


def trainer_for(env_name: str) -> str:
  """ON_POLICY, HYDRO or TOKEN_PPO: the trainer of a registered environment."""
  if env_name in HYDRO_ENVS:
    return HYDRO
  if env_name in TEXT_ENVS:
    return TOKEN_PPO
  return ON_POLICY


def check_algo(env_name: str, algo: str) -> None:
  """Raises cli.UserError when `algo` is not what the environment's trainer runs (PPO)."""
  route = trainer_for(env_name)
  if route == ON_POLICY or algo == "ppo":
    return
  what = {HYDRO: "trained by PPO with its recurrent agent (algos/ballast.py)",
          TOKEN_PPO: "a text environment, trained by token-level PPO (lm/token_ppo.py; "
                     "--config.token_ppo.advantage picks gae, grpo or gigpo)"}[route]
  raise cli.UserError(f"--algo={algo}: {env_name} is {what}; drop --algo")


def check_made_offline(env_name: str, make: Callable[[], Any]) -> None:
  """Makes an environment that downloads data when made; a failed download is a user error
  (the env needs network access or a cached copy), not a traceback."""
  if env_name not in DOWNLOAD_ENVS:
    return
  try:
    make()
  except OSError as e:   # urllib's URLError, socket errors, a missing or unreadable cache
    raise cli.UserError(
        f"--env={env_name}: gymnax downloads the MNIST data set when this environment is made, "
        f"and the download failed ({e}).\nIt needs network access (or a cached copy); every "
        "other registered environment trains offline.") from None


def positive_ints(config, names, prefix: str = "config") -> None:
  """Raises ValueError naming the first field of `names` that is not an integer > 0."""
  for name in names:
    v = config.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
      raise ValueError(f"{prefix}.{name} must be a positive integer, got {v!r}")


def positive_floats(config, names, prefix: str = "config", allow_zero: bool = False) -> None:
  """Raises ValueError naming the first field of `names` that is not a finite number > 0 (>= 0
  with allow_zero)."""
  for name in names:
    v = config.get(name)
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
          and abs(v) != float("inf") and (v >= 0 if allow_zero else v > 0))
    if not ok:
      raise ValueError(f"{prefix}.{name} must be a finite number {'>=' if allow_zero else '>'} 0, "
                       f"got {v!r}")
