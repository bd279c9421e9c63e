r"""Our PPO and REINFORCE on gymnax's own environments, against purejaxrl's published behaviour.

  python -m experiments.ppo_gymnax [--quick] [--workdir=workdirs/ppo_gymnax]

Claims tested (anchors from purejaxrl's README and stack.md's measurements):
  * PPO with purejaxrl's CartPole-v1 configuration reaches a return of ~500 in 5e5 steps.
  * REINFORCE with a baseline learns CartPole-v1 too, more slowly (no paper figure: reported).
  * PPO runs on a MinAtar environment (Breakout) and improves on the random policy.
Writes results/ppo_gymnax.{json,md,png}.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags
from tqdm.auto import tqdm

from jaxrl_suite.algos import ppo, reinforce
from jaxrl_suite.core import plotting, results, stats
from jaxrl_suite.envs import registry
from experiments import cli

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CONFIG = config_flags.DEFINE_config_file("config", os.path.join(_REPO, "configs/ppo_gymnax.py"))
_QUICK = flags.DEFINE_bool("quick", False, "Small run for CI.")
_WORKDIR = flags.DEFINE_string("workdir", "workdirs/ppo_gymnax", "Working directory.")


def _run(module, config, env_name, seeds):
  env, env_params = registry.make(env_name)
  train = jax.jit(jax.vmap(module.make_train(config, env, env_params)))
  t0 = time.time()
  _, metrics = train(jax.random.split(jax.random.key(config.seed), seeds))
  curve = np.asarray(metrics["returned_episode_returns"])  # [seeds, updates]
  return curve, time.time() - t0


def main(argv):
  del argv
  cfg = _CONFIG.value
  if _QUICK.value:
    from configs import ppo_gymnax as cfg_module
    cfg = cli.config_for(cfg_module, cfg, True)  # quick preset + --config.x overrides
  from configs import ppo_gymnax as cfg_module
  cfg_module.validate(cfg)
  t_start = time.time()

  runs = {}
  stages = [
      ("ppo_cartpole", ppo, "CartPole-v1", cfg.cartpole_timesteps, cfg.seeds, {}),
      ("reinforce_cartpole", reinforce, "CartPole-v1", cfg.reinforce_timesteps, cfg.seeds,
       {"num_envs": 16, "num_steps": 64}),
      ("ppo_minatar", ppo, cfg.minatar_env, cfg.minatar_timesteps, cfg.minatar_seeds,
       {"num_envs": 64 if not _QUICK.value else 8, "num_steps": 128 if not _QUICK.value else 32,
        "lr": 5e-4, "activation": "relu", "hidden_sizes": (128, 128)}),
  ]
  for name, module, env_name, steps, seeds, overrides in tqdm(stages, desc="ppo_gymnax"):
    c = module.default_config()
    c.update(overrides)
    c.env_name, c.total_timesteps = env_name, steps
    curve, wall = _run(module, c, env_name, seeds)
    runs[name] = {"env": env_name, "timesteps": steps, "seeds": seeds, "wall_s": wall,
                  "config": c.to_dict(), "curve": curve}

  def final(name):
    return runs[name]["curve"][:, -1]

  claims = []
  m, lo, hi = stats.mean_ci(final("ppo_cartpole"))
  target = 475.0 if not _QUICK.value else 150.0
  claims.append(results.claim(
      f"PPO (purejaxrl config) solves CartPole-v1 in {cfg.cartpole_timesteps:.0e} steps",
      "~500 (purejaxrl)", f"{m:.1f}", "reproduced" if lo >= target else
      ("partly reproduced" if m >= target else "not reproduced"), (lo, hi),
      f"final returned-episode return, mean over {cfg.seeds} seeds; threshold {target}"))
  m, lo, hi = stats.mean_ci(final("reinforce_cartpole"))
  claims.append(results.claim(
      "REINFORCE with a baseline learns CartPole-v1 (above random ~22)", "no paper figure",
      f"{m:.1f}", "reproduced" if lo > 22.0 else "not reproduced", (lo, hi),
      f"{cfg.reinforce_timesteps:.0e} steps"))
  mc = runs["ppo_minatar"]["curve"]
  m, lo, hi = stats.mean_ci(mc[:, -1])
  first = float(np.mean(mc[:, 0]))
  claims.append(results.claim(
      f"PPO improves on {cfg.minatar_env} (purejaxrl runs it)", "learns (purejaxrl plot)",
      f"{m:.2f} (first update {first:.2f})",
      "reproduced" if m > first else "inconclusive", (lo, hi),
      f"{cfg.minatar_timesteps:.0e} steps, {cfg.minatar_seeds} seeds"))

  plt = plotting.pyplot()
  fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
  for ax, (name, run) in zip(axes, runs.items()):
    curve = run["curve"]
    x = np.arange(curve.shape[1])
    mean = curve.mean(0)
    ax.plot(x, mean)
    ax.fill_between(x, curve.min(0), curve.max(0), alpha=0.2)
    ax.set_title(f"{name} ({run['seeds']} seeds)")
    ax.set_xlabel("update")
  axes[0].set_ylabel("episode return")
  plotting.save_figure(fig, results.figure_path("ppo_gymnax", "quick" if _QUICK.value else "full"), dpi=100)

  table = ["| run | env | steps | seeds | final return (mean, 95% CI) | wall s |",
           "|---|---|---|---|---|---|"]
  for name, run in runs.items():
    m, lo, hi = stats.mean_ci(run["curve"][:, -1])
    table.append(f"| {name} | {run['env']} | {run['timesteps']:.0e} | {run['seeds']} | "
                 f"{m:.1f} [{lo:.1f}, {hi:.1f}] | {run['wall_s']:.1f} |")
  payload = {"runs": {k: {**v, "curve_mean": v["curve"].mean(0)} for k, v in runs.items()}}
  for v in payload["runs"].values():
    del v["curve"]
  results.write_results(
      "ppo_gymnax", mode="quick" if _QUICK.value else "full", config=cfg,
      seeds=list(range(cfg.seeds)), claims=claims, wall_time_s=time.time() - t_start,
      payload=payload, markdown="\n".join(table) + "\n\n![curves](ppo_gymnax.png)")
  print(results.verdict_table(claims))


if __name__ == "__main__":
  app.run(main)
