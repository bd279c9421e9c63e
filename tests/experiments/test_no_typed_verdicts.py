"""No verdict string literal in experiments/*.py: every verdict comes from repro.verdicts.judge.

Every script is on the reproduction layer (the last two, serving_batching and serving_routing
with serving_common, moved in be4246f and after); the library outside jaxrl_suite/repro types
none either.
"""

import ast
import os

import pytest

from jaxrl_suite.repro import verdicts

EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "experiments")
WORDS = frozenset(verdicts.WORDS) | {verdicts.EXCEEDS}


def typed_verdicts(path: str) -> list[int]:
  """Line numbers of string constants that are exactly a verdict word."""
  with open(path) as f:
    tree = ast.parse(f.read(), filename=path)
  return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
          and isinstance(n.value, str) and n.value.strip() in WORDS]


def _scripts():
  return sorted(f for f in os.listdir(EXPERIMENTS) if f.endswith(".py"))


def test_detector_finds_a_typed_verdict(tmp_path):
  p = tmp_path / "x.py"
  p.write_text('v = "reproduced" if ok else "contradicted"\nmsg = "not reproduced here"\n')
  assert typed_verdicts(str(p)) == [1, 1]


@pytest.mark.parametrize("name", _scripts())
def test_no_typed_verdict(name):
  lines = typed_verdicts(os.path.join(EXPERIMENTS, name))
  assert not lines, (f"experiments/{name} lines {lines} type a verdict; compute it with "
                     "jaxrl_suite.repro (Claim + records.claim_record)")


def _vocabulary_lines(path: str) -> set[int]:
  """Lines of module-level `*VERDICTS = (...)` tuples: the record schema's vocabulary
  (core/results.py validates records against it; it judges nothing)."""
  with open(path) as f:
    tree = ast.parse(f.read(), filename=path)
  return {n.lineno for a in tree.body if isinstance(a, ast.Assign)
          and any(isinstance(t, ast.Name) and t.id.endswith("VERDICTS") for t in a.targets)
          for n in ast.walk(a) if isinstance(n, ast.Constant)}


def test_no_typed_verdict_in_the_library_outside_repro():
  root = os.path.join(os.path.dirname(EXPERIMENTS), "jaxrl_suite")
  found = {}
  for d, _, files in os.walk(root):
    if os.path.relpath(d, root).split(os.sep)[0] == "repro":
      continue
    for f in files:
      path = os.path.join(d, f)
      if f.endswith(".py") and (lines := sorted(set(typed_verdicts(path))
                                                - _vocabulary_lines(path))):
        found[os.path.relpath(path, root)] = lines
  assert not found, f"verdict words typed in the library (compute them with repro): {found}"
