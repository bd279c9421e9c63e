"""Rail pricing's speed benchmark (experiments/bench_rail.py): seconds per PPO update of a variant.

Builds a variant exactly as experiments/rail_pricing.py does (the full config `c`, c.n_seeds
seeds vmapped in one jit) and times, after a warm-up call that compiles:

  update   one learner update (rollout of num_envs x num_steps env steps, GAE, update_epochs x
           num_minibatches gradient steps), the unit of the budget sweep;
  rollout  the rollout alone (rollout.collect + rollout.next_values: env steps, the actor's
           forward pass on every row, the critic on the successors);
  env      the env alone (the same steps with a fixed fare, no agent);

as (wall s, process-CPU s) of the fastest call (core/bench.py: on a shared machine the wall time
grows with other people's load; CPU seconds are what a quiet machine would take).

Where the time went (docs/rail_pricing.md, "Speed"): the env's Poisson sampler took jnp.cumsum
over 40 pmf terms, which XLA:CPU lowers to a reduce_window (quadratic in the terms): 70% of an
env step, and most of an MLP update.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from jaxrl_suite.algos import rollout
from jaxrl_suite.core import bench
from jaxrl_suite.train.rail import variants


def _env_only(c, env, p, vec):
  """runner state -> reward sums (num_steps,) of the env stepped with a fixed middle fare."""
  def run(r):
    def body(st, k):
      a = jnp.full((vec.num_envs, vec.num_agents), env.num_actions // 2, jnp.int32)
      _, st, rew, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
          jax.random.split(k, vec.num_envs), st, a, p)
      return st, rew.sum()
    return jax.lax.scan(body, r.env.env_state, jax.random.split(r.key, int(c.rl.num_steps)))[1]
  return run


def bench_variant(c, name: str, updates: int, repeats: int) -> dict:
  """{"update", "rollout", "env": (wall s, CPU s), "compile_s"} of variant `name` (all seeds
  together; "update" per update, from calls of `updates` updates)."""
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

  timed = lambda f: bench.best_of(lambda: f(rs), repeats).fastest()
  upd = timed(run)
  return {"update": (upd[0] / updates, upd[1] / updates),
          "rollout": timed(jax.jit(jax.vmap(roll))),
          "env": timed(jax.jit(jax.vmap(_env_only(c, env, p, vec)))), "compile_s": compile_s}
