"""Benchmark: seconds per PPO update of the rail pricing variants, relational vs MLP.

Builds each variant exactly as experiments/rail_pricing.py does (full config, n_seeds seeds
vmapped in one jit) and times, after a warm-up call that compiles:

  update   one learner update (rollout of num_envs x num_steps env steps, GAE, update_epochs x
           num_minibatches gradient steps), the unit of the budget sweep;
  rollout  the rollout alone (rollout.collect + rollout.next_values: env steps, the actor's
           forward pass on every row, the critic on the successors);
  env      the env alone (the same steps with a fixed fare, no agent);

as wall seconds and process-CPU seconds (on a shared machine the wall time grows with other
people's load; CPU seconds are what a quiet machine would take, summed over its cores). Prints
the relational / MLP ratio of each learner and action form.

  python -m experiments.bench_rail [--variants ippo_mlp,ippo_rel,mappo_mlp,mappo_rel]
                                   [--updates 4] [--repeats 2]

Where the time went (docs/rail_pricing.md, "Speed"): the env's Poisson sampler took jnp.cumsum
over 40 pmf terms, which XLA:CPU lowers to a reduce_window (quadratic in the terms): 70% of an
env step, and most of an MLP update.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and __package__ in (None, ""):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time

from absl import app, flags
import jax
import jax.numpy as jnp

_VARIANTS = flags.DEFINE_list("variants", ["ippo_mlp", "ippo_rel", "mappo_mlp", "mappo_rel"],
                              "variants of configs/rail_pricing.py to time")
_UPDATES = flags.DEFINE_integer("updates", 4, "updates per timed call")
_REPEATS = flags.DEFINE_integer("repeats", 2, "timed calls per piece (the fastest is kept)")


def _timed(f, *args, repeats: int) -> tuple[float, float]:
  """(wall s, CPU s) of the fastest of `repeats` calls of a compiled f (one warm-up first)."""
  jax.block_until_ready(f(*args))
  best = (float("inf"), float("inf"))
  for _ in range(repeats):
    t, c = time.perf_counter(), time.process_time()
    jax.block_until_ready(f(*args))
    best = min(best, (time.perf_counter() - t, time.process_time() - c))
  return best


def bench_variant(c, name: str, updates: int, repeats: int) -> dict:
  """Per-update seconds of one variant (all seeds together): update, rollout, env, compile."""
  from jaxrl_suite.algos import rollout
  from jaxrl_suite.train.rail import variants
  env, p = variants.make_env(c, variants.parse(name)[2])
  learner, agent = variants.learner(c, env, p, name)
  vec = learner.vec_env
  rs = jax.jit(jax.vmap(learner.init))(jax.random.split(jax.random.PRNGKey(0), c.n_seeds))
  run = jax.jit(jax.vmap(lambda r: learner.run(r, updates)))
  t = time.perf_counter()
  jax.block_until_ready(run(rs))
  compile_s = time.perf_counter() - t

  def roll(r):
    carry, _, traj = rollout.collect(agent, r.train_state.params, vec, r.env, r.key,
                                     int(c.rl.num_steps))
    return rollout.next_values(agent, r.train_state.params, vec, traj, carry)

  def env_only(r):
    def body(st, k):
      a = jnp.full((vec.num_envs, vec.num_agents), env.num_actions // 2, jnp.int32)
      _, st, rew, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
          jax.random.split(k, vec.num_envs), st, a, p)
      return st, rew.sum()
    return jax.lax.scan(body, r.env.env_state, jax.random.split(r.key, int(c.rl.num_steps)))[1]

  upd = _timed(run, rs, repeats=repeats)
  rol = _timed(jax.jit(jax.vmap(roll)), rs, repeats=repeats)
  ev = _timed(jax.jit(jax.vmap(env_only)), rs, repeats=repeats)
  return {"update": (upd[0] / updates, upd[1] / updates), "rollout": rol, "env": ev,
          "compile_s": compile_s}


def main(argv):
  del argv
  import configs.rail_pricing as cfg
  from jaxrl_suite.train.rail import variants
  c = cfg.get_config()
  print(f"{c.n_seeds} seeds vmapped, {c.rl.num_envs} envs x {c.rl.num_steps} steps x {c.pad} "
        f"trains per update, {c.rl.update_epochs} epochs x {c.rl.num_minibatches} minibatches; "
        f"agent {c.agent.to_dict()}; {jax.devices()[0].platform}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
  out = {}
  for name in _VARIANTS.value:
    r = out[name] = bench_variant(c, name, _UPDATES.value, _REPEATS.value)
    print(f"{name:16s} update {r['update'][0]:.3f} s wall {r['update'][1]:.3f} s CPU | rollout "
          f"{r['rollout'][0]:.3f} / {r['rollout'][1]:.3f} | env {r['env'][0]:.3f} / "
          f"{r['env'][1]:.3f} | compile {r['compile_s']:.0f} s", flush=True)
  for name in out:
    mode, att, form = variants.parse(name)
    mlp = name.replace("_rel", "_mlp")
    if att and mlp in out:
      a, b = out[name]["update"], out[mlp]["update"]
      print(f"{name} / {mlp}: x{a[0] / b[0]:.2f} wall, x{a[1] / b[1]:.2f} CPU per update "
            f"(+{a[1] - b[1]:.3f} CPU s)")


if __name__ == "__main__":
  app.run(main)
