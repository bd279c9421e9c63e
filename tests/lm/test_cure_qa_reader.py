"""The learned QA reader (CapRL-style QA utility): inputs, questions, training, the frozen
reward as a pure function."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.lm import reward_models as rmod
from jaxrl_suite.envs.text import tokenizer

ENV = sc.SceneCap()
V = tokenizer.V2
P = sc.SceneCapParams()


def test_reader_inputs_are_caption_then_question():
  s = ENV.sample_scene(jax.random.PRNGKey(0), P)
  cap = ENV.reference_caption(s)
  x = np.asarray(rmod.reader_inputs(ENV, cap))
  assert x.shape == (ENV.E * ENV.F, ENV.response_len + 3)
  for e in range(ENV.E):
    for f in range(ENV.F):
      row = x[e * ENV.F + f]
      np.testing.assert_array_equal(row[:ENV.response_len], np.asarray(cap))
      assert list(row[-3:]) == [V.letter_id(e), tokenizer.DIGIT0 + f, rmod.QUERY]


def test_questions_are_the_salient_events():
  for i in range(8):
    s = ENV.sample_scene(jax.random.PRNGKey(i), P)
    asked, answer = rmod.questions(ENV, ENV.pack(s))
    act, vis, pres = (np.asarray(s.action), np.asarray(s.visible), np.asarray(s.present))
    for e in range(ENV.E):
      for f in range(ENV.F):
        q = e * ENV.F + f
        assert bool(asked[q]) == bool(act[e, f] >= 0 and vis[e, f] and pres[e])
        if asked[q]:
          assert int(answer[q]) == act[e, f]


@pytest.fixture(scope="module")
def trained():
  """A small reader trained on 2000 labels (~5 s on a quiet 2-core machine)."""
  task = rmod.CaptionTask(ENV, P, rmod.make_reward("exact_f1", ENV))
  pp = P.replace(drop_prob=0.3, halluc_prob=0.5)
  pool = rmod.label_pool(task, jax.random.PRNGKey(1), 2000, pp)
  test = rmod.label_pool(task, jax.random.PRNGKey(2), 200, pp)
  cfg = rmod.reader_config(ENV, 32, 2, 2)
  params, loss = rmod.train_reader(ENV, cfg, pool["qa_x"], pool["qa_y"], jax.random.PRNGKey(3),
                                   300, 64, 3e-3, progress=False)
  return cfg, params, loss, test


def test_trained_reader_beats_chance_on_held_out(trained):
  cfg, params, loss, test = trained
  pred = np.asarray(jnp.argmax(rmod.reader_logits(ENV, cfg, params, test["qa_x"]), -1))
  y = np.asarray(test["qa_y"])
  majority = np.bincount(y, minlength=ENV.A).max() / len(y)
  acc = (pred == y).mean()
  # binomial SE at n >= 200 is < 0.035: a margin of 0.15 is > 4 SE above the majority answer
  assert acc > majority + 0.15, (acc, majority)
  assert loss[-20:].mean() < loss[:20].mean()


def test_frozen_reader_reward_is_pure(trained):
  cfg, params, _, _ = trained
  fn = rmod.make_reward("qa_utility", ENV, reader=(cfg, params))
  keys = jax.random.split(jax.random.PRNGKey(5), 6)
  scenes = jax.vmap(lambda k: ENV.sample_scene(k, P))(keys)
  caps = jax.vmap(lambda k, s: ENV.noisy_caption(k, s, P))(keys, scenes)
  xs = ENV.pack(scenes)
  batched = np.asarray(jax.jit(jax.vmap(fn))(xs, caps))
  again = np.asarray(jax.jit(jax.vmap(fn))(xs, caps))
  np.testing.assert_array_equal(batched, again)
  for i in range(xs.shape[0]):
    # reference: the reader's argmax answer to every salient-event question, then accuracy
    asked, answer = map(np.asarray, rmod.questions(ENV, xs[i]))
    pred = np.asarray(jnp.argmax(rmod.reader_logits(ENV, cfg, params,
                                                    rmod.reader_inputs(ENV, caps[i])), -1))
    ref = (asked & (pred == answer)).sum() / max(asked.sum(), 1)
    assert float(batched[i]) == pytest.approx(ref, abs=1e-6)
    assert 0.0 <= batched[i] <= 1.0
