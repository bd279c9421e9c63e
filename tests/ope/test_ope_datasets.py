"""RLDS round trip through tensorflow-datasets (array_record, no TF) and FORE on the result."""

import os

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.ope import datasets as D
from jaxrl_suite.ope import fore as F


@pytest.fixture(scope="module")
def rollout():
  env, params = gymnax.make("CartPole-v1")
  params = params.replace(max_steps_in_episode=60)   # forces some truncated episodes
  mu = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, 0.2)
  ro = D.rollout_gymnax(jax.random.PRNGKey(0), env, params, mu, 24, 60)
  return env, params, ro


def test_rollout_is_consistent(rollout):
  _, _, ro = rollout
  L = ro["length"]
  assert (L >= 1).all() and (L <= 60).all()
  assert ((L == 60) | ro["terminated"]).all()          # every episode ends by termination or time
  assert (~ro["terminated"]).any()                      # some truncated
  assert ((ro["behavior_probs"] > 0) & (ro["behavior_probs"] <= 1)).all()


def test_rlds_round_trip_and_fore(rollout, tmp_path):
  _, _, ro = rollout
  eps = D.rollouts_to_episodes(ro)
  ep0 = eps[0]["steps"]
  T = int(ro["length"][0])
  assert len(ep0["reward"]) == T + 1 and ep0["is_first"][0] and ep0["is_last"][-1]
  bdir = D.write_rlds(eps, str(tmp_path))
  assert bdir.startswith(str(tmp_path))                 # written locally, nothing downloaded
  assert any(f.endswith(tuple(f"{i:05d}" for i in range(10))) or "array_record" in f
             for f in os.listdir(bdir))
  back = D.read_rlds(bdir)
  assert len(back) == len(eps)
  for a, b in zip(eps, back):
    assert a["episode_id"] == b["episode_id"]
    for k in a["steps"]:
      np.testing.assert_array_equal(a["steps"][k], b["steps"][k], err_msg=k)
  pi = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, 0.3)
  tr = D.episodes_to_transitions(back, D.poly_action_features, pi)
  n = int(ro["length"].sum())
  assert tr["phi"].shape == (n, 18) and tr["nu0"].shape == (len(eps), 18)
  # terminal transitions have zero next features; truncated ones keep them (bootstrap)
  last = np.cumsum(ro["length"]) - 1
  zero_next = np.all(np.asarray(tr["phi_next"])[last] == 0, axis=1)
  np.testing.assert_array_equal(zero_next, ro["terminated"])
  with jax.enable_x64(True):
    f64 = lambda a: jnp.asarray(a, jnp.float64)
    res = F.fore(f64(tr["phi"]), f64(tr["phi_next"]), f64(tr["rewards"]), f64(tr["nu0"]), 0.98,
                 cluster_ids=np.asarray(tr["cluster_ids"]), ridge=1e-6, on_ill_conditioned="ignore")
  assert np.isfinite(float(res.value)) and float(res.se) > 0
  assert 0 < float(res.value) < 1 / (1 - 0.98)        # rewards are 1 per step


def test_read_missing_dir_raises(tmp_path):
  with pytest.raises(FileNotFoundError):
    D.read_rlds(str(tmp_path / "nope"))
  with pytest.raises(ValueError, match="no episodes"):
    D.write_rlds([], str(tmp_path))
