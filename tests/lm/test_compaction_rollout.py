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
from tests.lm import jitted

ENV = sl.StreamLedger(max_events=32, max_events_per_obs=4)
P = ENV.default_params.replace(num_events=16, max_steps_in_episode=64)
CFG = lm_model.LMConfig("t", vocab_size=sl.V.size, d_model=16, num_layers=1, num_heads=2,
                        d_ff=32, max_len=96, tokenizer_version=2)


@pytest.fixture(scope="module")
def policy():
  return jitted.init_params(CFG, jax.random.PRNGKey(0))


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

  grads = jax.jit(grads)  # one compile for the three calls (eager: every op on its own)
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
  p = jitted.init_params(CFG, jax.random.PRNGKey(3))
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


def _teacher_logp(params, ro):
  """float64 log p_params(x_i | window[:i]) of every recorded token [B, K, W] (temperature 1)."""
  b, k, w = ro.tokens.shape
  lg, _ = lm_model.DecoderLM(CFG).apply({"params": params}, ro.tokens.reshape(b * k, w))
  lp = np.asarray(jax.nn.log_softmax(lg.astype(jnp.float32)), np.float64)
  tok = np.asarray(ro.tokens).reshape(b * k, w)
  out = np.zeros((b * k, w))
  out[:, 1:] = np.take_along_axis(lp[:, :-1], tok[:, 1:, None], axis=2)[..., 0]
  return out.reshape(b, k, w)


def test_frozen_summariser_samples_with_the_warm_start_not_the_policy(policy):
  """The summaries of a frozen summariser come from `summary_params`: the log-probability
  recorded for each summary token equals the warm start's teacher-forced one and not the
  policy's (the defect of issue 36: the policy wrote them, so they drifted during RL)."""
  warm = jitted.init_params(CFG, jax.random.PRNGKey(5))
  rcfg = comp.rollout_config("frozen", ENV, P, 64)
  ro = jax.jit(lambda k: lm_rollout.multi_turn_rollout(
      CFG, policy, ENV, P, k, 4, rcfg, summary_params=warm))(jax.random.PRNGKey(1))
  summ = np.asarray(ro.kind) == lm_rollout.KIND_SUMMARY
  assert summ.any()
  rec = np.asarray(ro.log_probs, np.float64)[summ]
  np.testing.assert_allclose(rec, _teacher_logp(warm, ro)[summ], atol=2e-4)
  assert np.abs(rec - _teacher_logp(policy, ro)[summ]).max() > 1e-2
  # Actions are still the policy's.
  act = np.asarray(ro.kind) == lm_rollout.KIND_ACTION
  np.testing.assert_allclose(np.asarray(ro.log_probs, np.float64)[act],
                             _teacher_logp(policy, ro)[act], atol=2e-4)
  # Without summary_params the policy writes them (the trained harness).
  ro2 = _rollout(policy, "compaction")
  s2 = np.asarray(ro2.kind) == lm_rollout.KIND_SUMMARY
  np.testing.assert_allclose(np.asarray(ro2.log_probs, np.float64)[s2],
                             _teacher_logp(policy, ro2)[s2], atol=2e-4)


def test_mixed_batch_segment_normalisation_is_biased_and_token_is_not(policy):
  """Horizons mixed within a batch give trajectories different numbers of windows; the token
  form weighs every token alike (SD of log weight per token 0), the per-window mean does not."""
  p = P.replace(num_events=8)
  ro_s = _rollout(policy, "compaction", n=4, key=2)
  rcfg = comp.rollout_config("compaction", ENV, P, 64)
  ro_l = jax.jit(lambda k: lm_rollout.multi_turn_rollout(CFG, policy, ENV, p, k, 4, rcfg))(
      jax.random.PRNGKey(3))
  ro = jax.tree.map(lambda *x: jnp.concatenate(x, 0), ro_s, ro_l)
  assert len(set(np.asarray(ro.num_segments).tolist())) > 1
  assert float(comp.normalisation_bias(ro.trainable, "token")) < 1e-5
  assert float(comp.normalisation_bias(ro.trainable, "segment")) > 0.05
  # A float64 reference of the segment form's per-token weights.
  t = np.asarray(ro.trainable, np.float64)
  per_win = t.sum(2)
  w = np.where(per_win[..., None] > 0, t / np.maximum(per_win[..., None], 1), 0) / (per_win > 0).sum()
  m = w.sum((1, 2)) / t.sum((1, 2))
  np.testing.assert_allclose(float(comp.normalisation_bias(ro.trainable, "segment")),
                             np.log(m).std(), rtol=1e-4)


def test_mixed_train_step_mixes_horizons_and_freezes_the_summariser(policy):
  """One compiled step: both horizons in one batch, per-horizon metrics, and the frozen
  harness's summaries from ref_params (a policy update leaves them unchanged)."""
  vcfg = lm_value.ValueConfig("shared")
  pcfg = token_ppo.TokenPPOConfig(epochs=1, num_minibatches=1)
  rcfg = comp.rollout_config("frozen", ENV, P, 64)
  init, step = comp.make_mixed_train_step(CFG, vcfg, pcfg, ENV, P, rcfg, 4, (8, 16))
  vp = jax.jit(lm_value.init_value_params, static_argnums=(0, 1))(vcfg, CFG, jax.random.PRNGKey(2))
  (st, i), m = jax.jit(step)(jax.jit(init)(policy, vp, policy), jax.random.PRNGKey(0))
  assert int(i) == 1
  for h in (8, 16):
    assert np.isfinite(float(m[f"return_H{h}"])) and float(m[f"windows_H{h}"]) >= 1.0
  assert float(m["segment_bias"]) >= 0.0
  with pytest.raises(ValueError, match="split evenly"):
    comp.make_mixed_train_step(CFG, vcfg, pcfg, ENV, P, rcfg, 3, (8, 16))
