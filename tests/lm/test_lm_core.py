"""Tests of the tiny-LM building blocks: tokenizer, model + KV cache, sampling, tasks, checkpoints."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import sampling
from jaxrl_suite.lm import tasks as lm_tasks
from jaxrl_suite.envs.text import tokenizer as tk
from tests.lm import jitted

TINY = lm_model.LMConfig("tiny", d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=24)


# ---- tokenizer -----------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, tk.VOCAB_SIZE - 1), max_size=40))
def test_lm_tokenizer_round_trip_ids(ids):
  assert tk.encode(tk.decode(ids)) == ids


def test_lm_tokenizer_round_trip_text_and_errors():
  text = "<bos>90806796=9c08c03c16c11<eos>"
  assert tk.decode(tk.encode(text)) == text
  assert tk.encode("c1c0") == [tk.C1, tk.C0]
  assert tk.encode("7") == [tk.digit_id(7)]
  with pytest.raises(ValueError):
    tk.encode("x")
  with pytest.raises(ValueError):
    tk.assert_same_vocab(32, 33)
  assert tk.VOCAB_SIZE == 32 and len(set(tk.TOKENS)) == 32


# ---- tasks ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lm_tasks.carry_add, lm_tasks.add_three])
def test_lm_task_solutions_and_reward(make):
  task = make()
  ops = task.sample_train(jax.random.PRNGKey(0), 256)
  sol = task.solutions(ops, jnp.zeros(256, bool))
  assert sol.shape == (256, task.response_len)
  np.testing.assert_array_equal(task.reward(ops, sol), 1.0)
  # Parsed sum equals the numpy sum (independent reference).
  value, ok = task.parse(sol)
  np.testing.assert_array_equal(np.asarray(value), np.asarray(ops).astype(np.int64).sum(1))
  assert bool(ok.all())
  # Carry-dropping solutions are wrong exactly when some column carries.
  if task.num_operands == 2:
    bug = task.solutions(ops, jnp.ones(256, bool))
    a, b = np.asarray(ops).T
    has_carry = np.array([any(_carries(int(x), int(y))) for x, y in zip(a, b)])
    np.testing.assert_array_equal(np.asarray(task.reward(ops, bug)), (~has_carry).astype(float))
  # Corrupting one digit breaks the reward; a bad format too.
  bad = sol.at[:, 0].set(tk.digit_id((sol[:, 0] - tk.DIGIT0 + 1) % 10))
  np.testing.assert_array_equal(task.reward(ops, bad), 0.0)
  np.testing.assert_array_equal(task.reward(ops, sol.at[:, -1].set(tk.PAD)), 0.0)


def _carries(x, y):
  c, out = 0, []
  for i in range(4):
    s = x // 10**i % 10 + y // 10**i % 10 + c
    c = s // 10
    out.append(c > 0)
  return out


def test_lm_task_heldout_split_is_disjoint():
  task = lm_tasks.carry_add()
  held = task.heldout_set(300)
  assert held.shape == (300, 2) and bool(np.all(task.is_heldout(held)))
  train = task.sample_train(jax.random.PRNGKey(3), 5000)
  assert not bool(jnp.any(task.is_heldout(train)))


def test_lm_mixture_batch_pads_to_common_length():
  seq, mask = lm_tasks.mixture_batch([lm_tasks.carry_add(), lm_tasks.add_three()], [0.5, 0.5],
                                     jax.random.PRNGKey(0), 8)
  assert seq.shape == (8, 22) and mask.shape == (8, 22)
  assert float(mask[:4, -2:].sum()) == 0.0  # carry_add rows padded (length 20)
  assert np.all(np.asarray(seq[:4, -2:]) == tk.PAD)


# ---- model ---------------------------------------------------------------------------------------
def test_lm_family_sizes():
  counts = {n: lm_model.num_params(jax.eval_shape(lambda k: lm_model.init_params(c, k),
                                                 jax.random.PRNGKey(0)))
            for n, c in lm_model.FAMILY.items()}
  assert 25_000 < counts["xs"] < 35_000
  assert 400_000 < counts["l"] < 520_000
  assert counts["xs"] < counts["s"] < counts["m"] < counts["l"]


def test_lm_kv_cache_matches_full_forward():
  params = jitted.init_params(TINY, jax.random.PRNGKey(1))
  toks = jax.random.randint(jax.random.PRNGKey(2), (3, 12), 0, tk.VOCAB_SIZE)
  full, _ = lm_model.DecoderLM(TINY).apply({"params": params}, toks)
  stepper = sampling.lm_stepper(TINY, params)
  stepper = sampling.Stepper(jax.jit(stepper.prefill), jax.jit(stepper.step))
  logits, cache = stepper.prefill(toks[:, :5])
  np.testing.assert_allclose(logits, full[:, 4], atol=1e-5)
  for t in range(5, 12):
    logits, cache = stepper.step(cache, toks[:, t], jnp.int32(t))
    np.testing.assert_allclose(logits, full[:, t], atol=1e-5)


def test_lm_model_is_causal():
  params = jitted.init_params(TINY, jax.random.PRNGKey(1))
  toks = jax.random.randint(jax.random.PRNGKey(2), (2, 10), 0, tk.VOCAB_SIZE)
  a, _ = lm_model.DecoderLM(TINY).apply({"params": params}, toks)
  b, _ = lm_model.DecoderLM(TINY).apply({"params": params}, toks.at[:, 7].set(3))
  np.testing.assert_allclose(a[:, :7], b[:, :7], atol=1e-6)
  assert not np.allclose(a[:, 7:], b[:, 7:])


# ---- sampling ------------------------------------------------------------------------------------
def test_lm_filter_logits_top_k_top_p():
  logits = jnp.log(jnp.array([0.05, 0.4, 0.3, 0.2, 0.05]))
  k2 = sampling.filter_logits(logits, top_k=2)
  assert np.isfinite(np.where(np.asarray(k2) > -1e8, 1, np.nan)).sum() == 2
  assert set(np.flatnonzero(np.asarray(k2) > -1e8)) == {1, 2}
  p = sampling.filter_logits(logits, top_p=0.65)  # 0.4 + 0.3 >= 0.65 -> keep {1, 2}
  assert set(np.flatnonzero(np.asarray(p) > -1e8)) == {1, 2}
  p = sampling.filter_logits(logits, top_p=0.01)  # always keeps the top token
  assert set(np.flatnonzero(np.asarray(p) > -1e8)) == {1}
  np.testing.assert_allclose(sampling.filter_logits(logits, temperature=2.0), logits / 2.0)


def test_lm_sampling_respects_top_k_top_p_and_eos():
  params = jitted.init_params(TINY, jax.random.PRNGKey(4))
  prompts = jnp.full((64, 4), tk.BOS, jnp.int32)
  st = sampling.lm_stepper(TINY, params)
  s = jax.jit(lambda k: sampling.sample(st, prompts, k, 12, top_k=3))(jax.random.PRNGKey(0))
  # Re-score each sampled token: it must be among the top-3 logits at its prefix.
  logits = sampling.response_logits(TINY, params, prompts, s.tokens)
  rank = (logits > jnp.take_along_axis(logits, s.tokens[..., None], -1)).sum(-1)
  assert int(jnp.max(jnp.where(s.mask, rank, 0))) <= 2
  s = jax.jit(lambda k: sampling.sample(st, prompts, k, 12, top_p=0.3))(jax.random.PRNGKey(1))
  probs = jax.nn.softmax(sampling.response_logits(TINY, params, prompts, s.tokens), -1)
  p_tok = jnp.take_along_axis(probs, s.tokens[..., None], -1)[..., 0]
  mass_above = jnp.where(probs > p_tok[..., None], probs, 0).sum(-1)
  assert float(jnp.max(jnp.where(s.mask, mass_above, 0))) < 0.3 + 1e-5
  # After <eos>: pad and mask off; determinism for a fixed key.
  plain = jax.jit(lambda k: sampling.sample(st, prompts, k, 12))
  s1, s2 = plain(jax.random.PRNGKey(1)), plain(jax.random.PRNGKey(1))
  np.testing.assert_array_equal(s1.tokens, s2.tokens)
  tok = np.asarray(s1.tokens)
  m = np.asarray(s1.mask)
  for row, mrow in zip(tok, m):
    eos = np.flatnonzero(row == tk.EOS)
    if eos.size:
      assert np.all(row[eos[0] + 1:] == tk.PAD) and not mrow[eos[0] + 1:].any()
      assert mrow[:eos[0] + 1].all()


# ---- checkpoints ---------------------------------------------------------------------------------
def test_lm_checkpoint_restores_bit_exactly(tmp_path):
  params = jitted.init_params(TINY, jax.random.PRNGKey(7))
  path = os.path.join(tmp_path, "ckpt")
  lm_pretrain.save_params(path, params)
  like = jitted.init_params(TINY, jax.random.PRNGKey(8))
  restored = lm_pretrain.load_params(path, like)
  for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(restored)):
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_lm_cached_params_train_once_per_key(tmp_path):
  """cached_params: a stage of core.stage_cache; the rerun reads the params (jax arrays, same
  structure, dtypes and values) and the info its first run measured; another key trains."""
  params = jitted.init_params(TINY, jax.random.PRNGKey(7))
  calls = []

  def make():
    calls.append(1)
    return params, {"loss_last": 0.5}

  wd = str(tmp_path)
  first = lm_pretrain.cached_params("lm/tiny", {"seed": 7}, make, wd)
  again = lm_pretrain.cached_params("lm/tiny", {"seed": 7}, make, wd)
  assert len(calls) == 1 and not first[2] and again[2] and again[1] == {"loss_last": 0.5}
  assert jax.tree.structure(again[0]) == jax.tree.structure(params)
  for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(again[0])):
    assert isinstance(b, jax.Array) and a.dtype == b.dtype
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  lm_pretrain.cached_params("lm/tiny", {"seed": 8}, make, wd)
  assert len(calls) == 2


def test_lm_pretraining_reduces_loss():
  params, loss = lm_pretrain.pretrain(TINY, [lm_tasks.carry_add()], [1.0], jax.random.PRNGKey(0),
                                      steps=60, batch_size=32, lr=3e-3, chunk=30, progress=False)
  assert loss[-10:].mean() < 0.6 * loss[:3].mean()
