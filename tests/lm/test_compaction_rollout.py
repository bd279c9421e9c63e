"""Compaction on StreamLedger through `lm.rollout`: copied summaries get zero gradient, the
corpus matches the rollout's window layout, the episode metrics read the record correctly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.text import stream_ledger as sl
from jaxrl_suite.lm import compaction as comp
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import token_ppo
from jaxrl_suite.lm import value as lm_value

ENV = sl.StreamLedger(max_events=32, max_events_per_obs=4)
P = ENV.default_params.replace(num_events=16, max_steps_in_episode=64)
CFG = lm_model.LMConfig("t", vocab_size=sl.V.size, d_model=16, num_layers=1, num_heads=2,
                        d_ff=32, max_len=96, tokenizer_version=2)


@pytest.fixture(scope="module")
def policy():
  return lm_model.init_params(CFG, jax.random.PRNGKey(0))


def _rollout(params, harness, n=4, key=1):
  rcfg = comp.rollout_config(harness, ENV, P, 64)
  return jax.jit(lambda k: lm_rollout.multi_turn_rollout(CFG, params, ENV, P, k, n, rcfg))(
      jax.random.PRNGKey(key))


def test_copied_summary_tokens_get_zero_gradient(policy):
  ro = _rollout(policy, "compaction")
  kind = np.asarray(ro.kind)
  assert (ro.num_segments > 1).any(), "H=16 > W must compact"
  copied = kind == lm_rollout.KIND_COPIED
  assert copied.any() and not np.asarray(ro.trainable)[copied].any()
  assert np.asarray(ro.trainable)[kind == lm_rollout.KIND_SUMMARY].all()
  vcfg = lm_value.ValueConfig("none")
  pcfg = token_ppo.TokenPPOConfig(epochs=1, num_minibatches=1)
  b, k, w = ro.tokens.shape
  rng = np.random.default_rng(0)
  adv = jnp.where(ro.trainable, jnp.asarray(rng.normal(size=(b, k, w)), jnp.float32), 0.0)

  def grads(adv_):
    batch = token_ppo.Batch(ro.tokens, ro.trainable, ro.log_probs, ro.log_probs, adv_,
                            jnp.zeros_like(adv_), jnp.zeros_like(adv_))
    return jax.grad(lambda p: token_ppo.ppo_token_loss(CFG, vcfg, pcfg, p, {}, batch)[0])(policy)

  g0 = grads(adv)
  # Arbitrary advantages on every non-trainable slot (copied summaries, observations) change
  # nothing: their per-token terms carry zero weight.
  noise = jnp.asarray(rng.normal(size=(b, k, w)) * 100, jnp.float32)
  g1 = grads(jnp.where(ro.trainable, adv, noise))
  for a, c in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
  # ...while the policy's own summary tokens do carry gradient.
  only_sum = jnp.where(ro.kind == lm_rollout.KIND_SUMMARY, adv, 0.0)
  gs = grads(only_sum)
  assert max(float(jnp.abs(x).max()) for x in jax.tree.leaves(gs)) > 0


def test_frozen_summariser_and_oracle_summaries_are_not_trained(policy):
  ro = _rollout(policy, "frozen")
  kind = np.asarray(ro.kind)
  assert (kind == lm_rollout.KIND_SUMMARY).any()
  assert not np.asarray(ro.trainable)[kind == lm_rollout.KIND_SUMMARY].any()
  ro = _rollout(policy, "oracle")
  assert not (np.asarray(ro.kind) == lm_rollout.KIND_SUMMARY).any()
  m = comp.episode_metrics(ro, agent=False)
  fid = np.asarray(m["fidelity"])                 # NaN: that episode wrote no summary
  assert np.isfinite(fid).any() and (fid[np.isfinite(fid)] == 1.0).all()   # oracle = truth


def test_episode_metrics_read_answers_and_summaries(policy):
  ro = _rollout(policy, "compaction", n=8)
  m = jax.tree.map(np.asarray, comp.episode_metrics(ro, agent=False))
  info = jax.tree.map(np.asarray, ro.info)
  valid = np.asarray(ro.turn_valid)
  final = (info["correct"] & info["final"] & valid).any(-1)
  np.testing.assert_array_equal(m["final_acc"], final.astype(np.float32))
  np.testing.assert_array_equal(m["compactions"], np.asarray(ro.num_segments) - 1)
  # Fidelity by hand: the first copied summary of trajectory 0 vs the truth at its turn.
  toks, kind, turn = (np.asarray(x)[0, 1] for x in (ro.tokens, ro.kind, ro.turn))
  assert toks[5] == comp.SUM and kind[5] == lm_rollout.KIND_COPIED
  body = np.where(kind[6:14] == lm_rollout.KIND_COPIED, toks[6:14], 0)
  got, found = sl.decode_summary(jnp.asarray(body))
  truth = info["summary_truth"][0, turn[0]]
  first_ok = bool(found.all()) and (np.asarray(got) == truth).all()
  if int(np.asarray(ro.num_segments)[0]) == 2:
    assert m["fidelity"][0] == float(first_ok)


def test_corpus_rows_follow_the_rollout_layout_and_mix():
  mix = comp.CorpusMix(p_drop=0.2, p_corrupt=0.3, p_first=0.0, p_last=0.0, p_agent=0.0)
  toks, mask, n = jax.jit(lambda k: comp.corpus_batch(k, ENV, P, 400, 2, 96, mix))(
      jax.random.PRNGKey(0))
  toks, mask, n = np.asarray(toks), np.asarray(mask), np.asarray(n)
  exact = 0
  for i in range(toks.shape[0]):
    row = toks[i, :n[i]]
    assert row[0] == sl.TASK and row[5] == comp.SUM        # [task][<sum> s_in] ...
    got, _ = sl.decode_summary(jnp.asarray(row[6:14]))
    tot = np.asarray(got).astype(int)
    # Replay the row: answers equal s_in + the events before them; only answers, the summary
    # and its <eoa> are trained.
    j = 14
    while row[j] != comp.COMPACT:
      if row[j] == sl.QUERY:
        q = row[j + 1] - sl.LETTER_A
        assert row[j + 2] == sl.DIGIT0 + tot[q] % 10 and mask[i, j + 2] and mask[i, j + 3]
        j += 4
      elif row[j] == sl.EOA:
        assert mask[i, j]
        j += 1
      else:
        sign = 1 if row[j + 1] == sl.PLUS else -1
        tot[row[j] - sl.LETTER_A] += sign * (row[j + 2] - sl.DIGIT0)
        assert not mask[i, j:j + 3].any()
        j += 3
    assert not mask[i, j] and row[n[i] - 1] == sl.EOA and mask[i, j + 1:n[i]].all()
    exact += float(sl.summary_fidelity(jnp.asarray(row[j + 1:n[i] - 1]),
                                       jnp.asarray(tot % 10), 4)) if n[i] - j - 2 == 8 else 0.0
  # 50% of written summaries are imperfect by construction (20% drop, 30% corrupt).
  assert 0.40 < exact / toks.shape[0] < 0.60


def test_agent_rollout_triggers_compaction_on_compact_action():
  """A policy that always answers <compact> first compacts every turn (until the window guard)."""
  p = lm_model.init_params(CFG, jax.random.PRNGKey(3))
  head = p["head"]
  bias = jnp.zeros_like(head["bias"]).at[comp.COMPACT].set(50.0)
  p = {**p, "head": {**head, "bias": bias, "kernel": jnp.zeros_like(head["kernel"])}}
  ro = _rollout(p, "agent", n=2)
  assert (np.asarray(ro.num_segments) > 3).all()
  m = comp.episode_metrics(ro, agent=True)
  assert (np.asarray(m["final_acc"]) == 0).all()


def test_corpus_p_query_sets_the_share_of_answered_blocks():
  """CorpusMix.p_query=1: every block of a row ends with a query; 0: none does (no row ends the
  episode). One compiled program for both (the mix is an argument)."""
  rows = jax.jit(lambda k, mix: comp.corpus_batch(k, ENV, P, 8, 2, 64, mix))

  def queries(p_query):
    mix = comp.CorpusMix(p_first=0.0, p_last=0.0, p_agent=0.0, p_query=p_query)
    toks, _, n = rows(jax.random.PRNGKey(1), mix)
    live = np.arange(toks.shape[1])[None] < np.asarray(n)[:, None]
    return int(((np.asarray(toks) == sl.QUERY) & live).sum())
  assert queries(1.0) == 4 * 1 + 4 * 2        # 8 rows: 4 with one block, 4 with two
  assert queries(0.0) == 0
