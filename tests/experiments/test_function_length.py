"""House rule for experiments/ (issue 34: scripts thin over the library): no function over 80
lines. LONG_NOT_YET_SPLIT lists the scripts that still have one today; the list shrinks as they
are split and cannot go stale: each listed file must exist and still hold a long function."""

import ast
import os

import pytest

EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "experiments")
MAX_LINES = 80
LONG_NOT_YET_SPLIT = frozenset({
    "purejaxrl_style_ppo.py",
})


def long_functions(path: str) -> list[tuple[str, int]]:
  """(name, length in lines) of every function in the file longer than MAX_LINES."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), filename=path)
  return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
          and n.end_lineno - n.lineno + 1 > MAX_LINES]


def _scripts():
  return sorted(f for f in os.listdir(EXPERIMENTS) if f.endswith(".py"))


def test_detector_finds_a_long_function(tmp_path):
  p = tmp_path / "x.py"
  p.write_text("def f():\n" + "  x = 1\n" * MAX_LINES + "\ndef g():\n  return 1\n")
  assert long_functions(str(p)) == [("f", MAX_LINES + 1)]


@pytest.mark.parametrize("name", [f for f in _scripts() if f not in LONG_NOT_YET_SPLIT])
def test_no_function_over_80_lines(name):
  long = long_functions(os.path.join(EXPERIMENTS, name))
  assert not long, f"experiments/{name}: functions over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("name", sorted(LONG_NOT_YET_SPLIT))
def test_allow_list_is_not_stale(name):
  path = os.path.join(EXPERIMENTS, name)
  assert os.path.exists(path), f"{name} no longer exists: drop it from LONG_NOT_YET_SPLIT"
  assert long_functions(path), f"{name} has no long function any more: drop it"
