"""The ruff configuration in pyproject.toml holds for the whole repository, and the files a user
of a Python package expects are there (LICENSE matching the metadata, py.typed)."""

import os
import shutil
import subprocess
import sys

import pytest


def _ruff() -> list[str] | None:
  exe = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
  return [exe] if exe else None


def test_ruff_check_passes(repo_root):
  cmd = _ruff()
  assert cmd is not None, "ruff is a test requirement: pip install -e '.[test]'"
  out = subprocess.run(cmd + ["check", "--no-cache", "."], cwd=repo_root, capture_output=True,
                       text=True, timeout=120)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_ruff_is_configured_for_this_code_base(repo_root):
  import tomllib
  with open(os.path.join(repo_root, "pyproject.toml"), "rb") as f:
    cfg = tomllib.load(f)["tool"]["ruff"]
  assert cfg["indent-width"] == 2 and cfg["line-length"] == 100
  assert {"E9", "F82"} <= set(cfg["lint"]["select"])


def test_license_and_py_typed(repo_root):
  with open(os.path.join(repo_root, "LICENSE")) as f:
    text = f.read()
  assert "Apache License" in text and "Version 2.0" in text
  with open(os.path.join(repo_root, "setup.cfg")) as f:
    assert "license = Apache-2.0" in f.read()
  assert os.path.isfile(os.path.join(repo_root, "jaxrl_suite", "py.typed"))


def test_stale_heavy_ids_are_found_only_where_judged(repo_root):
  """tests/heavy_tests.txt ids that name no test fail the run; a partial selection judges only
  the files it collected whole."""
  from conftest import stale_heavy_ids
  f = "tests/user_path/test_user_path_lint.py"
  heavy = {f"{f}::test_license_and_py_typed", f"{f}::test_renamed_away",
           "tests/gone/test_deleted.py::test_x"}
  nodeids = [f"{f}::test_license_and_py_typed", f"{f}::test_ruff_check_passes"]
  # Whole tree (or this file) collected: the renamed id and the deleted file are both stale.
  assert stale_heavy_ids(heavy, nodeids, ["tests"], repo_root) == [
      "tests/gone/test_deleted.py::test_x", f"{f}::test_renamed_away"]
  # `file::name` narrows the file: only ids in files that no longer exist are judged.
  assert stale_heavy_ids(heavy, nodeids[:1], [f"{f}::test_license_and_py_typed"],
                         repo_root) == ["tests/gone/test_deleted.py::test_x"]
  # Another path selected: this file is not judged at all.
  assert stale_heavy_ids(heavy, ["tests/core/test_core_losses.py::test_a"], ["tests/core"],
                         repo_root) == ["tests/gone/test_deleted.py::test_x"]
  # The list as committed names only tests that exist (the suite itself checks it against the
  # collection; this checks at least that each file is there).
  with open(os.path.join(repo_root, "tests", "heavy_tests.txt")) as fh:
    ids = [r[-1] for r in (line.split("#")[0].split() for line in fh) if r]
  assert ids and all(os.path.isfile(os.path.join(repo_root, i.split("::")[0])) for i in ids)
