"""The CuRe study's stages on SceneCap: captioner, rewards, held-out evaluator, GRPO per reward.

  build(config) -> (env, env params, captioner LMConfig, scorer LMConfig)
  pretrain_captioner(config, env, params, cap_cfg, workdir) -> captioner params (a stage of the
      workdir's stage cache, core.stage_cache)
  reward_fns(config, env, scorers, names) -> {reward name: fn(x, caption) -> scalar}
  make_evaluator(config, env, params, cap_cfg, fns) -> jit f(params [S, ...], ref, keys [S])
      -> {metric: [S]}
  run_rewards(config, env, params, cap_cfg, start, fns, evaluator, names)
      -> {name: {"curves": {metric: [S, n_eval]}, "train": {metric: [S, steps]}, "wall_s"}}

S = config.num_seeds and n_eval = grpo_steps // eval_every + 1 (`eval_steps`, step 0 included).
Every reward gets the identical GRPO run (`lm.grpo.make_step`: same steps, prompts, group, lr,
KL coefficient, seeds, held-out scenes and evaluation keys), so seed i of every run is paired.
The evaluator's metrics: "proxy_<reward>" for every reward in `fns`, the exact scene-graph
scores EXACT (never a training reward), "kl" and "sqrt_kl" to the start.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.text import claims
from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.lm import grpo as lm_grpo
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import reward_models as rmod
from jaxrl_suite.lm import sampling

try:  # tqdm is a project dependency, but keep the library importable without it.
  from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
  def tqdm(x, **_):
    return x

EXACT = ("precision", "recall", "f1", "claims", "false_claims", "duplicates", "malformed",
         "length")


def build(config):
  """(SceneCap env, its params, the captioner's LMConfig, the scorers' LMConfig)."""
  env = sc.SceneCap(**config.env.to_dict())
  params = sc.SceneCapParams(**config.env_params.to_dict())
  c = config.captioner
  cap_cfg = rmod.v2_config("captioner", d_model=c.d_model, num_layers=c.num_layers,
                           num_heads=c.num_heads, d_ff=4 * c.d_model,
                           max_len=env.prompt_len + env.response_len)
  s = config.scorer
  scorer_cfg = rmod.scorer_config(env, s.d_model, s.num_layers, s.num_heads)
  return env, params, cap_cfg, scorer_cfg


def pretrain_captioner(config, env, params, cap_cfg, workdir: str, progress: bool = True):
  """The start of every GRPO run: the captioner pretrained on the noisy-caption corpus, stage
  "cure/captioner" of the workdir's stage cache, keyed by everything that shapes it."""
  task = rmod.CaptionTask(env, params, rmod.make_reward("exact_f1", env))
  key = {"env": config.env, "env_params": config.env_params, "model": dataclasses.asdict(cap_cfg),
         "steps": config.pretrain_steps, "batch": config.pretrain_batch,
         "lr": config.pretrain_lr, "seed": config.seed}

  def make():
    p, _ = lm_pretrain.pretrain(cap_cfg, [task], [1.0],
                                jax.random.fold_in(jax.random.PRNGKey(config.seed), 1),
                                config.pretrain_steps, config.pretrain_batch,
                                config.pretrain_lr, chunk=max(config.pretrain_steps // 10, 1),
                                progress=progress)
    return p, {}

  return lm_pretrain.cached_params("cure/captioner", key, make, workdir)[0]


def noisy_name(eps) -> str:
  """The reward name of claim-F1 under the noisy exact verifier with false-accept rate eps."""
  return f"claim_f1_noisy_eps{float(eps):g}"


def reward_fns(config, env, scorers: dict, names) -> dict:
  """Every reward by name: `names` (the config's registered training rewards, built by
  `rmod.make_reward` with the frozen `scorers`) plus one noisy-verifier claim-F1 per
  config.noise_eps_grpo (false-reject rate config.noise_reject)."""
  kw = dict(verifier=scorers["verifier"], rm=scorers["holistic_rm"],
            reader=scorers["qa_reader"], extractor=scorers["salience"], fluency=config.fluency,
            beta=config.beta)
  out = {k: rmod.make_reward(k, env, **kw) for k in names}
  for e in config.noise_eps_grpo:
    out[noisy_name(e)] = rmod.make_reward("claim_f1_noisy", env, eps=float(e),
                                          reject=config.noise_reject, noise_seed=config.seed)
  return out


def eval_steps(config) -> np.ndarray:
  """[n_eval] GRPO steps of the evaluation points: 0, eval_every, ..., grpo_steps."""
  return np.arange(config.grpo_steps // config.eval_every + 1) * config.eval_every


def make_evaluator(config, env, params, cap_cfg, fns: dict):
  """jit f(params [S,...], ref, key [S]) -> {metric: [S]} on config.eval_scenes fixed held-out
  scenes (temperature-1 samples); `ref` is the start, for the sequence KL."""
  task = rmod.CaptionTask(env, params, fns["claim_f1"])
  ops = task.sample_train(jax.random.PRNGKey(10_000 + config.seed), config.eval_scenes)
  prompts = task.prompts(ops)

  def one(p, ref, key):
    s = sampling.sample(sampling.lm_stepper(cap_cfg, p), prompts, key, env.response_len)
    ref_lp = lm_model.token_log_probs(
        sampling.response_logits(cap_cfg, ref, prompts, s.tokens), s.tokens)
    kl = ((s.log_probs - ref_lp) * s.mask).sum(1).mean()
    out = {"kl": kl, "sqrt_kl": jnp.sqrt(jnp.maximum(kl, 0.0))}
    for name, fn in fns.items():
      out["proxy_" + name] = jax.vmap(fn)(ops, s.tokens).mean()
    ex = jax.vmap(lambda x, c: claims.exact_scores(env, c, *env.fact_masks(env.unpack(x))))(
        ops, s.tokens)
    ex["false_claims"] = ex["claims"] * (1.0 - ex["precision"])
    out.update({k: ex[k].mean() for k in EXACT})
    return out

  return jax.jit(jax.vmap(one, in_axes=(0, None, 0)))


def _grpo_segment(config, env, params, cap_cfg, start, reward_fn, name):
  """(initial state [S, ...], jit segment(state, t0) -> (state, {train metric: [E, S]}),
  evaluation keys [S]): eval_every GRPO steps of every seed, step t keyed by fold_in(seed, t)."""
  task = rmod.CaptionTask(env, params, reward_fn, name=name)
  gcfg = lm_grpo.GRPOConfig(steps=config.grpo_steps, prompts_per_step=config.grpo_prompts,
                            group_size=config.grpo_group, lr=config.grpo_lr,
                            kl_coef=config.grpo_kl)
  init, step = lm_grpo.make_step(cap_cfg, task, gcfg)
  S, E = config.num_seeds, config.eval_every
  base_key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 1000)
  keys = jax.random.split(base_key, S)   # the same seeds for every reward
  eval_keys = jax.random.split(jax.random.fold_in(base_key, 1), S)
  stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (S,) + x.shape), start)
  state = jax.vmap(init)(stacked, stacked)

  @jax.jit
  def segment(state, t0):
    def body(st, t):
      ks = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
      return jax.vmap(step)(st, ks)
    return jax.lax.scan(body, state, t0 + jnp.arange(E))

  return state, segment, eval_keys


def run_grpo(config, env, params, cap_cfg, start, reward_fn, evaluator, name,
             progress: bool = True):
  """Identical GRPO (lm.grpo.make_step) for num_seeds seeds; evaluates every eval_every steps.
  Returns ({metric: [S, n_eval]}, {train metric: [S, steps]}, wall seconds)."""
  state, segment, eval_keys = _grpo_segment(config, env, params, cap_cfg, start, reward_fn,
                                            name)
  E = config.eval_every
  t0 = time.time()
  curves, train = [evaluator(state[0], start, eval_keys)], []
  for i in tqdm(range(config.grpo_steps // E), desc=f"grpo {name}", disable=not progress,
                leave=False):
    state, m = segment(state, jnp.int32(i * E))
    train.append(jax.tree.map(np.asarray, m))
    curves.append(evaluator(state[0], start,
                            jax.vmap(lambda k: jax.random.fold_in(k, i + 1))(eval_keys)))
  curves = {k: np.stack([np.asarray(c[k]) for c in curves], 1) for k in curves[0]}
  train = {k: np.concatenate([t[k] for t in train], 0).T for k in train[0]}
  return curves, train, time.time() - t0


def run_rewards(config, env, params, cap_cfg, start, fns: dict, evaluator, names,
                progress: bool = True) -> dict:
  """{name: {"curves", "train", "wall_s"}}: `run_grpo` under fns[name] for every name, in order."""
  runs = {}
  for name in names:
    curves, train, wall = run_grpo(config, env, params, cap_cfg, start, fns[name], evaluator,
                                   name, progress)
    runs[name] = {"curves": curves, "train": train, "wall_s": wall}
  return runs
