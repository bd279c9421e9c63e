"""The CompactionRL study's measuring stages on StreamLedger-v0 (no caching, no verdicts).

  setup(config) -> (env, env params, LMConfig)
  seed_keys(config) -> [S] keys (seed s: PRNGKey(config.seed + s))
  warm_start_seed(config, env, p, cfg, s) -> {"params", "loss_last"}     seed s's warm start
  train_variant(config, env, p, cfg, params0, variant, spec, keys, is_flat) -> (params [S],
      vparams [S], {"curves": {metric: [S, T]}, "critic", "sweep": {budgets [K], scores [K, S]},
      "wall"})
  evaluate(...) -> {metric: [S]};  eval_rows(...) -> {str(H): {metric: [S]}}
  grad_mass(...) -> {share: [S]};  resplit_gaps(config) -> {"token"|"segment": {loss, grad: [S]}}

A variant's `spec` is its registered (harness, norm, advantage, gae_across_segments) tuple
(configs/compaction.py VARIANTS, which lm/ may not import: the caller passes the tuple). The
flatness rule is repro's, passed in as is_flat(scores [K, S], budgets [K]) -> bool.
"""

from __future__ import annotations

import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.text import stream_ledger as sl
from jaxrl_suite.lm import compaction as comp
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import token_ppo
from jaxrl_suite.lm import value as lm_value

# Key streams per seed (jax.random.fold_in of the seed's key): RL sampling is shared by every
# variant; evaluation and validation episodes have their own keys, used for nothing else.
K_VALUE, K_EVAL, K_VAL, K_MASS = 1, 3, 4, 77
CURVE_NAMES = ("return", "windows", "invalid", "clip_frac", "approx_kl", "segment_bias",
               "vf_loss")


def setup(config):
  """(env, env params at the shortest training horizon, LMConfig of the tiny decoder)."""
  env = sl.StreamLedger(max_events=config.env.max_events,
                        max_events_per_obs=config.env.events_per_obs)
  p = sl.EnvParams(num_events=min(config.train_events), num_items=config.env.num_items,
                   events_per_obs=config.env.events_per_obs, max_amount=config.env.max_amount,
                   mid_query_prob=config.env.mid_query_prob, mid_reward=config.env.mid_reward,
                   final_reward=config.env.final_reward,
                   max_steps_in_episode=4 * config.env.max_events)
  sl.validate_params(p, env)
  m = config.model
  cfg = lm_model.LMConfig("compaction", vocab_size=sl.V.size, d_model=m.d_model,
                          num_layers=m.num_layers, num_heads=m.num_heads, d_ff=m.d_ff,
                          max_len=m.max_len, tokenizer_version=2)
  return env, p, cfg


def seed_keys(config):
  """[S] keys, one per seed (seed s: PRNGKey(config.seed + s))."""
  return jnp.stack([jax.random.PRNGKey(config.seed + s) for s in range(config.num_seeds)])


def warm_start_seed(config, env, p, cfg, s: int, progress=True) -> dict:
  """Seed s's warm start: pretraining on imperfect-summary windows from its own key.
  Returns {"params", "loss_last": mean loss of the last 20 steps}."""
  pp, loss = comp.warm_start(
      cfg, env, p, jax.random.fold_in(jax.random.PRNGKey(config.seed + s), 7),
      config.warm_steps, config.warm_batch, config.warm_lr, max_turns=config.warm_turns,
      mix=comp.CorpusMix(**config.corpus), progress=progress, row_len=config.warm_row_len)
  return {"params": pp, "loss_last": float(np.mean(np.asarray(loss)[-20:]))}


def ppo_config(config, spec):
  """(harness, TokenPPOConfig) of a variant's (harness, norm, advantage, across) spec."""
  harness, norm, adv, across = spec
  return harness, token_ppo.TokenPPOConfig(
      epochs=config.epochs, num_minibatches=config.num_minibatches, lr=config.lr,
      critic_lr=config.critic_lr, clip_eps=config.clip_eps, gamma=config.gamma, lam=config.lam,
      gae_across_segments=across, advantage=adv,
      group_size=config.group_size if adv == "grpo" else 1,
      normalize_advantages=adv == "gae", norm=norm, critic_warmup_steps=config.critic_warmup)


def make_trainer(config, env, p, cfg, spec, num_seeds):
  """(init over seeds, vstep over seeds, vcfg) of one variant: one compiled program for every
  training horizon (the rollout has the turns of the longest one)."""
  harness, pcfg = ppo_config(config, spec)
  rcfg = comp.rollout_config(harness, env, p.replace(num_events=max(config.train_events)),
                             config.window, config.temperature)
  vcfg = lm_value.ValueConfig("shared")
  init, step = comp.make_mixed_train_step(cfg, vcfg, pcfg, env, p, rcfg, config.num_envs,
                                          config.train_events)
  names = CURVE_NAMES + tuple(f"{q}_H{h}" for q in ("return", "windows")
                              for h in config.train_events)

  def vstep(st, k):
    st, m = jax.vmap(step)(st, jax.random.split(k, num_seeds))
    return st, {n: m[n] for n in names}

  return jax.vmap(init), vstep, vcfg


def sweep_budgets(config):
  """The budget sweep: config.budgets, then doublings up to config.max_budget."""
  b = list(config.budgets)
  while b[-1] < config.max_budget:
    b.append(2 * b[-1])
  return b


def _critic_warmup(config, vstep, state, rl_key, variant, progress):
  """`critic_warmup` value-only iterations; the policy does not move (warm-start rollouts)."""
  if not config.critic_warmup:
    return state, {}
  state, critic = lm_pretrain.run_chunked(
      vstep, state, jax.random.fold_in(rl_key, 0), config.critic_warmup, config.chunk,
      f"critic warm-up {variant}", progress)
  return state, {k: np.asarray(critic[k]).T for k in ("vf_loss", "return")}


def train_variant(config, env, p, cfg, params0, variant, spec, keys,
                  is_flat: Callable[[np.ndarray, list], bool], progress=True):
  """Critic warm-up, then RL over the budget sweep until is_flat on validation episodes.

  params0: the warm starts stacked [S, ...]; keys [S] the seeds' keys. Returns (params [S],
  vparams [S], {"curves": {metric: [S, T]}, "critic": {metric: [S, warm-up]}, "sweep":
  {"budgets": [K], "scores": [K, S]}, "wall": s}).
  """
  init, vstep, vcfg = make_trainer(config, env, p, cfg, spec, config.num_seeds)
  vparams = jax.vmap(lambda k: lm_value.init_value_params(
      vcfg, cfg, jax.random.fold_in(k, K_VALUE)))(keys)
  state = init(params0, vparams, params0)
  rl_key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 5)   # every variant: same keys
  t0 = time.time()
  state, critic = _critic_warmup(config, vstep, state, rl_key, variant, progress)
  val_keys = jax.vmap(lambda k: jax.random.fold_in(k, K_VAL))(keys)
  done, budgets, scores, parts = 0, [], [], []
  for b in sweep_budgets(config):
    state, cur = lm_pretrain.run_chunked(vstep, state, jax.random.fold_in(rl_key, b),
                                         b - done, config.chunk, f"RL {variant} to {b}",
                                         progress)
    parts.append(cur)
    done = b
    val = evaluate(config, env, p, cfg, state[0].params, spec[0], config.eval_horizon,
                   val_keys, config.val_episodes, warm=params0)
    budgets.append(b)
    scores.append(val["final_acc"])
    if len(budgets) >= len(config.budgets) and is_flat(np.asarray(scores), budgets):
      break   # flat (or degrading) on validation: more budget would not change the answer
  curves = {k: np.concatenate([np.asarray(c[k]) for c in parts]).T for k in parts[0]}
  out = {"curves": curves, "critic": critic, "wall": time.time() - t0,
         "sweep": {"budgets": np.asarray(budgets, np.float64),
                   "scores": np.asarray(scores, np.float64)}}
  return state[0].params, state[0].vparams, out


_EVAL_FNS: dict = {}


def _eval_fn(config, env, p, cfg, harness):
  """The jitted batch evaluation of a harness: sums and counts of finite per-episode metrics,
  f(params, summary_params, env_params, key).

  One compiled program per harness serves every horizon, variant and seed (H and the params
  are arguments; the rollout has the turns of the longest horizon of that harness). The frozen
  harness evaluates as it trains: answers from the policy, summaries sampled from
  summary_params (the seed's warm start), never from the policy."""
  frozen = harness == "frozen"
  h = "compaction" if frozen else harness   # the compaction rollout (no gradients here)
  horizons = config.full_context_events if h == "full" else config.eval_events
  key = (harness, config.eval_batch, config.window, config.temperature, tuple(horizons))
  if key not in _EVAL_FNS:
    rcfg = comp.rollout_config(h, env, p.replace(num_events=max(horizons)), config.window,
                               config.temperature, max_len=config.model.max_len)

    def one(pp, sp, pe, k):
      ro = lm_rollout.multi_turn_rollout(cfg, pp, env, pe, k, config.eval_batch, rcfg,
                                         summary_params=sp if frozen else None)
      m = comp.episode_metrics(ro, h == "agent", config.env.num_items)
      return {n: (jnp.nansum(v), jnp.isfinite(v).sum()) for n, v in m.items()}

    _EVAL_FNS[key] = jax.jit(one)
  return _EVAL_FNS[key]


def pool_means(parts: list) -> dict:
  """{metric: sum / count} over batches [{metric: (sum, count)}]; NaN where no count."""
  tot = {n: (sum(float(q[n][0]) for q in parts), sum(int(q[n][1]) for q in parts))
         for n in parts[0]}
  return {n: t / c if c else float("nan") for n, (t, c) in tot.items()}


def evaluate(config, env, p, cfg, params, harness, events, keys, episodes, warm=None):
  """Per-seed means [S] of each episode metric over `episodes` episodes at horizon `events`.

  params: stacked over seeds [S, ...]; warm: the warm starts stacked [S, ...], which write the
  frozen harness's summaries (required for it, unused otherwise); keys [S]: seed s's episodes
  are drawn from
  fold_in(keys[s], events) in batches of config.eval_batch. Seeds run one after the other: vmap
  would turn the rollout's compaction `lax.cond` into a select computing both branches.
  A metric with no finite value in a seed (fidelity without summaries) is NaN there."""
  if harness == "frozen" and warm is None:
    raise ValueError("the frozen harness needs `warm` (the summariser's parameters)")
  fn = _eval_fn(config, env, p, cfg, harness)
  pe = jax.tree.map(jnp.asarray, p.replace(num_events=events))
  out = []
  for s in range(keys.shape[0]):
    pp = jax.tree.map(lambda x: x[s], params)
    sp = pp if warm is None else jax.tree.map(lambda x: x[s], warm)
    k = jax.random.fold_in(keys[s], events)
    out.append(pool_means([fn(pp, sp, pe, jax.random.fold_in(k, i))
                           for i in range(episodes // config.eval_batch)]))
  return {n: np.asarray([o[n] for o in out], np.float64) for n in out[0]}


def eval_rows(config, env, p, cfg, params, harness, horizons, keys, warm=None) -> dict:
  """{str(H): per-seed metrics} on the evaluation episodes (stage values need str keys);
  warm: as in `evaluate`."""
  eval_keys = jax.vmap(lambda k: jax.random.fold_in(k, K_EVAL))(keys)
  return {str(h): evaluate(config, env, p, cfg, params, harness, h, eval_keys,
                           config.eval_episodes, warm) for h in horizons}


def grad_mass(config, env, p, cfg, params, vparams, spec, keys):
  """Per-seed gradient-mass shares [S] (comp.gradient_mass) on one fresh batch per seed."""
  harness, pcfg = ppo_config(config, spec)
  rcfg = comp.rollout_config(harness, env, p, config.window, config.temperature)
  vcfg = lm_value.ValueConfig("shared")

  def one(pp, vp, k):
    ro = lm_rollout.multi_turn_rollout(cfg, pp, env, p, jax.random.fold_in(k, K_MASS),
                                       config.num_envs, rcfg, group_size=pcfg.group_size)
    return comp.gradient_mass(pcfg, cfg, vcfg, pp, vp, ro)

  return {k: np.asarray(v) for k, v in jax.jit(jax.vmap(one))(params, vparams, keys).items()}


def resplit_gaps(config) -> dict:
  """Per-seed max |dL| over random re-splits (comp.resegmentation_gap), token and segment."""
  gaps = [comp.resegmentation_gap(jax.random.fold_in(jax.random.PRNGKey(config.seed + s), 9))
          for s in range(config.num_seeds)]
  return {n: {q: np.asarray([g[n][q] for g in gaps]) for q in ("loss", "grad")}
          for n in ("token", "segment")}


def stack_seeds(params: list):
  """Per-seed param trees -> one tree stacked [S, ...]."""
  return jax.tree.map(lambda *x: jnp.stack([jnp.asarray(a) for a in x]), *params)
