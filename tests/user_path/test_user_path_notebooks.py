"""Every colabs/*.ipynb runs top to bottom (cwd colabs/, cells tagged skip-execution skipped).

Executed with nbclient on the `python3` kernel; jupyter_client starts a kernelspec whose argv is
"python" with this interpreter (sys.executable), so notebooks see the project's virtualenv.
"""

import glob
import os
import time

import nbformat
import pytest
from nbclient import NotebookClient

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLABS = os.path.join(REPO_ROOT, "colabs")
NOTEBOOKS = sorted(glob.glob(os.path.join(COLABS, "*.ipynb")))
SKIP_TAG = "skip-execution"
CELL_TIMEOUT_S = 600
# Notebooks measured to take more than 60 s on the 2-core CI machine (run by `make test-slow`).
SLOW: set[str] = set()


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_conventions(path):
  """Install cells are tagged skip-execution and never pip-install from git; the first code cell
  puts the repository root on sys.path so the notebook runs from colabs/ without installing."""
  nb = nbformat.read(path, as_version=4)
  code = [c for c in nb.cells if c.cell_type == "code"]
  for c in code:
    if "pip install" in c.source:
      assert SKIP_TAG in _tags(c), f"{os.path.basename(path)}: untagged install cell"
    assert "git+" not in c.source, f"{os.path.basename(path)}: pip install from git"
  assert any(c.cell_type == "markdown" for c in nb.cells), "no explanation"
  runnable = [c for c in code if SKIP_TAG not in _tags(c)]
  assert runnable and "sys.path" in runnable[0].source, \
      f"{os.path.basename(path)}: first executed cell must add the repo root to sys.path"


def test_quickstart_matches_its_generator():
  """colabs/ppo_quickstart.ipynb is what colabs/build_notebooks.py writes (edit the generator)."""
  import importlib.util
  spec = importlib.util.spec_from_file_location("build_notebooks",
                                                os.path.join(COLABS, "build_notebooks.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  built = mod.ppo_quickstart()
  on_disk = nbformat.read(os.path.join(COLABS, "ppo_quickstart.ipynb"), as_version=4)
  assert [(c.cell_type, c.source, _tags(c)) for c in on_disk.cells] == \
      [(c.cell_type, c.source, _tags(c)) for c in built.cells], \
      "ppo_quickstart.ipynb is stale: python colabs/build_notebooks.py"
