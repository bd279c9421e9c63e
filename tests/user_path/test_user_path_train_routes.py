"""`python -m jaxrl_suite.train --env=NAME` covers every registered environment: each name goes
to a trainer (train/routes.py), its default config passes validation, and the two routes beside
the on-policy learners (the hydro trainer, token PPO) train a couple of updates and write finite
metrics. MNISTBandit-bsuite, whose data set is downloaded when it is made, is refused offline with
a message that says so."""

import json
import os
import urllib.error

import numpy as np
import pytest

from jaxrl_suite import train
from jaxrl_suite.core import cli
from jaxrl_suite.envs import registry
from jaxrl_suite.envs.text import base as text_base
from jaxrl_suite.train import host, hydro, routes, text


def test_every_registered_environment_has_a_trainer():
  got = {n: routes.trainer_for(n) for n in registry.registered_names()}
  assert {k for k, v in got.items() if v == routes.HYDRO} == {"BallastHydro-v0"}
  assert {k for k, v in got.items() if v == routes.TOKEN_PPO} == set(routes.TEXT_ENVS)
  assert set(got.values()) == {routes.ON_POLICY, routes.HYDRO, routes.TOKEN_PPO}


def test_text_envs_are_exactly_the_registered_text_environments():
  """The name list in routes.py matches what the registry builds (our own envs; the gymnax ones
  are array-observation envs)."""
  made_text = {n for n in registry.project_names() if n not in routes.HYDRO_ENVS
               and isinstance(registry.make(n)[0], text_base.TextEnvironment)}
  assert made_text == set(routes.TEXT_ENVS)


@pytest.mark.parametrize("name", ["BallastHydro-v0", *routes.TEXT_ENVS])
def test_default_configs_of_the_new_routes_validate(name):
  config = train.default_config("ppo", name)
  assert config.env_name == name
  train.validate_run_config(config)


def test_text_default_window_holds_an_episode_or_truncates():
  kv, goal = text.default_config("KVLookup-v0"), text.default_config("GoalHouse-v0")
  assert not kv.truncate_oldest and kv.window == 28 and kv.num_turns == 3  # 18 + 2*2 + 3*2
  assert goal.truncate_oldest and goal.window == 64 and goal.num_turns == 30


@pytest.mark.parametrize("name", ["BallastHydro-v0", "KVLookup-v0"])
def test_other_algorithms_are_refused_for_the_ppo_only_routes(name):
  with pytest.raises(cli.UserError, match=f"--algo=reinforce: {name} is .*drop --algo"):
    train.default_config("reinforce", name)


@pytest.mark.parametrize("field,value,needle", [
    ("num_minibatches", 3, "config.num_minibatches=3 must divide config.num_envs=64"),
    ("agent", "mlp", "config.agent must be 'ballast_hydro'"),
])
def test_hydro_config_errors_name_the_field(field, value, needle):
  c = hydro.default_config()
  c[field] = value
  with pytest.raises(ValueError, match=needle):
    train.validate_run_config(c)


def test_text_config_errors_name_the_field():
  c = text.default_config("SceneCap-v0")
  c.window = 64   # a 40-token scene and a 43-token caption need 83 slots
  with pytest.raises(ValueError, match="config.window / num_turns / truncate_oldest: context "
                                       "overflow"):
    train.validate_run_config(c)
  c = text.default_config("KVLookup-v0")
  c.token_ppo.advantage = "ppo"
  with pytest.raises(ValueError, match="config.token_ppo: TokenPPOConfig.advantage"):
    train.validate_run_config(c)


def test_mnist_bandit_offline_is_a_user_error_saying_it_downloads():
  def offline():
    raise urllib.error.URLError("Name or service not known")
  with pytest.raises(cli.UserError) as e:
    routes.check_made_offline("MNISTBandit-bsuite", offline)
  msg = str(e.value)
  assert "downloads the MNIST data set" in msg and "network access" in msg
  assert len(msg.splitlines()) == 2
  routes.check_made_offline("CartPole-v1", offline)   # other envs: not made here at all


def _rows(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


@pytest.mark.slow
def test_hydro_route_trains_two_updates_and_resumes(tmp_path):
  """BallastHydro-v0 through the hydro trainer (tiny agent, small bank, short episodes): an
  interrupted run (stop_after) resumes from its checkpoint to the same end as one that ran
  through."""
  c = hydro.default_config()
  c.env_kwargs = {"layout": "direct10", "n_bank": 8, "reward_scale": 0.1,
                  "max_steps_in_episode": 16}
  c.update(dict(num_envs=4, num_steps=8, num_minibatches=2, update_epochs=1,
                total_timesteps=64, updates_per_chunk=1, checkpoint_every=1))
  c.hydro.update(dict(hidden=16, gru=16, slots=8))
  work = str(tmp_path / "w")
  _, done = train.run_training(c, work, progress=False, stop_after=1)
  assert done == 1 and [r["step"] for r in _rows(work)] == [0]
  state, done = train.run_training(c, work, progress=False)
  rows = _rows(work)
  assert done == 2 and [r["step"] for r in rows] == [0, 1]
  for r in rows:
    assert np.isfinite(r["returned_episode_returns"]) and np.isfinite(r["loss"])
    assert 0 <= r["success_rate"] <= 1 and r["episodes"] > 0   # episodes ended in each update
  assert os.path.isfile(os.path.join(work, "DONE"))
  assert int(np.asarray(state.step)[0]) == 2 * c.update_epochs * c.num_minibatches


@pytest.mark.slow
@pytest.mark.parametrize("name", routes.TEXT_ENVS)
def test_text_route_trains_two_updates(name, tmp_path):
  """Each text environment through token PPO (a 1-layer d_model=16 LM, 2 turns or fewer)."""
  c = text.default_config(name)
  c.num_turns = min(c.num_turns, 2)
  c.update(dict(num_envs=4, total_timesteps=2 * 4 * c.num_turns, updates_per_chunk=2,
                checkpoint_every=2, num_seeds=2))
  c.model.update(dict(d_model=16, num_layers=1, d_ff=32))
  c.token_ppo.update(dict(epochs=1, num_minibatches=2))
  work = str(tmp_path / "w")
  _, done = train.run_training(c, work, progress=False)
  rows = _rows(work)
  assert done == 2 and [r["step"] for r in rows] == [0, 1]
  for r in rows:
    for k in ("returned_episode_returns", "returned_episode_returns_seed0",
              "returned_episode_returns_seed1", "loss", "entropy"):
      assert np.isfinite(r[k]), (k, r)
    assert r["trainable_tokens"] > 0   # the LM sampled action tokens and trained on them
  assert os.path.isfile(os.path.join(work, "learning_curve.png"))


_ON_POLICY = [n for n in registry.registered_names()
              if routes.trainer_for(n) == routes.ON_POLICY and n not in routes.DOWNLOAD_ENVS]


@pytest.mark.slow
@pytest.mark.parametrize("name", _ON_POLICY)
def test_every_on_policy_env_traces_one_update_from_its_default_config(name):
  """What `--env=NAME` builds for each on-policy env (the Gaussian agent for Box actions): its
  default config validates and one update traces (shapes only, nothing compiled)."""
  import jax
  config = train.default_config("ppo", name)
  config.env_name = name
  host._pick_box_agent(config)
  config.update(dict(num_envs=2, num_steps=4, num_minibatches=1, total_timesteps=8))
  train.validate_run_config(config)
  plan = train.make_plan(config)
  assert plan.total == 1 and plan.per_update > 0
  keys = jax.random.split(jax.random.key(0), 1)
  state = jax.eval_shape(plan.init, keys)
  _, metrics = jax.eval_shape(lambda s: plan.run(s, 1, 0), state)
  assert metrics["returned_episode_returns"].shape == (1, 1)


def test_an_on_policy_config_for_a_text_env_is_refused_naming_the_default():
  from jaxrl_suite.algos import ppo
  c = ppo.default_config()
  c.env_name = "KVLookup-v0"
  with pytest.raises(ValueError, match="token_ppo trainer.*drop --config"):
    train.validate_run_config(c)
