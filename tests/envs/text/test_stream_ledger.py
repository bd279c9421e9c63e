"""StreamLedger-v0: ledger invariants (hypothesis), rewards only for correct answers, parsing."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, strategies as st

from jaxrl_suite.envs.text import stream_ledger as sl

ENV = sl.StreamLedger(max_events=32, max_events_per_obs=4)


def _params(h, epo, q=0.5, amount=3, items=4):
  return ENV.default_params.replace(num_events=h, events_per_obs=epo, mid_query_prob=q,
                                    max_amount=amount, num_items=items, max_steps_in_episode=64)


def _parse_block(tokens, length):
  """Python parser of one observation block: ([(item, amount)], query item or None)."""
  t = [int(x) for x in np.asarray(tokens)[:int(length)]]
  q = None
  if len(t) >= 2 and t[-2] == sl.QUERY:
    q, t = t[-1] - sl.LETTER_A, t[:-2]
  assert len(t) % 3 == 0
  ev = []
  for i in range(0, len(t), 3):
    sign = {sl.PLUS: 1, sl.MINUS: -1}[t[i + 1]]
    ev.append((t[i] - sl.LETTER_A, sign * (t[i + 2] - sl.DIGIT0)))
  return ev, q


_step = jax.jit(ENV.step_env)
_reset = jax.jit(ENV.reset_env)


def _play(seed, p, answer_fn):
  """Plays one episode; returns per-step (obs, reward, done, info) and the Python ledger."""
  obs, state = _reset(jax.random.PRNGKey(seed), p)
  tot = [0] * 4
  pending, log = None, []
  for t in range(40):
    if pending is None:
      act = [sl.EOA, 0, 0, 0]
    else:
      act = [sl.DIGIT0 + answer_fn(tot[pending[0]], t), sl.EOA, 0, 0]
    obs, state, r, done, info = _step(jax.random.PRNGKey(t), state, jnp.array(act), p)
    log.append((pending, act, float(r), bool(done), jax.tree.map(np.asarray, info)))
    if done:
      break
    ev, q = _parse_block(obs.tokens, obs.length)
    for item, amt in ev:
      tot[item] += amt
    pending = None if q is None else (q, [x % 10 for x in tot])
  return log, tot, state


@given(seed=st.integers(0, 10_000), h=st.integers(1, 32), epo=st.integers(1, 4),
       q=st.sampled_from([0.0, 0.5, 1.0]), items=st.integers(1, 4), amount=st.integers(1, 9))
def test_ledger_totals_consistent_and_rewards_only_for_correct_answers(seed, h, epo, q, items,
                                                                       amount):
  p = _params(h, epo, q, amount, items)
  # Truthful agent: every answer is the total of the parsed stream -> rewarded.
  log, tot, state = _play(seed, p, lambda true, t: true % 10)
  assert log[-1][3], "episode must terminate after the final query"
  n_events = h
  np.testing.assert_array_equal(np.asarray(sl.totals_after(state.items, state.amounts, h)),
                                np.mod(tot, 10))
  assert int(state.pos) == n_events
  for pending, act, r, done, info in log:
    if pending is None:
      assert r == 0.0 and not info["answered"]
    else:
      assert info["correct"]
      assert r == (p.final_reward if info["final"] else p.mid_reward)
  # The parsed events stay inside the declared ranges.
  assert (np.asarray(state.items)[:h] < items).all()
  assert (np.abs(np.asarray(state.amounts)[:h]) <= amount).all()
  # Wrong agent: every answer off by one -> never rewarded, still terminates.
  log, _, _ = _play(seed, p, lambda true, t: (true + 1) % 10)
  assert all(r == 0.0 for _, _, r, _, _ in log)
  assert log[-1][3]


@given(seed=st.integers(0, 10_000), h=st.integers(2, 32))
def test_reference_episode_matches_env_queries(seed, h):
  p = _params(h, 4, 0.5)
  log, _, state = _play(seed, p, lambda true, t: true % 10)
  ref = sl.reference_episode(np.asarray(state.items), np.asarray(state.amounts),
                             np.asarray(state.query_item), h, 4)
  asked = [(pend[0], bool(info["final"])) for pend, _, _, _, info in log if pend is not None]
  assert asked == [(i, f) for i, _, f in ref]
  assert ref[-1][2], "the last block always carries the final query"


def test_invalid_answer_gets_error_obs_and_the_stream_waits():
  p = _params(8, 4, 1.0)
  obs, state = _reset(jax.random.PRNGKey(0), p)
  obs, state, r, done, info = _step(jax.random.PRNGKey(1), state, jnp.array([sl.EOA, 0, 0, 0]), p)
  pos = int(state.pos)
  bad = jnp.array([sl.LETTER_A, sl.EOA, 0, 0])          # a letter where a digit is due
  obs2, state2, r2, done2, info2 = _step(jax.random.PRNGKey(2), state, bad, p)
  assert bool(info2["invalid"]) and float(r2) == 0.0 and not bool(done2)
  assert int(obs2.length) == 1 and int(obs2.tokens[0]) == sl.V.id("<err>")
  assert int(state2.pos) == pos and int(state2.time) == int(state.time) + 1


def test_step_is_deterministic_and_vmaps():
  p = _params(16, 4)
  keys = jax.random.split(jax.random.PRNGKey(3), 5)
  obs, states = jax.vmap(ENV.reset_env, in_axes=(0, None))(keys, p)
  obs_b, states_b = jax.vmap(ENV.reset_env, in_axes=(0, None))(keys, p)
  np.testing.assert_array_equal(np.asarray(states.items), np.asarray(states_b.items))
  act = jnp.tile(jnp.array([sl.EOA, 0, 0, 0]), (5, 1))
  out = jax.vmap(ENV.step_env, in_axes=(0, 0, 0, None))(keys, states, act, p)
  single = ENV.step_env(keys[2], jax.tree.map(lambda x: x[2], states), act[2], p)
  np.testing.assert_array_equal(np.asarray(out[0].tokens[2]), np.asarray(single[0].tokens))


@given(tot=st.lists(st.integers(0, 9), min_size=4, max_size=4), drop=st.integers(0, 3))
def test_summary_round_trip_and_fidelity(tot, drop):
  t = jnp.array(tot, jnp.int32)
  toks = sl.summary_tokens(t)
  got, found = sl.decode_summary(toks)
  np.testing.assert_array_equal(np.asarray(got), tot)
  assert bool(found.all()) and float(sl.summary_fidelity(toks, t)) == 1.0
  dropped = jnp.concatenate([toks[:2 * drop], toks[2 * drop + 2:], jnp.zeros((2,), jnp.int32)])
  assert float(sl.summary_fidelity(dropped, t)) == 0.0
  wrong = t.at[drop].set((t[drop] + 1) % 10)
  assert float(sl.summary_fidelity(toks, wrong)) == 0.0


def test_oracle_summary_holds_totals_before_the_latest_block():
  p = _params(16, 4, 0.0)
  obs, state = _reset(jax.random.PRNGKey(5), p)
  for t in range(3):
    obs, state, *_ = _step(jax.random.PRNGKey(t), state, jnp.array([sl.EOA, 0, 0, 0]), p)
  ids, n = ENV.oracle_summary(state, p)
  got, _ = sl.decode_summary(ids[:int(n)])
  np.testing.assert_array_equal(np.asarray(got),
                                np.asarray(sl.totals_after(state.items, state.amounts,
                                                           int(state.pos) - 4)))


def test_validate_params_names_the_field():
  import pytest
  with pytest.raises(ValueError, match="num_events"):
    sl.validate_params(_params(33, 4), ENV)
  with pytest.raises(ValueError, match="events_per_obs"):
    sl.validate_params(_params(8, 5), ENV)
