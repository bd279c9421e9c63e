"""The spec's CompactionRL tests, against float64 numpy references:

(i)  the token-level loss and its gradient are invariant to where the same tokens are split into
     windows; the segment-level loss is not (and equals its own numpy formula);
(ii) GAE across one window boundary equals GAE on the concatenated sequence; independent GAE
     equals per-segment GAE with V_next = 0;
(iii) copied summary tokens (and observations) get exactly zero gradient; the minibatch
     normalisation keeps whole trajectories together.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from jaxrl_suite.lm import advantages as lm_adv
from jaxrl_suite.lm import compaction as comp
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import token_ppo
from jaxrl_suite.lm import value as lm_value


def _np_token_loss(theta, adv):
  return float(np.sum(-adv * theta) / len(theta))


def _np_segment_loss(theta, adv, cuts):
  b = [0, *cuts, len(theta)]
  segs = [np.arange(b[k], b[k + 1]) for k in range(len(b) - 1)]
  return float(sum(np.mean(-adv[s] * theta[s]) for s in segs) / len(segs))


@given(n=st.integers(4, 40), seed=st.integers(0, 1000), k1=st.integers(1, 5),
       k2=st.integers(1, 5))
def test_token_loss_invariant_under_resegmentation(n, seed, k1, k2):
  rng = np.random.default_rng(seed)
  theta, adv = rng.normal(size=n), rng.normal(size=n)
  cuts = [sorted(rng.choice(np.arange(1, n), min(k, n - 1), replace=False)) for k in (k1, k2)]
  with jax.enable_x64(True):
    th, ad = jnp.asarray(theta), jnp.asarray(adv)
    res = []
    for c in cuts:
      idx, _ = comp.place(n, c, 6, 48)
      res.append({norm: jax.value_and_grad(comp.split_loss)(th, ad, idx, norm)
                  for norm in ("token", "segment")})
    for r, c in zip(res, cuts):
      np.testing.assert_allclose(float(r["token"][0]), _np_token_loss(theta, adv), rtol=1e-5)
      np.testing.assert_allclose(float(r["segment"][0]), _np_segment_loss(theta, adv, list(c)),
                                 rtol=1e-5, atol=1e-7)
      np.testing.assert_allclose(np.asarray(r["token"][1]), -adv / n, rtol=1e-5)
    np.testing.assert_allclose(float(res[0]["token"][0]), float(res[1]["token"][0]), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(res[0]["token"][1]), np.asarray(res[1]["token"][1]))


def test_segment_loss_is_not_invariant():
  gap = comp.resegmentation_gap(jax.random.PRNGKey(0), trials=10)
  assert gap["token"]["loss"] < 1e-5 and gap["token"]["grad"] < 1e-6
  assert gap["segment"]["loss"] > 1e-2 and gap["segment"]["grad"] > 1e-2


def test_minibatch_normalisation_covers_all_tokens_of_whole_trajectories():
  """Two trajectories of one minibatch, one split into 1 window and one into 3: token weights
  are 1/(all trainable tokens), whatever the split; segment weights follow K_tau (the bias)."""
  tr = np.zeros((2, 3, 8), bool)
  tr[0, 0, :6] = True                       # 6 tokens, one window
  tr[1, 0, :2] = tr[1, 1, :2] = tr[1, 2, :2] = True   # 6 tokens, three windows
  w_tok = np.asarray(token_ppo.loss_weights(jnp.asarray(tr), "token"))
  np.testing.assert_allclose(w_tok[tr], 1 / 12)
  w_seg = np.asarray(token_ppo.loss_weights(jnp.asarray(tr), "segment"))
  np.testing.assert_allclose(w_seg[0].sum(), 1 / 4)   # one window of four
  np.testing.assert_allclose(w_seg[1].sum(), 3 / 4)   # three windows of four: weighted by K


def _np_gae(r, v, gamma, lam, cut_after=()):
  """float64 GAE on a chronological token sequence; V_next = 0 after the last token and after
  every index in cut_after (independent segments)."""
  n = len(r)
  adv = np.zeros(n)
  nxt = 0.0
  for i in reversed(range(n)):
    cut = i == n - 1 or i in cut_after
    vn = 0.0 if cut else v[i + 1]
    delta = r[i] + gamma * vn - v[i]
    nxt = delta + (0.0 if cut else gamma * lam * nxt)
    adv[i] = nxt
  return adv


def _two_window_rollout(n1, n2, rng, w=12):
  """A rollout record with one trajectory whose trainable tokens are n1 in window 0 and n2 in
  window 1 (with non-trainable slots in between), reward on two action ends."""
  tokens = np.ones((1, 2, w), np.int32)
  trainable = np.zeros((1, 2, w), bool)
  kind = np.full((1, 2, w), lm_rollout.KIND_OBS, np.int8)
  pos0 = np.sort(rng.choice(np.arange(1, w), n1, replace=False))
  pos1 = np.sort(rng.choice(np.arange(1, w), n2, replace=False))
  trainable[0, 0, pos0] = True
  trainable[0, 1, pos1] = True
  kind[trainable] = lm_rollout.KIND_ACTION
  h = 2
  rewards = rng.normal(size=(1, h)).astype(np.float32)
  action_end = np.array([[pos0[-1], w + pos1[-1]]], np.int32)
  z = lambda *s: np.zeros(s, np.float32)
  ro = lm_rollout.Rollout(
      tokens=jnp.asarray(tokens), kind=jnp.asarray(kind), turn=jnp.zeros((1, 2, w), jnp.int32),
      trainable=jnp.asarray(trainable), log_probs=jnp.asarray(z(1, 2, w)),
      values=jnp.asarray(z(1, 2, w)), seg_len=jnp.full((1, 2), w, jnp.int32),
      num_segments=jnp.array([2], jnp.int32), rewards=jnp.asarray(rewards),
      terminated=jnp.zeros((1, h), bool), truncated=jnp.zeros((1, h), bool),
      turn_valid=jnp.ones((1, h), bool), actions=jnp.zeros((1, h, 2), jnp.int32),
      action_end=jnp.asarray(action_end), state_key=jnp.full((1, h), -1, jnp.int32), info={},
      compacted=jnp.zeros((1, h), bool), segment_overflow=jnp.zeros((1,), bool),
      group=jnp.zeros((1,), jnp.int32))
  return ro, trainable


# Jitted once for the fixed [1, 2, 12] layout: eager calls re-trace the scan at every example.
_token_gae = jax.jit(lm_adv.token_gae, static_argnums=(5,))
_token_rewards = jax.jit(lm_adv.token_rewards)


@given(n1=st.integers(1, 8), n2=st.integers(1, 8), seed=st.integers(0, 1000),
       lam=st.sampled_from([0.0, 0.5, 0.95, 1.0]), gamma=st.sampled_from([0.9, 1.0]))
def test_gae_across_one_boundary_equals_gae_on_the_concatenation(n1, n2, seed, lam, gamma):
  rng = np.random.default_rng(seed)
  ro, tr = _two_window_rollout(n1, n2, rng)
  values = rng.normal(size=tr.shape).astype(np.float32)
  rewards = np.asarray(_token_rewards(ro))
  seq_v, seq_r = values[tr], rewards[tr]        # chronological: window 0 then window 1
  assert seq_r[n1 - 1] == pytest.approx(float(ro.rewards[0, 0]))
  for across, cuts in ((True, ()), (False, (n1 - 1,))):
    adv, tgt = _token_gae(ro, jnp.asarray(values), jnp.asarray(rewards), gamma, lam, across)
    ref = _np_gae(seq_r.astype(np.float64), seq_v.astype(np.float64), gamma, lam, cuts)
    np.testing.assert_allclose(np.asarray(adv)[tr], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(tgt)[tr], ref + seq_v, rtol=1e-5, atol=1e-5)
    assert (np.asarray(adv)[~tr] == 0).all()
  # gamma = lam = 1 across the boundary: A_n = R - V(u_n) (Monte Carlo).
  adv, _ = _token_gae(ro, jnp.asarray(values), jnp.asarray(rewards), 1.0, 1.0, True)
  np.testing.assert_allclose(np.asarray(adv)[tr], seq_r[::-1].cumsum()[::-1] - seq_v, rtol=1e-5,
                             atol=1e-5)


def _layout_rollout(lengths, splits, k=3, w=8):
  """B trajectories of `lengths[j]` trainable tokens with ids unique to the trajectory
  (1 + 12 j + i), laid out into K windows of W slots split before `splits[j]` (see
  `compaction.place`). Only tokens, trainable and the shapes matter to the learner here."""
  b = len(lengths)
  tokens = np.zeros((b, k, w), np.int32)
  for j, (n, cuts) in enumerate(zip(lengths, splits)):
    idx, _ = comp.place(n, cuts, k, w)
    tokens[j] = np.where(idx >= 0, 1 + 12 * j + idx, 0)
  tr = tokens > 0
  z = lambda *s: jnp.zeros(s, jnp.float32)
  zb = lambda *s: jnp.zeros(s, bool)
  return lm_rollout.Rollout(
      tokens=jnp.asarray(tokens), kind=jnp.asarray(np.where(tr, lm_rollout.KIND_ACTION,
                                                            lm_rollout.KIND_OBS).astype(np.int8)),
      turn=jnp.zeros((b, k, w), jnp.int32), trainable=jnp.asarray(tr), log_probs=z(b, k, w),
      values=z(b, k, w), seg_len=jnp.full((b, k), w, jnp.int32),
      num_segments=jnp.full((b,), k, jnp.int32), rewards=z(b, 1), terminated=zb(b, 1),
      truncated=zb(b, 1), turn_valid=jnp.ones((b, 1), bool), actions=jnp.zeros((b, 1, 2), jnp.int32),
      action_end=jnp.zeros((b, 1), jnp.int32), state_key=jnp.full((b, 1), -1, jnp.int32), info={},
      compacted=zb(b, 1), segment_overflow=zb(b), group=jnp.arange(b, dtype=jnp.int32))


def test_learner_minibatches_keep_trajectories_whole(monkeypatch):
  """The real `token_ppo.make_learner` update (2 epochs x 2 shuffled minibatches, Adam, clipping)
  on the same trajectories split into windows in two different ways, with a context-free policy
  (log pi(u) = log softmax(theta)[u], so re-splitting leaves every token's log-prob unchanged)
  and advantages attached to the tokens. Token normalisation: the same losses and the same new
  parameters whatever the split, because minibatches hold whole trajectories. Segment
  normalisation: the losses move with the split (the bias). And minibatching windows instead
  of trajectories brings the split dependence back even under token normalisation."""
  vocab = 64
  rng = np.random.default_rng(0)
  adv_table = jnp.asarray(rng.normal(size=vocab), jnp.float32)

  def scores(cfg, vcfg, params, vparams, tokens):
    logp = jax.nn.log_softmax(params["theta"])[tokens]
    values = vparams["v"][tokens] if vparams else jnp.zeros(tokens.shape)
    return lm_value.TokenScores(jnp.zeros(tokens.shape + (1,)), logp, jnp.zeros(tokens.shape),
                                values)

  monkeypatch.setattr(lm_value, "policy_and_values", scores)
  adv_fn = lambda ro, v: (jnp.where(ro.trainable, adv_table[ro.tokens], 0.0), jnp.zeros_like(v))
  lengths = (5, 7, 4, 6)
  layouts = {"a": _layout_rollout(lengths, ((2,), (3, 5), (1, 2), ())),
             "b": _layout_rollout(lengths, ((1, 4), (), (3,), (2, 4)))}
  theta0 = {"theta": jnp.asarray(rng.normal(size=vocab), jnp.float32)}
  v0 = {"v": jnp.zeros((vocab,), jnp.float32)}
  key = jax.random.PRNGKey(3)

  def run(norm, ro):
    pcfg = token_ppo.TokenPPOConfig(epochs=2, num_minibatches=2, lr=0.05, norm=norm)
    init, update = token_ppo.make_learner(None, lm_value.ValueConfig("shared"), pcfg, adv_fn)
    st, m = jax.jit(update)(init(theta0, v0, theta0), ro, key)
    return np.asarray(st.params["theta"]), float(m["pg_loss"])

  tok = {n: run("token", ro) for n, ro in layouts.items()}
  np.testing.assert_allclose(tok["a"][0], tok["b"][0], rtol=1e-6, atol=1e-7)
  assert tok["a"][1] == pytest.approx(tok["b"][1], abs=1e-7)
  assert np.abs(tok["a"][0] - np.asarray(theta0["theta"])).max() > 1e-3   # the update moved
  seg = {n: run("segment", ro) for n, ro in layouts.items()}
  assert abs(seg["a"][1] - seg["b"][1]) > 1e-3
  # Windows as the unit of minibatching ([B*K, 1, W]: each window its own row) mixes windows
  # of different trajectories; the token normaliser of a minibatch then depends on the split.
  as_windows = {n: jax.tree.map(lambda x: x.reshape((-1, 1) + x.shape[2:])
                                if x.ndim == 3 and x.shape[1] == 3 else x, ro)
                for n, ro in layouts.items()}
  as_windows = {n: ro._replace(num_segments=jnp.ones((12,), jnp.int32),
                               seg_len=jnp.full((12, 1), 8, jnp.int32))
                for n, ro in as_windows.items()}
  win = {n: run("token", ro) for n, ro in as_windows.items()}
  assert abs(win["a"][1] - win["b"][1]) > 1e-3
