r"""Benchmark: the KV-cached multi-turn sampler vs recomputing the window for every token, and the
token-PPO update.

  1. `lm.rollout.multi_turn_rollout` on KVLookup with `--turns` queries (a 4-pair table, so the
     window fills to ~4 * turns + 20 tokens of a `--window`-slot context), model FAMILY_V2[--model],
     at each batch in `--batches`: sampled (policy) tokens per second with the KV cache (one
     decode step per token, observation blocks prefilled in one call) and with
     `RolloutConfig(recompute=True)` (a full causal pass over the window for every token). Both
     draw the same tokens (tested), so the ratio is the cache's speed-up.
  2. `lm.token_ppo.make_learner(...).update` on those rollouts: trainable tokens per second
     (tokens x epochs / update time) and window tokens per second, at the same batches.
  3. Architectures: a full causal forward pass over `--window` tokens (jitted `DecoderLM.apply`,
     logits out) of FAMILY_V2[--model] (GPT: learned positions, LayerNorm, GELU MLP) and of a
     Llama-style and a Qwen3-style `lm.llama.LlamaConfig` of the same size (same width, depth,
     heads and head dimension; SwiGLU width 2/3 d_ff so the MLP has the same parameters; no
     biases; untied head), at each batch: tokens per second and the ratio to the GPT model
     (best of `--reps` rounds, the three models timed in turn within each round).

Wall-clock: best of `--reps` after a compile-and-warm call (best-of, not median: on a shared CPU
the minimum is the least contaminated by other processes). Run:
  python -m experiments.bench_lm [--batches 1,64,512] [--model xs] [--quick]
                                 [--sections sampler,arch]
Not timed in tests.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

_BATCHES = flags.DEFINE_list("batches", ["1", "64", "512"], "Trajectories per rollout.")
_MODEL = flags.DEFINE_string("model", "xs", "FAMILY_V2 member.")
_TURNS = flags.DEFINE_integer("turns", 24, "Turns (queries) per trajectory.")
_WINDOW = flags.DEFINE_integer("window", 128, "Context window W (<= the model's max_len).")
_REPS = flags.DEFINE_integer("reps", 3, "Timed repetitions (best of).")
_QUICK = flags.DEFINE_bool("quick", False, "Tiny sizes (a smoke run: batches 1,8, 6 turns).")
_SECTIONS = flags.DEFINE_list("sections", ["sampler", "arch"],
                               "sampler: sections 1-2 above; arch: section 3.")
_SKIP_RECOMPUTE_ABOVE = flags.DEFINE_integer(
    "skip_recompute_above", 100_000, "Skip the recompute baseline above this batch.")


def best_time(fn, *args, reps: int = 3) -> float:
  """Best wall-clock seconds of `reps` calls after one compile-and-warm call."""
  import jax
  jax.block_until_ready(fn(*args))
  ts = []
  for _ in range(reps):
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    ts.append(time.perf_counter() - t)
  return float(min(ts))


def same_size_llamas(cfg):
  """Llama- and Qwen3-style configs of the GPT config `cfg`'s size (see the module doc)."""
  from jaxrl_suite.lm import llama
  common = dict(vocab_size=cfg.vocab_size, d_model=cfg.d_model, num_layers=cfg.num_layers,
                num_heads=cfg.num_heads, num_kv_heads=cfg.num_heads,
                head_dim=cfg.d_model // cfg.num_heads, d_ff=round(2 * cfg.d_ff / 3),
                max_len=cfg.max_len, tokenizer_version=cfg.tokenizer_version)
  return {"llama": llama.LlamaConfig(name=f"llama_{cfg.name}", **common),
          "qwen3": llama.LlamaConfig(name=f"qwen3_{cfg.name}", qk_norm=True, **common)}


def bench_architectures(cfg, batches, length: int, reps: int) -> None:
  """Section 3: forward tokens/s of the GPT model and its Llama / Qwen3 counterparts."""
  import jax
  import jax.numpy as jnp
  from jaxrl_suite.lm import model as lm_model
  models = {"gpt": cfg, **same_size_llamas(cfg)}
  params = {k: lm_model.init_params(c, jax.random.PRNGKey(0)) for k, c in models.items()}
  print(f"\nforward pass over {length} tokens (logits out), tok/s and ratio to gpt; params: "
        + ", ".join(f"{k} {lm_model.num_params(p):,}" for k, p in params.items()))
  print(f"{'batch':>6} " + " ".join(f"{k + ' tok/s':>13}" for k in models) + " "
        + " ".join(f"{k + '/gpt':>11}" for k in models if k != "gpt"))
  for b in batches:
    tokens = jax.random.randint(jax.random.PRNGKey(b), (b, length), 0, cfg.vocab_size)
    fwd = {k: jax.jit(lambda p, t, c=c: lm_model.DecoderLM(c).apply({"params": p}, t)[0])
           for k, c in models.items()}
    best = {k: float("inf") for k in models}
    for k in models:  # compile and warm
      jax.block_until_ready(fwd[k](params[k], tokens))
    for _ in range(reps):  # round robin, so load drifting on a shared CPU hits every model
      for k in models:
        t = time.perf_counter()
        jax.block_until_ready(fwd[k](params[k], tokens))
        best[k] = min(best[k], time.perf_counter() - t)
    rate = {k: b * length / best[k] for k in models}
    print(f"{b:>6} " + " ".join(f"{rate[k]:>13,.0f}" for k in models) + " "
          + " ".join(f"{rate[k] / rate['gpt']:>10.2f}x" for k in models if k != "gpt"))


def main(argv):
  del argv
  import jax
  from jaxrl_suite.envs.text import kv_lookup
  from jaxrl_suite.lm import model as lm_model
  from jaxrl_suite.lm import rollout as lm_rollout
  from jaxrl_suite.lm import token_ppo
  from jaxrl_suite.lm import value as lm_value

  batches = [int(b) for b in _BATCHES.value]
  turns, window, reps = _TURNS.value, _WINDOW.value, _REPS.value
  if _QUICK.value:
    batches, turns, reps = [1, 8], 6, 1
  env = kv_lookup.KVLookup(kv_lookup.EnvParams(num_pairs=4, num_queries=turns,
                                               max_steps_in_episode=turns))
  ep = env.default_params
  cfg = lm_model.FAMILY_V2[_MODEL.value]
  if "sampler" not in _SECTIONS.value:
    bench_architectures(cfg, batches, window, reps)
    return
  params = lm_model.init_params(cfg, jax.random.PRNGKey(0))
  vcfg = lm_value.ValueConfig("shared")
  vparams = lm_value.init_value_params(vcfg, cfg, jax.random.PRNGKey(1))
  print(f"device: {jax.devices()[0].device_kind}; model {cfg.name} "
        f"({lm_model.num_params(params):,} params), KVLookup {turns} turns, window {window}")
  print(f"{'batch':>6} {'cached tok/s':>14} {'recompute tok/s':>16} {'speed-up':>9} "
        f"{'ctx tokens':>10} {'train tok/s':>12} {'window tok/s':>13}")
  for b in batches:
    res = {}
    for recompute in (False, True):
      if recompute and b > _SKIP_RECOMPUTE_ABOVE.value:
        continue
      rcfg = lm_rollout.RolloutConfig(num_turns=turns, window=window, recompute=recompute)
      run = jax.jit(lambda p, k, rcfg=rcfg, b=b: lm_rollout.multi_turn_rollout(
          cfg, p, env, ep, k, b, rcfg))
      ro = run(params, jax.random.PRNGKey(2))
      sampled = int((ro.kind == lm_rollout.KIND_ACTION).sum())
      res[recompute] = sampled / best_time(run, params, jax.random.PRNGKey(2), reps=reps)
    ctx = float(ro.seg_len.sum(-1).mean())
    pcfg = token_ppo.TokenPPOConfig(epochs=2, num_minibatches=1 if b < 4 else 4)
    init, update = token_ppo.make_learner(cfg, vcfg, pcfg)
    st = init(params, vparams, params)
    upd = jax.jit(update)
    t = best_time(upd, st, ro, jax.random.PRNGKey(3), reps=reps)
    train_tok = float(ro.trainable.sum()) * pcfg.epochs / t
    win_tok = float(ro.tokens.size) * pcfg.epochs / t
    rec = res.get(True, float("nan"))
    print(f"{b:>6} {res[False]:>14,.0f} {rec:>16,.0f} {res[False] / rec:>8.1f}x {ctx:>10.0f} "
          f"{train_tok:>12,.0f} {win_tok:>13,.0f}")
  if "arch" in _SECTIONS.value:
    bench_architectures(cfg, batches, window, reps)


if __name__ == "__main__":
  app.run(main)
