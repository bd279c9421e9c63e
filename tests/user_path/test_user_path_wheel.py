"""A non-editable install works: the wheel carries the package data (ballast layouts, trace samples
and their attribution/licence, py.typed) and every registered environment can be made from a
directory outside the checkout, and `python -m jaxrl_suite.train --env=...` trains there (its
config comes from the library, not from the checkout's configs/).

The wheel is built from the files a clone would have (tracked plus untracked-not-ignored), with
no build isolation (no network), and installed with `pip install --no-deps` into a fresh venv
whose dependencies come from this venv's site-packages through a `.pth` line (so the editable
install of the checkout is NOT visible there: its finder is a `.pth` hook that only runs in
this venv's own site directory).
"""

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile

import numpy as np
import pytest

_CHECK = r"""
import importlib.resources, os, sys
import jaxrl_suite
from jaxrl_suite.envs import registry
from jaxrl_suite.envs.ballast import layout
from jaxrl_suite.envs.serving import traces
root = os.path.dirname(jaxrl_suite.__file__)
assert os.path.realpath(root).startswith(os.path.realpath(sys.prefix)), root
assert not os.path.realpath(root).startswith(os.path.realpath(sys.argv[1])), root
assert layout.available_layouts() == ["direct10", "ring14"], layout.available_layouts()
for name in traces.SHIPPED:
  assert len(traces.load_shipped(name)) > 100, name
data = importlib.resources.files("jaxrl_suite.envs.serving") / "data"
assert (data / "ATTRIBUTION.md").is_file() and (data / "LICENSE-CC-BY-4.0.txt").is_file()
assert (importlib.resources.files("jaxrl_suite") / "py.typed").is_file()
# gymnax's MNISTBandit downloads MNIST when it is made (network, not package data): left out.
made = []
for name in registry.registered_names():
  if name == "MNISTBandit-bsuite":
    continue
  kwargs = {"BallastHydro-v0": {"n_bank": 8}}.get(name, {})   # the default bank takes ~1 min
  env, params = registry.make(name, **kwargs)
  made.append(name)
print("made", len(made), "environments:", ", ".join(made))
"""


def _clone_files(repo_root: str, dest: str) -> None:
  """Copies the files a fresh clone would have (plus untracked, not-ignored ones)."""
  out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       cwd=repo_root, capture_output=True, check=True).stdout
  for rel in filter(None, out.decode().split("\0")):
    src = os.path.join(repo_root, rel)
    if not os.path.isfile(src):   # deleted in the work tree but still in the index
      continue
    os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
    shutil.copy2(src, os.path.join(dest, rel))


@pytest.fixture(scope="module")
def installed(repo_root, tmp_path_factory):
  """(python of a fresh venv with the wheel installed, its environment, a directory outside the
  checkout); the wheel's contents are checked on the way."""
  tmp_path = tmp_path_factory.mktemp("wheel")
  assert shutil.which("git"), "git is needed to list the checkout's files"
  src, wheels, outside = tmp_path / "src", tmp_path / "wheels", tmp_path / "elsewhere"
  outside.mkdir()
  _clone_files(repo_root, str(src))
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                  "-w", str(wheels), str(src)], check=True, capture_output=True, timeout=300)
  (whl,) = list(wheels.glob("jaxrl_suite-*.whl"))
  names = zipfile.ZipFile(whl).namelist()
  for need in ("jaxrl_suite/envs/ballast/layouts/ring14.json",
               "jaxrl_suite/envs/ballast/layouts/direct10.json",
               "jaxrl_suite/envs/serving/data/azure2023_conv_sample.csv",
               "jaxrl_suite/envs/serving/data/azure2023_code_sample.csv",
               "jaxrl_suite/envs/serving/data/ATTRIBUTION.md",
               "jaxrl_suite/envs/serving/data/LICENSE-CC-BY-4.0.txt",
               "jaxrl_suite/py.typed"):
    assert need in names, f"{need} missing from the wheel"
  assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
             for n in names), "LICENSE missing from the wheel's metadata"
  venv = tmp_path / "venv"
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
  vpy = venv / "bin" / "python"
  vsite = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
  with open(os.path.join(vsite, "deps_from_dev_venv.pth"), "w") as f:
    f.write("\n".join(site.getsitepackages()) + "\n")
  subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "-q",
                  "--no-deps", "--no-index", str(whl)], check=True, capture_output=True, timeout=300)
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
  env["JAX_PLATFORMS"] = "cpu"
  return vpy, env, outside


def test_wheel_installs_and_makes_every_environment(repo_root, installed):
  vpy, env, outside = installed
  out = subprocess.run([str(vpy), "-c", _CHECK, repo_root], cwd=outside, env=env,
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-4000:]
  assert "BallastNet-v0" in out.stdout and "made" in out.stdout
  # Train by environment name from the installed package, in a directory without configs/:
  # two tiny updates, default workdir workdirs/<algo>_<env> under the current directory.
  assert not (outside / "configs").exists()
  out = subprocess.run([str(vpy), "-m", "jaxrl_suite.train", "--env=CartPole-v1",
                        "--config.total_timesteps=128", "--config.num_steps=16",
                        "--config.hidden_sizes=(16,)", "--config.update_epochs=1",
                        "--config.num_minibatches=1"],
                       cwd=outside, env=env, capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-4000:]
  work = outside / "workdirs" / "ppo_CartPole-v1"
  rows = [json.loads(l) for l in open(work / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [0, 1] and rows[-1]["env_steps"] == 128, rows
  assert (work / "learning_curve.png").is_file() and (work / "DONE").is_file()


def _rows(work):
  with open(work / "metrics.jsonl") as f:
    return [json.loads(line) for line in f]


@pytest.mark.slow
def test_installed_package_trains_the_hydro_and_text_routes(installed):
  """The two routes beside the on-policy learners, by name from the installed package: token PPO
  on KVLookup-v0 and the hydro trainer on BallastHydro-v0 (a shipped layout, package data), two
  tiny updates each, finite returns in metrics.jsonl."""
  vpy, env, outside = installed
  runs = {
      "KVLookup-v0": ["--config.num_envs=4", "--config.total_timesteps=24",
                      "--config.updates_per_chunk=2", "--config.model.d_model=16",
                      "--config.model.num_layers=1", "--config.model.d_ff=32",
                      "--config.token_ppo.epochs=1"],
      "BallastHydro-v0": ["--config.env_kwargs={'layout': 'direct10', 'n_bank': 8, "
                          "'reward_scale': 0.1, 'max_steps_in_episode': 16}",
                          "--config.num_envs=4", "--config.num_steps=8",
                          "--config.num_minibatches=2", "--config.update_epochs=1",
                          "--config.total_timesteps=64", "--config.updates_per_chunk=2",
                          "--config.hydro.hidden=16", "--config.hydro.gru=16",
                          "--config.hydro.slots=8"],
  }
  for name, args in runs.items():
    out = subprocess.run([str(vpy), "-m", "jaxrl_suite.train", f"--env={name}", *args],
                         cwd=outside, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, (name, out.stderr[-4000:])
    rows = _rows(outside / "workdirs" / f"ppo_{name}")
    assert [r["step"] for r in rows] == [0, 1], (name, rows)
    assert all(np.isfinite(r["returned_episode_returns"]) for r in rows), (name, rows)
