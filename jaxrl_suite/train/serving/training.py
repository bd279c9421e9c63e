"""RL training for the serving studies: seeds vmapped in one jit, budget checkpoints, resume.

  ALGOS                                  {"ppo": algos.ppo, "reinforce": algos.reinforce}
  train_checkpoints(mod, acfg, env, params, seeds, n_chunks, desc, ...)
      -> ([params stacked over seeds [S, ...]] per checkpoint, curves [S, U], seconds)
  bc_warm_params(mod, acfg, env, params, teacher, seeds, bcfg)
      -> (params stacked over seeds, BC accuracy [S], seconds)
  learned_sweep(c, env, params, seeds, path, budget, reuse, desc)
      -> ({algo: [params at budget/2, at budget]}, {algo: curves [S, U]}, {algo: seconds})
  net_policy(c, env, params)   -> (policy(net, obs, key) -> actions, template net params)
  with_modes(c, learned)       -> {variant: {"params", "greedy" [S]}} per action mode
  library_fingerprint()        -> sha256 prefix of jaxrl_suite's code (part of every cache key)

Files: `train_checkpoints` writes its resume file (tree_io npz) and `learned_sweep` its policy
file (harness.save_policy) where the caller says; the file formats are the scripts' workdir
caches and must not change without a new cache key.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

import jaxrl_suite
from jaxrl_suite.algos import behaviour_cloning, ppo, reinforce
from jaxrl_suite.core import tree_io
from jaxrl_suite.core.networks import ActorCritic
from jaxrl_suite.envs.serving import harness

ALGOS = {"ppo": ppo, "reinforce": reinforce}


def library_fingerprint() -> str:
  """sha256 of every jaxrl_suite/*.py file (paths and contents): part of every workdir cache
  key, so a cache made by other library code (engine, learners, agents) is never reused, while
  a change to an experiment script's plumbing keeps it."""
  root = os.path.dirname(os.path.abspath(jaxrl_suite.__file__))
  h = hashlib.sha256()
  for d, dirs, files in sorted(os.walk(root)):
    dirs.sort()
    for f in sorted(x for x in files if x.endswith(".py")):
      path = os.path.join(d, f)
      h.update(os.path.relpath(path, root).encode())
      with open(path, "rb") as fh:
        h.update(fh.read())
  return h.hexdigest()[:16]


def train_checkpoints(mod, acfg, env, params, seeds: Sequence[int], n_chunks: int, desc: str,
                      init_params: Any = None, resume_path: str | None = None,
                      resume_key: str = ""):
  """Trains one policy per seed, all seeds vmapped in one jit, in `n_chunks` equal chunks of
  updates of ONE run (the learning-rate schedule is the full run's), keeping the params after
  each chunk: the budget sweep's checkpoints at budget i / n_chunks. init_params (stacked over
  seeds): warm start (behaviour cloning) instead of the learner's initialisation.

  resume_path: after each chunk the whole runner state (params, optimiser state, env states,
  PRNG keys) and the checkpoints so far are written there (tree_io, atomic), and a run that
  finds a file with the same `resume_key` continues after its last chunk. Chunks are
  deterministic, so an interrupted and resumed run gives the uninterrupted run's result.
  Returns ([params stacked over seeds] per checkpoint, curves [S, U], seconds)."""
  t0 = time.time()
  learner = mod.make_learner(acfg, env, params)
  n = learner.num_updates
  if n % n_chunks:
    raise ValueError(f"{desc}: {n} updates do not split into {n_chunks} budget checkpoints")
  keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
  if init_params is None:
    rs = jax.jit(jax.vmap(learner.init))(keys)
  else:
    rs = jax.jit(jax.vmap(lambda k, p: behaviour_cloning.warm_start(learner, p, k)))(
        keys, init_params)
  run = jax.jit(jax.vmap(lambda r: learner.run(r, n // n_chunks)))
  ckpts, curves, spent = [], [], 0.0
  if resume_path and os.path.exists(resume_path):
    rs, ckpts, curves, spent = _resume(resume_path, resume_key, rs, n_chunks)
    if ckpts:
      print(f"{desc}: resuming after checkpoint {len(ckpts)} / {n_chunks} ({resume_path})",
            flush=True)
  for _ in tqdm(range(len(ckpts), n_chunks), desc=f"{desc} ({len(seeds)} seeds vmapped)",
                initial=len(ckpts), total=n_chunks):
    rs, met = jax.block_until_ready(run(rs))
    ckpts.append(rs.train_state.params)
    curves.append(np.asarray(met["returned_episode_returns"]))
    if resume_path:
      tree_io.save_tree(resume_path, {
          "key": resume_key, "state": [np.asarray(x) for x in jax.tree.leaves(rs)],
          "ckpts": [jax.tree.map(np.asarray, c) for c in ckpts], "curves": curves,
          "seconds": spent + time.time() - t0})
  return ckpts, np.concatenate(curves, 1), spent + time.time() - t0


def _resume(path: str, key: str, rs, n_chunks: int):
  """(runner state, checkpoints, curves, seconds) from a `train_checkpoints` resume file, or
  the fresh `rs` and nothing if the file is another run's (key) or does not fit `rs`."""
  saved = tree_io.load_tree(path)
  leaves, treedef = jax.tree.flatten(rs)
  state = saved.get("state", [])
  if (saved.get("key") != key or len(state) != len(leaves) or len(saved["ckpts"]) > n_chunks
      or any(np.shape(a) != np.shape(b) for a, b in zip(state, leaves))):
    print(f"{path}: another run's state; training from the start", flush=True)
    return rs, [], [], 0.0
  rs = jax.tree.unflatten(treedef, [jnp.asarray(a, dtype=b.dtype) for a, b in zip(state, leaves)])
  ckpts = [jax.tree.map(jnp.asarray, c) for c in saved["ckpts"]]
  return rs, ckpts, [np.asarray(c) for c in saved["curves"]], float(saved["seconds"])


def bc_warm_params(mod, acfg, env, params, teacher, seeds: Sequence[int], bcfg):
  """Per seed: the learner's initial agent params fitted by behaviour cloning to demonstrations
  of `teacher(obs [B, ...], key) -> actions [B]` in `env` (bcfg: num_envs, num_steps, steps,
  batch_size, lr). Returns (params stacked over seeds, accuracy per seed [S], seconds)."""
  t0 = time.time()
  agent = mod.make_learner(acfg, env, params).agent
  demos = jax.jit(lambda k: behaviour_cloning.collect(
      env, params, teacher, k, int(bcfg.num_envs), int(bcfg.num_steps)))(
          jax.random.PRNGKey(int(seeds[0]) + 7919))

  def one(seed_key):
    k_init, k_fit = jax.random.split(seed_key)
    p0 = agent.init(k_init, demos.obs[:1])
    p, _ = behaviour_cloning.fit(agent, p0, demos, k_fit, int(bcfg.steps), int(bcfg.batch_size),
                                 float(bcfg.lr))
    return p, behaviour_cloning.accuracy(agent, p, demos)

  keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 1) for s in seeds])
  p, acc = jax.block_until_ready(jax.jit(jax.vmap(one))(keys))
  return p, np.asarray(acc), time.time() - t0


def learned_sweep(c, env, params, seeds, path: str, budget: dict[str, int], reuse: bool,
                  desc: str):
  """Trains (or reloads) every algorithm in c.algos, all seeds vmapped, as one run per
  algorithm whose params are kept at half and at the whole budget (`train_checkpoints` with 2
  chunks): the last budget doubling, which the fair-chance rule scores on validation windows.
  Policies saved in `path` by a run with the same budget, seeds, table, loads and library are
  reused; `reuse` (--eval_trace, --reuse_policies) always reuses what is there.
  Returns ({algo: [params at budget/2, params at budget], each stacked over seeds},
  {algo: curves [S, U]}, {algo: train seconds})."""
  run_key = json.dumps([budget, list(seeds), int(c.train_table), list(c.loads),
                        library_fingerprint()])
  saved = harness.load_policy(path) if os.path.exists(path) else None
  if saved is not None and (reuse or str(saved.get("key", "")) == run_key):
    return ({a: [jax.tree.map(jnp.asarray, p) for p in v] for a, v in saved["params"].items()},
            saved["curves"], saved.get("train_time", {}))
  learned, curves, train_time = {}, {}, {}
  for a in c.algos:
    acfg = c[a].copy_and_resolve_references()
    acfg.total_timesteps = int(budget[a])
    learned[a], cv, train_time[a] = train_checkpoints(ALGOS[a], acfg, env, params, seeds, 2,
                                                      f"{desc} train {a}")
    curves[a] = cv.tolist()
  harness.save_policy(path, {"params": learned, "curves": curves, "key": run_key,
                             "train_time": train_time})
  return learned, curves, train_time


def net_policy(c, env, params):
  """(policy(net, obs, key), template net params) of the network every algorithm in
  c.algos trains (they must share the agent and its network, so one evaluator serves all).
  The agent is the one `c.<algo>.agent` names ("mlp": hidden_sizes / activation; "entities":
  the set encoder over the entity observation)."""
  if not c.algos:
    return (lambda net, obs, key: jnp.zeros(obs.shape[:-1], jnp.int32)), {}
  first = c.algos[0]
  arch = lambda a: (c[a].get("agent", "mlp"), tuple(c[a].hidden_sizes), c[a].activation,
                    json.dumps(c[a].entities.to_dict(), sort_keys=True))
  for a in c.algos:
    if arch(a) != arch(first):
      raise ValueError(f"config.{a} network (agent, hidden_sizes, activation, entities) differs "
                       f"from config.{first}: one evaluator needs one architecture")
  obs_dim = int(np.prod(env.observation_space(params).shape))
  if c[first].get("agent", "mlp") == "mlp":
    net = ActorCritic(int(env.num_actions), tuple(c[first].hidden_sizes), c[first].activation)
    template = net.init(jax.random.PRNGKey(0), jnp.zeros((1, obs_dim), jnp.float32))
  else:
    template = ALGOS[first].make_learner(c[first], env, params).agent.init(
        jax.random.PRNGKey(0), jnp.zeros((1, obs_dim), jnp.float32))
  f = ALGOS[first].make_policy(c[first], env, params)

  def policy(net, obs, key):
    # The action mode is data (net["greedy"]), so one compiled evaluator runs both: sampled (the
    # trained policy itself) and greedy argmax, which can be a different policy (in routing
    # every seed's argmax once sent everything to the H100).
    return jnp.where(net["greedy"], f(net["params"], obs, key, greedy=True),
                     f(net["params"], obs, key, greedy=False))

  return policy, {"params": template, "greedy": jnp.zeros((), bool)}


def with_modes(c, learned: dict[str, Any]) -> dict[str, Any]:
  """{algo: params stacked over seeds} -> {variant: {"params", "greedy" [S]}}, one variant per
  action mode in c.rl_modes: "ppo" = sampled actions, "ppo-greedy" = argmax. Which variant
  counts as RL's result is chosen per load on the training windows (by the script, through
  jaxrl_suite.repro)."""
  out = {}
  for a, p in learned.items():
    n = jax.tree.leaves(p)[0].shape[0]
    for m in c.rl_modes:
      out[a if m == "sampled" else f"{a}-greedy"] = {"params": p,
                                                      "greedy": jnp.full((n,), m == "greedy")}
  return out
