"""Multi-turn rollouts: the jitted, KV-cached sampler against a step-by-step Python reference
(full recomputation of the context for every token, Python lists for the windows), for each
overflow policy; the recompute mode; trace-time errors for overflow and tokenizer mixing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.text import kv_lookup
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as R
from jaxrl_suite.lm import sampling
from jaxrl_suite.envs.text import tokenizer as tk
from tests.lm import jitted

CFG = lm_model.LMConfig("ro_tiny", d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=48,
                        vocab_size=tk.V2.size, tokenizer_version=2)
ENV = kv_lookup.KVLookup(kv_lookup.EnvParams(num_pairs=2, num_queries=8, max_steps_in_episode=8))
EP = ENV.default_params


def _params(seed=0):
  p = jitted.init_params(CFG, jax.random.PRNGKey(seed))
  # Sharpen the head so <eoa> and digits are sampled sometimes (varied action lengths and valid
  # answers, not only invalid 2-token actions).
  bias = p["head"]["bias"].at[ENV.eoa_id].add(2.5).at[tk.DIGIT0:tk.DIGIT0 + 10].add(2.0)
  return {**p, "head": {**p["head"], "bias": bias}}


def reference_rollout(params, key, num_envs, rcfg, group_size=1):
  """Per trajectory, in Python: full causal pass over the current window for every token."""
  w, a = rcfg.window, ENV.max_action_len
  model = lm_model.DecoderLM(CFG)
  full = jax.jit(lambda toks: model.apply({"params": params}, toks)[0][0])

  @jax.jit  # (logits [V], key) -> (token, log-prob of it under the filtered distribution)
  def draw(logits, key):
    x = sampling.filter_logits(logits, rcfg.temperature, rcfg.top_k, rcfg.top_p)
    tok = jax.random.categorical(key, x)
    return tok, jax.nn.log_softmax(x)[tok]

  reset, step_env = jax.jit(ENV.reset), jax.jit(ENV.step_env)
  eoa = ENV.eoa_id
  comp = rcfg.overflow.resolved(ENV.vocab) if isinstance(rcfg.overflow, R.Compaction) else None
  reserve = comp.reserve if comp else 0
  k_reset, k_pol = jax.random.split(key)
  env_keys = jnp.repeat(jax.random.split(k_reset, num_envs // group_size), group_size, axis=0)
  pol_keys = jax.random.split(k_pol, num_envs)
  out = []
  for b in range(num_envs):
    obs, state = reset(env_keys[b], EP)
    task = [int(x) for x in obs.tokens[:int(obs.length)]]
    segs = [[]]  # items: (token, kind, turn, trainable, logp)

    def gen(seg, key, n, end, kind, turn, trainable):
      toks = []
      for i in range(n):
        ids = np.zeros((1, w), np.int32)
        ids[0, :len(seg)] = [x[0] for x in seg]
        tok, logp = draw(full(jnp.asarray(ids))[len(seg) - 1], jax.random.fold_in(key, i))
        tok = int(tok)
        seg.append((tok, kind, turn, trainable, float(logp)))
        toks.append(tok)
        if tok == end:
          break
      return toks

    rewards, done = [], False
    for t in range(rcfg.num_turns):
      if done:
        break
      ka, ks = jax.random.split(jax.random.fold_in(pol_keys[b], t), 2)
      cur = segs[-1]
      if rcfg.overflow is not None and len(cur) + int(obs.length) + a + reserve > w:
        if isinstance(rcfg.overflow, R.TruncateOldest):
          keep = rcfg.overflow.keep_task
          budget = w - a - int(obs.length) - (len(task) if keep else 0)
          starts = [j for j in range(len(cur)) if (not keep or cur[j][1] != R.KIND_TASK) and (
              j == 0 or cur[j][2] != cur[j - 1][2]
              or (cur[j][1] == R.KIND_TASK) != (cur[j - 1][1] == R.KIND_TASK))]
          ok = [j for j in starts if len(cur) - j <= budget]
          s0 = ok[0] if ok else len(cur)
          new = [(x, R.KIND_TASK, 0, False, 0.0) for x in task] if keep else []
          new += [(x[0], R.KIND_TASK if x[1] == R.KIND_TASK else R.KIND_COPIED, x[2], False, 0.0)
                  for x in cur[s0:]]
        else:
          cur.extend((x, R.KIND_PROMPT, t, False, 0.0) for x in comp.prompt)
          summ = gen(cur, ks, comp.summary_len, comp.end_id, R.KIND_SUMMARY, t, True)
          summ = summ[:summ.index(comp.end_id)] if comp.end_id in summ else summ
          new = [(x, R.KIND_TASK, t, False, 0.0) for x in task]
          new += [(x, R.KIND_COPIED, t, False, 0.0) for x in list(comp.prefix) + summ]
        segs.append(new)
        cur = new
      kind = R.KIND_TASK if t == 0 else R.KIND_OBS
      cur.extend((int(x), kind, t, False, 0.0) for x in obs.tokens[:int(obs.length)])
      act = gen(cur, ka, a, eoa, R.KIND_ACTION, t, True)
      action = jnp.asarray(act + [tk.PAD] * (a - len(act)), jnp.int32)
      obs, state, r, term, _ = step_env(jax.random.fold_in(env_keys[b], t + 1), state, action,
                                        EP)
      rewards.append(float(r))
      done = bool(term) or bool(ENV.is_truncated(state, EP))
    out.append((segs, rewards))
  return out


def _compare(ro, ref):
  for b, (segs, rewards) in enumerate(ref):
    assert int(ro.num_segments[b]) == len(segs)
    for k, seg in enumerate(segs):
      n = len(seg)
      assert int(ro.seg_len[b, k]) == n
      col = lambda i: np.array([x[i] for x in seg])
      np.testing.assert_array_equal(np.asarray(ro.tokens[b, k, :n]), col(0))
      np.testing.assert_array_equal(np.asarray(ro.kind[b, k, :n]), col(1))
      np.testing.assert_array_equal(np.asarray(ro.turn[b, k, :n]), col(2))
      np.testing.assert_array_equal(np.asarray(ro.trainable[b, k, :n]), col(3))
      np.testing.assert_allclose(np.asarray(ro.log_probs[b, k, :n]), col(4), atol=2e-5)
      assert not bool(ro.trainable[b, k, n:].any()) and bool((ro.kind[b, k, n:] == 0).all())
    h = len(rewards)
    np.testing.assert_allclose(np.asarray(ro.rewards[b, :h]), rewards, atol=1e-7)
    assert bool(ro.turn_valid[b, :h].all()) and not bool(ro.turn_valid[b, h:].any())


CASES = {
    "fits": R.RolloutConfig(num_turns=8, window=48, temperature=0.9, top_k=40),
    "truncate": R.RolloutConfig(num_turns=8, window=24, overflow=R.TruncateOldest()),
}
SLOW_CASES = {
    "truncate_task_scrolls_out": R.RolloutConfig(num_turns=8, window=16,
                                                 overflow=R.TruncateOldest(keep_task=False)),
    "compaction": R.RolloutConfig(num_turns=8, window=30,
                                  overflow=R.Compaction(summary_len=2)),
}


def _check_case(rcfg):
  params = _params()
  key = jax.random.PRNGKey(3)
  ro = jax.jit(lambda p, k: R.multi_turn_rollout(CFG, p, ENV, EP, k, 3, rcfg, group_size=1))(
      params, key)
  _compare(ro, reference_rollout(params, key, 3, rcfg))
  if rcfg.overflow is not None:
    assert int(ro.num_segments.max()) > 1, "the case should exercise the overflow policy"
  return ro


@pytest.mark.parametrize("name", sorted(CASES))
def test_lm_rollout_matches_python_reference(name):
  _check_case(CASES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_CASES))
def test_lm_rollout_matches_python_reference_slow(name):
  ro = _check_case(SLOW_CASES[name])
  if name == "compaction":
    assert bool((ro.kind == R.KIND_SUMMARY).any()) and bool((ro.kind == R.KIND_PROMPT).any())
    # summary tokens are trainable, the copies in the next window are not
    assert bool(ro.trainable[ro.kind == R.KIND_SUMMARY].all())
    assert not bool(ro.trainable[ro.kind == R.KIND_COPIED].any())


def test_lm_rollout_recompute_mode_samples_the_same_tokens():
  params = _params(1)
  rc = CASES["truncate"]
  f = lambda rcfg: jax.jit(lambda k: R.multi_turn_rollout(CFG, params, ENV, EP, k, 4, rcfg))(
      jax.random.PRNGKey(5))
  a = f(rc)
  b = f(R.RolloutConfig(**{**rc.__dict__, "recompute": True}))
  np.testing.assert_array_equal(np.asarray(a.tokens), np.asarray(b.tokens))
  np.testing.assert_allclose(np.asarray(a.log_probs), np.asarray(b.log_probs), atol=2e-5)


def test_lm_rollout_groups_share_the_task_and_vmap_over_seeds():
  params = _params()
  rc = CASES["fits"]
  run = jax.jit(jax.vmap(lambda k: R.multi_turn_rollout(CFG, params, ENV, EP, k, 4, rc,
                                                        group_size=2)))
  ro = run(jax.random.split(jax.random.PRNGKey(0), 2))
  task = lambda s, b: np.asarray(ro.tokens[s, b, 0, :10])
  for s in range(2):
    np.testing.assert_array_equal(task(s, 0), task(s, 1))
    assert not np.array_equal(task(s, 0), task(s, 2))
  np.testing.assert_array_equal(np.asarray(ro.group[0]), [0, 0, 1, 1])
  # the seed axis is independent: seed 0 alone gives the same record
  one = jax.jit(lambda k: R.multi_turn_rollout(CFG, params, ENV, EP, k, 4, rc, group_size=2))(
      jax.random.split(jax.random.PRNGKey(0), 2)[0])
  np.testing.assert_array_equal(np.asarray(one.tokens), np.asarray(ro.tokens[0]))


def test_lm_rollout_length_overflow_raises_at_trace_time():
  params = _params()
  too_small = R.RolloutConfig(num_turns=8, window=36)  # 10 + 7 x 2 + 8 x 2 = 40 > 36
  with pytest.raises(ValueError, match="context overflow"):
    jax.eval_shape(lambda k: R.multi_turn_rollout(CFG, params, ENV, EP, k, 2, too_small),
                   jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="max_len"):
    R.multi_turn_rollout(CFG, params, ENV, EP, jax.random.PRNGKey(0), 2,
                         R.RolloutConfig(num_turns=2, window=64))
  with pytest.raises(ValueError, match="Compaction"):
    R.multi_turn_rollout(CFG, params, ENV, EP, jax.random.PRNGKey(0), 2,
                         R.RolloutConfig(num_turns=8, window=20, overflow=R.Compaction()))
  v1 = lm_model.LMConfig("v1", d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=48)
  with pytest.raises(ValueError, match="tokenizer"):
    R.multi_turn_rollout(v1, jitted.init_params(v1, jax.random.PRNGKey(0)), ENV, EP,
                         jax.random.PRNGKey(0), 2, CASES["fits"])


def test_lm_sampling_overflow_raises_at_trace_time():
  """Issue 14 item 4: prompt + response past max_len used to give NaN log-probs silently."""
  cfg = lm_model.LMConfig("t", d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=8)
  params = jitted.init_params(cfg, jax.random.PRNGKey(0))
  st = sampling.lm_stepper(cfg, params)
  prompts = jnp.ones((2, 5), jnp.int32)
  with pytest.raises(ValueError, match="exceeds the model's max_len=8"):
    jax.eval_shape(lambda k: sampling.sample(st, prompts, k, 4), jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="exceeds the model's max_len=8"):
    jax.eval_shape(lambda r: sampling.response_logits(cfg, params, prompts, r),
                   jnp.ones((2, 4), jnp.int32))
  with pytest.raises(ValueError, match="longer than"):
    lm_model.DecoderLM(cfg).apply({"params": params}, jnp.ones((1, 9), jnp.int32))
  # exactly max_len is fine and finite
  s = sampling.sample(st, prompts, jax.random.PRNGKey(0), 3)
  assert bool(jnp.isfinite(s.log_probs).all())
  both = sampling.combine_steppers([st, st], lambda x, y: x + y)
  assert both.max_len == 8


def test_lm_model_per_sequence_positions_and_key_mask():
  """Cached decoding at different offsets per sequence equals the full pass of each sequence;
  a key mask hides left padding exactly."""
  cfg = lm_model.LMConfig("t", d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=12,
                          vocab_size=tk.V2.size, tokenizer_version=2)
  params = jitted.init_params(cfg, jax.random.PRNGKey(0))
  m = lm_model.DecoderLM(cfg)
  seqs = jax.random.randint(jax.random.PRNGKey(1), (2, 10), 0, tk.V2.size)
  full = [m.apply({"params": params}, seqs[i:i + 1])[0][0] for i in range(2)]
  lens = jnp.array([3, 6])
  cache = lm_model.init_cache(cfg, 2, length=12)
  blk = jnp.where(jnp.arange(6)[None] < lens[:, None], seqs[:, :6], 0)
  lg, cache = m.apply({"params": params}, blk, jnp.broadcast_to(jnp.arange(6), (2, 6)), cache)
  for i in range(2):
    np.testing.assert_allclose(lg[i, :int(lens[i])], full[i][:int(lens[i])], atol=1e-5)
  pos = lens
  for _ in range(3):
    tok = jnp.take_along_axis(seqs, pos[:, None], 1)
    lg, cache = m.apply({"params": params}, tok, pos[:, None], cache)
    for i in range(2):
      np.testing.assert_allclose(lg[i, 0], full[i][int(pos[i])], atol=1e-5)
    pos = pos + 1
  # left padding hidden by key_mask: same logits as the unpadded sequence at shifted positions
  x = seqs[:1, :4]
  padded = jnp.concatenate([jnp.zeros((1, 2), jnp.int32), x], 1)
  mask = jnp.arange(6)[None] >= 2
  pos6 = jnp.maximum(jnp.arange(6) - 2, 0)[None]
  lp, _ = m.apply({"params": params}, padded, pos6, key_mask=mask)
  np.testing.assert_allclose(lp[0, 2:], full[0][:4], atol=1e-5)


def test_lm_cached_logits_equal_full_pass_at_ragged_positions():
  """Issue 36 item 5 (head-major cache, per-sequence writes): three sequences at different
  offsets are fed as the rollout feeds them, a right-padded first block, then blocks of 2 and
  single tokens at each sequence's own position; after every call the cached logits equal the
  full pass's at those positions. A write to the wrong slot, head or sequence (or a read of a
  stale slot) changes a later logit and fails here."""
  cfg = lm_model.LMConfig("t", d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=20,
                          vocab_size=tk.V2.size, tokenizer_version=2)
  params = jitted.init_params(cfg, jax.random.PRNGKey(0))
  m = lm_model.DecoderLM(cfg)
  # jitted (one compile per block width; eager, every op of the model is dispatched on its own)
  apply = jax.jit(lambda toks, idx, c: m.apply({"params": params}, toks, idx, c))
  seqs = jax.random.randint(jax.random.PRNGKey(1), (3, 20), 0, tk.V2.size)
  full = jax.jit(lambda toks: m.apply({"params": params}, toks)[0])(seqs)     # [3, 20, V]
  cache = lm_model.init_cache(cfg, 3, length=24)                              # scratch slots
  assert cache[0]["k"].shape == (3, 2, 24, 8)                                 # [B, H, T, Dh]
  pos = jnp.array([1, 4, 7])
  blk = jnp.where(jnp.arange(8)[None] < pos[:, None], seqs[:, :8], tk.PAD)    # padded block
  lg, cache = apply(blk, jnp.broadcast_to(jnp.arange(8), (3, 8)), cache)
  for i in range(3):
    np.testing.assert_allclose(lg[i, :int(pos[i])], full[i, :int(pos[i])], atol=1e-5)
  for width in (1, 2, 1, 2, 2, 1, 1):
    idx = pos[:, None] + jnp.arange(width)[None]                              # [3, width]
    lg, cache = apply(jnp.take_along_axis(seqs, idx, 1), idx, cache)
    for i in range(3):
      np.testing.assert_allclose(lg[i], full[i, int(pos[i]):int(pos[i]) + width], atol=1e-5)
    pos = pos + width


def test_lm_sampling_categorical_draws_as_jax_random_categorical():
  """sampling.categorical / gumbel_argmax (the samplers' cheaper argmax) draw exactly what
  jax.random.categorical draws, per key and for a batch under one key; ties and NaN resolve to
  the first index, as jnp.argmax."""
  keys = jax.random.split(jax.random.PRNGKey(0), 256)
  x = jax.random.normal(jax.random.PRNGKey(1), (256, tk.V2.size)) * 3
  x = x.at[:, 5].set(-1e9)  # filtered entries (sampling.NEG_INF) are never drawn
  want = jax.vmap(jax.random.categorical)(keys, x)
  got = jax.jit(jax.vmap(sampling.categorical))(keys, x)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert got.dtype == jnp.int32 and not bool((got == 5).any())
  np.testing.assert_array_equal(np.asarray(sampling.categorical(keys[0], x)),
                                np.asarray(jax.random.categorical(keys[0], x, axis=-1)))
  y = jnp.array([[0., 2., 2., 1.], [0., jnp.nan, 3., jnp.nan], [1., 1., 1., 1.]])
  np.testing.assert_array_equal(np.asarray(sampling.gumbel_argmax(jnp.zeros_like(y), y)),
                                np.asarray(jnp.argmax(y, -1)))
