"""No verdict string literal in experiments/*.py: every verdict comes from repro.verdicts.judge.

NOT_YET_MIGRATED lists the scripts that still type one today; the list shrinks as they move
onto the reproduction layer, and cannot go stale: each listed file must exist and still hold one.
"""

import ast
import os

import pytest

from jaxrl_suite.repro import verdicts

EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "experiments")
WORDS = frozenset(verdicts.WORDS) | {verdicts.EXCEEDS}
NOT_YET_MIGRATED = frozenset({
    "serving_common.py",
})


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


@pytest.mark.parametrize("name", [f for f in _scripts() if f not in NOT_YET_MIGRATED])
def test_no_typed_verdict(name):
  lines = typed_verdicts(os.path.join(EXPERIMENTS, name))
  assert not lines, (f"experiments/{name} lines {lines} type a verdict; compute it with "
                     "jaxrl_suite.repro (Claim + records.claim_record)")


@pytest.mark.parametrize("name", sorted(NOT_YET_MIGRATED))
def test_allow_list_is_not_stale(name):
  path = os.path.join(EXPERIMENTS, name)
  assert os.path.exists(path), f"{name} no longer exists: drop it from NOT_YET_MIGRATED"
  assert typed_verdicts(path), f"{name} types no verdict any more: drop it from NOT_YET_MIGRATED"
