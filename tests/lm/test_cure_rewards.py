"""Holistic proxies and the GRPO task adaptor against pure-Python references."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.envs.text import claims
from jaxrl_suite.lm import reward_models as rmod
from jaxrl_suite.envs.text import tokenizer

ENV = sc.SceneCap()
V = tokenizer.V2
P = sc.SceneCapParams()


def _until_eos(ids):
  ids = list(np.asarray(ids))
  return ids[:ids.index(tokenizer.EOS)] if tokenizer.EOS in ids else ids


def ref_token_recall(ref, cap, fluency, wf):
  r, c = collections.Counter(_until_eos(ref)), collections.Counter(_until_eos(cap))
  return sum(min(v, c[t]) for t, v in r.items()) / max(1, sum(r.values())) + fluency * wf


def ref_qa(scene, cap):
  ids = _until_eos(cap)
  answers = {}
  for k in range(min(-(-len(ids) // 6), ENV.K)):
    c = ids[6 * k:6 * k + 6]
    if len(c) < 6 or c[5] != tokenizer.SEMI:
      continue
    lo = [0, sc.COLOR_BASE, sc.SHAPE_BASE, sc.ACT_BASE]
    sz = [ENV.E, ENV.C, ENV.S, ENV.A]
    vals = [c[i] - V.letter_id(0) - lo[i] for i in range(4)] + [c[4] - tokenizer.DIGIT0]
    if all(0 <= v < s for v, s in zip(vals, sz + [ENV.F])):
      answers.setdefault((vals[0], vals[4]), vals[3])
  act, vis, pres = (np.asarray(scene.action), np.asarray(scene.visible),
                    np.asarray(scene.present))
  asked = [(e, f) for e in range(ENV.E) for f in range(ENV.F)
           if act[e, f] >= 0 and vis[e, f] and pres[e]]
  return sum(answers.get(q, -1) == act[q] for q in asked) / max(1, len(asked))


@pytest.fixture(scope="module")
def batch():
  keys = jax.random.split(jax.random.PRNGKey(0), 24)
  hp = P.replace(halluc_prob=0.8, drop_prob=0.3)
  scenes = jax.vmap(lambda k: ENV.sample_scene(k, hp))(keys)
  caps = jax.vmap(lambda k, s: ENV.noisy_caption(k, s, hp))(jax.random.split(keys[0], 24),
                                                             scenes)
  # corrupt a few tokens so malformed claims occur too
  noise = jax.random.randint(keys[1], caps.shape, 0, V.size)
  flip = jax.random.bernoulli(keys[2], 0.03, caps.shape) & (caps != tokenizer.EOS)
  caps = jnp.where(flip, noise, caps)
  return scenes, caps, ENV.pack(scenes)


def test_token_recall_matches_reference(batch):
  scenes, caps, xs = batch
  got = jax.vmap(lambda x, c: rmod.token_recall(ENV, x, c, 0.1))(xs, caps)
  for i in range(caps.shape[0]):
    s = jax.tree.map(lambda a: a[i], scenes)
    p = claims.parse(ENV, caps[i])
    wf = float((p["fact"] >= 0).sum() / max(int(p["present"].sum()), 1))
    assert float(got[i]) == pytest.approx(
        ref_token_recall(ENV.reference_caption(s), caps[i], 0.1, wf), abs=1e-6)


def test_qa_rule_matches_reference(batch):
  scenes, caps, xs = batch
  got = jax.vmap(lambda x, c: rmod.qa_rule(ENV, x, c))(xs, caps)
  ref = [ref_qa(jax.tree.map(lambda a: a[i], scenes), caps[i]) for i in range(caps.shape[0])]
  np.testing.assert_allclose(got, ref, atol=1e-6)
  assert 0 < np.mean(ref) < 1   # the batch exercises both outcomes


def test_exact_reward_and_noiseless_noisy_verifier_agree(batch):
  _, caps, xs = batch
  ex = jax.vmap(rmod.make_reward("exact_f1", ENV))(xs, caps)
  nz = jax.vmap(rmod.make_reward("claim_f1_noisy", ENV, eps=0.0, reject=0.0))(xs, caps)
  np.testing.assert_allclose(ex, nz, atol=1e-7)
  always = jax.vmap(rmod.make_reward("claim_f1_noisy", ENV, eps=1.0, reject=0.0))(xs, caps)
  assert np.all(np.asarray(always) >= np.asarray(ex) - 1e-7)


def test_caption_task_pretrain_batch_masks_response():
  task = rmod.CaptionTask(ENV, P, rmod.make_reward("exact_f1", ENV))
  seq, mask = task.pretrain_batch(jax.random.PRNGKey(1), 8)
  assert seq.shape == (8, ENV.prompt_len + ENV.response_len)
  m = np.asarray(mask)
  assert not m[:, :ENV.prompt_len].any()
  for i in range(8):
    resp = np.asarray(seq[i, ENV.prompt_len:])
    eos = int(np.argmax(resp == tokenizer.EOS))
    np.testing.assert_array_equal(m[i, ENV.prompt_len:], np.arange(len(resp)) <= eos)


def test_label_pool_same_budget_and_labels():
  task = rmod.CaptionTask(ENV, P, rmod.make_reward("exact_f1", ENV))
  pool = rmod.label_pool(task, jax.random.PRNGKey(2), 64, P.replace(halluc_prob=0.5))
  assert pool["ver_x"].shape[0] == pool["rm_x"].shape[0] == pool["qa_x"].shape[0] == 64
  assert pool["qa_x"].shape[1] == ENV.response_len + 3
  assert np.all((np.asarray(pool["qa_y"]) >= 0) & (np.asarray(pool["qa_y"]) < ENV.A))
  assert pool["ver_visible"].shape == (64,)
  # a visible claim is an event of the world: every visible claim is labelled true
  assert np.all(np.asarray(pool["ver_y"])[np.asarray(pool["ver_visible"])] == 1.0)
  assert pool["ver_x"].shape[1] == ENV.prompt_len + 6
  assert pool["rm_x"].shape[1] == ENV.prompt_len + ENV.response_len + 1
  assert np.all(np.asarray(pool["ver_x"][:, -1]) == rmod.QUERY)
  y = np.asarray(pool["ver_y"])
  assert 0 < y.mean() < 1 and set(np.unique(y)) <= {0.0, 1.0}
  assert np.all((np.asarray(pool["rm_y"]) >= 0) & (np.asarray(pool["rm_y"]) <= 1))


def test_scorer_learns_a_probe():
  """A scorer fits a rule it can see: label = whether the claim's entity letter is 'A'."""
  env = ENV
  cfg = rmod.scorer_config(env, 16, 1, 2)
  k = jax.random.PRNGKey(0)
  x = jax.random.randint(k, (256, env.prompt_len + 6), 46, 62).at[:, -1].set(rmod.QUERY)
  y = (x[:, -6] == V.letter_id(0)).astype(jnp.float32)
  x = x.at[:, -6].set(jnp.where(jax.random.bernoulli(k, 0.5, (256,)), V.letter_id(0),
                                V.letter_id(1)))
  y = (x[:, -6] == V.letter_id(0)).astype(jnp.float32)
  params, loss = rmod.train_scorer(cfg, x, y, k, 150, 64, 3e-3, progress=False)
  acc = ((rmod.score(cfg, params, x) > 0) == (y > 0.5)).mean()
  assert float(acc) > 0.95 and loss[-10:].mean() < loss[:10].mean()
