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


def _standard_episodes(eps):
  """The project episodes in the standard RLDS schema: dict observation, no behaviour field."""
  out = []
  for e in eps:
    s = dict(e["steps"])
    o = s.pop("observation")
    s.pop("behavior_prob")
    s["observation"] = {"pole": o[:, 2:], "cart": o[:, :2]}  # sorted keys: cart, pole
    out.append(dict(steps=s, episode_id=e["episode_id"]))
  return out


def test_standard_rlds_schema_round_trips_and_loads_with_a_behaviour_policy(rollout, tmp_path):
  """A standard RLDS dataset (dict observations, no behavior_prob) is written, read back and
  turned into the same FORE inputs as the project schema, mu coming from the behaviour policy."""
  _, _, ro = rollout
  eps = D.rollouts_to_episodes(ro)[:6]
  std = _standard_episodes(eps)
  back = D.read_rlds(D.write_rlds(std, str(tmp_path)))
  assert len(back) == len(std)
  for a, b in zip(std, back):
    for k in ("action", "reward", "is_terminal", "discount"):
      np.testing.assert_array_equal(a["steps"][k], b["steps"][k], err_msg=k)
    for k in ("cart", "pole"):
      np.testing.assert_array_equal(a["steps"]["observation"][k], b["steps"]["observation"][k])
  pi = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, 0.3)
  mu = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, 0.2)
  with pytest.raises(ValueError, match="behavior_prob"):
    D.episodes_to_transitions(back, D.poly_action_features, pi)
  got = D.episodes_to_transitions(back, D.poly_action_features, pi, behavior_probs_fn=mu)
  ref = D.episodes_to_transitions(eps, D.poly_action_features, pi)
  for k in ("phi", "phi_next", "rewards", "nu0", "pi_probs", "cluster_ids"):
    np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
  np.testing.assert_allclose(got["mu_probs"], ref["mu_probs"], rtol=1e-6)
  # a nested named field works too
  nested = [dict(steps=dict(e["steps"], infos={"mu": e["steps"]["behavior_prob"]}),
                 episode_id=e["episode_id"]) for e in eps]
  for e in nested:
    e["steps"].pop("behavior_prob")
  got2 = D.episodes_to_transitions(nested, D.poly_action_features, pi,
                                   behavior_prob_key="infos/mu")
  np.testing.assert_array_equal(got2["mu_probs"], ref["mu_probs"])


def test_episode_validation_names_the_field(rollout):
  _, _, ro = rollout
  eps = D.rollouts_to_episodes(ro)[:2]
  pi = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, 0.3)
  bad = [dict(steps=dict(e["steps"]), episode_id=e["episode_id"]) for e in eps]
  bad[1]["steps"]["action"] = bad[1]["steps"]["action"].copy()
  bad[1]["steps"]["action"][0] = 2                      # out of range for 2 actions
  with pytest.raises(ValueError, match=r"episode 1 .*steps/action\[0\] = 2 is outside \[0, 2\)"):
    D.episodes_to_transitions(bad, D.poly_action_features, pi)
  bad[1]["steps"]["action"] = bad[1]["steps"]["action"].astype(np.float32) + 0.5
  with pytest.raises(ValueError, match="steps/action must hold integer"):
    D.episodes_to_transitions(bad, D.poly_action_features, pi)
  short = [dict(steps=dict(eps[0]["steps"], reward=eps[0]["steps"]["reward"][:-1]))]
  with pytest.raises(ValueError, match="steps/reward has shape"):
    D.episodes_to_transitions(short, D.poly_action_features, pi)
  nomu = [dict(steps=dict(eps[0]["steps"], behavior_prob=eps[0]["steps"]["behavior_prob"] * 0))]
  with pytest.raises(ValueError, match="behavior_prob.* is not a probability"):
    D.episodes_to_transitions(nomu, D.poly_action_features, pi)
  with pytest.raises(ValueError, match="observation"):
    D.episodes_to_transitions([dict(steps={"action": np.zeros(3, int)})], D.poly_action_features,
                              pi)
  with pytest.raises(ValueError, match="numeric"):
    D.flatten_observation(np.array(["a", "b"]))
