"""On-policy learners: `make_train(config, env, env_params) -> train(key)`."""

from jaxrl_suite.algos import ppo, reinforce

ALGOS = {"ppo": ppo, "reinforce": reinforce}


def get(name: str):
  if name not in ALGOS:
    raise ValueError(f"config.algo must be one of {sorted(ALGOS)}, got {name!r}")
  return ALGOS[name]
