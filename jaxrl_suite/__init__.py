"""jaxrl_suite: JAX-first functional RL research code for a batch of 2026 RL papers.

Sub-packages:
  core    -- losses, GAE, networks, sharding, checkpoints, logging, results records
  envs    -- gymnax environments (serving, ballast, ...) and a registry
  algos   -- PPO and REINFORCE: make_train(config, env, env_params) -> train(key)
  ope     -- off-policy evaluation (FORE and baselines)
  lm      -- tiny language models and LLM-RL methods (GRPO, Direct-OPD)
"""

__version__ = "0.1.0"
