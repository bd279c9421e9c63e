"""One evaluation harness for baselines and learned policies on BallastNet.

`evaluate(env, env_params, policy, policy_params, keys)` runs one episode per key (vmapped, a
`lax.scan` of max_steps_in_episode steps without auto-reset; a finished episode is frozen) and
returns per-episode arrays. Paired seeds: the same key gives the same clogs, plan and sounding
noise sequence for every policy (the sounding noise is drawn from the step key, independent of
the action), so differences are due to the policies alone.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.ballast.env import BallastNet, EnvParams


N_FLAGS = 2  # per-step flags counted by the evaluators (see make_evaluate)


def make_evaluate(env: BallastNet, policy: Callable, diag_fn: Callable | None = None,
                  num_steps: int = 96, flag_fn: Callable | None = None):
  """Returns evaluate(env_params, policy_params, keys) -> dict of per-episode arrays.

  `num_steps` (static) should equal env_params.max_steps_in_episode.

  Output fields [N]: steps (decision steps until success, or the limit), success, capsized,
  max_heel, heel_steps, noop_steps; [N, E]: clog (true), exercised, diag
  (diag_fn(policy_params, final_obs) if given), final_obs [N, D]; flag_steps [N, N_FLAGS]: the
  number of live steps on which flag_fn(policy_params, obs, action) -> bool[N_FLAGS] held
  (e.g. "the action differs from B-replan's"; zeros without flag_fn).
  """

  def episode(env_params: EnvParams, policy_params: Any, key: jax.Array):
    kr, ks = jax.random.split(key)
    obs, state = env.reset_env(kr, env_params)

    def step(carry, k):
      obs, state, done, steps, noop_steps, flag_steps = carry
      ka, ke = jax.random.split(k)
      action = policy(policy_params, obs, ka)
      obs2, state2, _, term, _ = env.step_env(ke, state, action, env_params)
      keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(done, b, a), new, old)
      obs_n, state_n = keep((obs2, state2), (obs, state))
      is_noop = jnp.all(jnp.asarray(action) >= env.num_actions - 1)
      steps = steps + (~done)
      noop_steps = noop_steps + (~done & is_noop)
      if flag_fn is not None:
        flag_steps = flag_steps + (~done & flag_fn(policy_params, obs, action))
      return (obs_n, state_n, done | term, steps, noop_steps, flag_steps), None

    carry0 = (obs, state, jnp.array(False), jnp.int32(0), jnp.int32(0),
              jnp.zeros(N_FLAGS, jnp.int32))
    (obs, state, done, steps, noop_steps, flag_steps), _ = jax.lax.scan(
        step, carry0, jax.random.split(ks, num_steps))
    out = {"steps": steps, "success": state.success,
           "capsized": done & ~state.success, "max_heel": state.max_heel,
           "heel_steps": state.heel_steps, "noop_steps": noop_steps, "clog": state.clog,
           "exercised": state.exercised, "final_obs": obs, "flag_steps": flag_steps}
    if diag_fn is not None:
      out["diag"] = diag_fn(policy_params, obs)
    return out

  def evaluate(env_params: EnvParams, policy_params: Any, keys: jax.Array):
    return jax.vmap(episode, in_axes=(None, None, 0))(env_params, policy_params, keys)

  return jax.jit(evaluate)


def _switch(pid, fns, *args):
  """lax.switch over fns(*args); pid traced, so one compile serves every branch."""
  return jax.lax.switch(pid, list(fns), *args)


def _no_flags(*_):
  return jnp.zeros(N_FLAGS, bool)


def make_switch_evaluate(env: BallastNet, branches: Sequence[tuple[Callable, Callable | None]],
                         num_steps: int = 96):
  """One compiled evaluator for several policies: evaluate(env_params, branch_params, pid, keys)
  runs branch pid = (policy, flag_fn or None) with branch_params[pid] (a tuple with one entry
  per branch; keep its structure and the number of keys fixed to avoid recompiles)."""

  def policy(pp, obs, key):
    xp, pid = pp
    return _switch(pid, [lambda o, k, f=f, i=i: jnp.asarray(f(xp[i], o, k), jnp.int32)
                         for i, (f, _) in enumerate(branches)], obs, key)

  def flags(pp, obs, action):
    xp, pid = pp
    return _switch(pid, [(lambda o, a, g=g, i=i: g(xp[i], o, a).astype(bool)) if g else _no_flags
                         for i, (_, g) in enumerate(branches)], obs, action)

  inner = make_evaluate(env, policy, None, num_steps, flags)

  @jax.jit
  def evaluate(env_params, branch_params, pid, keys):
    return inner(env_params, (branch_params, jnp.int32(pid)), keys)

  return evaluate


def make_baseline_evaluate(env: BallastNet, num_steps: int = 96,
                           extra: Sequence[tuple[Callable, ...]] = ()):
  """One compiled evaluator for every baseline (a `lax.switch` on a policy id), so the env is
  compiled once. Returns evaluate(env_params, baseline_params, pid, keys, extra_params=());
  pid indexes `baselines.BASELINES`, then the `extra` (policy, diag_fn[, flag_fn]) tuples (e.g.
  the RL agent: pid = len(BASELINES) + i, with its params in extra_params[i]). Adds "diag": the
  reference diagnosis of the final observation for a baseline, diag_fn(extra_params[i],
  final_obs) for an extra policy; "flag_steps" counts flag_fn(extra_params[i], obs, action)
  (zeros for baselines). pid is traced and not vmapped, so the switch runs only the chosen
  branch and one compile serves every policy, step length and layout of the same padded shapes
  (keep the number of keys and the extra_params structure fixed to avoid recompiles).

  For pid == BASELINES.index("oracle") pass env_params.replace(reveal_clog=True).
  """
  from jaxrl_suite.envs.ballast import baselines as B  # local: baselines imports env only
  from jaxrl_suite.envs.ballast.diagnosis import reference_diagnosis

  branches = [B.POLICIES[n] for n in B.BASELINES]

  def policy(pp, obs, key):
    bp, xp, pid = pp
    fns = [lambda o, k, f=f: jnp.int32(f(bp, o, k)) for f in branches]
    fns += [lambda o, k, f=e[0], i=i: jnp.int32(f(xp[i], o, k)) for i, e in enumerate(extra)]
    return _switch(pid, fns, obs, key)

  def flags(pp, obs, action):
    _, xp, pid = pp
    fns = [_no_flags] * len(branches)
    fns += [(lambda o, a, g=e[2], i=i: g(xp[i], o, a).astype(bool)) if len(e) > 2 else _no_flags
            for i, e in enumerate(extra)]
    return _switch(pid, fns, obs, action)

  inner = make_evaluate(env, policy, None, num_steps, flags)

  @jax.jit
  def evaluate(env_params, bp, pid, keys, extra_params=()):
    pid = jnp.int32(pid)
    out = inner(env_params, (bp, extra_params, pid), keys)
    diag_fns = [lambda o: reference_diagnosis(o, env_params)] * len(branches)
    diag_fns += [lambda o, d=e[1], i=i: d(extra_params[i], o).astype(bool)
                 for i, e in enumerate(extra)]
    out["diag"] = jax.vmap(lambda o: jax.lax.switch(pid, diag_fns, o))(out["final_obs"])
    return out

  return evaluate
