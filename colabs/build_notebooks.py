r"""Builds colabs/ppo_quickstart.ipynb and puts the shared setup cell first in every notebook
(run from anywhere: python colabs/build_notebooks.py).

The quickstart is generated, not hand-edited, so its cells stay reviewable as Python strings here.
Every notebook's first code cell is `SETUP` (see `with_setup`): it imports the checkout the
notebook sits in (locally, from colabs/ or anywhere inside the clone), else uses an installed
jaxrl_suite, else (Colab) clones REPO_URL and pip-installs it -- no `pip install -e ..` that only
works from colabs/ of a clone. Outputs are not stored: tests/user_path/test_user_path_notebooks.py
executes every notebook top to bottom and checks the setup cell.
"""

from __future__ import annotations

import os

import nbformat
from nbformat import v4

HERE = os.path.dirname(os.path.abspath(__file__))


def _md(text: str):
  return v4.new_markdown_cell(text.strip("\n"))


def _code(text: str, tags: tuple[str, ...] = ()):
  cell = v4.new_code_cell(text.strip("\n"))
  if tags:
    cell.metadata["tags"] = list(tags)
  return cell


SETUP_TAG = "setup"
SETUP = r"""
# Setup: works in a local checkout and in Colab. Locally the checkout this notebook sits in is
# imported in place; otherwise an installed jaxrl_suite is used; otherwise (Colab) REPO_URL is
# cloned and installed (the package ships its data, so a plain install is complete).
REPO_URL = ""   # git URL of jaxrl_suite (or set JAXRL_SUITE_REPO); only needed in Colab
import importlib, importlib.util, os, subprocess, sys


def _find_checkout(start="."):
  d = os.path.abspath(start)
  while True:
    if os.path.isfile(os.path.join(d, "setup.cfg")) and os.path.isdir(os.path.join(d, "jaxrl_suite")):
      return d
    if os.path.dirname(d) == d:
      return None
    d = os.path.dirname(d)


ROOT = _find_checkout()
if ROOT is not None:
  sys.path.insert(0, ROOT)
elif importlib.util.find_spec("jaxrl_suite") is None:
  url = REPO_URL or os.environ.get("JAXRL_SUITE_REPO", "")
  if not url:
    raise RuntimeError("jaxrl_suite is neither installed nor in a checkout around this notebook: "
                       "set REPO_URL in this cell to its git URL and run it again")
  ROOT = os.path.abspath("jaxrl_suite")
  if not os.path.isdir(ROOT):
    subprocess.run(["git", "clone", "--depth", "1", url, ROOT], check=True)
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", ROOT], check=True)
  importlib.invalidate_caches()
import jaxrl_suite
print("jaxrl_suite from", os.path.dirname(jaxrl_suite.__file__))
"""


def setup_cell():
  return _code(SETUP, tags=(SETUP_TAG,))


def _is_old_install(cell) -> bool:
  """The cells the setup cell replaces: `%pip install -e ..` and its 'Install' heading."""
  if cell.cell_type == "code":
    return "pip install" in cell.source and "-e .." in cell.source
  return cell.cell_type == "markdown" and cell.source.startswith("**Install**")


def with_setup(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
  """`nb` with the old install cells dropped and SETUP as its first code cell."""
  cells = [c for c in nb.cells if not _is_old_install(c)
           and SETUP_TAG not in c.get("metadata", {}).get("tags", [])]
  first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
  nb.cells = cells[:first_code] + [setup_cell()] + cells[first_code:]
  return nb


def verdicts_cell(name: str):
  """A code cell printing the verdict table of the committed full run `results/<name>.json`."""
  return _code(f"""
import json, os
from jaxrl_suite.core import results as R
path = os.path.join(R.REPO_ROOT, "results", "{name}.json")
if os.path.exists(path):
  rec = json.load(open(path))
  print(rec["mode"], "mode, commit", rec["provenance"]["commit"][:8])
  print(R.verdict_table(rec["claims"]))
else:
  print("no results/{name}.json yet: run python -m experiments.{name}")
""")


def notebook(cells) -> nbformat.NotebookNode:
  """A Python 3 notebook of `cells` with the shared setup cell first."""
  nb = nbformat.v4.new_notebook()
  nb.cells = list(cells)
  nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                               "language": "python"}
  return with_setup(nb)


def write(nb: nbformat.NotebookNode, filename: str) -> str:
  """Stable cell ids (regenerating gives no diff) and Colab metadata, validated, written to
  colabs/<filename>; returns the path."""
  for i, cell in enumerate(nb.cells):
    cell["id"] = f"cell-{i:02d}"
  nb.metadata["language_info"] = {"name": "python"}
  nb.metadata["colab"] = {"name": filename, "provenance": []}
  nbformat.validate(nb)
  path = os.path.join(HERE, filename)
  nbformat.write(nb, path)
  print("wrote", path)
  return path


def ppo_quickstart() -> nbformat.NotebookNode:
  cells = [
      _md(r"""
# Train PPO on any gymnax environment

`jaxrl_suite` writes a whole PPO run as one pure function, `train(key) -> (runner_state,
metrics)`, purejaxrl-style: environment steps, GAE and the gradient epochs all live inside
`jax.lax.scan`, so `jax.jit(jax.vmap(train))` trains **several seeds at once in one compiled
call**. Any gymnax environment (or one of ours: `ServingBatch-v0`, `ServingRoute-v0`,
`BallastNet-v0`) plugs in through `registry.make(name) -> (env, env_params)`.

This notebook trains PPO on CartPole-v1 with 4 seeds, plots the learning curve with a 95%
confidence band, then swaps in Acrobot-v1 by changing two lines. It runs on a laptop CPU in
well under a minute (most of it is XLA compilation); on a GPU raise `total_timesteps`.
"""),
      setup_cell(),
      _code(r"""
import os, time

import jax
import jax.numpy as jnp
import numpy as np
import matplotlib.pyplot as plt

# Optional: cache compiled programs on disk so re-running the notebook skips most compilation.
jax.config.update("jax_compilation_cache_dir",
                  os.environ.get("JAX_COMPILATION_CACHE_DIR", os.path.abspath("../.jax_cache")))

from jaxrl_suite.algos import ppo
from jaxrl_suite.core.stats import mean_ci
from jaxrl_suite.envs import registry
print("jax", jax.__version__, "on", jax.devices()[0].platform)
"""),
      _md(r"""
## A config and an environment

`ppo.default_config()` is an `ml_collections.ConfigDict` with purejaxrl's CartPole settings
(4 envs x 128 steps per update, 4 epochs x 4 minibatches, Adam 2.5e-4 annealed). We shrink
`total_timesteps` so the run takes seconds on a CPU: 60 updates of 512 steps.
"""),
      _code(r"""
config = ppo.default_config()
config.total_timesteps = 60 * config.num_envs * config.num_steps   # 30,720 env steps per seed
config.lr = 1e-3

env, env_params = registry.make("CartPole-v1")
num_seeds = 4
print(config)
"""),
      _md(r"""
## Train: one compiled call, vmapped over seeds

`make_train` returns a pure function of a PRNG key; `jax.vmap` maps it over 4 keys and
`jax.jit` compiles the whole thing once. Each metric comes back with shape `[seeds, updates]`.
"""),
      _code(r"""
def train_seeds(config, env, env_params, num_seeds, seed=0):
  train = jax.jit(jax.vmap(ppo.make_train(config, env, env_params)))
  keys = jax.random.split(jax.random.key(seed), num_seeds)
  t0 = time.time()
  runner_state, metrics = jax.block_until_ready(train(keys))
  print(f"{num_seeds} seeds x {config.total_timesteps:,} steps in {time.time() - t0:.1f} s "
        "(including compilation)")
  return runner_state, metrics

def episode_returns(metrics):
  # [seeds, updates] mean return of the last finished episodes; NaN until one has finished
  # (before that gymnax's LogWrapper reports 0, which is not a return).
  r = np.asarray(metrics["returned_episode_returns"], dtype=np.float64)
  seen = np.cumsum(np.asarray(metrics["episodes"]), axis=-1) > 0
  return np.where(seen, r, np.nan)

runner_state, metrics = train_seeds(config, env, env_params, num_seeds)
returns = episode_returns(metrics)
print("metrics:", sorted(metrics), "each of shape", returns.shape)
"""),
      _md(r"""
## Learning curve

Mean episode return over seeds with a Student-t 95% confidence interval per update
(`jaxrl_suite.core.stats.mean_ci`, the same statistic every reproduction reports).
"""),
      _code(r"""
def plot_curve(returns, title, ax=None):
  ax = ax or plt.gca()
  stats = np.array([mean_ci(returns[:, i]) for i in range(returns.shape[1])])  # [updates, 3]
  steps = np.arange(returns.shape[1]) * config.num_envs * config.num_steps
  ax.plot(steps, stats[:, 0], label="mean over seeds")
  ax.fill_between(steps, stats[:, 1], stats[:, 2], alpha=0.3, label="95% CI")
  for r in returns:
    ax.plot(steps, r, lw=0.5, alpha=0.4, color="gray")
  ax.set_xlabel("environment steps (per seed)")
  ax.set_ylabel("episode return")
  ax.set_title(title)
  ax.legend()

plt.figure(figsize=(6, 3.5))
plot_curve(returns, "PPO on CartPole-v1")
plt.show()
m, lo, hi = mean_ci(returns[:, -1])
print(f"final return {m:.1f} (95% CI [{lo:.1f}, {hi:.1f}]) over {num_seeds} seeds")
"""),
      _md(r"""
## Use the trained policy

`runner_state.train_state.params` holds the network parameters (one set per seed, stacked on the
first axis). `make_policy` gives `policy(params, obs, key) -> action`, the same signature as the
heuristic baselines, so one evaluation harness runs both.
"""),
      _code(r"""
policy = ppo.make_policy(config, env, env_params)
params_seed0 = jax.tree.map(lambda x: x[0], runner_state.train_state.params)
obs, state = env.reset(jax.random.key(1), env_params)
print("greedy action at the first state:",
      int(policy(params_seed0, obs[None], jax.random.key(2), greedy=True)[0]))
"""),
      _md(r"""
## Swap the environment: two lines

Every gymnax environment name works (`gymnax.registered_envs`; MinAtar games need more steps),
and so do ours. Acrobot-v1 gives -1 per step until the arm swings up (500 steps at most), so
returns start near -500 and rise as PPO learns.
"""),
      _code(r"""
env, env_params = registry.make("Acrobot-v1")
_, metrics = train_seeds(config, env, env_params, num_seeds)

plt.figure(figsize=(6, 3.5))
plot_curve(episode_returns(metrics), "PPO on Acrobot-v1")
plt.show()
"""),
      _md(r"""
## Next steps

* Train from the command line with checkpoints and resume:
  `python -m jaxrl_suite.train --config=configs/ppo_cartpole.py --workdir=workdirs/ppo_cartpole`
  (interrupt it and run the same command again: it resumes from the last checkpoint).
* Sweep hyperparameters: `python -m experiments.sweep --sweep=configs/sweeps/ppo_cartpole_lr.py`.
* Reproductions with verdicts against the papers: `python -m experiments.reproduce --quick`.
"""),
  ]
  for i, cell in enumerate(cells):  # stable ids: regenerating the notebook gives no diff
    cell["id"] = f"cell-{i:02d}"
  nb = v4.new_notebook(cells=cells)
  nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                               "language": "python"}
  nb.metadata["language_info"] = {"name": "python"}
  nb.metadata["colab"] = {"name": "ppo_quickstart.ipynb", "provenance": []}
  return nb


NOTEBOOKS = {"ppo_quickstart.ipynb": ppo_quickstart}


def main(argv: list[str] | None = None) -> None:
  """Writes the generated notebooks; with --setup, also puts SETUP first in the named notebooks
  (the hand-written ones keep every other cell as it is)."""
  import sys
  argv = sys.argv[1:] if argv is None else argv
  for name, build in NOTEBOOKS.items():
    write(build(), name)
  if argv and argv[0] == "--setup":
    for name in argv[1:]:
      path = os.path.join(HERE, name)
      nb = with_setup(nbformat.read(path, as_version=4))
      nbformat.validate(nb)
      nbformat.write(nb, path)
      print("setup cell in", path)


if __name__ == "__main__":
  main()
