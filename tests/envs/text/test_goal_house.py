"""GoalHouse-v0: parsing, the neglect labeller on a scripted trajectory, hypothesis invariants."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from jaxrl_suite.envs.text import goal_house as gh

V = gh.V
P = gh.EnvParams()
ENV = gh.GoalHouse(P)
_STEP = jax.jit(ENV.step_env)


def _act(text: str) -> jnp.ndarray:
  ids = V.encode(text) + [V.id("<eoa>")]
  return jnp.array(ids + [0] * (ENV.max_action_len - len(ids)), jnp.int32)


def _state():
  # rooms A-F; receptacles G..N stand in rooms (c mod 6): G,M in A; H,N in B; I C; J D; K E; L F.
  # objects O..V: O,P in G; Q in H; R in I; S in J; T in K; U in L; V in M. Goal: put R in J.
  return gh.EnvState(room=jnp.int32(0), held=jnp.int32(-1),
                     loc=jnp.array([0, 0, 1, 2, 3, 4, 5, 6], jnp.int32),
                     opened=jnp.zeros((8,), bool), goal_obj=jnp.int32(3), goal_rec=jnp.int32(3),
                     time=jnp.int32(0), done=jnp.zeros((), bool))


# (action, expected [N1, N2, N3, N4], expected observation)
SCRIPT = [
    ("<note>R<in>J", [0, 0, 0, 0], "<obs><yes>"),
    ("<open>G", [0, 0, 0, 0], "<obs>G:OP"),
    ("<take>V", [1, 0, 0, 0], "<obs><no>"),          # N1 alone: V is not visible
    ("<open>G", [0, 0, 1, 0], "<obs>G:OP"),          # N3 alone: re-open while R unfound
    ("<open>M", [0, 0, 0, 0], "<obs>M:V"),
    ("<go>B", [0, 0, 0, 0], "<obs><room>B:HN"),
    ("<open>H", [0, 0, 0, 0], "<obs>H:Q"),
    ("<go>A", [0, 0, 1, 1], "<obs><room>A:GM"),      # N3 revisit + N4 (optimal to fetch O or P)
    ("<take>O", [1, 0, 0, 1], "<obs><hold>O"),       # N1 + N4 (optimal for a goal with O)
    ("<go>B", [0, 0, 0, 1], "<obs><room>B:HN"),      # N4 alone: carries O towards H or N
    ("<put>O<in>J", [0, 1, 0, 0], "<obs><no>"),      # N2 alone: J is not here
    ("<put>O<in>H", [0, 0, 0, 0], "<obs><yes>"),     # the repair (drop O): not neglect
    ("<go>", [0, 0, 0, 0], "<err>"),                 # invalid: no label
    ("<open>N", [0, 0, 0, 0], "<obs>N:<no>"),
    ("<go>C", [0, 0, 0, 0], "<obs><room>C:I"),
    ("<open>I", [0, 0, 0, 0], "<obs>I:R"),
    ("<open>I", [0, 0, 0, 0], "<obs>I:R"),           # re-open after R was found: not N3
    ("<take>R", [0, 0, 0, 0], "<obs><hold>R"),
    ("<go>D", [0, 0, 0, 0], "<obs><room>D:J"),
    ("<open>J", [0, 0, 0, 0], "<obs>J:S"),
    ("<put>R<in>J", [0, 0, 0, 0], "<obs><done>"),
]


def test_scripted_trajectory_labels_fire_exactly_where_constructed():
  s = _state()
  key = jax.random.PRNGKey(0)
  for t, (text, labels, want_obs) in enumerate(SCRIPT):
    obs, s, r, term, info = _STEP(key, s, _act(text), P)
    got = V.decode(obs.tokens[:obs.length])
    assert got == want_obs, (t, text, got)
    np.testing.assert_array_equal(np.asarray(info["neglect"]).astype(int), labels,
                                  err_msg=f"step {t}: {text}")
    assert bool(info["invalid"]) == (text == "<go>")
    assert bool(term) == (t == len(SCRIPT) - 1)
    assert float(r) == (1.0 if t == len(SCRIPT) - 1 else 0.0)
  assert int(s.time) == len(SCRIPT)


def test_parse_and_render_roundtrip_every_action():
  idx = jnp.arange(gh.num_actions(P))
  goal = jnp.array([3, 5], jnp.int32)
  toks = jax.vmap(lambda i: gh.action_tokens(i, P, goal))(idx)
  back, valid, note = jax.vmap(lambda a: gh.parse_action(a, P))(toks)
  assert bool(valid.all())
  np.testing.assert_array_equal(np.asarray(back), np.asarray(idx))
  np.testing.assert_array_equal(np.asarray(note[-1]), [3, 5])


@pytest.mark.parametrize("text", ["<go>G", "<take>A", "<put>O<in>A", "<open>", "<go>A<go>",
                                  "<note>O", "<put>O<go>G"])
def test_malformed_actions_are_invalid(text):
  _, valid, _ = gh.parse_action(_act(text), P)
  assert not bool(valid)


def test_state_key_separates_its_fields():
  s = _state()
  keys = {int(gh.state_key(x, P)) for x in (
      s, s.replace(room=jnp.int32(1)), s.replace(held=jnp.int32(0)),
      s.replace(opened=s.opened.at[2].set(True)), s.replace(opened=s.opened.at[5].set(True)))}
  assert len(keys) == 5
  assert max(keys) < gh.num_state_keys(P)


def test_goal_only_in_first_observation():
  obs, s = ENV.reset(jax.random.PRNGKey(1), P)
  assert V.decode(obs.tokens[:2]) == "<task><goal>"
  goal_tok = int(obs.tokens[2])
  for text in ("<go>A", "<open>G", "<go>B"):
    obs, s, *_ = _STEP(jax.random.PRNGKey(0), s, _act(text), P)
    assert V.id("<goal>") not in np.asarray(obs.tokens[:obs.length]).tolist()


@st.composite
def _episodes(draw):
  return draw(st.integers(0, 2 ** 31 - 1)), draw(st.lists(st.integers(0, 86), min_size=1,
                                                         max_size=30))


_ACT = jax.jit(jax.vmap(lambda i: gh.action_tokens(i, P, jnp.array([3, 3], jnp.int32))))


@given(_episodes())
def test_objects_conserved_and_success_iff_goal_object_in_goal_receptacle(ep):
  seed, actions = ep
  obs, s = ENV.reset(jax.random.PRNGKey(seed), P)
  assert int(s.loc[s.goal_obj]) != int(s.goal_rec)
  toks = _ACT(jnp.array(actions, jnp.int32))
  for a in toks:
    prev = s
    obs, s, r, term, info = _STEP(jax.random.PRNGKey(0), s, a, P)
    loc, held = np.asarray(s.loc), int(s.held)
    # every object is either held (loc -1) or in exactly one receptacle; at most one held
    assert ((loc >= 0) | (np.arange(8) == held)).all()
    assert (loc < 0).sum() == (1 if held >= 0 else 0)
    assert ((loc >= -1) & (loc < 8)).all()
    in_goal = int(s.loc[s.goal_obj]) == int(s.goal_rec)
    assert bool(term) == (in_goal and not bool(prev.done))
    assert float(r) == (1.0 if bool(term) else 0.0)
    assert int(info["state_key"]) == int(gh.state_key(prev, P))
    if bool(term):
      break
