"""House rule for the FORE scripts: no function in experiments/fore.py or bench_fore.py is over
80 lines (issue 39: long report builders were split into one-section helpers)."""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("path", ["experiments/fore.py", "experiments/bench_fore.py"])
def test_no_function_over_80_lines(path):
  tree = ast.parse(open(os.path.join(REPO, path), encoding="utf-8").read())
  long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
          and n.end_lineno - n.lineno + 1 > 80]
  assert not long, f"{path}: functions over 80 lines: {long}"
