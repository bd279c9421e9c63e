"""registry.make: unknown names and misspelt keywords fail early with a message that says what to
do, for every registered environment; valid keywords still reach the factories."""

import functools

import jax
import pytest

from jaxrl_suite.envs import arguments, probes, registry
from jaxrl_suite.envs.rail import make_rail
from jaxrl_suite.envs.serving import make_batching, make_routing

ALL = registry.registered_names()


def _typo(word: str, valid) -> str:
  """A misspelling of `word` that is no valid keyword: a dropped letter, else a doubled one."""
  for i in range(len(word) - 1, 0, -1):
    cand = word[:i] + word[i + 1:]
    if cand not in valid and len(cand) >= 3:
      return cand
  return word + word[-1]


def _no_build(monkeypatch):
  """make() must reject bad keywords before it builds anything (a bank or trace can take a
  minute): the build step fails the test if it is reached."""
  def boom(name, kwargs):
    raise AssertionError(f"{name} was built despite bad keywords {sorted(kwargs)}")
  monkeypatch.setattr(registry, "_build", boom)


def test_listing_is_stable_and_covers_every_project_env():
  names = registry.registered_names()
  assert len(names) == len(set(names))
  assert names[:len(registry.project_names())] == registry.project_names()
  for need in ("BallastHydro-v0", "BallastNet-v0", "ServingBatch-v0", "ServingRoute-v0",
               "RailRM-v0", "KVLookup-v0", "StreamLedger-v0", "GoalHouse-v0", "SceneCap-v0",
               "ProbeMasked-v0", "CartPole-v1"):
    assert need in names and registry.is_registered(need)
  assert not registry.is_registered("BallastHydro-v1")
  for name in registry.project_names():
    assert registry.summary(name), f"{name} has no one-line summary in the registry"


@pytest.mark.parametrize("name", ["Cartpole-v1", "ballasthydro-v0", "ServingRoute-v1"])
def test_unknown_name_suggests_the_close_match_and_lists_all(name, monkeypatch):
  _no_build(monkeypatch)
  with pytest.raises(ValueError) as e:
    registry.make(name)
  msg = str(e.value)
  assert f"unknown environment {name!r}" in msg
  want = {"Cartpole-v1": "CartPole-v1", "ballasthydro-v0": "BallastHydro-v0",
          "ServingRoute-v1": "ServingRoute-v0"}[name]
  assert f"Did you mean {want!r}" in msg, msg
  for valid in ALL:
    assert valid in msg


@pytest.mark.parametrize("name", ALL)
def test_misspelt_name_of_every_env_is_suggested(name, monkeypatch):
  _no_build(monkeypatch)
  typo = name.replace("-v", "_v", 1) if "-v" in name else name[:-1]   # CartPole_v1, Catch-bsuit
  with pytest.raises(ValueError) as e:
    registry.make(typo)
  msg = str(e.value)
  assert msg.startswith(f"unknown environment {typo!r}. Did you mean "), msg
  assert repr(name) in msg.split("Valid names")[0], msg


def test_unknown_name_without_close_match_lists_all(monkeypatch):
  _no_build(monkeypatch)
  with pytest.raises(ValueError, match="unknown environment 'Zebra'") as e:
    registry.make("Zebra")
  assert "Did you mean" not in str(e.value) and "ServingBatch-v0, " in str(e.value)


@pytest.mark.parametrize("name", ALL)
def test_misspelt_keyword_names_env_argument_and_valid_ones(name, monkeypatch):
  _no_build(monkeypatch)
  valid = registry.valid_kwargs(name)
  assert valid is not None, f"{name}: its factory's keywords are unknown to the registry"
  if valid:
    right = max(valid, key=len)
    bad = _typo(right, valid)
  else:
    right, bad = None, "num_envs"
  with pytest.raises(ValueError) as e:
    registry.make(name, **{bad: 1})
  msg = str(e.value)
  assert msg.startswith(f"{name}: unknown argument {bad!r}"), msg
  if right is not None:
    assert f"did you mean {right!r}" in msg, msg
    assert "Valid arguments: " + ", ".join(valid) in msg, msg
  else:
    assert "Valid arguments: (none)" in msg, msg


@pytest.mark.parametrize("name", registry.project_names())
def test_registry_knows_each_factorys_keywords(name):
  """The registry's view of a factory (its signature and what its **overrides reach) resolves,
  and every name it excludes is one the factory really has: a stale entry after a code move
  fails here rather than in a user's hands."""
  sources, exclude = registry._sources(name)
  assert sources and all(callable(s) for s in sources)
  seen = set().union(*(arguments.keywords(s) for s in sources))
  assert exclude <= seen, f"{name}: excluded keywords {sorted(exclude - seen)} are not arguments"
  assert set(registry.valid_kwargs(name)) == seen - exclude


def test_direct_factory_calls_check_their_overrides():
  with pytest.raises(ValueError, match=r"ServingBatch-v0: unknown argument 'tabel_size' "
                                       r"\(did you mean 'table_size'\?\)"):
    make_batching(tabel_size=16)
  with pytest.raises(ValueError, match=r"ServingRoute-v0: unknown argument 'slo_ttf' "
                                       r"\(did you mean 'slo_ttft'\?\)"):
    make_routing(slo_ttf=1.0)
  with pytest.raises(ValueError, match=r"RailRM-v0: unknown argument 'demand_levle'"):
    make_rail("tiny", demand_levle=1.2)
  with pytest.raises(ValueError, match=r"RailRM-v0: action_mode='buckets'"):
    make_rail("tiny", action_mode="buckets")
  with pytest.raises(ValueError, match=r"RailRM-v0: instance='ecm1' is not a shipped instance"):
    make_rail("ecm1")
  with pytest.raises(ValueError, match=r"ServingBatch-v0: mode must be"):
    make_batching(mode="dynamic")


def test_valid_keywords_still_reach_the_factories():
  env, p = registry.make("ServingBatch-v0", table_size=16, slo_ttft=1.5, mode="continuous")
  assert env.table_size == 16 and float(p.slo_ttft) == 1.5 and env.num_actions == 9
  env, p = registry.make("ServingRoute-v0", table_size=16, cap=64, trace="azure_code")
  assert env.table_size == 16 and p.cap == 64
  env, p = registry.make("RailRM-v0", instance="tiny", demand_level=1.2, reward_mode="operator")
  assert float(p.demand_level) == 1.2 and int(p.reward_mode) == 1
  env, p = registry.make("ProbeEntities-v0", num_slots=6, min_entities=2)
  assert env.num_actions == 6 and p.min_entities == 2
  env, p = registry.make("ProbeCoordination-v0", num_agents=5, live_agents=4)
  assert env.num_agents == 5 and p.live_agents == 4
  env, p = registry.make("ProbeTimeLimit-v0", max_steps_in_episode=7)
  assert p.max_steps_in_episode == 7
  env, p = registry.make("KVLookup-v0", num_pairs=3)
  assert p.num_pairs == 3
  env, p = registry.make("StreamLedger-v0", max_events=64, num_events=16)
  assert env.max_events == 64 and p.num_events == 16
  env, p = registry.make("GoalHouse-v0", num_rooms=4, max_steps=20)
  assert p.num_rooms == 4 and p.max_steps == 20
  env, p = registry.make("SceneCap-v0", num_entities=2)
  assert env.E == 2
  env, p = registry.make("BallastNet-v0", layout="direct10", max_steps_in_episode=48)
  assert p.max_steps_in_episode == 48
  env, p = registry.make("Catch-bsuite", rows=8)
  assert env.observation_space(p).shape == (8, 5)
  obs, _ = env.reset(jax.random.PRNGKey(0), p)
  assert obs.shape == (8, 5)


def test_ballast_hydro_is_registered_with_the_make_hydro_convention(monkeypatch):
  """make("BallastHydro-v0", ...) forwards to ballast.make_hydro and returns (env, params)
  without its bank report (a stub make_hydro: the real bank takes ~1 min on CPU)."""
  import jaxrl_suite.envs.ballast as ballast
  seen = {}

  @functools.wraps(ballast.make_hydro)   # same signature: the registry inspects it
  def fake(**kw):
    seen.update(kw)
    return "env", "params", {"report": 1}
  monkeypatch.setattr(ballast, "make_hydro", fake)
  assert registry.make("BallastHydro-v0", n_bank=8, heel_limit=1.5) == ("env", "params")
  assert seen == {"n_bank": 8, "heel_limit": 1.5}


@pytest.mark.parametrize("name,call", [
    ("ServingBatch-v0", lambda **kw: make_batching(**kw)),
    ("ServingRoute-v0", lambda **kw: make_routing(**kw)),
    ("RailRM-v0", lambda **kw: make_rail("tiny", **kw)),
    ("ProbeMemory-v0", lambda **kw: probes.make_probe("ProbeMemory-v0", **kw)),
])
def test_direct_factory_and_registry_give_the_same_message(name, call):
  """A factory checks its own overrides (envs.arguments, below the registry: no import cycle);
  its list of valid keywords must be the registry's, so both calls read the same."""
  with pytest.raises(ValueError) as direct:
    call(not_an_argument=1)
  with pytest.raises(ValueError) as by_name:
    registry.make(name, not_an_argument=1)
  assert str(direct.value) == str(by_name.value)
