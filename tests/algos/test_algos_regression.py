"""Regression: the MLP agent through the agent interface reproduces the pre-interface learner.

The numbers below were produced by `ppo.make_train` / `reinforce.make_train` at commit 3d07084
(the learner tied to `ActorCritic`, before `algos/agent.py` existed) on CartPole-v1, 6 updates
of purejaxrl's configuration, key 7. The refactored learner gives them to float tolerance (on
the machine they were captured on, bit for bit).
"""

import jax
import numpy as np
import pytest

from jaxrl_suite.algos import ppo, reinforce
from jaxrl_suite.envs import registry

REFERENCE = {
    ppo: {
        "loss": [22.80344009399414, 19.717079162597656, 26.72174835205078, 26.1851806640625,
                 30.476547241210938, 24.009445190429688],
        "episode_return": [23.5, 21.29166603088379, 25.77777862548828, 28.100000381469727,
                           33.93333435058594, 22.61111068725586],
        "value_loss": [45.625022888183594, 39.45164108276367, 53.459190368652344,
                       52.38566589355469, 60.96880340576172, 48.0338134765625],
        "entropy": [0.6929577589035034, 0.6917294263839722, 0.690044641494751,
                    0.6888195276260376, 0.6879086494445801, 0.6854002475738525],
        "params_abs_sum": 1242.0218505859375, "params_sum": -8.133710861206055,
    },
    reinforce: {
        "loss": [74.99207305908203, 53.65293502807617, 77.58930969238281, 105.83928680419922,
                 74.86479949951172, 47.51677322387695],
        "episode_return": [23.5, 20.954545974731445, 27.047618865966797, 26.94444465637207,
                           22.409090042114258, 22.434782028198242],
        "value_loss": [149.99810791015625, 107.32328033447266, 155.1964111328125,
                       211.6981964111328, 149.74850463867188, 95.06159210205078],
        "params_abs_sum": 1235.871337890625, "params_sum": -8.041397094726562,
    },
}


@pytest.mark.parametrize("module", [ppo, pytest.param(reinforce, marks=pytest.mark.slow)],
                         ids=["ppo", "reinforce"])
def test_mlp_agent_reproduces_the_pre_interface_learner(module):
  c = module.default_config()
  assert c.agent == "mlp"
  c.total_timesteps = 4 * 128 * 6
  env, params = registry.make("CartPole-v1")
  rs, m = jax.jit(module.make_train(c, env, params))(jax.random.key(7))
  ref = REFERENCE[module]
  for k, v in ref.items():
    if not k.startswith("params"):
      np.testing.assert_allclose(np.asarray(m[k]), v, rtol=2e-5, err_msg=k)
  flat = np.concatenate([np.ravel(x) for x in jax.tree.leaves(rs.train_state.params)])
  np.testing.assert_allclose(np.abs(flat).sum(), ref["params_abs_sum"], rtol=1e-5)
  np.testing.assert_allclose(flat.sum(), ref["params_sum"], rtol=1e-3, atol=1e-3)
