"""House rule for experiments/ (issue 34: scripts thin over the library): no function over 80
lines, in every script (the allow-list of scripts not yet split is gone: all are split)."""

import ast
import os

import pytest

EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "experiments")
MAX_LINES = 80


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


@pytest.mark.parametrize("name", _scripts())
def test_no_function_over_80_lines(name):
  long = long_functions(os.path.join(EXPERIMENTS, name))
  assert not long, f"experiments/{name}: functions over {MAX_LINES} lines: {long}"
