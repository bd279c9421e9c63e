"""Every colabs/*.ipynb runs top to bottom (cwd colabs/, cells tagged skip-execution skipped).

Executed with nbclient on the `python3` kernel; jupyter_client starts a kernelspec whose argv is
"python" with this interpreter (sys.executable), so notebooks see the project's virtualenv.
"""

import glob
import importlib.util
import os
import subprocess
import time

import nbformat
import pytest
from nbclient import NotebookClient

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLABS = os.path.join(REPO_ROOT, "colabs")
NOTEBOOKS = sorted(glob.glob(os.path.join(COLABS, "*.ipynb")))
SKIP_TAG = "skip-execution"
_REAL_RUN, _REAL_FIND_SPEC = subprocess.run, importlib.util.find_spec
CELL_TIMEOUT_S = 600
# Notebooks that train something (> 30 CPU-s measured with a cold compilation cache: rail 85,
# quickstart 45, compaction 31; the others 11-18): run by `make test-slow`, the rest by `make test`.
SLOW: set[str] = {"rail_pricing.ipynb", "ppo_quickstart.ipynb", "compaction.ipynb"}


def _params():
  return [pytest.param(p, id=os.path.basename(p),
                       marks=[pytest.mark.slow] if os.path.basename(p) in SLOW else [])
          for p in NOTEBOOKS]


def _tags(cell):
  return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", _params())
def test_notebook_executes(path, monkeypatch):
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR",
                     os.environ.get("JAX_COMPILATION_CACHE_DIR",
                                    os.path.join(REPO_ROOT, ".jax_cache")))
  nb = nbformat.read(path, as_version=4)
  nbformat.validate(nb)
  nb.cells = [c for c in nb.cells if SKIP_TAG not in _tags(c)]
  assert any(c.cell_type == "code" for c in nb.cells), f"{path} has no code to run"
  client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                          resources={"metadata": {"path": COLABS}})
  t0 = time.time()
  client.execute()   # raises CellExecutionError naming the failing cell
  wall = time.time() - t0
  errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.output_type == "error"]
  assert not errors, f"{os.path.basename(path)}: {errors[0]['ename']}: {errors[0]['evalue']}"
  images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.output_type in ("display_data", "execute_result") and "image/png" in o["data"]]
  assert images, f"{os.path.basename(path)} shows no inline plot"
  print(f"{os.path.basename(path)} ran in {wall:.1f} s")


def _builder():
  import importlib.util
  spec = importlib.util.spec_from_file_location("build_notebooks",
                                                os.path.join(COLABS, "build_notebooks.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_conventions(path):
  """The first code cell is the shared setup cell (local checkout or Colab), executed, not
  skipped; no cell assumes it runs from colabs/ of a clone (`pip install -e ..`) or installs from
  git with pip."""
  nb = nbformat.read(path, as_version=4)
  code = [c for c in nb.cells if c.cell_type == "code"]
  for c in code:
    assert "-e .." not in c.source, f"{os.path.basename(path)}: `pip install -e ..` assumes colabs/"
    assert "git+" not in c.source, f"{os.path.basename(path)}: pip install from git"
  assert any(c.cell_type == "markdown" for c in nb.cells), "no explanation"
  first = code[0]
  assert SKIP_TAG not in _tags(first)
  assert first.source == _builder().SETUP.strip("\n"), \
      f"{os.path.basename(path)}: first code cell is not the setup cell (colabs/build_notebooks.py)"


def _run_setup(cwd, monkeypatch, installed: bool, repo_url: str = ""):
  """Executes the setup cell in-process from `cwd`; pip is recorded, not run."""
  import importlib.util
  import subprocess
  calls = []
  real_run, real_find = _REAL_RUN, _REAL_FIND_SPEC

  def fake_run(cmd, **kw):
    calls.append(list(cmd))
    if cmd[0] == "git":
      return real_run(cmd, **kw)
    return subprocess.CompletedProcess(cmd, 0)

  monkeypatch.chdir(cwd)
  monkeypatch.setattr(subprocess, "run", fake_run)
  monkeypatch.setattr(importlib.util, "find_spec", real_find if installed else (
      lambda name, *a: None if name == "jaxrl_suite" else real_find(name, *a)))
  monkeypatch.setenv("JAXRL_SUITE_REPO", repo_url)
  monkeypatch.setattr("sys.path", list(__import__("sys").path))
  ns = {}
  exec(compile(_builder().SETUP, "setup-cell", "exec"), ns)
  return ns, calls


def test_setup_cell_uses_the_checkout_it_sits_in(monkeypatch):
  ns, calls = _run_setup(COLABS, monkeypatch, installed=False)
  assert ns["ROOT"] == REPO_ROOT and calls == []
  ns, calls = _run_setup(os.path.join(REPO_ROOT, "docs"), monkeypatch, installed=False)
  assert ns["ROOT"] == REPO_ROOT and calls == []


def test_setup_cell_in_colab_clones_and_installs(tmp_path, monkeypatch):
  import shutil
  assert shutil.which("git"), "git is needed to clone the checkout"
  # Colab: no checkout around /content and no jaxrl_suite installed -> clone REPO_URL, install.
  ns, calls = _run_setup(tmp_path, monkeypatch, installed=False, repo_url=REPO_ROOT)
  clone = str(tmp_path / "jaxrl_suite")
  assert calls[0][:2] == ["git", "clone"] and calls[0][-2:] == [REPO_ROOT, clone]
  assert calls[1][1:] == ["-m", "pip", "install", "-q", clone]
  assert os.path.isfile(os.path.join(clone, "setup.cfg"))
  # Without a URL it says what to do instead of failing somewhere later.
  (tmp_path / "empty").mkdir()
  with pytest.raises(RuntimeError, match="set REPO_URL"):
    _run_setup(str(tmp_path / "empty"), monkeypatch, installed=False)
  # Installed package (pip install / Colab after setup): used as it is.
  ns, calls = _run_setup(str(tmp_path / "empty"), monkeypatch, installed=True)
  assert ns["ROOT"] is None and calls == []


def test_quickstart_matches_its_generator():
  """colabs/ppo_quickstart.ipynb is what colabs/build_notebooks.py writes (edit the generator)."""
  built = _builder().ppo_quickstart()
  on_disk = nbformat.read(os.path.join(COLABS, "ppo_quickstart.ipynb"), as_version=4)
  assert [(c.cell_type, c.source, _tags(c)) for c in on_disk.cells] == \
      [(c.cell_type, c.source, _tags(c)) for c in built.cells], \
      "ppo_quickstart.ipynb is stale: python colabs/build_notebooks.py"
