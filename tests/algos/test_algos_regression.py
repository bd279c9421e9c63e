"""Regression: the MLP agent through the agent interface reproduces the pre-interface learner.

The numbers below were produced by `ppo.make_train` / `reinforce.make_train` at commit 3d07084
(the learner tied to `ActorCritic`, before `algos/agent.py` existed) on CartPole-v1, 6 updates
of purejaxrl's configuration, key 7. The refactored learner gives them to float tolerance (on
the machine they were captured on, bit for bit).
"""

import json
import os

import jax
import numpy as np
import pytest

from jaxrl_suite.algos import ppo, reinforce
from jaxrl_suite.envs import registry

# {"ppo" | "reinforce": metric -> per-update values, plus two parameter checksums}
with open(os.path.join(os.path.dirname(__file__), "data", "pre_interface_learner.json")) as f:
  REFERENCE = json.load(f)


@pytest.mark.parametrize("module", [ppo, pytest.param(reinforce, marks=pytest.mark.slow)],
                         ids=["ppo", "reinforce"])
def test_mlp_agent_reproduces_the_pre_interface_learner(module):
  c = module.default_config()
  assert c.agent == "mlp"
  c.total_timesteps = 4 * 128 * 6
  env, params = registry.make("CartPole-v1")
  rs, m = jax.jit(module.make_train(c, env, params))(jax.random.key(7))
  ref = REFERENCE[module.__name__.rsplit(".", 1)[-1]]
  for k, v in ref.items():
    if not k.startswith("params"):
      np.testing.assert_allclose(np.asarray(m[k]), v, rtol=2e-5, err_msg=k)
  flat = np.concatenate([np.ravel(x) for x in jax.tree.leaves(rs.train_state.params)])
  np.testing.assert_allclose(np.abs(flat).sum(), ref["params_abs_sum"], rtol=1e-5)
  np.testing.assert_allclose(flat.sum(), ref["params_sum"], rtol=1e-3, atol=1e-3)
