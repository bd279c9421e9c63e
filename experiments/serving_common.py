"""The pipeline shared by `experiments/serving_batching.py` and `experiments/serving_routing.py`.

calibrate the load -> tune every baseline family on TRAINING windows (one batched call) -> train
RL (PPO, REINFORCE; seeds vmapped in one jit or one after another) -> evaluate baselines and
learned policies on later, unseen windows with ONE compiled evaluator per environment
(`harness.Evaluator` over a universal policy) -> per-seed metrics, paired ratios, verdicts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Sequence

from absl import flags
import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import config_flags
from tqdm import tqdm

from experiments import cli
import jaxrl_suite
from jaxrl_suite.algos import behaviour_cloning, ppo, reinforce
from jaxrl_suite.core import results, stats, tree_io
from jaxrl_suite.core.networks import ActorCritic
from jaxrl_suite.envs.serving import harness, heuristics, protocol, traces, workload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALGOS = {"ppo": ppo, "reinforce": reinforce}
_FLAG_NAMES = ("config", "quick", "workdir", "eval_trace", "reuse_policies")

# The serving studies' measurement protocol lives in the library (envs/serving/protocol.py);
# these names keep the scripts' `common.X` calls.
tune = protocol.tune
best_heuristic_capacity = protocol.best_heuristic_capacity
evaluate_table = protocol.evaluate_table
mean_of = protocol.mean_of
cells = protocol.cells
results_rows = protocol.results_rows
ratio_rows = protocol.ratio_rows
knob_line = protocol.knob_line
tuned_payload = protocol.tuned_payload


def define_flags(name: str) -> dict[str, Any]:
  """The CLI of a serving reproduction. Both scripts define the same flag names, so a second
  import in one process (tests) replaces the first one's definitions."""
  cli.replace_flags(_FLAG_NAMES)
  return {
      "config": config_flags.DEFINE_config_file(
          "config", os.path.join(ROOT, "configs", f"{name}.py"), "experiment config"),
      "quick": flags.DEFINE_bool("quick", False, "small, fast run (CI)"),
      "workdir": flags.DEFINE_string(
          "workdir", None, f"work directory (default workdirs/{name}, per trace for routing)"),
      "eval_trace": flags.DEFINE_string(
          "eval_trace", None, "evaluate the saved policies (and tuned baselines) on this trace"),
      "reuse_policies": flags.DEFINE_bool(
          "reuse_policies", False, "evaluate the policies saved in --workdir instead of training"),
  }


def config_module(name: str):
  if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
  import importlib  # pylint: disable=g-import-not-at-top
  return importlib.import_module(f"configs.{name}")


def get_config(name: str, fl: dict[str, Any]):
  """--config, or with --quick the config's quick variant plus any --config.x overrides."""
  return cli.config_for(config_module(name), fl["config"].value, fl["quick"].value)


def enable_compilation_cache() -> None:
  """Persistent XLA cache (as `make`/reproduce.py do): re-runs skip most compilation."""
  jax.config.update("jax_compilation_cache_dir", os.environ.get(
      "JAX_COMPILATION_CACHE_DIR", os.path.join(ROOT, ".jax_cache")))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


# ------------------------------------------------------------------------------ traces

def load_traces(c, eval_trace: str | None):
  """(train, test) traces: early / late part of the shipped trace, or --eval_trace as test."""
  train_tr, test_tr = traces.load_shipped(c.trace).split(c.train_frac)
  if eval_trace:
    test_tr = traces.load_trace(eval_trace)
    # Checked before any training: the evaluation needs n_eval_windows distinct windows of
    # eval_table requests (a 3-request file used to give three verdicts).
    need = int(c.eval_table) + int(c.n_eval_windows) - 1
    if len(test_tr) < need:
      raise traces.TraceError(
          f"{eval_trace}: {len(test_tr)} requests, too few for {c.n_eval_windows} evaluation "
          f"windows of config.eval_table={c.eval_table} requests (needs >= {need}); use a "
          "longer trace or lower --config.eval_table / --config.n_eval_windows")
  return train_tr, test_tr


def eval_setup(c, make, train_tr, test_tr, **kw):
  """Evaluation env and its params on the train and test traces (padded to one length, so one
  compiled evaluator serves both), the PRNG key, and the tuning (random, training part) and
  evaluation (evenly spaced, later part) window starts. `make(table_size=, trace=, **kw)` is an
  env factory. Returns (env, p_train, p_test, key, tune_starts, test_starts)."""
  env, p_train = make(table_size=c.eval_table, trace=train_tr, **kw)
  _, p_test = make(table_size=c.eval_table, trace=test_tr, **kw)
  length = padded_length(p_train, p_test)
  p_train = p_train.replace(trace=workload.pad_trace(p_train.trace, length))
  p_test = p_test.replace(trace=workload.pad_trace(p_test.trace, length))
  rng = np.random.default_rng(c.seed)
  tune_starts = harness.window_starts(len(train_tr), c.eval_table, c.n_tune_windows, rng)
  test_starts = harness.window_starts(len(test_tr), c.eval_table, c.n_eval_windows)
  return env, p_train, p_test, jax.random.PRNGKey(c.seed), tune_starts, test_starts


def main(name: str, run, fl: dict[str, Any]) -> None:
  """Body of each script's absl `main`: config from flags, compilation cache, run."""
  enable_compilation_cache()
  with cli.user_errors():
    run(get_config(name, fl), fl["quick"].value, fl["workdir"].value, fl["eval_trace"].value,
        fl["reuse_policies"].value)


def replay_length(c, n_eval_part: int, trace: str) -> tuple[int, int]:
  """(eval_table, train_table) for an evaluation part of n_eval_part requests, one rule for
  every serving study: replays no longer than the evaluation part holds n_eval_windows times
  (disjoint windows), in multiples of 64; train on the same length when they are shortened."""
  fit = int(c.eval_table)
  if n_eval_part // int(c.n_eval_windows) < fit:
    fit = n_eval_part // int(c.n_eval_windows) // 64 * 64
  if fit < min(64, int(c.eval_table)):
    raise traces.TraceError(f"{trace}: evaluation part of {n_eval_part} requests is too short "
                            f"for {c.n_eval_windows} windows of >= 64 requests")
  train = min(int(c.train_table), fit) if fit < int(c.eval_table) else int(c.train_table)
  return fit, train


def window_of(c) -> int | None:
  """The engine window of the config (None: the whole episode, the measured protocol)."""
  return int(c.window) if int(c.window) > 0 else None


def warmup_of(c) -> int:
  """Leading requests of each evaluation episode excluded from its metrics."""
  return int(float(c.warmup_frac) * int(c.eval_table))


def padded_length(*params, bucket: int = 4096) -> int:
  """Trace length both traces are padded to: rounded up to `bucket` rows, so that runs on other
  traces (--eval_trace) reuse the persistent compilation cache."""
  n = max(p.trace.arrival.shape[0] for p in params)
  return -(-n // bucket) * bucket


def clip_stats(tr: traces.Trace, max_model_len: int = 4096, max_output: int = 2048
               ) -> dict[str, float]:
  """`traces.clip_stats` for the routing study's model (Llama-2-7B, a 4096-token context)."""
  return traces.clip_stats(tr, max_model_len, max_output)


def clip_line(stats_: dict[str, dict[str, float]]) -> str:
  return ("Context clipping (Llama-2 4096-token context: output <= 2048, prompt left-truncated to "
          "4096 - output): " + "; ".join(
              f"{k}: {v['clipped_share']:.1%} of {v['requests']} requests clipped "
              f"({v['prompt_tokens_removed_share']:.1%} of prompt tokens removed)"
              for k, v in stats_.items()) + ".")


# ------------------------------------------------------------------------------ RL

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


def library_fingerprint() -> str:
  """sha256 of every jaxrl_suite/*.py file (paths and contents): part of every workdir cache
  key, so a cache made by other library code (engine, learners, agents) is never reused, while
  a change to an experiment script's plumbing keeps it."""
  import hashlib
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


def budget_gain(table, name: str, prev: str, ld, metric: str = "goodput"):
  """Gain of the last budget checkpoint over the one before (paired cells, two-way bootstrap
  over seeds x windows): (mean, lo, hi) of metric(last) - metric(prev)."""
  return stats.crossed_ci(table[(name, ld)].grid(metric) - table[(prev, ld)].grid(metric))


def with_modes(c, learned: dict[str, Any]) -> dict[str, Any]:
  """{algo: params stacked over seeds} -> {variant: {"params", "greedy" [S]}}, one variant per
  action mode in c.rl_modes: "ppo" = sampled actions, "ppo-greedy" = argmax. Which variant
  counts as RL's result is chosen per load on the training windows (repro.selection)."""
  out = {}
  for a, p in learned.items():
    n = jax.tree.leaves(p)[0].shape[0]
    for m in c.rl_modes:
      out[a if m == "sampled" else f"{a}-greedy"] = {"params": p,
                                                      "greedy": jnp.full((n,), m == "greedy")}
  return out


# ------------------------------------------------------------------------------ tune / evaluate

def paired_ratio(table, a: str, b: str, ld, metric: str = "goodput"):
  """(ratio, lo, hi) of a's mean metric over b's, paired by (seed, window) with the two-way
  bootstrap over seeds and windows (`stats.crossed_ratio_ci`) when the table keeps its cells;
  else paired over seeds."""
  ta, tb = table[(a, ld)], table[(b, ld)]
  if isinstance(ta, harness.Cells) and isinstance(tb, harness.Cells):
    return stats.crossed_ratio_ci(ta.grid(metric), tb.grid(metric))
  x = np.array([m[metric] for m in ta])
  y = np.array([m[metric] for m in tb])
  return stats.paired_ratio_ci(x, y)


def late_gain(curve, frac: float = 0.125) -> tuple[float, float, float]:
  """How much a learning curve [S, U] still rose at its end: per seed, the mean of the last
  `frac` of updates minus the mean of the `frac` before it; mean and 95% CI over seeds."""
  cv = np.asarray(curve, np.float64)
  n = max(1, int(round(frac * cv.shape[-1])))
  return stats.mean_ci(cv[:, -n:].mean(-1) - cv[:, -2 * n:-n].mean(-1))


# ------------------------------------------------------------------------------ report

def plot_curves(ax, curves: dict[str, Any], prefix: str = "") -> None:
  for a, cv in curves.items():
    cv = np.asarray(cv, np.float64)
    m = cv.mean(0)
    ax.plot(m, label=f"{prefix}{a}")
    if cv.shape[0] > 1:
      se = cv.std(0, ddof=1) / np.sqrt(cv.shape[0])
      ax.fill_between(np.arange(len(m)), m - 1.96 * se, m + 1.96 * se, alpha=0.15)
  ax.set_xlabel("update")
  ax.set_ylabel("episode return (SLO-met requests)")
  ax.legend(fontsize=7)


