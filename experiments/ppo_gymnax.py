r"""Our PPO and REINFORCE on gymnax's own environments, against purejaxrl's published behaviour.

  python -m experiments.ppo_gymnax [--quick] [--workdir=workdirs/ppo_gymnax] [--config.x=v]

Claims (registered in configs/ppo_gymnax.py before the run; judged by jaxrl_suite.repro):
  * PPO with purejaxrl's CartPole-v1 configuration reaches the maximum return (500) in 5e5 steps.
  * REINFORCE with a baseline learns CartPole-v1 too (no paper figure: a sanity check).
  * PPO improves on a MinAtar game (Breakout-MinAtar).
Each training stage is cached in --workdir (repro.stage_cache: keyed by the stage's learner
config and the library's code), so a rerun only redoes the analysis.
Writes <results dir>/ppo_gymnax.{json,md,png}: results/ for a full run, workdirs/results_quick/
with --quick (jaxrl_suite.repro.entry prints which).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from configs import ppo_gymnax as cfg_module  # noqa: E402
from jaxrl_suite.core import plotting, results  # noqa: E402
from jaxrl_suite.repro import Claim, claim_record, entry, stage_cache  # noqa: E402
from jaxrl_suite.repro.format import fmt_ci  # noqa: E402
from jaxrl_suite.repro.intervals import t_mean  # noqa: E402

NAME = "ppo_gymnax"
FLAGS = entry.define_flags(NAME, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "configs", f"{NAME}.py"))


# ---- stages --------------------------------------------------------------------------------------

def stage_specs(cfg) -> dict:
  """{stage: (learner module name, env name, seeds, learner-config fields)} of the config."""
  return {
      "ppo_cartpole": ("ppo", "CartPole-v1", cfg.seeds,
                       dict(cfg.cartpole.to_dict(), total_timesteps=cfg.cartpole_timesteps)),
      "reinforce_cartpole": ("reinforce", "CartPole-v1", cfg.seeds,
                             dict(cfg.reinforce.to_dict(),
                                  total_timesteps=cfg.reinforce_timesteps)),
      "ppo_minatar": ("ppo", cfg.minatar_env, cfg.minatar_seeds,
                      dict(cfg.minatar.to_dict(), total_timesteps=cfg.minatar_timesteps)),
  }


def learner_config(algo: str, env_name: str, fields: dict, seed: int):
  """The learner's default config with the stage's fields (what the stage cache is keyed by)."""
  from jaxrl_suite.algos import ppo, reinforce  # pylint: disable=g-import-not-at-top
  c = {"ppo": ppo, "reinforce": reinforce}[algo].default_config()
  c.update(fields)
  c.env_name, c.seed = env_name, seed
  return c


def train(algo: str, lcfg, seeds: int) -> dict:
  """Trains `seeds` runs vmapped in one jit. Returns per-update curves [seeds, updates]:
  `returned` (each env's last finished episode return, averaged over envs: purejaxrl's metric)
  and `episode` (mean return of the episodes finished during the update; NaN if none)."""
  import jax  # pylint: disable=g-import-not-at-top
  from jaxrl_suite.algos import ppo, reinforce  # pylint: disable=g-import-not-at-top
  from jaxrl_suite.envs import registry  # pylint: disable=g-import-not-at-top
  module = {"ppo": ppo, "reinforce": reinforce}[algo]
  env, env_params = registry.make(lcfg.env_name)
  fn = jax.jit(jax.vmap(module.make_train(lcfg, env, env_params)))
  _, metrics = jax.block_until_ready(fn(jax.random.split(jax.random.key(lcfg.seed), seeds)))
  return {"returned": np.asarray(metrics["returned_episode_returns"], np.float64),
          "episode": np.asarray(metrics["episode_return"], np.float64)}


def run_stages(cfg, workdir: str) -> dict:
  """{stage: {"env", "timesteps", "seeds", "wall_s", "cached", "returned", "episode"}}; each
  stage's curves come from the workdir's stage cache when its learner config is unchanged."""
  runs = {}
  for name, (algo, env_name, seeds, fields) in stage_specs(cfg).items():
    lcfg = learner_config(algo, env_name, fields, cfg.seed)
    key = {"algo": algo, "seeds": seeds, "learner": lcfg}
    res = stage_cache.run_stage(name, key, lambda: train(algo, lcfg, seeds), workdir)
    print(f"{name}: {'from the stage cache ' + res.path if res.hit else 'trained'} "
          f"({res.wall_s:.1f} s)", flush=True)
    runs[name] = {"env": env_name, "timesteps": fields["total_timesteps"], "seeds": seeds,
                  "wall_s": res.wall_s, "cached": res.hit, **res.value}
  return runs


# ---- claims --------------------------------------------------------------------------------------

def window_means(episode: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
  """Per seed, the mean episode return over the first and over the last k updates [S] each
  (NaN updates, where no episode finished, are skipped; a window with none stays NaN)."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)   # an all-NaN window stays NaN (reported)
    return np.nanmean(episode[:, :k], 1), np.nanmean(episode[:, -k:], 1)


def improvement_row(claim: Claim, run: dict, k: int) -> dict:
  """The paired per-seed row last window vs first window; seeds with no finished episode in a
  window cannot express the claim (reported, never dropped silently)."""
  first, last = window_means(run["episode"], k)
  ok = np.isfinite(first) & np.isfinite(last)
  why = None
  if not ok.all():
    why = (f"{int((~ok).sum())} of {ok.size} seeds finished no episode in the first or last "
           f"{k} updates; raise the stage's num_steps or config.window_updates")
  return claim_record(claim, last[ok], first[ok], cannot_express=why)


def claim_rows(cfg, runs: dict) -> list[dict]:
  """Every registered claim (configs/ppo_gymnax.py), judged by jaxrl_suite.repro from per-seed
  samples; no verdict is decided here."""
  reg = {d["id"]: Claim.from_dict(d) for d in cfg_module.claims()}
  rows = [claim_record(reg["ppo_gymnax.ppo_cartpole_500.v1"],
                       runs["ppo_cartpole"]["returned"][:, -1])]
  rows.append(improvement_row(reg["ppo_gymnax.reinforce_cartpole_learns.v1"],
                              runs["reinforce_cartpole"], cfg.window_updates))
  rows.append(improvement_row(reg["ppo_gymnax.ppo_minatar_improves.v1"], runs["ppo_minatar"],
                              cfg.window_updates))
  return rows


# ---- report --------------------------------------------------------------------------------------

def plot(runs: dict, path: str) -> None:
  plt = plotting.pyplot()
  fig, axes = plt.subplots(1, len(runs), figsize=(4 * len(runs), 3.2))
  for ax, (name, run) in zip(np.atleast_1d(axes), runs.items()):
    curve = run["returned"]
    x = np.arange(curve.shape[1])
    ax.plot(x, curve.mean(0))
    ax.fill_between(x, curve.min(0), curve.max(0), alpha=0.2)
    ax.set_title(f"{name} ({run['seeds']} seeds)")
    ax.set_xlabel("update")
  np.atleast_1d(axes)[0].set_ylabel("episode return")
  plotting.save_figure(fig, path, dpi=100)


def table(runs: dict) -> str:
  """Final return per stage: t interval over seeds (one seed: no interval)."""
  lines = ["| run | env | steps | seeds | final return (mean, 95% CI over seeds) | train s | "
           "cached |", "|---|---|---|---|---|---|---|"]
  for name, run in runs.items():
    iv = t_mean(run["returned"][:, -1])
    lines.append(f"| {name} | {run['env']} | {run['timesteps']:.0e} | {run['seeds']} | "
                 f"{fmt_ci(iv.estimate, iv.lo, iv.hi)} | {run['wall_s']:.1f} | "
                 f"{'yes' if run['cached'] else 'no'} |")
  return "\n".join(lines)


def run(e: entry.Entry) -> dict:
  """The whole reproduction for a resolved entry (config validated, folders chosen)."""
  t0 = time.time()
  cfg = e.config
  runs = run_stages(cfg, e.workdir)
  claims = claim_rows(cfg, runs)
  plot(runs, e.figure_path())
  payload = {"runs": {k: {**{f: v for f, v in r.items() if f not in ("returned", "episode")},
                          "curve_mean": r["returned"].mean(0)} for k, r in runs.items()}}
  train_s = sum(r["wall_s"] for r in runs.values())
  note = (f"Training time {train_s:.0f} s in all (stages read from the workdir's stage cache "
          "keep the time measured when they ran).")
  results.write_results(
      NAME, mode=e.mode, config=cfg, seeds=list(range(cfg.seed, cfg.seed + cfg.seeds)),
      claims=claims, wall_time_s=time.time() - t0 + sum(
          r["wall_s"] for r in runs.values() if r["cached"]),
      payload=payload, results_dir=e.results_dir,
      markdown="\n".join([table(runs), "", note, "", f"![curves]({NAME}.png)"]))
  print(results.verdict_table(claims))
  return {"claims": claims, "runs": runs}


if __name__ == "__main__":
  entry.main(FLAGS, run, validate=cfg_module.validate)
