"""Regression: the BallastNet agents through the one learner reproduce the retired ballast PPO
loop (`envs/ballast/ppo_loop.py`, commit 3d07084) to float tolerance.

Reference: 3 updates of 16 envs x 32 steps on ring14 (dt 5 min, 96 steps, sigma 0.0025), v1 key
PRNGKey(0), v2 key PRNGKey(1), produced by the old loop. The one learner compiles a different
XLA program (the old loop scored [final_obs; next obs] in one call inside the scan, the learner
bootstraps all final observations in one call after it), so values agree to ~1e-7 relative,
not bit for bit; every discrete quantity (actions, episode counts and lengths) is identical.
"""

import jax
import numpy as np
import pytest

from jaxrl_suite.algos import ballast as A
from jaxrl_suite.algos import ppo
from jaxrl_suite.envs.ballast import make_ballast

REFERENCE = {
    "v1": dict(key=0, params_abs_sum=1898.7376708984375, metrics={
        "episode_return": [7.9782938957214355, 1.9647480249404907, 5.65541410446167],
        "episode_length": [20.157894134521484, 20.25, 21.18181800842285],
        "off_top_share": [0.9140625, 0.861328125, 0.8203125],
        "entropy": [2.358572006225586, 2.328159809112549, 2.1353812217712402],
        "value_loss": [13.017032623291016, 27.805633544921875, 16.078857421875],
        "aux_loss": [0.1680424064397812, 0.14363506436347961, 0.137269526720047],
        "episodes": [19, 20, 22], "success_rate": [1.0, 1.0, 1.0]}),
    "v2": dict(key=1, params_abs_sum=2610.070556640625, metrics={
        "episode_return": [3.7396631240844727, 2.4741649627685547, -1.0667110681533813],
        "episode_length": [9.0, 10.0, 12.576923370361328],
        "off_top_share": [0.75390625, 0.765625, 0.765625],
        "entropy": [2.8686790466308594, 2.8238601684570312, 2.832268714904785],
        "value_loss": [26.983386993408203, 192.77194213867188, 270.15789794921875],
        "episodes": [39, 31, 26], "success_rate": [1.0, 1.0, 1.0]}),
}


@pytest.mark.slow   # ~80 s: two ballast compilations
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_ballast_agents_reproduce_the_retired_loop(version):
  env, p = make_ballast(task=version, dt_h=5 / 60, max_steps_in_episode=96,
                        sigma_level=0.0025)
  c = A.default_config(version)
  c.num_envs, c.total_timesteps = 16, 16 * 32 * 3
  ref = REFERENCE[version]
  rs, m = jax.jit(ppo.make_train(c, env, p))(jax.random.PRNGKey(ref["key"]))
  for k, v in ref["metrics"].items():
    np.testing.assert_allclose(np.asarray(m[k]), v, rtol=1e-5, err_msg=k)
  total = sum(float(np.abs(np.asarray(x)).sum()) for x in jax.tree.leaves(rs.train_state.params))
  np.testing.assert_allclose(total, ref["params_abs_sum"], rtol=1e-6)
