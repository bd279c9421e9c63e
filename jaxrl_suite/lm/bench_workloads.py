"""The LM speed benchmark's workloads (experiments/bench_lm.py): sampler, token-PPO, architectures.

  1. `sampler_rate`: `lm.rollout.multi_turn_rollout` on KVLookup (`kv_lookup_env`: a 4-pair
     table, so the window fills to ~4 * turns + 20 tokens), sampled (policy) tokens per second
     with the KV cache (one decode step per token, observation blocks prefilled in one call) or
     with `RolloutConfig(recompute=True)` (a full causal pass over the window for every token).
     Both draw the same tokens (tested), so the ratio is the cache's speed-up.
  2. `token_ppo_rates`: `lm.token_ppo.make_learner(...).update` on such a rollout: trainable
     tokens per second (tokens x epochs / update time) and window tokens per second.
  3. `forward_rates`: a full causal forward pass over `length` tokens (jitted
     `DecoderLM.apply`, logits out) of a GPT config and of `same_size_llamas` of it, tokens per
     second, the models timed in turn within each round (core/bench.py: load drifting on a
     shared CPU hits every model alike).
Every figure is the best of `reps` calls after a compile-and-warm call (best-of, not median: on
a shared CPU the minimum is the least contaminated by other processes).
"""

from __future__ import annotations

import jax

from jaxrl_suite.core import bench
from jaxrl_suite.envs.text import kv_lookup
from jaxrl_suite.lm import llama
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import token_ppo


def kv_lookup_env(turns: int):
  """(env, env params) of KVLookup with 4 pairs and `turns` queries per episode."""
  env = kv_lookup.KVLookup(kv_lookup.EnvParams(num_pairs=4, num_queries=turns,
                                               max_steps_in_episode=turns))
  return env, env.default_params


def sampler_rate(cfg, params, env, ep, batch: int, turns: int, window: int, recompute: bool,
                 reps: int):
  """(sampled tokens per second, the rollout) of `batch` trajectories of `turns` turns in a
  `window`-slot context, KV-cached or recomputing the window for every token."""
  rcfg = lm_rollout.RolloutConfig(num_turns=turns, window=window, recompute=recompute)
  run = jax.jit(lambda p, k: lm_rollout.multi_turn_rollout(cfg, p, env, ep, k, batch, rcfg))
  ro = run(params, jax.random.PRNGKey(2))
  sampled = int((ro.kind == lm_rollout.KIND_ACTION).sum())
  return sampled / bench.best_of(lambda: run(params, jax.random.PRNGKey(2)), reps).best_wall, ro


def token_ppo_rates(cfg, vcfg, params, vparams, ro, reps: int) -> tuple[float, float]:
  """(trainable tokens per second, window tokens per second) of one token-PPO update (2 epochs;
  4 minibatches from a batch of 4) on rollout `ro`, both counted over the epochs."""
  b = ro.tokens.shape[0]
  pcfg = token_ppo.TokenPPOConfig(epochs=2, num_minibatches=1 if b < 4 else 4)
  init, update = token_ppo.make_learner(cfg, vcfg, pcfg)
  st = init(params, vparams, params)
  upd = jax.jit(update)
  t = bench.best_of(lambda: upd(st, ro, jax.random.PRNGKey(3)), reps).best_wall
  return float(ro.trainable.sum()) * pcfg.epochs / t, float(ro.tokens.size) * pcfg.epochs / t


def same_size_llamas(cfg) -> dict:
  """{"llama", "qwen3"}: `lm.llama.LlamaConfig`s of the GPT config `cfg`'s size (same width,
  depth, heads and head dimension; SwiGLU width 2/3 d_ff so the MLP has the same parameters; no
  biases; untied head); qwen3 adds QK-norm."""
  common = dict(vocab_size=cfg.vocab_size, d_model=cfg.d_model, num_layers=cfg.num_layers,
                num_heads=cfg.num_heads, num_kv_heads=cfg.num_heads,
                head_dim=cfg.d_model // cfg.num_heads, d_ff=round(2 * cfg.d_ff / 3),
                max_len=cfg.max_len, tokenizer_version=cfg.tokenizer_version)
  return {"llama": llama.LlamaConfig(name=f"llama_{cfg.name}", **common),
          "qwen3": llama.LlamaConfig(name=f"qwen3_{cfg.name}", qk_norm=True, **common)}


def forward_rates(models: dict, params: dict, batch: int, length: int, reps: int) -> dict:
  """{name: tokens per second} of a forward pass of each of `models` ({name: config}) with
  `params` ({name: params}) over (batch, length) random tokens, timed round robin."""
  vocab = next(iter(models.values())).vocab_size
  tokens = jax.random.randint(jax.random.PRNGKey(batch), (batch, length), 0, vocab)
  fwd = {k: jax.jit(lambda p, t, c=c: lm_model.DecoderLM(c).apply({"params": p}, t)[0])
         for k, c in models.items()}
  t = bench.interleaved({k: (lambda k=k: fwd[k](params[k], tokens)) for k in models}, reps)
  return {k: batch * length / t[k].best_wall for k in models}
