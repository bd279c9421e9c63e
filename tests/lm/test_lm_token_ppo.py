"""Token-level learners: GAE over trainable tokens (boundary flag) and GRPO / GiGPO against float64
numpy references, zero gradient on observed / copied tokens, PPO at one epoch without clipping
equals the policy gradient, loss-normalisation properties, critic warm-up, checkpoints."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.lm import advantages as A
from jaxrl_suite.lm import checkpoint as lm_ckpt
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as R
from jaxrl_suite.lm import token_ppo as P
from jaxrl_suite.envs.text import tokenizer as tk
from jaxrl_suite.lm import value as V
from tests.lm import jitted

CFG = lm_model.LMConfig("ppo_tiny", d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=16,
                        vocab_size=tk.V2.size, tokenizer_version=2)


def fake_rollout(seed, b=3, k=3, w=8, h=4, group_size=1):
  """A Rollout with random tokens, kinds and turn structure (no model involved)."""
  rng = np.random.default_rng(seed)
  kind = rng.choice([R.KIND_OBS, R.KIND_ACTION, R.KIND_COPIED, R.KIND_PAD], size=(b, k, w),
                    p=[0.3, 0.4, 0.2, 0.1]).astype(np.int8)
  kind[:, :, 0] = R.KIND_OBS  # slot 0 of a window is never trainable
  turn = np.sort(rng.integers(0, h, size=(b, k * w)), axis=1).reshape(b, k, w).astype(np.int32)
  trainable = kind == R.KIND_ACTION
  flat_tr = trainable.reshape(b, -1)
  action_end = np.full((b, h), -1, np.int32)
  for i in range(b):
    for t in range(h):
      idx = np.nonzero(flat_tr[i] & (turn.reshape(b, -1)[i] == t))[0]
      if len(idx):
        action_end[i, t] = idx[-1]
  z = lambda *s: jnp.zeros(s, jnp.float32)
  return R.Rollout(
      tokens=jnp.asarray(rng.integers(1, tk.V2.size, size=(b, k, w)), jnp.int32),
      kind=jnp.asarray(kind), turn=jnp.asarray(turn), trainable=jnp.asarray(trainable),
      log_probs=z(b, k, w), values=jnp.asarray(rng.normal(size=(b, k, w)), jnp.float32),
      seg_len=jnp.full((b, k), w, jnp.int32), num_segments=jnp.full((b,), k, jnp.int32),
      rewards=jnp.asarray(rng.normal(size=(b, h)), jnp.float32),
      terminated=jnp.zeros((b, h), bool), truncated=jnp.zeros((b, h), bool),
      turn_valid=jnp.asarray(action_end >= 0), actions=jnp.zeros((b, h, 2), jnp.int32),
      action_end=jnp.asarray(action_end),
      state_key=jnp.asarray(rng.integers(-1, 3, size=(b, h)), jnp.int32), info={},
      compacted=jnp.zeros((b, h), bool), segment_overflow=jnp.zeros((b,), bool),
      group=jnp.arange(b, dtype=jnp.int32) // group_size)


def np_gae(r, v, gamma, lam):
  """float64 GAE on one sequence with V(after the end) = 0."""
  adv = np.zeros(len(r))
  nxt = 0.0
  for n in reversed(range(len(r))):
    v_next = v[n + 1] if n + 1 < len(r) else 0.0
    nxt = r[n] + gamma * v_next - v[n] + gamma * lam * nxt
    adv[n] = nxt
  return adv


_GAE = jax.jit(A.token_gae, static_argnames=("across_segments",))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.5, 1.0), st.floats(0.0, 1.0))
def test_lm_token_gae_matches_numpy_on_concatenation_and_per_segment(seed, gamma, lam):
  ro = fake_rollout(seed)
  rng = np.random.default_rng(seed + 1)
  rew = jnp.asarray(rng.normal(size=ro.tokens.shape), jnp.float32)
  tr = np.asarray(ro.trainable).reshape(ro.tokens.shape[0], -1)
  seg = np.asarray(ro.segment).reshape(tr.shape)
  for across in (True, False):
    adv, tgt = _GAE(ro, ro.values, rew, gamma, lam, across_segments=across)
    adv, tgt = np.asarray(adv).reshape(tr.shape), np.asarray(tgt).reshape(tr.shape)
    for i in range(tr.shape[0]):
      idx = np.nonzero(tr[i])[0]
      r = np.asarray(rew, np.float64).reshape(tr.shape)[i, idx]
      v = np.asarray(ro.values, np.float64).reshape(tr.shape)[i, idx]
      if across:  # one GAE over the concatenated trainable tokens of all windows
        ref = np_gae(r, v, gamma, lam)
      else:       # restarts: V_next = 0 and a cut at every window's last trainable token
        ref = np.concatenate([np_gae(r[seg[i, idx] == s], v[seg[i, idx] == s], gamma, lam)
                              for s in np.unique(seg[i, idx])]) if len(idx) else np.zeros(0)
      np.testing.assert_allclose(adv[i, idx], ref, rtol=1e-4, atol=1e-4)
      np.testing.assert_allclose(tgt[i, idx], ref + v, rtol=1e-4, atol=1e-4)
      assert np.all(adv[i, ~tr[i]] == 0) and np.all(tgt[i, ~tr[i]] == 0)


def test_lm_token_rewards_land_on_each_turns_last_action_token():
  ro = fake_rollout(3)
  r = np.asarray(A.token_rewards(ro)).reshape(ro.tokens.shape[0], -1)
  for i in range(r.shape[0]):
    ref = np.zeros(r.shape[1])
    for t in range(ro.rewards.shape[1]):
      if int(ro.action_end[i, t]) >= 0:
        ref[int(ro.action_end[i, t])] += float(ro.rewards[i, t])
    np.testing.assert_allclose(r[i], ref, atol=1e-6)


def test_lm_grpo_and_gigpo_advantages_match_numpy():
  ro = fake_rollout(5, b=6, h=4, group_size=3)
  g = 3
  ret = np.asarray(ro.returns, np.float64).reshape(-1, g)
  a_ep = ((ret - ret.mean(1, keepdims=True)) / (ret.std(1, keepdims=True) + 1e-6)).reshape(-1)
  adv = np.asarray(A.grpo_token_advantages(ro, g))
  tr = np.asarray(ro.trainable)
  np.testing.assert_allclose(adv[tr], np.broadcast_to(a_ep[:, None, None], tr.shape)[tr],
                             rtol=1e-5)
  # step groups: same state key within a group of rollouts, return-to-go normalised
  rew = np.where(np.asarray(ro.turn_valid), np.asarray(ro.rewards, np.float64), 0)
  rtg = np.cumsum(rew[:, ::-1], 1)[:, ::-1] * np.asarray(ro.turn_valid)
  keys, ok = np.asarray(ro.state_key), np.asarray(ro.turn_valid) & (np.asarray(ro.state_key) >= 0)
  step_ref = np.zeros_like(rtg)
  for grp in range(2):
    rows = range(grp * g, grp * g + g)
    cells = [(i, t) for i in rows for t in range(4) if ok[i, t]]
    for (i, t) in cells:
      same = [rtg[j, u] for (j, u) in cells if keys[j, u] == keys[i, t]]
      if len(same) > 1:
        step_ref[i, t] = (rtg[i, t] - np.mean(same)) / (np.std(same) + 1e-6)
  np.testing.assert_allclose(np.asarray(A.step_group_advantages(ro, g)), step_ref, atol=1e-4)
  full = np.asarray(A.gigpo_token_advantages(ro, g, step_weight=0.5))
  turn = np.clip(np.asarray(ro.turn), 0, 3)
  ref = a_ep[:, None, None] + 0.5 * np.take_along_axis(step_ref[:, None, :],
                                                      turn.reshape(6, 1, -1), 2).reshape(tr.shape)
  np.testing.assert_allclose(full[tr], ref[tr], atol=1e-4)
  assert np.all(full[~tr] == 0)


def _batch(ro, seed=0, adv_everywhere=True):
  rng = np.random.default_rng(seed)
  shape = ro.tokens.shape
  f = lambda: jnp.asarray(rng.normal(size=shape), jnp.float32)
  adv = f()
  if not adv_everywhere:
    adv = jnp.where(ro.trainable, adv, 0.0)
  return P.Batch(ro.tokens, ro.trainable, old_logp=f() * 0.1 - 2, ref_logp=f() * 0.1 - 2,
                 advantages=adv, targets=f(), old_values=f())


# One normalisation in `make test` (17 CPU-s each with a cold compile cache); all by test-slow.
@pytest.mark.parametrize("norm", [n if n == "token" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in P.NORMS])
def test_lm_observed_and_copied_tokens_get_exactly_zero_gradient(norm):
  ro = fake_rollout(7)
  pcfg = P.TokenPPOConfig(norm=norm, kl_coef=0.3, ent_coef=0.1, vf_coef=0.5, value_clip=0.2)
  batch = _batch(ro)  # advantages and targets non-zero on EVERY slot, masked ones too
  shape = ro.tokens.shape
  rng = np.random.default_rng(1)
  x = [jnp.asarray(rng.normal(size=shape), jnp.float32) - 2 for _ in range(3)]
  grads = jax.grad(lambda lp, en, v: P.token_loss_terms(pcfg, lp, en, v, batch)[0],
                   argnums=(0, 1, 2))(*x)
  tr = np.asarray(ro.trainable)
  for g in grads:
    assert np.all(np.asarray(g)[~tr] == 0.0)
    assert np.any(np.asarray(g)[tr] != 0.0)
  # end to end through the model: changing advantages/targets on masked slots changes nothing
  params = jitted.init_params(CFG, jax.random.PRNGKey(0))
  vcfg = V.ValueConfig("shared")
  vp = jax.jit(V.init_value_params, static_argnums=(0, 1))(vcfg, CFG, jax.random.PRNGKey(1))
  vp = jax.tree.map(lambda z: z + 0.1, vp)
  loss = jax.jit(lambda bt: jax.grad(lambda p, q: P.ppo_token_loss(CFG, vcfg, pcfg, p, q, bt)[0],
                                     argnums=(0, 1))(params, vp))
  b2 = batch._replace(advantages=jnp.where(ro.trainable, batch.advantages, 1e3),
                      targets=jnp.where(ro.trainable, batch.targets, -1e3))
  for g1, g2 in zip(jax.tree.leaves(loss(batch)), jax.tree.leaves(loss(b2))):
    np.testing.assert_array_equal(np.asarray(g1), np.asarray(g2))


def test_lm_token_ppo_one_epoch_no_clip_equals_policy_gradient():
  """At theta = theta_old (ratio 1) with no clipping the PPO gradient is
  -(1/N) sum_n A_n grad log pi(u_n); one update with 1 epoch / 1 minibatch applies exactly the
  optimiser step of that gradient."""
  ro = fake_rollout(11, b=4)
  # Every model call below is jitted: eager, each op of the model (and of its backward pass) is
  # dispatched on its own (~30 s for this test).
  params = jitted.init_params(CFG, jax.random.PRNGKey(2))
  vcfg = V.ValueConfig("none")
  tok = ro.tokens.reshape(-1, ro.tokens.shape[-1])
  m = lm_model.DecoderLM(CFG)

  def logp_fn(p):  # independent path: manual shift and log-softmax
    logits = m.apply({"params": p}, tok)[0][:, :-1]
    lp = jnp.take_along_axis(jax.nn.log_softmax(logits), tok[:, 1:, None], -1)[..., 0]
    return jnp.pad(lp, ((0, 0), (1, 0))).reshape(ro.tokens.shape)

  old = jax.jit(logp_fn)(params)
  rng = np.random.default_rng(0)
  adv = jnp.where(ro.trainable, jnp.asarray(rng.normal(size=ro.tokens.shape), jnp.float32), 0)
  n = ro.trainable.sum()
  pg = jax.jit(jax.grad(lambda p: -(jnp.where(ro.trainable, logp_fn(p) * adv, 0)).sum() / n))(
      params)
  pcfg = P.TokenPPOConfig(epochs=1, num_minibatches=1, clip_eps=1e6, vf_coef=0.0, lr=1e-2)
  batch = P.Batch(ro.tokens, ro.trainable, old, old, adv, jnp.zeros_like(adv), jnp.zeros_like(adv))
  g = jax.jit(jax.grad(lambda p: P.ppo_token_loss(CFG, vcfg, pcfg, p, {}, batch)[0]))(params)
  for a_, b_ in zip(jax.tree.leaves(g), jax.tree.leaves(pg)):
    np.testing.assert_allclose(np.asarray(a_), np.asarray(b_), rtol=1e-4, atol=1e-7)
  # the learner's update with these advantages = one optimiser step on pg
  import jaxrl_suite.lm.token_ppo as tp
  orig = tp.token_advantages
  tp.token_advantages = lambda pcfg_, ro_, v_: (adv, jnp.zeros_like(adv))
  try:
    init, update = P.make_learner(CFG, vcfg, pcfg)
    st0 = init(params, {}, params)
    st1, _ = jax.jit(update)(st0, ro, jax.random.PRNGKey(0))  # traced here, under the patch
  finally:
    tp.token_advantages = orig
  opt = optax.chain(optax.clip_by_global_norm(pcfg.max_grad_norm), optax.adam(pcfg.lr))
  want = jax.jit(lambda g_, p_: optax.apply_updates(p_, opt.update(g_, opt.init(p_), p_)[0]))(
      pg, params)
  # Adam's first step is lr * g / (|g| + eps): compare where |g| is far above rounding noise.
  for a_, b_, g_ in zip(jax.tree.leaves(st1.params), jax.tree.leaves(want), jax.tree.leaves(pg)):
    big = np.abs(np.asarray(g_)) > 1e-4 * np.abs(np.asarray(g_)).max()
    np.testing.assert_allclose(np.asarray(a_)[big], np.asarray(b_)[big], rtol=1e-5, atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_lm_token_norm_is_invariant_to_resegmentation_segment_norm_is_not(seed):
  """Moving the same tokens (same per-token terms) into different windows leaves the token-norm
  loss unchanged; the per-window mean changes (the compression bias)."""
  rng = np.random.default_rng(seed)
  w = 12
  tr = rng.random(2 * w) < 0.6
  tr[0] = tr[w] = False
  terms = rng.normal(size=2 * w)
  one = jnp.asarray(np.concatenate([tr, np.zeros(2 * w, bool)]).reshape(1, 2, 2 * w))
  split = jnp.asarray(tr.reshape(1, 2, w))
  lossw = lambda m, norm: float((P.loss_weights(m, norm) * jnp.asarray(
      np.resize(terms, m.shape), jnp.float32) * m).sum())
  t1 = np.concatenate([terms, np.zeros(2 * w)]).reshape(1, 2, 2 * w)
  full = float((P.loss_weights(one, "token") * t1).sum())
  seg = float((P.loss_weights(split, "token") * terms.reshape(1, 2, w)).sum())
  assert abs(full - seg) < 1e-5
  n0, n1 = tr[:w].sum(), tr[w:].sum()
  if n0 and n1 and n0 != n1 and abs(terms[:w][tr[:w]].mean() - terms[w:][tr[w:]].mean()) > 1e-3:
    s_full = float((P.loss_weights(one, "segment") * t1).sum())
    s_split = float((P.loss_weights(split, "segment") * terms.reshape(1, 2, w)).sum())
    assert abs(s_full - s_split) > 1e-6
  del lossw


@pytest.mark.slow   # 17 CPU-s (two value kinds, four compiles)
def test_lm_critic_warmup_moves_only_the_value_parameters():
  ro = fake_rollout(13, b=4)
  ro = ro._replace(rewards=jnp.ones_like(ro.rewards))
  params = jitted.init_params(CFG, jax.random.PRNGKey(3))
  for kind in ("shared", "separate"):
    vcfg = V.ValueConfig(kind, critic=CFG if kind == "separate" else None)
    vp = V.init_value_params(vcfg, CFG, jax.random.PRNGKey(4))
    pcfg = P.TokenPPOConfig(critic_warmup_steps=1, num_minibatches=2, lr=1e-2)
    init, update = P.make_learner(CFG, vcfg, pcfg)
    st = init(params, vp, params)
    st1, _ = jax.jit(update)(st, ro, jax.random.PRNGKey(0))
    for a_, b_ in zip(jax.tree.leaves(st1.params), jax.tree.leaves(params)):
      np.testing.assert_array_equal(np.asarray(a_), np.asarray(b_))
    assert any(np.any(np.asarray(a_) != np.asarray(b_))
               for a_, b_ in zip(jax.tree.leaves(st1.vparams), jax.tree.leaves(vp)))
    st2, _ = jax.jit(update)(st1, ro, jax.random.PRNGKey(1))  # warm-up over: the policy moves
    assert any(np.any(np.asarray(a_) != np.asarray(b_))
               for a_, b_ in zip(jax.tree.leaves(st2.params), jax.tree.leaves(params)))


@pytest.mark.slow   # 16 CPU-s; tests/core/test_core_checkpoint.py covers orbax round trips
def test_lm_checkpoint_restores_train_state_bit_exactly(tmp_path):
  ro = fake_rollout(17, b=4)
  params = jitted.init_params(CFG, jax.random.PRNGKey(5))
  vcfg = V.ValueConfig("shared")
  init, update = P.make_learner(CFG, vcfg, P.TokenPPOConfig(num_minibatches=2))
  upd = jax.jit(update)
  st, _ = upd(init(params, V.init_value_params(vcfg, CFG, jax.random.PRNGKey(6)), params), ro,
              jax.random.PRNGKey(0))
  lm_ckpt.save_lm(str(tmp_path / "ck"), 1, st, CFG, extra={"note": "test"})
  like = jax.tree.map(jnp.zeros_like, st)
  back, step, meta = lm_ckpt.restore_lm(str(tmp_path / "ck"), like, CFG)
  assert step == 1 and meta["tokenizer_version"] == 2 and meta["note"] == "test"
  for a_, b_ in zip(jax.tree.leaves(back), jax.tree.leaves(st)):
    assert a_.dtype == b_.dtype
    np.testing.assert_array_equal(np.asarray(a_), np.asarray(b_))
  s1, _ = upd(st, ro, jax.random.PRNGKey(1))
  s2, _ = upd(back, ro, jax.random.PRNGKey(1))
  for a_, b_ in zip(jax.tree.leaves(s1), jax.tree.leaves(s2)):
    np.testing.assert_array_equal(np.asarray(a_), np.asarray(b_))
  v1 = lm_model.LMConfig("v1", d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=16)
  with pytest.raises(ValueError, match="tokenizer v2"):
    lm_ckpt.restore_lm(str(tmp_path / "ck"), like, v1)


def test_lm_config_tokenizer_versions():
  with pytest.raises(ValueError, match="vocab_size"):
    lm_model.LMConfig("bad", vocab_size=96)  # v1 by default
  assert all(c.tokenizer_version == 1 and c.vocab_size == 32 for c in lm_model.FAMILY.values())
  assert all(c.tokenizer_version == 2 and c.vocab_size == 96 and 128 <= c.max_len <= 256
             for c in lm_model.FAMILY_V2.values())
  with pytest.raises(ValueError, match="different tokenizer"):
    lm_model.assert_same_tokenizer(lm_model.FAMILY["xs"], lm_model.FAMILY_V2["xs"])
  with pytest.raises(ValueError, match="tokenizer"):
    V.init_value_params(V.ValueConfig("separate", critic=lm_model.FAMILY["xs"]), CFG,
                        jax.random.PRNGKey(0))


def test_lm_advantage_fn_hook_with_the_default_estimator_is_bit_identical():
  """make_learner(advantage_fn=token_advantages of the same config) and the default path give
  the same parameters, optimiser state and metrics, bit for bit (and the hook is the one used)."""
  ro = fake_rollout(23, b=4)
  ro = ro._replace(rewards=jnp.asarray(np.random.default_rng(1).normal(size=ro.rewards.shape),
                                       jnp.float32))
  params = jitted.init_params(CFG, jax.random.PRNGKey(7))
  vcfg = V.ValueConfig("shared")
  vp = V.init_value_params(vcfg, CFG, jax.random.PRNGKey(8))
  pcfg = P.TokenPPOConfig(num_minibatches=2, lr=1e-2, normalize_advantages=True)
  calls = []

  def hook(r, v):
    calls.append(v.shape)   # traced once, under jit
    return P.token_advantages(pcfg, r, v)

  init, update = P.make_learner(CFG, vcfg, pcfg)
  _, update_hook = P.make_learner(CFG, vcfg, pcfg, advantage_fn=hook)
  st0 = init(params, vp, params)
  a, ma = jax.jit(update)(st0, ro, jax.random.PRNGKey(0))
  assert not calls
  b, mb = jax.jit(update_hook)(st0, ro, jax.random.PRNGKey(0))
  assert calls == [ro.tokens.shape]
  for x, y in zip(jax.tree.leaves((a, ma)), jax.tree.leaves((b, mb))):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  assert any(np.any(np.asarray(x) != np.asarray(y))
             for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(params)))
