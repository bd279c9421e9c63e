"""GRPO and Direct-OPD on tiny Llama / Qwen3 checkpoint folders, through the generic LM code.

Every folder is written by the test (config.json + safetensors + a `tokenizers` tokenizer.json
whose ids are our v1 vocabulary) and loaded with `lm.hf_checkpoint`; the model then runs through
`model.DecoderLM` (the `Architecture` dispatch), i.e. the same sampling / GRPO / Direct-OPD code
as the GPT family. Expected numbers come from the float64 numpy reference of
test_llama_reference.py, which reads the HF-named tensors directly.
"""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from jaxrl_suite.lm import direct_opd, grpo, hf_checkpoint, hf_tokenizer, llama, sampling, tasks
from jaxrl_suite.lm import model as lm_model
from tests.lm import jitted
from test_llama_reference import TINY, hf_tensors, ref_logits, write_tiny

# A larger Llama-style student (more layers, wider, GQA 4:2, head_dim 10) for the transfer.
LARGE = dict(TINY["llama"], hidden_size=40, num_hidden_layers=3, num_key_value_heads=2,
             intermediate_size=64)
TASK = tasks.carry_add(num_digits=2, min_value=10)  # prompt 6 + response 6 tokens


def load(folder):
  """The loading path a user takes: tokenizer first (our ids?), then config and weights."""
  version = hf_tokenizer.matching_version(hf_tokenizer.load(str(folder)))
  assert version == 1
  return hf_checkpoint.load(str(folder), tokenizer_version=version)


def log_softmax64(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def ref_response_logp(c, t, prompts, responses):
  """float64 log-softmax at the positions that predict each response token: [B, R, V]."""
  seq = np.concatenate([prompts, responses], 1)[:, :-1]
  pos = np.broadcast_to(np.arange(seq.shape[1]), seq.shape)
  return log_softmax64(ref_logits(c, t, seq, pos)[:, prompts.shape[1] - 1:])


def test_non_architecture_config_is_refused():
  with pytest.raises(TypeError, match="neither an LMConfig nor an lm.model.Architecture"):
    lm_model.init_cache(object(), 1)


@pytest.mark.parametrize("kind", ["qwen3", "llama"])
def test_generic_lm_code_runs_the_checkpoint_like_the_reference(tmp_path, kind):
  """Teacher-forced logits, cached sampling and FLOPs go through model.DecoderLM's dispatch."""
  t = write_tiny(tmp_path, kind, seed=11)
  cfg, params = load(tmp_path)
  rng = np.random.default_rng(0)
  prompts, resp = rng.integers(0, 32, (3, 5)), rng.integers(0, 32, (3, 4))
  want = ref_response_logp(TINY[kind], t, prompts, resp)
  got = jax.nn.log_softmax(sampling.response_logits(cfg, params, jnp.asarray(prompts),
                                                    jnp.asarray(resp)), -1)
  np.testing.assert_allclose(np.asarray(got), want, atol=3e-4 * max(1, np.abs(want).max()))
  # The sampler's KV-cached stepper (prefill + one decode step) predicts the same distributions.
  st = sampling.lm_stepper(cfg, params)
  l0, cache = st.prefill(jnp.asarray(prompts))
  l1, _ = st.step(cache, jnp.asarray(resp[:, 0]), jnp.int32(prompts.shape[1]))
  for j, lj in enumerate((l0, l1)):
    np.testing.assert_allclose(np.asarray(jax.nn.log_softmax(lj, -1)), want[:, j],
                               atol=3e-4 * max(1, np.abs(want).max()))
  assert cache[0]["k"].shape == (3, cfg.max_len, cfg.num_kv_heads, cfg.head_dim)
  assert lm_model.forward_flops_per_token(cfg, 9) == llama.forward_flops_per_token(cfg, 9)


@dataclasses.dataclass(frozen=True)
class EvenTokenTask:
  """TASK's prompts with a dense verifiable reward: the share of even token ids in the response.

  A random checkpoint almost never solves an addition (every reward 0, every advantage 0, no
  gradient); this reward varies within a group, so one GRPO step must move the parameters."""
  base: tasks.AdditionTask = TASK

  prompt_len = property(lambda self: self.base.prompt_len)
  response_len = property(lambda self: self.base.response_len)

  def sample_train(self, key, n):
    return self.base.sample_train(key, n)

  def prompts(self, ops):
    return self.base.prompts(ops)

  def reward(self, ops, responses):
    del ops
    return (responses % 2 == 0).mean(-1).astype(jnp.float32)


@pytest.mark.parametrize("kind", ["qwen3", "llama"])
def test_one_grpo_step_on_a_checkpoint(tmp_path, kind):
  write_tiny(tmp_path / "src", kind, seed=12)
  cfg, params = load(tmp_path / "src")
  task = EvenTokenTask()
  gcfg = grpo.GRPOConfig(steps=1, prompts_per_step=4, group_size=4, lr=1e-3)
  init, step = grpo.make_step(cfg, task, gcfg)
  key = jax.random.PRNGKey(3)
  (new, _, ref), m = jax.jit(step)(init(params, params), key)
  # The batch the step drew (same key, same program pieces) -> the loss at theta = theta_old:
  # ratio 1 and KL 0, so L = -sum_b A_b n_b / sum_b n_b (n_b valid tokens of response b).
  ops, prompts, s = jax.jit(lambda p, k: grpo.sample_groups(
      cfg, p, task, k, gcfg.prompts_per_step, gcfg.group_size, gcfg.temperature))(params, key)
  r = np.asarray(task.reward(ops, s.tokens), np.float64).reshape(-1, gcfg.group_size)
  adv = ((r - r.mean(1, keepdims=True)) / (r.std(1, keepdims=True) + 1e-6)).reshape(-1)
  n = np.asarray(s.mask, np.float64).sum(1)
  assert np.ptp(adv) > 0  # the reward must vary, or the step below tests nothing
  np.testing.assert_allclose(float(m["loss"]), -(adv * n).sum() / n.sum(), rtol=1e-4, atol=1e-6)
  assert abs(float(m["kl_ref"])) < 1e-6
  leaves_new, leaves_old = jax.tree.leaves(new), jax.tree.leaves(params)
  assert all(np.isfinite(np.asarray(x)).all() for x in leaves_new)
  assert any(not np.array_equal(a, b) for a, b in zip(leaves_new, leaves_old))
  jax.tree.map(np.testing.assert_array_equal, ref, params)  # the reference stays frozen

  # The step lowers its own surrogate on the same batch (a descent step, not just any change).
  def surrogate(p):
    logp = lm_model.token_log_probs(sampling.response_logits(cfg, p, prompts, s.tokens),
                                    s.tokens)
    return grpo.masked_mean(-jnp.asarray(adv, jnp.float32)[:, None] * logp, s.mask)
  assert float(surrogate(new)) < float(surrogate(params))
  # The trained policy saves as a checkpoint folder that loads back to the same parameters.
  hf_checkpoint.save(str(tmp_path / "rl"), cfg, new, shards=2, extra_files={
      "tokenizer.json": str(tmp_path / "src" / "tokenizer.json")})
  _, back = load(tmp_path / "rl")
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)),
               back, new)


def write_rl_pair(tmp_path, seed=21):
  """Small Qwen3 teacher: reference folder and a post-RL folder (reference + a recorded shift)."""
  t_ref = write_tiny(tmp_path / "small_ref", "qwen3", seed=seed)
  rng = np.random.default_rng(seed + 1)
  t_rl = {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(np.float32)
          for k, v in t_ref.items()}
  write_tiny(tmp_path / "small_rl", "qwen3", seed=seed)
  save_file(t_rl, os.path.join(tmp_path / "small_rl", "model.safetensors"))
  t_large = write_tiny(tmp_path / "large", "llama", seed=seed + 2, **LARGE)
  return t_ref, t_rl, t_large


def test_direct_opd_transfer_from_small_qwen3_to_larger_llama(tmp_path):
  """Decode-time delta and one distillation step, small Qwen3 pair -> larger Llama student."""
  t_ref, t_rl, t_large = write_rl_pair(tmp_path)
  hf_tokenizer.assert_same_tokenizer(*(str(tmp_path / d) for d in ("small_ref", "small_rl",
                                                                    "large")))
  cs, ref = load(tmp_path / "small_ref")
  _, rl = load(tmp_path / "small_rl")
  cl, pl = load(tmp_path / "large")
  assert lm_model.num_params(pl) > lm_model.num_params(ref)
  pair = direct_opd.DeltaPair(cs, ref, rl)
  rng = np.random.default_rng(4)
  prompts, resp = rng.integers(0, 32, (2, 6)), rng.integers(0, 32, (2, 5))
  # r = log pi_RL - log pi_ref at every prefix, and the decode-time logits log pi_L + beta r.
  r_ref = (ref_response_logp(TINY["qwen3"], t_rl, prompts, resp)
           - ref_response_logp(TINY["qwen3"], t_ref, prompts, resp))
  r = np.asarray(pair.on(jnp.asarray(prompts), jnp.asarray(resp)))
  np.testing.assert_allclose(r, r_ref, atol=5e-4)
  assert np.abs(r_ref).max() > 0.05  # the recorded shift is not negligible
  beta = 0.7
  l_ref = ref_response_logp(LARGE, t_large, prompts, resp)
  lg = sampling.response_logits(cl, pl, jnp.asarray(prompts), jnp.asarray(resp))
  rs = sampling.response_logits(cs, ref, jnp.asarray(prompts), jnp.asarray(resp))
  rr = sampling.response_logits(cs, rl, jnp.asarray(prompts), jnp.asarray(resp))
  np.testing.assert_allclose(np.asarray(direct_opd.delta_decode_logits(lg, rs, rr, beta)),
                             l_ref + beta * r_ref, atol=1e-3)

  # One Direct-OPD distillation step into the large student on its own rollouts.
  dcfg = direct_opd.DistillConfig(steps=1, prompts_per_step=3, rollouts_per_prompt=2, lr=1e-3)
  init, step = direct_opd.make_step(cl, cs, TASK, dcfg)
  key = jax.random.PRNGKey(5)
  state, m = jax.jit(step)(init(pl, ref, rl), key)
  _, pr, s = jax.jit(lambda p, k: grpo.sample_groups(
      cl, p, TASK, k, dcfg.prompts_per_step, dcfg.rollouts_per_prompt, dcfg.temperature))(pl, key)
  pr, toks, mask = np.asarray(pr), np.asarray(s.tokens), np.asarray(s.mask, np.float64)
  logp = ref_response_logp(LARGE, t_large, pr, toks)
  delta = (ref_response_logp(TINY["qwen3"], t_rl, pr, toks)
           - ref_response_logp(TINY["qwen3"], t_ref, pr, toks))
  w = np.exp(logp) * delta
  # L = -(1/N) sum_t sum_v p_v r_v log p_v ;  rbar = (1/N) sum_t E_p[r_t]; KL to the start = 0.
  np.testing.assert_allclose(float(m["pg_loss"]),
                             -((w * logp).sum(-1) * mask).sum() / mask.sum(), atol=2e-4)
  np.testing.assert_allclose(float(m["rbar"]), (w.sum(-1) * mask).sum() / mask.sum(), atol=2e-4)
  assert abs(float(m["kl_start"])) < 1e-6 and np.isfinite(float(m["loss"]))
  moved = [not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(state.params),
                                                    jax.tree.leaves(pl))]
  assert all(moved)  # every tensor of the student receives the transferred signal
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))
  # alpha follows the paper's rule from the measured rbar.
  np.testing.assert_allclose(float(state.alpha), float(direct_opd.adaptive_alpha(
      jnp.float32(dcfg.alpha_init), m["rbar"], dcfg.alpha_eps, dcfg.alpha_min, dcfg.alpha_max)))


def test_transfer_refuses_a_checkpoint_with_another_vocabulary(tmp_path):
  write_tiny(tmp_path / "small", "qwen3")
  t = hf_tensors(dict(LARGE, vocab_size=40), 0)
  cs, _ = load(tmp_path / "small")
  cl = hf_checkpoint.read_config(str(_write_v40(tmp_path / "big", t)))
  with pytest.raises(ValueError, match="vocab size 40"):
    direct_opd.make_step(cl, cs, TASK, direct_opd.DistillConfig())


def _write_v40(folder, t):
  import json
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "config.json"), "w") as fh:
    json.dump(dict(LARGE, vocab_size=40), fh)
  save_file(t, os.path.join(folder, "model.safetensors"))
  return folder


@pytest.mark.slow
def test_multi_turn_rollout_and_token_ppo_run_a_qwen3_model():
  """The multi-turn rollout draws the same tokens with its KV cache as with a full recompute of
  the window for every token (the GPT model's invariant), here for a Qwen3-style model on the v2
  vocabulary; one token-PPO update on those rollouts is finite."""
  from jaxrl_suite.envs.text import kv_lookup
  from jaxrl_suite.lm import rollout, token_ppo, value
  env = kv_lookup.KVLookup(kv_lookup.EnvParams(num_pairs=4, num_queries=3,
                                               max_steps_in_episode=3))
  cfg = llama.LlamaConfig(name="qwen3_v2", vocab_size=96, tokenizer_version=2, d_model=32,
                          num_heads=4, num_kv_heads=2, head_dim=8, d_ff=64, max_len=128,
                          qk_norm=True)
  params = jitted.init_params(cfg, jax.random.PRNGKey(0))
  runs = [jax.jit(lambda p, k, rc=rollout.RolloutConfig(num_turns=3, window=64, recompute=r):
                  rollout.multi_turn_rollout(cfg, p, env, env.default_params, k, 4, rc))(
                      params, jax.random.PRNGKey(1)) for r in (False, True)]
  np.testing.assert_array_equal(np.asarray(runs[0].tokens), np.asarray(runs[1].tokens))
  assert int((runs[0].kind == rollout.KIND_ACTION).sum()) > 0
  vcfg = value.ValueConfig("shared")
  init, update = token_ppo.make_learner(cfg, vcfg, token_ppo.TokenPPOConfig(epochs=1,
                                                                            num_minibatches=1))
  st = init(params, value.init_value_params(vcfg, cfg, jax.random.PRNGKey(2)), params)
  _, m = jax.jit(update)(st, runs[0], jax.random.PRNGKey(3))
  assert all(np.isfinite(np.asarray(v)).all() for v in jax.tree.leaves(m))
  assert float(m["trainable_tokens"]) > 0 and float(m["entropy"]) > 0
