"""Two probes of experiments/bench_ballast.py on the full ballast_hydro config (configs/
ballast_hydro.py, passed in as `c`), each yielding its printed lines as it goes:

  train_hash(c, n_chunks)   rl_gru trained [c.n_seeds seeds] on 16-episode banks of the first 4
      training layouts for n_chunks 5-update chunks, the sha256 of its parameters after each:
      compare processes (e.g. one under `taskset -c 0`) for bitwise determinism;
  resid_probe(c, n)         success on the >=1-blocked episodes of n-episode banks of the
      held-out and shipped layouts: rl_gru_resid at initialisation (the residual dominates:
      w_init) vs the heel-aware replanner with a command per pump, same episodes.
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.algos import ballast as AB
from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast import load_layout, make_hydro
from jaxrl_suite.envs.ballast.hydro_layouts import pick_layouts
from jaxrl_suite.envs.ballast.hydro_rollout import (make_hydro_evaluate,
                                                    make_hydro_evaluate_recurrent)
from jaxrl_suite.envs.ballast.routes import layout_sizes


def hydro_family(c, n_bank: int, n_train: int, seed: int):
  """(train envs, held-out + shipped envs by name) of config c: (env, params, report) each,
  padded to the family's sizes; the evaluation envs only when seed >= 0."""
  tr = pick_layouts(c.train_seed0, c.n_train, c.max_routes)
  held = pick_layouts(c.heldout_seed0, c.n_heldout, c.max_routes)
  ship = [load_layout(n) for n in c.shipped]
  sizes = layout_sizes(tr + held + ship)
  mk = lambda l, s: make_hydro(l, n_bank=n_bank, seed=s, sizes=sizes,
                               reward_scale=c.reward_scale)
  return ([mk(l, 0) for l in tr[:n_train]],
          {l["name"]: mk(l, seed) for l in held + ship} if seed >= 0 else {})


def train_hash(c, n_chunks: int) -> Iterator[str]:
  """Per-chunk sha256 of rl_gru's parameters (module doc)."""
  envs, _ = hydro_family(c, 16, 4, -1)
  env = envs[0][0]
  tabs = [A.make_tables(p, False, env.agent_api) for _, p, _ in envs]
  init, chunk = AB.make_trainer(c, env, 5 * n_chunks, c.chunk_updates)
  keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(0), 100), c.n_seeds)
  state = init(keys, tabs[0])
  cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  yield f"{cpus} CPUs, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
  for i in range(n_chunks):
    keys = jax.vmap(lambda k, i=i: jax.random.fold_in(k, i))(keys)
    state, m = chunk(state, tabs[i % len(tabs)], keys)
    h = hashlib.sha256()
    for x in jax.tree.leaves(jax.device_get(state.params)):
      h.update(np.asarray(x).tobytes())
    yield (f"chunk {i}: params {h.hexdigest()[:16]} episode_length "
           f"{np.asarray(m['episode_length']).mean(-1).round(4).tolist()}")


def resid_probe(c, n: int = 64) -> Iterator[str]:
  """The residual agent at init vs the heel-aware replanner, per layout and pooled (module doc)."""
  _, evals = hydro_family(c, n, 0, 1)
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
    yield (f"{name} ({int(p.pump_mask.sum())} pumps, {int(m.sum())} episodes x {c.n_seeds} "
           f"init seeds): residual agent {rr.mean():.3f}, heel-aware replanner {rb.mean():.3f}")
  yield "pooled: " + ", ".join(f"{k} {np.concatenate(v).mean():.3f}" for k, v in pooled.items())
