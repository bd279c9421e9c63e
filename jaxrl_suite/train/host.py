"""The program `python -m jaxrl_suite.train` (its usage text is the package docstring,
jaxrl_suite/train/__init__.py): its flags and the host loop around a trainer (config checks,
chunks of jitted updates with a progress bar, metrics, orbax checkpoints, resume, Ctrl-C).

Kept out of the package's `__init__` so that importing a sibling (`jaxrl_suite.train.sweep`,
`.rail`, `.serving`, `.ballast_hydro`) does not import this module, and with it jax, orbax, the
env registry and every trainer. `jaxrl_suite.train.<name>` still reaches the public names here
(the package forwards them lazily).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import Any

import jax
import numpy as np
from absl import flags
from absl import logging as absl_logging
from ml_collections import config_flags
from tqdm.auto import tqdm

from jaxrl_suite import algos
from jaxrl_suite.algos import on_policy
from jaxrl_suite.core import checkpoint, cli, logging as mlog, run_config
from jaxrl_suite.envs import registry
from jaxrl_suite.train import hydro, routes, text

# Host-loop fields of a run config (besides the learner's): name -> what it means. Every
# learner's default_config() holds them (core/run_config.py has the defaults).
HOST_FIELDS = run_config.HOST_FIELDS
# Fields that may differ from the checkpoint's config under --resume=force: they change how long
# the run goes on and how it is chunked and logged, not what the restored state means.
RESUMABLE_FIELDS = ("total_timesteps", "updates_per_chunk", "checkpoint_every", "log_every",
                    "max_to_keep")


class ConfigMismatchError(cli.UserError):
  """The workdir holds a run with another config."""


def _route_help(env_name: str, config) -> str:
  """`--help` for an env with its own trainer: that trainer's config fields and defaults."""
  lines = [f"the default config of {env_name}'s trainer ({routes.trainer_for(env_name)}, "
           "jaxrl_suite/train/routes.py). Override fields with --config.FIELD=VALUE.",
           "Config fields:"]
  for f in cli.field_names(config):
    v = config
    for part in f.split("."):
      v = v[part]
    if not (hasattr(v, "keys") and not isinstance(v, dict)):
      lines.append(f"  {f} = {v!r}")
  return "\n".join(lines)


def config_help() -> str:
  """Every config field with its default, per algorithm, for `--help`."""
  lines = ["an ml_collections config file (path[:variant]); without it, the default config of "
           "--algo. Override fields with --config.FIELD=VALUE.",
           "Config fields (defaults of the algorithms' default_config()):"]
  seen: dict[str, Any] = {}
  for name, mod in sorted(algos.ALGOS.items()):
    cfg = mod.default_config()
    for f in cli.field_names(cfg):
      v = cfg
      for part in f.split("."):
        v = v[part]
      if hasattr(v, "keys") and not isinstance(v, dict):
        continue   # a nested ConfigDict: its own fields are listed
      seen.setdefault(f, []).append((name, v))
  for f, vals in seen.items():
    defaults = {repr(v) for _, v in vals}
    if len(defaults) == 1:
      lines.append(f"  {f} = {next(iter(defaults))}" + ("" if len(vals) == len(algos.ALGOS) else
                                                         f"  ({', '.join(n for n, _ in vals)})"))
    else:
      lines.append(f"  {f} = " + ", ".join(f"{v!r} ({n})" for n, v in vals))
  if "algo" not in seen:
    lines.append("  algo = 'ppo'  (one of " + ", ".join(sorted(algos.ALGOS)) + ")")
  lines.append("Host-loop fields (chunks, checkpoints, logging):")
  for f, what in HOST_FIELDS.items():
    lines.append(f"  {f}: {what}")
  return "\n".join(lines)


def default_config(algo: str, env_name: str | None):
  """The config the CLI starts from: the default config of `env_name`'s trainer (routes.py):
  `<algo>.default_config()` for the on-policy learners, hydro.default_config() for
  BallastHydro-v0, text.default_config(env_name) for a text environment (their algo is PPO)."""
  route = routes.trainer_for(env_name) if env_name and registry.is_registered(env_name) else None
  if route in (routes.HYDRO, routes.TOKEN_PPO):
    routes.check_algo(env_name, algo)
    return hydro.default_config() if route == routes.HYDRO else text.default_config(env_name)
  return algos.get(algo).default_config()


def _define_flags(argv) -> Any:
  """CLI flags, defined only when run as a program: importing this module (tests, sweeps,
  experiment scripts with their own --config flag) must not claim absl's global flag names.

  `--config=<file>` defines the config flag from that file; without it, from the default config
  of `--algo` (read from argv before absl parses it, since the flag's fields depend on it), which
  is returned so that unknown `--config.<field>` names can be refused before parsing.
  """
  global _CONFIG, _CONFIG_FILE, _ENV, _ALGO, _WORKDIR, _RESUME
  names = sorted(algos.ALGOS)
  algo = cli.config_arg(argv, "algo")
  if algo is not None and algo not in algos.ALGOS:
    raise cli.UserError(f"--algo={algo}: unknown algorithm; one of {', '.join(names)}")
  _CONFIG_FILE = cli.config_arg(argv, "config")
  default = None
  if _CONFIG_FILE is not None:
    _CONFIG = config_flags.DEFINE_config_file("config", None, config_help())
  else:
    default = default_config(algo or "ppo", cli.config_arg(argv, "env"))
    # ml_collections applies --config.<field> overrides as the flag is defined: an unknown field
    # would be a traceback there, so it is refused first.
    cli.check_config_overrides(cli.normalize_number_overrides(argv), "config", default)
    env = cli.config_arg(argv, "env")
    routed = (env is not None and registry.is_registered(env)
              and routes.trainer_for(env) != routes.ON_POLICY)
    _CONFIG = config_flags.DEFINE_config_dict(
        "config", default, _route_help(env, default) if routed else config_help())
    flags.FLAGS["config"].default_as_str = None   # --help: the field list, not a YAML dump
  _ENV = flags.DEFINE_string(
      "env", None, "the environment, a name of jaxrl_suite.envs.registry (sets config.env_name): "
      + ", ".join(registry.registered_names()))
  _ALGO = flags.DEFINE_enum("algo", None, names,
                            "the learner whose default_config() is the config (default ppo); "
                            "with --config, the file's algo")
  _WORKDIR = flags.DEFINE_string(
      "workdir", None, "Directory for checkpoints and metrics (default: workdirs/<algo>_<env>, "
      "or workdirs/<config file name> with --config).")
  _RESUME = flags.DEFINE_enum(
      "resume", "auto", ["auto", "force"],
      "auto: resume a workdir only if its checkpoint has the same config; force: also resume "
      f"when only {', '.join(RESUMABLE_FIELDS)} differ")
  cli.define_debug_flag()
  flags.declare_key_flag("debug")   # listed by --help, not only --helpfull
  return default


def validate_run_config(config) -> None:
  """Validates the learner fields and the host-loop fields (chunking, checkpoints, logging).

  Integral floats in integer fields (`total_timesteps=2e5` in a config file) become ints;
  absent host-loop fields get their defaults (core/run_config.py).
  """
  algos.get(config.get("algo", "ppo"))
  run_config.add_host_defaults(config)   # a config built before the fields existed
  _integral_floats_to_int(config, ("num_envs", "num_steps", "num_turns", "total_timesteps",
                                   "update_epochs", "num_minibatches", "num_seeds", "seed",
                                   *HOST_FIELDS))
  if not registry.is_registered(config.env_name):
    raise ValueError(f"config.env_name {config.env_name!r} is not a registered environment; "
                     f"valid names: {', '.join(registry.registered_names())}")
  route = routes.trainer_for(config.env_name)
  if route != routes.ON_POLICY and config.get("algo", "ppo") != "ppo":
    raise ValueError(f"config.algo={config.algo!r}: {config.env_name} trains with PPO only "
                     f"({route} trainer, jaxrl_suite/train/routes.py)")
  block = {routes.HYDRO: "hydro", routes.TOKEN_PPO: "token_ppo"}.get(route)
  if block is not None and block not in config:
    mod = "hydro" if route == routes.HYDRO else "text"
    raise ValueError(f"config.env_name {config.env_name!r} trains with the {route} trainer, whose "
                     f"config (jaxrl_suite.train.{mod}.default_config) has a `{block}` block this "
                     "config lacks: drop --config to start from that default")
  if route == routes.HYDRO:
    hydro.validate(config)
  elif route == routes.TOKEN_PPO:
    text.validate(config)
  else:
    on_policy.validate(config)
  for name in HOST_FIELDS:
    v = config.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
      raise ValueError(f"config.{name} must be a positive integer, got {v!r}")
  if config.checkpoint_every % config.updates_per_chunk:
    raise ValueError(f"config.checkpoint_every={config.checkpoint_every} must be a multiple of "
                     f"config.updates_per_chunk={config.updates_per_chunk}")


# Agents that act through a categorical policy over `action_space.n` discrete actions.
_DISCRETE_AGENTS = ("mlp", "gru", "entities")


def check_env_fits_agent(config, env, env_params) -> None:
  """Raises ValueError (before anything is traced or compiled) when `config.agent` cannot act
  in the environment: the generic agents need array observations and discrete actions.

  Text environments (dict observations of token blocks) are for the LM agents of
  `jaxrl_suite.lm`; continuous (Box) action spaces have no Gaussian policy here.
  """
  agent = config.get("agent", "mlp")
  if agent not in _DISCRETE_AGENTS:
    return   # env-specific agents check their own environment
  obs_space, act_space = env.observation_space(env_params), env.action_space(env_params)
  where = f"config.env_name {config.env_name!r}"
  if not hasattr(obs_space, "shape"):
    raise ValueError(
        f"{where} has {type(obs_space).__name__} observations (a text environment for the LM "
        f"agents of jaxrl_suite.lm); config.agent={agent!r} needs array observations: "
        "train it with its experiment script, or pick an array-observation environment")
  if not hasattr(act_space, "n"):
    raise ValueError(
        f"{where} has a continuous ({type(act_space).__name__}) action space; "
        f"config.agent={agent!r} (like {', '.join(a for a in _DISCRETE_AGENTS if a != agent)}) "
        "acts over discrete actions: use --config.agent=gaussian")


def _integral_floats_to_int(config, names) -> None:
  for name in names:
    v = config.get(name)
    if isinstance(v, float) and v.is_integer():
      with config.unlocked():
        # ConfigDict fields are typed: replace the float field by an int one.
        del config[name]
        config[name] = int(v)


def _as_json(d: Any) -> Any:
  return json.loads(json.dumps(d, default=str))


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(d, dict):
    out = {}
    for k, v in d.items():
      out.update(_flatten(v, f"{prefix}{k}."))
    return out or {prefix[:-1]: {}}
  return {prefix[:-1]: d}


def config_diff(old: dict, new: dict) -> list[tuple[str, Any, Any]]:
  """[(dotted field, old value, new value)] where two config dicts (JSON form) differ."""
  a, b = _flatten(_as_json(old)), _flatten(_as_json(new))
  missing = object()
  return [(k, a.get(k, missing), b.get(k, missing)) for k in sorted(set(a) | set(b))
          if a.get(k, missing) != b.get(k, missing)]


def check_resume(saved: dict, config, workdir: str, step: int, resume: str) -> list[str]:
  """Raises ConfigMismatchError unless `config` may resume a run saved with `saved`.

  Returns the fields that differ (all in RESUMABLE_FIELDS, under resume="force").
  """
  diff = config_diff(saved, config.to_dict())
  if not diff:
    return []

  def show(v):
    return "(absent)" if not isinstance(v, (str, int, float, bool, list, type(None))) else repr(v)

  listed = "; ".join(f"{k}: {show(o)} -> {show(n)}" for k, o, n in diff)
  fixed = [k for k, _, _ in diff if k not in RESUMABLE_FIELDS]
  where = f"{workdir} holds a run (checkpoint step {step}) with another config: {listed}."
  if fixed:
    raise ConfigMismatchError(
        f"{where}\n{', '.join(fixed)} cannot change on resume: use a new --workdir (or rerun "
        "with the stored values, see its config.json).")
  if resume != "force":
    raise ConfigMismatchError(
        f"{where}\nUse a new --workdir, or --resume=force to continue this run with the new "
        f"{', '.join(k for k, _, _ in diff)}.")
  return [k for k, _, _ in diff]


def _saved_config(ckpt: checkpoint.Checkpointer, step: int, workdir: str) -> dict | None:
  meta = ckpt.metadata(step)
  if isinstance(meta.get("config"), dict):
    return meta["config"]
  path = os.path.join(workdir, "config.json")   # checkpoints written before configs were stored
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  return None


@contextlib.contextmanager
def _sigint_deferred():
  """Ctrl-C inside the block is raised as KeyboardInterrupt when the block ends, not inside it.

  Around the host loop's bookkeeping (metrics rows, the runner state and its step count, a
  checkpoint save): an interrupt there would otherwise leave them out of step (a state of step
  k + n saved as step k). Only the main thread can set signal handlers; elsewhere, no deferral.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  caught = []
  previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)
  if caught:
    raise KeyboardInterrupt


class _StopRequest:
  """The first Ctrl-C asks the host loop to stop at the next chunk boundary; a second one raises
  KeyboardInterrupt at once.

  Why not let the first one raise: a KeyboardInterrupt raised inside JAX's dispatch or a
  device-to-host copy can leave the runtime's locks held, and the checkpoint save that follows
  then waits forever (seen once in CI under load). Stopping between chunks saves a consistent
  state with nothing in flight. Only the main thread can set signal handlers; elsewhere the
  default behaviour is kept.
  """

  def __init__(self):
    self.requested = False

  def _handler(self, signum, frame):
    del signum, frame
    if self.requested:
      raise KeyboardInterrupt
    self.requested = True
    print("\nstopping after the current chunk of updates and saving (Ctrl-C again to stop "
          "without waiting)", file=sys.stderr, flush=True)

  @contextlib.contextmanager
  def installed(self):
    if threading.current_thread() is not threading.main_thread():
      yield self
      return
    previous = signal.signal(signal.SIGINT, self._handler)
    try:
      yield self
    finally:
      signal.signal(signal.SIGINT, previous)


def make_plan(config) -> routes.Plan:
  """The trainer of `config.env_name` (routes.trainer_for) as the host loop's routes.Plan."""
  route = routes.trainer_for(config.env_name)
  if route == routes.HYDRO:
    return hydro.plan(config)
  if route == routes.TOKEN_PPO:
    return text.plan(config)
  env, env_params = registry.make(config.env_name, **dict(config.get("env_kwargs", {})))
  check_env_fits_agent(config, env, env_params)
  learner = algos.get(config.get("algo", "ppo")).make_learner(config, env, env_params)
  runners: dict[int, Any] = {}

  def run(state, n, done):
    del done   # the runner state carries its own keys
    if n not in runners:   # at most two sizes: the chunk and the shorter last one
      runners[n] = jax.jit(jax.vmap(lambda rs: learner.run(rs, n)))
    return runners[n](state)

  return routes.Plan(jax.jit(jax.vmap(learner.init)), run, int(learner.num_updates),
                     int(learner.vec_env.num_envs) * int(config.num_steps))


def run_training(config, workdir: str, progress: bool = True, stop_after: int | None = None,
                 resume: str = "auto"):
  """Runs (or resumes) training. Returns (runner_state, number of updates done).

  `stop_after` ends the host loop after that many updates (used to test interruption);
  `resume` is "auto" or "force" (see the package docstring). Every check (config values, the
  workdir's stored config) runs before anything is compiled or written.

  Raises:
    cli.Interrupted: on Ctrl-C (KeyboardInterrupt), after saving the last finished update as a
      checkpoint; its message says where a rerun resumes.
  """
  if resume not in ("auto", "force"):
    raise ValueError(f"resume must be 'auto' or 'force', got {resume!r}")
  validate_run_config(config)
  ckpt_dir = os.path.join(workdir, "checkpoints")
  latest, ckpt = None, None
  if os.path.isdir(ckpt_dir):
    ckpt = checkpoint.Checkpointer(ckpt_dir, int(config.max_to_keep))
    latest = ckpt.latest_step()
    if latest is not None:
      try:
        saved = _saved_config(ckpt, latest, workdir)
        if saved is not None:
          check_resume(saved, config, workdir, latest, resume)
      except (ConfigMismatchError, checkpoint.CheckpointError):
        ckpt.close()
        raise
  plan = make_plan(config)
  total = int(plan.total)
  if total <= 0:   # validate() refuses this; kept as a guard for learners with other rules
    raise ValueError(f"config.total_timesteps={config.total_timesteps} gives 0 updates")
  # env steps per update, per seed: the x axis of the progress bar and the learning curve
  per_update = int(plan.per_update)
  seeds = int(config.num_seeds)
  keys = jax.random.split(jax.random.key(int(config.seed)), seeds)
  init = plan.init

  try:
    state = init(keys)
    if ckpt is None:
      ckpt = checkpoint.Checkpointer(ckpt_dir, int(config.max_to_keep))
    if latest is not None:
      state = ckpt.restore(latest, like=state)
  except (checkpoint.CheckpointError, KeyboardInterrupt) as e:
    if ckpt is not None:
      ckpt.close()
    if not isinstance(e, KeyboardInterrupt):
      raise
    raise cli.Interrupted(   # nothing written yet: the workdir is as it was
        "interrupted before training started; nothing was changed; rerun the same command to "
        + ("start" if latest is None else f"resume from step {latest}")) from None
  done = 0 if latest is None else latest
  if done >= total:   # finished (possibly with a larger total before --resume=force)
    ckpt.close()
    print(f"{workdir} is already finished ({done} of {total} updates); nothing to do")
    return state, done
  if latest is not None:
    print(f"resuming from step {done} of {total} ({done * per_update:,} env steps per seed) in "
          f"{workdir}", flush=True)
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(config.to_dict(), f, indent=1, default=str)
  writer = mlog.MetricWriter(workdir, stride=int(config.log_every), start_step=done,
                             tensorboard=True)
  chunk = int(config.updates_per_chunk)
  name = f"{config.get('algo', 'ppo')} {config.env_name}"
  bar = tqdm(total=total * per_update, initial=done * per_update, unit=" env steps",
             unit_scale=True, disable=not progress, desc=name, dynamic_ncols=True)
  t0, done0, saved_at = time.time(), done, latest
  meta = lambda: {"config": config.to_dict(), "updates": done, "num_updates": total}
  interrupted = False
  stop = _StopRequest()
  try:
    with stop.installed():
      while done < total and (stop_after is None or done < stop_after) and not stop.requested:
        n = min(chunk, total - done)
        new_state, metrics = plan.run(state, n, done)
        metrics = jax.tree.map(lambda x: np.swapaxes(np.asarray(x), 0, 1), metrics)  # [n, seeds]
        steps = (np.arange(done, done + n, dtype=np.float64) + 1) * per_update
        metrics["env_steps"] = np.repeat(steps[:, None], seeds, axis=1)
        if seeds > 1:   # per-seed returns too: intervals over seeds need the units, not the mean
          for i in range(seeds):
            metrics[f"returned_episode_returns_seed{i}"] = metrics["returned_episode_returns"][:, i]
        with _sigint_deferred():
          writer.write_chunk(done, metrics)
          state, done = new_state, done + n
          if done % config.checkpoint_every == 0 or done == total:
            writer.flush()
            ckpt.save(done, state, metadata=meta())
            saved_at = done
        ret = np.nanmean(metrics["returned_episode_returns"][-1])
        sps = (done - done0) * per_update * seeds / max(time.time() - t0, 1e-9)
        bar.set_postfix_str(f"step {done}/{total}, return {ret:.1f}, {sps:,.0f} env steps/s "
                            "(all seeds)" if seeds > 1 else f"step {done}/{total}, return {ret:.1f}",
                            refresh=False)
        bar.update(n * per_update)
      if stop.requested:   # the first Ctrl-C, honoured at this chunk boundary
        raise KeyboardInterrupt
  except KeyboardInterrupt:
    interrupted = True
    with _sigint_deferred():   # a second Ctrl-C must not cut this save short
      if done > 0 and done != saved_at:
        writer.flush()
        ckpt.save(done, state, metadata=meta())
        saved_at = done
  finally:
    bar.close()
    writer.close()
    ckpt.close()
  if interrupted:
    if saved_at is None:
      raise cli.Interrupted("interrupted before the first update finished; nothing was saved "
                            "(rerun the same command to start again)") from None
    raise cli.Interrupted(
        f"interrupted at step {saved_at} of {total} ({saved_at * per_update:,} env steps per "
        f"seed, saved in {ckpt_dir}); rerun the same command to resume") from None
  if done >= total:
    # Marks a finished run for sweep launchers (local or XManager) so they do not re-run it.
    open(os.path.join(workdir, "DONE"), "w").close()
  if os.path.exists(writer.jsonl_path) and os.path.getsize(writer.jsonl_path):
    seeds_note = f", mean of {seeds} seeds" if seeds > 1 else ""
    mlog.plot_learning_curve(
        writer.jsonl_path, os.path.join(workdir, "learning_curve.png"),
        title=f"{config.get('algo', 'ppo')} on {config.env_name}", x_key="env_steps",
        xlabel="env steps (per seed)",
        ylabel=f"episode return{seeds_note}\n(returned_episode_returns)")
  return state, done


def _check_env(name: str) -> None:
  if registry.is_registered(name):
    return
  import difflib
  valid = registry.registered_names()
  near = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
  hint = f"; did you mean {near[0]}?" if near else ""
  raise cli.UserError(f"--env={name}: not a registered environment{hint}\n"
                      f"valid names: {', '.join(valid)}")


def _pick_box_agent(config) -> None:
  """The default mlp agent on a Box action space becomes the Gaussian agent (before any resume
  check, so the stored config names the agent that ran)."""
  if (config.get("agent", "mlp") != "mlp"
      or routes.trainer_for(config.env_name) != routes.ON_POLICY):
    return   # BallastHydro's Box is one command per pump: its own trainer (routes.py)
  env, params = registry.make(config.env_name, **dict(config.get("env_kwargs", {})))
  space = env.action_space(params)
  if not hasattr(space, "n") and hasattr(env.observation_space(params), "shape"):
    config.agent = "gaussian"
    print(f"{config.env_name} has continuous actions: agent=gaussian (tanh-squashed Gaussian)")


def main(argv):
  if len(argv) > 1:
    raise cli.UserError(f"unexpected arguments {argv[1:]}; flags are --name=value")
  absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every file at INFO
  config = _CONFIG.value
  if _CONFIG_FILE is None:
    algo = _ALGO.value or "ppo"
    if config.get("algo", algo) != algo:
      raise cli.UserError(f"--config.algo={config.algo}: choose the algorithm with "
                          f"--algo={config.algo} (it picks that algorithm's default config)")
    if _ENV.value is None:
      raise cli.UserError("--env is required (a registered environment, e.g. --env=CartPole-v1; "
                          "--help lists them), or give a config file with --config=<file>")
  elif _ALGO.value is not None and config.get("algo", "ppo") != _ALGO.value:
    raise cli.UserError(f"--algo={_ALGO.value} differs from the algo of --config={_CONFIG_FILE} "
                        f"({config.get('algo', 'ppo')!r}): drop --algo, or drop --config to "
                        f"train with {_ALGO.value}'s default config")
  if _ENV.value is not None:
    _check_env(_ENV.value)
    routes.check_made_offline(_ENV.value, lambda: registry.make(_ENV.value))
    config.env_name = _ENV.value
    _pick_box_agent(config)
  if _WORKDIR.value:
    workdir = _WORKDIR.value
  elif _CONFIG_FILE is not None:
    workdir = os.path.join("workdirs", os.path.splitext(
        os.path.basename(flags.FLAGS["config"].config_filename))[0])
  else:
    workdir = os.path.join("workdirs", f"{config.get('algo', 'ppo')}_{config.env_name}")
  _, done = run_training(config, workdir, resume=_RESUME.value)
  print(f"finished {done} updates; metrics in {workdir}/metrics.jsonl, "
        f"curve in {workdir}/learning_curve.png")


def _entry(argv=None, after_define=None) -> None:
  """The program. `after_define()` runs once the flags exist, before they are parsed
  (`__main__.py` makes them its key flags there, so `--help` lists them)."""
  argv = list(sys.argv if argv is None else argv)
  cli.define_debug_flag()
  try:
    default = _define_flags(argv)
  except cli.UserError as e:
    cli.fail(cli.short_message(e))
  if after_define is not None:
    after_define()
  cli.run(main, argv, config=default)
