"""One RL variant of the rail pricing study on S seeds (vmapped, one jit) over the budget sweep.

  train_variant(c, name, key, tune_rows, eval_keys, scenarios, rules) -> (out, curve, meta, sweep)
  train_variants(c, key, tune_keys, eval_keys, scenarios, rules, workdir) -> the same, per variant

At every budget of the variant's sweep (variants.budgets; algos/budget_sweep.py runs it, one
constant-lr run or one lr-decayed run per budget as config.lr_decay says) the greedy and the
sampled policy of every seed are scored on the tuning episodes. At config.main_updates the
evaluation mode is chosen on those scores (`rules.pick_mode`) and the chosen policies play the
held-out episodes of every scenario. Returns
  out    {scenario: {metric: [S]}} held-out per-seed means at main_updates (revenue_op [S, O]);
  curve  [S, U] training returns of the last run;
  meta   mode choice, budgets, fair-chance record of the chosen mode's sweep
         (`rules.last_doubling`, with `last_vs_main` = `rules.ratio` of the last budget to
         main_updates when the sweep runs past it) and the entropy-collapse check;
  sweep  {"greedy" | "sampled": [S, B] tuning revenue, "updates": [B], "env_steps": [B]}.

The selection and flatness rules live in jaxrl_suite.repro, which train/ may not import
(ARCHITECTURE.md, "Layers"): the caller passes them in as a `Rules`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.algos import budget_sweep
from jaxrl_suite.core import stage_cache
from jaxrl_suite.envs.rail import evaluate
from jaxrl_suite.train.rail import variants

MODES = ("greedy", "sampled")


@dataclasses.dataclass(frozen=True)
class Rules:
  """The study's registered choices, computed by the caller (jaxrl_suite.repro):
  pick_mode({"greedy": [S], "sampled": [S]}, data=str) -> a Selection (.choice, .to_dict());
  last_doubling(revenue [S, B], budgets [B]) -> dict, the fair-chance record of a sweep;
  ratio(a [S], b [S]) -> [ratio, lo, hi] of the per-seed ratio a / b."""
  pick_mode: Callable[..., Any]
  last_doubling: Callable[[np.ndarray, list], dict]
  ratio: Callable[[np.ndarray, np.ndarray], list]


def policy_evaluator(env, agent):
  """jit(params [S, ...], keys [S, N, 2], env_params, greedy bool) -> metrics [S, N]: each
  seed's policy on its own keys; greedy is traced, so one compile serves both modes."""
  def evaluate_rl(ps, keys, pv, greedy):
    def pol(k, obs, st):
      return jnp.where(greedy, agent.policy(ps, obs, k, greedy=True),
                       agent.policy(ps, obs, k, greedy=False))
    return evaluate.evaluate(env, pv, pol, keys)

  return jax.jit(jax.vmap(evaluate_rl, in_axes=(0, 0, None, None)))


def per_seed(m: dict) -> dict:
  """metrics with leading [S, N] -> per-seed means [S] (revenue_op -> [S, O])."""
  return {k: np.asarray(v, np.float64).mean(1) for k, v in m.items()}


class _Scores:
  """What `budget_sweep.train` reports at each budget: the entropy, both modes' tuning revenue,
  and at main_updates the chosen mode's held-out metrics."""

  def __init__(self, name, c, ev_rl, tune_rows, eval_keys, scenarios, p_v, rules):
    self.name, self.main, self.ev_rl, self.p_v, self.rules = name, c.main_updates, ev_rl, p_v, rules
    self.tune_rows, self.eval_keys, self.scenarios = tune_rows, eval_keys, scenarios
    self.sw, self.ent = {m: [] for m in MODES}, []
    self.out = self.sel = self.mode_sel = self.greedy = None

  def tune_rev(self, ps, greedy: bool) -> np.ndarray:
    """[S] mean tuning-episode revenue of every seed's policy."""
    m = self.ev_rl(ps, self.tune_rows, self.p_v, jnp.asarray(greedy))
    return np.asarray(m["revenue_total"], np.float64).mean(1)

  def __call__(self, done, rs, met):
    self.ent.append(np.asarray(met["entropy"], np.float64)[:, -1])
    for m in self.sw:
      self.sw[m].append(self.tune_rev(rs.train_state.params, m == "greedy"))
    if done == self.main:
      self._pick_and_evaluate(done, rs.train_state.params)

  def _pick_and_evaluate(self, done, params):
    """Greedy vs sampled chosen on the tuning episodes (seed-mean revenue; greedy first on a
    tie), then the held-out episodes of every scenario score the chosen policies."""
    self.sel = {m: float(self.sw[m][-1].mean()) for m in MODES}
    self.mode_sel = self.rules.pick_mode({m: self.sw[m][-1] for m in MODES},
                                         data=f"{self.name}: tuning episodes at {done} updates")
    self.greedy = self.mode_sel.choice == "greedy"
    self.out = {}
    for sc, ps_ in self.scenarios.items():
      pv = self.p_v.replace(demand_level=ps_.demand_level)
      self.out[sc] = per_seed(jax.device_get(
          self.ev_rl(params, self.eval_keys, pv, jnp.asarray(self.greedy))))


def _meta(c, scores: _Scores, sweep: dict, budgets: list, n_actions: int, rules: Rules) -> dict:
  """The variant's record: mode choice, budgets, fair chance of the chosen mode's sweep,
  entropy collapse."""
  mode = "greedy" if scores.greedy else "sampled"
  meta = {"selection_revenue": scores.sel, "mode": mode,
          "mode_selection": scores.mode_sel.to_dict(), "updates": c.main_updates,
          "sweep_updates": budgets[-1], "lr_decay": bool(c.lr_decay),
          "flattening": rules.last_doubling(sweep[mode], budgets),
          "entropy": budget_sweep.entropy_collapse(np.stack(scores.ent, 1), n_actions,
                                                   c.entropy_collapse_frac)}
  im = budgets.index(c.main_updates)
  if budgets[-1] > c.main_updates:
    meta["flattening"]["last_vs_main"] = rules.ratio(sweep[mode][:, -1], sweep[mode][:, im])
  return meta


def train_variant(c, name: str, key, tune_rows, eval_keys, scenarios: dict, rules: Rules):
  """Trains `name` on config.n_seeds seeds (keys from fold_in(key, 1000)) through its sweep.
  tune_rows [S, N, 2] (the tuning keys, the same for every seed), eval_keys [S, N, 2] held-out,
  scenarios {name: env params} (only their demand_level is used). See the module docstring."""
  _, att, amode = variants.parse(name)
  env_v, p_v = variants.make_env(c, amode)
  budgets = variants.budgets(c, att)
  per_update = c.rl.num_envs * c.rl.num_steps
  learner, agent = variants.learner(c, env_v, p_v, name)
  seeds = jax.random.split(jax.random.fold_in(key, 1000), c.n_seeds)
  scores = _Scores(name, c, policy_evaluator(env_v, agent), tune_rows, eval_keys, scenarios,
                   p_v, rules)

  def learner_for(decay_over):
    if decay_over is None:
      return learner
    return variants.learner(c, env_v, p_v, name, anneal_lr=True,
                            total_timesteps=decay_over * per_update)[0]

  curve = budget_sweep.train(budget_sweep.plan(budgets, c.lr_decay), learner_for, seeds, scores)
  sweep = {m: np.stack(v, 1) for m, v in scores.sw.items()}                  # [S, B]
  sweep["updates"] = np.asarray(budgets, np.float64)
  sweep["env_steps"] = sweep["updates"] * per_update
  return scores.out, curve, _meta(c, scores, sweep, budgets, env_v.num_actions, rules), sweep


def train_variants(c, key, tune_keys, eval_keys, scenarios: dict, rules: Rules, workdir: str,
                   on_variant: Callable[[], None] = lambda: None):
  """Every variant of config.variants through train_variant, each a stage of the workdir's
  stage cache (core.stage_cache "rail/rl/<variant>", keyed by the config and the library): a
  rerun with the same config and code reads a finished variant back instead of training it.
  tune_keys [N, 2] are every seed's tuning keys. Returns dicts {variant: ...} of
  train_variant's (out, curve, meta with train_s, the training seconds, sweep), as stored.
  on_variant() after each."""
  rl, curves, rl_meta, sweep = {}, {}, {}, {}
  tune_rows = jnp.broadcast_to(tune_keys[None], eval_keys.shape)
  for name in c.variants:
    def make(name=name):
      tv = time.time()
      out, curve, meta, sw = train_variant(c, name, key, tune_rows, eval_keys, scenarios, rules)
      meta["train_s"] = time.time() - tv
      return {"rl": out, "curve": curve, "meta": meta, "sweep": sw}
    v = stage_cache.cached_stage(f"rail/rl/{name}", c, make, workdir)
    rl[name], curves[name], rl_meta[name], sweep[name] = (v["rl"], v["curve"], v["meta"],
                                                          v["sweep"])
    on_variant()
  return rl, curves, rl_meta, sweep
