r"""Benchmark: the KV-cached multi-turn sampler vs recomputing the window for every token, the
token-PPO update, and GPT vs same-size Llama / Qwen3 forward passes (what is timed and why:
jaxrl_suite/lm/bench_workloads.py), model FAMILY_V2[--model], at each batch in `--batches`.

  python -m experiments.bench_lm [--batches 1,64,512] [--model xs] [--quick]
                                 [--sections sampler,arch]
Sections: sampler (1. cached / recompute tok/s, 2. token-PPO train and window tok/s), arch (3.
forward tok/s over `--window` tokens and the ratio to gpt). Not timed in tests.
"""

from __future__ import annotations

import os
import sys

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


def bench_architectures(cfg, batches, length: int, reps: int) -> None:
  """Section 3: forward tok/s of the GPT model and its Llama / Qwen3 counterparts."""
  import jax
  from jaxrl_suite.lm import bench_workloads as W
  from jaxrl_suite.lm import model as lm_model
  models = {"gpt": cfg, **W.same_size_llamas(cfg)}
  params = {k: lm_model.init_params(c, jax.random.PRNGKey(0)) for k, c in models.items()}
  print(f"\nforward pass over {length} tokens (logits out), tok/s and ratio to gpt; params: "
        + ", ".join(f"{k} {lm_model.num_params(p):,}" for k, p in params.items()))
  print(f"{'batch':>6} " + " ".join(f"{k + ' tok/s':>13}" for k in models) + " "
        + " ".join(f"{k + '/gpt':>11}" for k in models if k != "gpt"))
  for b in batches:
    rate = W.forward_rates(models, params, b, length, reps)
    print(f"{b:>6} " + " ".join(f"{rate[k]:>13,.0f}" for k in models) + " "
          + " ".join(f"{rate[k] / rate['gpt']:>10.2f}x" for k in models if k != "gpt"))


def main(argv):
  del argv
  import jax
  from jaxrl_suite.lm import bench_workloads as W
  from jaxrl_suite.lm import model as lm_model
  from jaxrl_suite.lm import value as lm_value

  batches = [int(b) for b in _BATCHES.value]
  turns, window, reps = _TURNS.value, _WINDOW.value, _REPS.value
  if _QUICK.value:
    batches, turns, reps = [1, 8], 6, 1
  env, ep = W.kv_lookup_env(turns)
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
      res[recompute], ro = W.sampler_rate(cfg, params, env, ep, b, turns, window, recompute, reps)
    ctx = float(ro.seg_len.sum(-1).mean())
    train_tok, win_tok = W.token_ppo_rates(cfg, vcfg, params, vparams, ro, reps)
    rec = res.get(True, float("nan"))
    print(f"{b:>6} {res[False]:>14,.0f} {rec:>16,.0f} {res[False] / rec:>8.1f}x {ctx:>10.0f} "
          f"{train_tok:>12,.0f} {win_tok:>13,.0f}")
  if "arch" in _SECTIONS.value:
    bench_architectures(cfg, batches, window, reps)


if __name__ == "__main__":
  app.run(main)
