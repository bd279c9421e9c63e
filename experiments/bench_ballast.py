"""Benchmark: BallastNet-v0 environment steps per second, vmapped over 4096 ships.

Runs `env.step` (with gymnax auto-reset) under `jax.jit(jax.vmap(...))` inside a `lax.scan`:
(1) env only (a fixed route cycling through the library: measures reset + step + auto-reset
select), (2) a uniformly random masked-valid route (one uniform per ship, inverse CDF over the
mask), (3) B-replan choosing the routes. Prints steps/s and the ratio against gymnax CartPole-v1
in the same harness (reference, random actions).

  python -m experiments.bench_ballast [--ships 4096] [--steps 64]
  python -m experiments.bench_ballast --hydro [--bank 512] [--layouts ring14,direct10,gen:7]
  python -m experiments.bench_ballast --v2_bank --bank 2048 --layouts ring14,direct10
  python -m experiments.bench_ballast --train_hash 4      (also under `taskset -c 0`)
  python -m experiments.bench_ballast --resid_probe

--hydro instead reports BallastHydro-v0 (hydraulic env): per layout (shipped names, JSON paths,
or gen:SEED for a generated layout), the episode bank (rejections per #blocked stratum, episodes
per clog regime) and the oracle / plain B-replan / heel-aware replanner on every bank episode
(success, heel-limit violations, decision steps and hours, pump energy), plus vmapped steps/s.

Where the time went before the reset rewrite (4096 ships, 2-core CPU): the gymnax auto-reset
evaluates reset_env on every step, and reset drew 4 (plan, clog) candidates with ~1,000 PRNG
words and 5 argsorts each (XLA:CPU sorts are slow under vmap): ~5k steps/s. Now reset draws one
plan and 4 clog candidates from ~130 uniforms, uses top_k / inverse-CDF draws and packed route
bit sets for the feasibility test.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app, flags
import gymnax
import jax
import jax.numpy as jnp

from jaxrl_suite.envs.ballast import baselines as B
from jaxrl_suite.envs.ballast import make_ballast
from jaxrl_suite.envs.ballast.env import _categorical_icdf

_SHIPS = flags.DEFINE_integer("ships", 4096, "parallel ships (vmap width)")
_STEPS = flags.DEFINE_integer("steps", 64, "scan length per timed call")
_HYDRO = flags.DEFINE_bool("hydro", False, "report BallastHydro-v0 banks and baselines instead")
_BANK = flags.DEFINE_integer("bank", 512, "episodes per bank (--hydro)")
_LAYOUTS = flags.DEFINE_list("layouts", ["ring14", "direct10", "gen:7"],
                             "layouts for --hydro: shipped names, JSON paths or gen:SEED")
_V2_BANK = flags.DEFINE_bool("v2_bank", False, "report checked BallastNet v2 banks (--layouts, "
                             "shipped names; --bank episodes) instead")
_TRAIN_HASH = flags.DEFINE_integer("train_hash", 0, "instead: train rl_gru (full ballast_hydro "
                                   "config, 16-episode banks on the first 4 training layouts) "
                                   "for this many 5-update chunks and print a parameter hash "
                                   "after each (compare processes, e.g. under taskset)")
_RESID_PROBE = flags.DEFINE_bool("resid_probe", False, "instead: the untrained residual agent "
                                 "(rl_gru_resid at init) vs the heel-aware replanner on the "
                                 "held-out and shipped layouts' >=1-blocked episodes")


def _bench(env, params, act_fn, ships: int, steps: int) -> tuple[float, float]:
  """Returns (env steps per wall second, env steps per process-CPU second) of one compiled call.

  On a shared machine the wall rate drops with other people's load; steps per CPU second times
  the number of cores estimates the rate the machine would give alone.
  """

  def run(key):
    keys = jax.random.split(key, ships)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

    def body(carry, k):
      obs, state = carry
      ka, ks = jax.random.split(k)
      a = jax.vmap(act_fn, in_axes=(0, 0, 0))(obs, state, jax.random.split(ka, ships))
      obs, state, r, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
          jax.random.split(ks, ships), state, a, params)
      return (obs, state), r.sum()

    return jax.lax.scan(body, (obs, state), jax.random.split(key, steps))[1].sum()

  f = jax.jit(run)
  jax.block_until_ready(f(jax.random.PRNGKey(0)))
  t, c = time.perf_counter(), time.process_time()
  jax.block_until_ready(f(jax.random.PRNGKey(1)))
  n = ships * steps
  return n / (time.perf_counter() - t), n / (time.process_time() - c)


def _mean_ci(x, n_boot: int = 2000, seed: int = 0) -> str:
  """mean [95% bootstrap CI] of a 1-D array, as text."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  x = np.asarray(x, np.float64)
  idx = np.random.default_rng(seed).integers(0, len(x), (n_boot, len(x)))
  lo, hi = np.quantile(x[idx].mean(1), [0.025, 0.975])
  return f"{x.mean():.3f} [{lo:.3f}, {hi:.3f}]"


def hydro_report(layouts, n_bank: int, ships: int, steps: int) -> None:
  """Prints the --hydro report (module docstring)."""
  from jaxrl_suite.envs.ballast import hydro_baselines as HB  # pylint: disable=g-import-not-at-top
  from jaxrl_suite.envs.ballast import make_hydro  # pylint: disable=g-import-not-at-top
  from jaxrl_suite.envs.ballast.generator import generate_layout  # pylint: disable=g-import-not-at-top
  from jaxrl_suite.envs.ballast.hydro_rollout import make_hydro_evaluate  # pylint: disable=g-import-not-at-top
  for name in layouts:
    lay = generate_layout(int(name[4:])) if name.startswith("gen:") else name
    t0 = time.perf_counter()
    env, params, rep = make_hydro(lay, n_bank=n_bank, seed=0)
    t_bank = time.perf_counter() - t0
    K = params.route_mask.shape[0]
    print(f"\n## {rep['layout']} ({int(params.tank_mask.sum())} tanks, "
          f"{int(params.route_mask.sum())} routes padded to {K}, "
          f"{int(params.pump_mask.sum())} pumps); bank of {n_bank} in {t_bank:.0f} s")
    print(f"rejection rate {rep['rejection_rate']:.3f} (oracle failed "
          f"{rep['oracle_fail_rate']:.3f} of routable draws); episodes per regime "
          f"{rep['regimes']}")
    print("| #blocked | quota | drawn | no route | oracle failed | rejection rate |")
    print("|---|---|---|---|---|---|")
    for st in rep["strata"]:
      print(f"| {st['n_blocked']} | {st['quota']} | {st['drawn']} | {st['no_route']} | "
            f"{st['oracle_failed']} | {st['rejection_rate']:.3f} |")
    ev = make_hydro_evaluate(env, HB.hydro_policy, int(params.max_steps_in_episode))
    keys = jax.random.split(jax.random.PRNGKey(1), n_bank)
    idx = jnp.arange(n_bank)
    print("| policy | success | heel limit violated | decision steps | hours | kWh |")
    print("|---|---|---|---|---|---|")
    for pol in HB.HYDRO_BASELINES:
      p = params.replace(reveal_clog=pol == "oracle")
      out = jax.device_get(ev(p, HB.make_hydro_baseline(p, pol), idx, keys))
      print(f"| {pol} | {_mean_ci(out['success'])} | {_mean_ci(out['violated'])} | "
            f"{_mean_ci(out['steps'])} | {out['steps'].mean() * float(p.dt_h):.2f} | "
            f"{_mean_ci(out['energy_kwh'])} |")
    hb = HB.make_hydro_baseline(params, "heel_replan")
    sps = _bench(env, params, lambda o, s, k, hb=hb: HB.hydro_policy(hb, o, k), ships, steps)
    print(f"heel-aware replanner, {ships} ships x {steps} steps: {sps[0]:,.0f} env steps/s "
          f"({sps[1]:,.0f} per CPU-s)")


def v2_bank_report(layouts, n: int) -> None:
  """Checked v2 banks (envs/ballast/net_bank.py): rejections per #blocked stratum and the
  regime mix without the check vs in the bank, per layout (seed 3, default env params)."""
  from jaxrl_suite.envs.ballast import net_bank as NB
  for name in layouts:
    env, p = make_ballast(layout=name, task="v2")
    t = time.time()
    _, r = NB.make_v2_bank(env, p, n=n, seed=3, batch=512)
    per = ", ".join(f"{s['n_blocked']}: {s['rejected']}/{s['checked']} "
                    f"({100 * s['rejection_rate']:.1f}%)" for s in r["strata"])
    print(f"{name}: {n} episodes in {time.time() - t:.0f} s; rejected per #blocked {per}; all "
          f"{100 * r['rejection_rate']:.1f}%")
    print("  regimes without the check -> bank: " + ", ".join(
        f"{k} {r['regimes_unchecked'][k]:.3f} -> {r['regimes_bank'][k]:.3f}"
        for k in r["regimes_bank"]))
    print("  with a partial clog, checked -> accepted: " + ", ".join(
        f"{s['n_blocked']}: {s['with_partial_checked']:.3f} -> {s['with_partial_accepted']:.3f}"
        for s in r["strata"]))


def _hydro_family(n_bank: int, n_train: int, seed: int):
  """(config, train envs, held-out + shipped envs by name) of the full ballast_hydro config."""
  import configs.ballast_hydro as cfg_mod
  from experiments import ballast_hydro as X
  from jaxrl_suite.envs.ballast import load_layout, make_hydro
  from jaxrl_suite.envs.ballast.routes import layout_sizes
  c = cfg_mod.get_config()
  tr = X.pick_layouts(c.train_seed0, c.n_train, c.max_routes)
  held = X.pick_layouts(c.heldout_seed0, c.n_heldout, c.max_routes)
  ship = [load_layout(n) for n in c.shipped]
  sizes = layout_sizes(tr + held + ship)
  mk = lambda l, s: make_hydro(l, n_bank=n_bank, seed=s, sizes=sizes,
                               reward_scale=c.reward_scale)
  return (c, [mk(l, 0) for l in tr[:n_train]],
          {l["name"]: mk(l, seed) for l in held + ship} if seed >= 0 else {})


def train_hash(n_chunks: int) -> None:
  """Per-chunk sha256 of rl_gru's parameters [3 seeds] (full PPO / agent config)."""
  import hashlib
  import numpy as np
  from jaxrl_suite.agents import ballast_hydro as A
  from jaxrl_suite.algos import ballast as AB
  c, envs, _ = _hydro_family(16, 4, -1)
  env = envs[0][0]
  tabs = [A.make_tables(p, False, env.agent_api) for _, p, _ in envs]
  init, chunk = AB.make_trainer(c, env, 5 * n_chunks, c.chunk_updates)
  keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(0), 100), c.n_seeds)
  state = init(keys, tabs[0])
  cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  print(f"{cpus} CPUs, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
  for i in range(n_chunks):
    keys = jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys)
    state, m = chunk(state, tabs[i % len(tabs)], keys)
    h = hashlib.sha256()
    for x in jax.tree.leaves(jax.device_get(state.params)):
      h.update(np.asarray(x).tobytes())
    print(f"chunk {i}: params {h.hexdigest()[:16]} episode_length "
          f"{np.asarray(m['episode_length']).mean(-1).round(4).tolist()}", flush=True)


def resid_probe(n: int = 64) -> None:
  """Success on >=1-blocked episodes of rl_gru_resid at initialisation (the residual dominates:
  w_init) and of the heel-aware replanner with a command per pump, same episodes."""
  import numpy as np
  from jaxrl_suite.agents import ballast_hydro as A
  from jaxrl_suite.algos import ballast as AB
  from jaxrl_suite.envs.ballast import hydro_baselines as HB
  from jaxrl_suite.envs.ballast.hydro_rollout import (make_hydro_evaluate,
                                                      make_hydro_evaluate_recurrent)
  c, _, evals = _hydro_family(n, 0, 1)
  env = next(iter(evals.values()))[0]
  ms = int(next(iter(evals.values()))[1].max_steps_in_episode)
  init, _ = AB.make_trainer(c, env, 10, 5)
  ev_b = make_hydro_evaluate(env, HB.hydro_policy, ms)
  ev_r = jax.jit(jax.vmap(make_hydro_evaluate_recurrent(
      env, A.make_policy(c.agent, greedy=True), jnp.zeros(c.agent.gru), ms),
      in_axes=(None, (0, None), None, None)))
  keys = jax.random.split(jax.random.PRNGKey(0), c.n_seeds)
  pooled = {"resid": [], "replan": []}
  for name, (_, p, _) in evals.items():
    idx, ks = jnp.arange(n), jax.random.split(jax.random.PRNGKey(5), n)
    m = np.asarray(p.bank.n_blocked) >= 1
    hb = HB.make_hydro_baseline(p, "heel_replan", n_cmds=int(p.pump_mask.sum()))
    rb = np.asarray(jax.device_get(ev_b(p, hb, idx, ks))["success"])[m]
    tb = A.make_tables(p, True, env.agent_api)
    rr = np.asarray(jax.device_get(ev_r(p, (init(keys, tb).params, tb), idx, ks))["success"])
    rr = rr[:, m].ravel()
    pooled["resid"].append(rr)
    pooled["replan"].append(rb)
    print(f"{name} ({int(p.pump_mask.sum())} pumps, {int(m.sum())} episodes x {c.n_seeds} init "
          f"seeds): residual agent {rr.mean():.3f}, heel-aware replanner {rb.mean():.3f}")
  print("pooled: " + ", ".join(f"{k} {np.concatenate(v).mean():.3f}" for k, v in pooled.items()))


def main(argv):
  del argv
  ships, steps = _SHIPS.value, _STEPS.value
  if _V2_BANK.value:
    v2_bank_report(_LAYOUTS.value, _BANK.value)
    return
  if _TRAIN_HASH.value:
    train_hash(_TRAIN_HASH.value)
    return
  if _RESID_PROBE.value:
    resid_probe()
    return
  if _HYDRO.value:
    hydro_report(_LAYOUTS.value, _BANK.value, ships, steps)
    return
  env, params = make_ballast()
  bp = B.make_params(params, bayes=False)

  def fixed(obs, state, key):
    del obs, key
    return (state.time * 7) % env.num_actions

  def random_masked(obs, state, key):
    # one uniform + inverse CDF over the mask (a Gumbel per action would cost 257 PRNG words)
    m = env.action_mask(state, params)
    return _categorical_icdf(jax.random.uniform(key), m.astype(jnp.float32))

  def replan(obs, state, key):
    return B.replan_policy(bp, obs, key)

  sps_env = _bench(env, params, fixed, ships, steps)
  sps_rand = _bench(env, params, random_masked, ships, steps)
  sps_replan = _bench(env, params, replan, ships, steps)
  cp, cp_params = gymnax.make("CartPole-v1")
  sps_cp = _bench(cp, cp_params, lambda o, s, k: jax.random.randint(k, (), 0, 2), ships, steps)
  print(f"BallastNet-v0 (ring14), {ships} ships x {steps} steps, {jax.devices()[0].platform}, "
        f"{os.cpu_count()} cores; env steps per wall second (per CPU second):")
  rows = [("env only (fixed route)", sps_env), ("random masked routes", sps_rand),
          ("B-replan routes", sps_replan), ("reference CartPole-v1", sps_cp)]
  for name, (w, c) in rows:
    print(f"  {name:24s}: {w:12,.0f}  ({c:12,.0f} per CPU-s)")
  print(f"  ratio BallastNet/CartPole (wall) = {sps_env[0] / sps_cp[0]:.3f} (env only), "
        f"{sps_rand[0] / sps_cp[0]:.3f} (random), {sps_replan[0] / sps_cp[0]:.3f} (B-replan)")


if __name__ == "__main__":
  app.run(main)
