"""The STAPO study's measuring stages on GoalHouse-v0: warm start, detection, lr sweep, training.

  setup(config) -> (env, env params, LMConfig, RolloutConfig)
  warm_start(config, env, p, cfg, workdir, key) -> (params, info)   a stage of the workdir's
      stage cache (core.stage_cache "stapo/warm_start")
  detection(config, env, p, cfg, rcfg, params, key, ci) -> {"per_seed": [rows], metric: ci(...)}
  lr_sweep(progs, params, key, timing, pick, workdir) -> ({method: {lr: success [S]}},
      {method: choice})
  train_until_flat(progs, params, lrs, key, timing, last_doubling, workdir) -> {"val", "ev",
      "curves", "budgets", "flat", "start"}   (shapes on the function)

With a workdir, every sweep run (method, lr) and every training segment (method, budget) is a
stage of the workdir's stage cache ("stapo/sweep/...", "stapo/train/..."), keyed by the config
fields it reads (`_NOT_READ`) and the library: a run stopped after hours resumes from its last
finished segment with identical data (the stored train state is read back, as on a first run),
a finished run is reread in seconds, and a larger max_budget extends a stored run. The sweep's
cells, and each segment's methods, are one list of independent stages
(`stage_cache.optional_stages`), so processes sharing the workdir (`--workers`) split them.

S is a number of seeds (det_seeds, sweep_seeds or num_seeds of the config). Every method trains
through one compiled step per learning rate (`Programs`): the method id is data, so methods,
sweep runs and budget segments share compilations.

The interval, selection and flatness rules live in jaxrl_suite.repro, which lm/ may not import
(see ARCHITECTURE.md, "Layers"): the caller passes them in as callables (`ci`, `pick`,
`last_doubling`).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import stage_cache
from jaxrl_suite.envs.text import goal_house as gh
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import stapo
from jaxrl_suite.lm import token_ppo

# Budget doubling stops once every flat method's last doubling is in one of these states
# (the names of repro.flatness.Flatness.state).
_SWEEP_DONE = ("flat", "degrading")
# The warm start's stage key holds these config fields (plus the env): change one, retrain.
_WARM_FIELDS = ("ws_episodes", "ws_note_prob", "ws_noisy_share", "ws_noise", "ws_steps",
                "ws_batch", "ws_lr", "window", "model", "seed")


def setup(config):
  """(env, env params, LMConfig, RolloutConfig): window W with the task scrolled out."""
  env, p = gh.make_goal_house(**config.env.to_dict())
  cfg = lm_model.FAMILY_V2[config.model]
  rcfg = lm_rollout.RolloutConfig(num_turns=p.max_steps, window=config.window,
                                  max_segments=config.max_segments,
                                  overflow=lm_rollout.TruncateOldest(keep_task=False),
                                  temperature=config.temperature)
  return env, p, cfg, rcfg


def method_config(config) -> stapo.MethodConfig:
  """The config's STAPO method fields as a stapo.MethodConfig."""
  keys = [f for f in stapo.MethodConfig._fields if f != "group_size"]
  return stapo.MethodConfig(group_size=config.group_size, **{k: config[k] for k in keys})


# ---- 1. warm start -----------------------------------------------------------------------------

def warm_start_key(config) -> dict:
  """What the warm start's params depend on: its stage key (the fields `_WARM_FIELDS`, the env)."""
  return dict({k: config[k] for k in _WARM_FIELDS}, env=config.env)


def _behaviour_clone(config, env, p, cfg, key, info: dict):
  """BC on scripted expert + noisy demonstrations cut into the harness's windows; fills info."""
  k_ep, k_init, k_bc = jax.random.split(key, 3)
  n = config.ws_episodes
  noisy = jnp.arange(n) < int(round(config.ws_noisy_share * n))
  noise = jnp.where(noisy, config.ws_noise, 0.0)
  ep = jax.jit(lambda k: gh.scripted_episodes(k, n, p, config.ws_note_prob, noise, env))(k_ep)
  ep = jax.tree.map(np.asarray, ep)
  rows, mask = stapo.truncate_oldest_segments(ep["obs"], ep["obs_len"], ep["act"],
                                              ep["act_len"], ep["valid"], config.window,
                                              env.max_action_len)
  params, loss = stapo.behaviour_clone(cfg, lm_model.init_params(cfg, k_init),
                                       jnp.asarray(rows), jnp.asarray(mask), k_bc,
                                       config.ws_steps, config.ws_batch, config.ws_lr,
                                       chunk=min(100, config.ws_steps))
  info.update(demo_success=float(ep["success"].mean()), rows=int(rows.shape[0]),
              loss_first=float(loss[:10].mean()), loss_last=float(loss[-50:].mean()))
  return params


def warm_start(config, env, p, cfg, workdir: str, key):
  """BC params (stage "stapo/warm_start" of the workdir's stage cache, keyed by
  `warm_start_key`) and the info dict {demo_success, rows, loss_first, loss_last, cached}."""
  def make():
    info = {}
    return _behaviour_clone(config, env, p, cfg, key, info), info

  params, info, hit = lm_pretrain.cached_params("stapo/warm_start", warm_start_key(config),
                                                make, workdir)
  return params, dict(info, cached=bool(hit))


# ---- 2. detection ------------------------------------------------------------------------------

def _det_batch_fn(config, env, p, cfg, rcfg, params):
  """jit (ema, key) -> (ema, per-step arrays [det_envs, turns]) of the fixed policy."""
  g = config.group_size
  mc = method_config(config)

  @jax.jit
  def batch(ema, k):
    ro = lm_rollout.multi_turn_rollout(cfg, params, env, p, k, config.det_envs, rcfg,
                                       group_size=g)
    sig = stapo.turn_signals(cfg, params, ro, g, ema, mc.min_count)
    ema = stapo.update_ema(ema, sig.h, ro.state_key, ro.turn_valid, config.ema_decay)
    raw = stapo.raw_zscore(sig.h, ro.turn_valid)
    v = ro.turn_valid
    return ema, dict(h=sig.h, z=sig.norm.z, ratio=sig.norm.ratio, count=sig.norm.count,
                     source=sig.norm.source, valid=v, flag=stapo.flag_steps(mc, sig.norm, v),
                     flag_raw=stapo.flag_raw(mc, raw, v), others=sig.norm.others,
                     label=ro.info["neglect"].any(-1) & v, labels=ro.info["neglect"],
                     success=(ro.info["success"] & v).any(-1), optimal=ro.info["optimal"])
  return batch


def det_row(o: dict) -> dict:
  """Detection metrics of one seed's concatenated batches.

  o: per-step arrays [N, T] (h, z, ratio, count, source, others, flag, flag_raw, label, valid,
  optimal), labels [N, T, 4] (N1..N4), success [N]. Returns floats, label_rates a list of 4."""
  v = o["valid"]
  y, f, fr = o["label"][v], o["flag"][v], o["flag_raw"][v]
  nan = float("nan")
  return {
      "auroc_z": stapo.auroc(o["z"][v], y), "auroc_ratio": stapo.auroc(o["ratio"][v], y),
      "auroc_raw": stapo.auroc(o["h"][v], y),
      "precision_flag": stapo.precision(f, y), "precision_raw": stapo.precision(fr, y),
      "flagged": float(f.mean()), "flagged_raw": float(fr.mean()),
      "recall_flag": float(f[y].mean()) if y.any() else nan,
      "recall_raw": float(fr[y].mean()) if y.any() else nan,
      # flags among steps with no neglect label: the realised false-flag rate (alpha if the
      # unlabelled steps behave like the null; benign high-entropy states may push it up)
      "flagged_unlabelled": float(f[~y].mean()) if (~y).any() else nan,
      "base_rate": float(y.mean()), "success": float(o["success"].mean()),
      "optimal": float(o["optimal"][v].mean()),
      "share_recurring": float((o["count"][v] >= 2).mean()),
      "mean_others": float(np.nanmean(np.where(np.isfinite(o["others"][v]), o["others"][v],
                                               nan))),
      "share_ema": float((o["source"][v] == stapo.SOURCE_EMA).mean()),
      "share_task": float((o["source"][v] == stapo.SOURCE_TASK).mean()),
      "label_rates": o["labels"][v].mean(0).tolist()}


def summarise_detection(per_seed: list, ci: Callable) -> dict:
  """{"per_seed": rows, metric: ci([value per seed]), "label_rates": mean over seeds [4]}."""
  out = {"per_seed": per_seed}
  for k in per_seed[0]:
    if k != "label_rates":
      out[k] = ci([r[k] for r in per_seed])
  out["label_rates"] = np.mean([r["label_rates"] for r in per_seed], 0).tolist()
  return out


def detection(config, env, p, cfg, rcfg, params, key, ci: Callable) -> dict:
  """Per seed: det_batches consecutive rollout batches of the fixed policy (EMA carried);
  ci(values [S]) -> [mean, lo, hi] summarises each metric over seeds."""
  batch = _det_batch_fn(config, env, p, cfg, rcfg, params)
  per_seed = []
  for s in range(config.det_seeds):
    ema = stapo.init_ema(gh.num_state_keys(p))
    outs = []
    for b in range(config.det_batches):
      ema, o = batch(ema, jax.random.fold_in(jax.random.fold_in(key, s), b))
      outs.append(jax.tree.map(np.asarray, o))
    per_seed.append(det_row({k: np.concatenate([x[k] for x in outs]) for k in outs[0]}))
  return summarise_detection(per_seed, ci)


# ---- 3./4. training: programs per learning rate, the lr sweep, the budget doubling -------------

class Programs:
  """One compiled-shape training step and evaluator per learning rate (the method is data)."""

  def __init__(self, config, env, p, cfg, rcfg):
    self.config, self.env, self.p, self.cfg, self.rcfg = config, env, p, cfg, rcfg
    self.mc = method_config(config)
    self._steps = {}
    c = config

    def episodes(n, prm, k):
      ro = lm_rollout.multi_turn_rollout(cfg, prm, env, p, k, n, rcfg, group_size=c.group_size)
      m = stapo.episode_neglect(ro.info, ro.turn_valid)
      m["note_rate"] = ((ro.info["action_index"] == gh.num_actions(p) - 1) & ro.turn_valid
                        ).sum() / jnp.maximum(ro.turn_valid.sum(), 1)
      return m
    evaluate = functools.partial(episodes, c.eval_envs)
    # per-seed params: eval_envs fresh episodes (evaluation, lr sweep) or val_envs (validation
    # at each budget, the flatness test's data)
    self.evaluate = jax.jit(jax.vmap(evaluate, in_axes=(0, 0)))
    self.validate = jax.jit(jax.vmap(functools.partial(episodes, c.val_envs), in_axes=(0, 0)))
    self.evaluate_fixed = jax.jit(jax.vmap(evaluate, in_axes=(None, 0)))  # one policy, S keys

  def step(self, lr: float):
    """(init, chunk) of the method-generic train step at learning rate lr (built once)."""
    if lr not in self._steps:
      c = self.config
      pc = token_ppo.TokenPPOConfig(
          epochs=c.epochs, num_minibatches=c.num_minibatches, lr=float(lr), clip_eps=c.clip_eps,
          kl_coef=c.kl_coef, max_grad_norm=c.max_grad_norm, group_size=c.group_size)
      init, step = stapo.make_train_step(self.cfg, self.env, self.p, self.rcfg, c.train_envs,
                                         self.mc, pc)

      # `chunk` iterations per call, vmapped over seeds; one jitted function per lr, so it is
      # traced and compiled once and reused by every method, sweep run and budget segment
      # (the method is data). Iteration t of a segment uses fold_in(seed key, t).
      @jax.jit
      def chunk(state, keys, t0):
        def body(st, t):
          st, m = jax.vmap(step)(st, jax.vmap(lambda k: jax.random.fold_in(k, t))(keys))
          return st, m
        return jax.lax.scan(body, state, t0 + jnp.arange(c.chunk))
      self._steps[lr] = (init, chunk)
    return self._steps[lr]


def train(progs, lr, method, state, seed_keys, segment, steps, timing, params=None):
  """Trains one method at lr on every seed (vmapped) for `steps` more iterations; state None
  starts from `params`. Segment j's rollout keys depend only on (seed key, j). Adds compile_s /
  run_s to `timing`. Returns (state, training metrics {name: [S, steps]})."""
  init, chunk = progs.step(lr)
  if state is None:
    mid = jnp.full((seed_keys.shape[0],), stapo.method_id(method), jnp.int32)
    state = jax.vmap(init, in_axes=(None, 0))(params, mid)
  keys = jax.vmap(lambda k: jax.random.fold_in(k, segment))(seed_keys)
  out = []
  for t0 in range(0, steps, progs.config.chunk):
    t1 = time.perf_counter()
    state, m = chunk(state, keys, jnp.int32(t0))
    out.append(jax.tree.map(np.asarray, m))
    # the first call of a program includes its tracing and compilation
    key = "compile_s" if not timing.get(("seen", lr)) else "run_s"
    timing[("seen", lr)] = True
    timing[key] = timing.get(key, 0.0) + time.perf_counter() - t1
  print(f"stapo {method} lr={lr:g}: {steps} iterations", flush=True)
  return state, {k: np.concatenate([x[k] for x in out]).T for k in out[0]}


def evaluate(progs, state, keys, validation: bool = False) -> dict:
  """Episode metrics {name: [S]} of fresh rollouts of each seed's trained policy: eval_envs
  episodes per seed, or val_envs with `validation`."""
  fn = progs.validate if validation else progs.evaluate
  return jax.tree.map(np.asarray, fn(state[0].params, keys))


# Config fields a sweep cell or a training segment does not read: left out of their stage keys,
# so that e.g. a larger max_budget reuses every stored segment and extends the run.
_NOT_READ = {"sweep": ("det_seeds", "det_batches", "det_envs", "methods", "lr_grid", "num_seeds",
                       "first_budget", "max_budget", "flat_methods", "val_envs"),
             "train": ("det_seeds", "det_batches", "det_envs", "methods", "lr_grid",
                       "sweep_seeds", "sweep_steps", "max_budget", "flat_methods", "eval_envs")}


def _stage(name: str, progs, fields: dict, fn: Callable[[], dict]) -> stage_cache.Stage:
  """Stage `name` ("stapo/sweep/..." or "stapo/train/...") computing fn(), keyed by the config
  fields it reads plus `fields`."""
  drop = _NOT_READ[name.split("/")[1]]
  key = {k: v for k, v in progs.config.to_dict().items() if k not in drop}
  return stage_cache.Stage(name, dict(config=key, **fields), fn)


def _state_of(progs, lr, method, n: int, params, leaves) -> Any:
  """The train state of n seeds (a fresh init's structure) holding the stored `leaves`."""
  init, _ = progs.step(lr)
  mid = jnp.full((n,), stapo.method_id(method), jnp.int32)
  shape = jax.eval_shape(jax.vmap(init, in_axes=(None, 0)), params, mid)
  return jax.tree.unflatten(jax.tree.structure(shape), [jnp.asarray(x) for x in leaves])


def lr_sweep(progs, params, key, timing, pick: Callable[[str, dict], Any], workdir=None):
  """Per method: success [sweep_seeds] of fresh rollouts after sweep_steps iterations at every
  lr of the grid, on training seeds of their own (own training and rollout keys), and
  pick(method, {lr name: success [S]}) -> the selection. Each (method, lr) run is a stage of
  the workdir's cache (module doc). Returns (scores, selections)."""
  c = progs.config
  seed_keys = jax.random.split(key, c.sweep_seeds)
  eval_keys = jax.random.split(jax.random.fold_in(key, 7), c.sweep_seeds)
  def run(m, lr):
    state, _ = train(progs, lr, m, None, seed_keys, 0, c.sweep_steps, timing, params)
    return {"success": evaluate(progs, state, eval_keys)["success"]}
  cells = [(m, lr) for m in c.methods for lr in c.lr_grid]
  values = stage_cache.optional_stages(
      [_stage(f"stapo/sweep/{m}_lr{lr:g}", progs, dict(method=m, lr=float(lr)),
              lambda m=m, lr=lr: run(m, lr)) for m, lr in cells], workdir, timing)
  scores = {m: {} for m in c.methods}
  for (m, lr), v in zip(cells, values):
    scores[m][f"{lr:g}"] = np.asarray(v["success"])
  return scores, {m: pick(m, scores[m]) for m in c.methods}


def _is_done(flat: dict) -> bool:
  return bool(flat) and all(f["state"] in _SWEEP_DONE for f in flat.values())


def train_until_flat(progs, params, lrs: dict, key, timing,
                     last_doubling: Callable[[np.ndarray, list], Any], workdir=None) -> dict:
  """Every method at its chosen lr on the evaluation seeds, the budget doubled (first_budget,
  2x, ... max_budget) until each of flat_methods is flat or degrading on validation rollouts
  (last_doubling(success [K, S], budgets [K]) -> a Flatness); then fresh evaluation rollouts.
  Returns {"val": {m: {metric: [K, S]}}, "ev": {m: {metric: [S]}}, "curves": {m: {metric:
  [S, steps]}}, "budgets": [K], "flat": {m: Flatness dict}, "start": {metric: [S]}}.
  Each (method, segment) is a stage of the workdir's cache holding the train state, the
  segment's curves and its validation metrics (module doc)."""
  c = progs.config
  seed_keys = jax.random.split(key, c.num_seeds)
  val_keys = jax.random.split(jax.random.fold_in(key, 98), c.num_seeds)
  eval_keys = jax.random.split(jax.random.fold_in(key, 99), c.num_seeds)
  states = {m: None for m in c.methods}
  val = {m: {} for m in c.methods}
  curves = {m: [] for m in c.methods}
  budgets, done, seg = [], 0, 0
  while True:
    target = c.first_budget * 2 ** seg
    def run(m, state, steps, seg):
      st, cur = train(progs, lrs[m], m, state, seed_keys, seg, steps, timing, params)
      return {"state": jax.tree.leaves(jax.device_get(st)), "curves": cur,
              "val": evaluate(progs, st, val_keys, validation=True)}
    outs = stage_cache.optional_stages(
        [_stage(f"stapo/train/{m}_seg{seg}", progs,
                dict(method=m, lr=float(lrs[m]), segment=seg, budget=target),
                lambda m=m, state=states[m], steps=target - done, seg=seg:
                run(m, state, steps, seg)) for m in c.methods], workdir, timing)
    for m, out in zip(c.methods, outs):
      states[m] = _state_of(progs, lrs[m], m, c.num_seeds, params, out["state"])
      curves[m].append({k: np.asarray(v) for k, v in out["curves"].items()})
      for k, v in out["val"].items():
        val[m].setdefault(k, []).append(np.asarray(v))
    budgets.append(target)
    done, seg = target, seg + 1
    flat = {m: last_doubling(np.asarray(val[m]["success"]), budgets).to_dict()
            for m in c.flat_methods if m in c.methods and len(budgets) > 1}
    if target >= c.max_budget or _is_done(flat):
      break
  ev = {m: evaluate(progs, states[m], eval_keys) for m in c.methods}
  curves = {m: {k: np.concatenate([x[k] for x in curves[m]], axis=1) for k in curves[m][0]}
            for m in c.methods}
  val = {m: {k: np.stack(v) for k, v in val[m].items()} for m in c.methods}
  start = jax.tree.map(np.asarray, progs.evaluate_fixed(params, eval_keys))
  return {"val": val, "ev": ev, "curves": curves, "budgets": budgets, "flat": flat,
          "start": start}
