"""The library's layering, checked on the source: learners and policies never reach into
environments, and core depends on nothing above it.

  core/    <- algos/, agents/, envs/, ope/, lm/   (anyone may use core)
  algos/   <- agents/ (the Agent protocol), experiments
  agents/  <- experiments, configs
  envs/    <- experiments, configs, train.py (the driver that resolves an env by name)

An env-specific policy gets the env's functions and sizes as arguments (dependency injection), so
a new environment never needs an edit in algos/ or agents/. Every import statement counts, those
inside functions too (a lazy import is still a dependency).
"""

import ast
import os

import pytest

_PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "jaxrl_suite")

# package -> the jaxrl_suite subpackages it must not import
_FORBIDDEN = {
    "algos": ("envs", "experiments", "configs"),
    "agents": ("envs", "experiments", "configs"),
    "core": ("algos", "agents", "envs", "ope", "lm", "experiments", "configs"),
}


def _imported_modules(path: str, package: str) -> list[tuple[int, str]]:
  """(line, absolute module name) of every import in the file at `path` (a module of
  `jaxrl_suite.<package>`); relative imports are resolved against the file's package."""
  tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
  rel_dir = os.path.relpath(os.path.dirname(path), os.path.dirname(_PKG)).split(os.sep)
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out += [(node.lineno, a.name) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        base = rel_dir[:len(rel_dir) - node.level + 1]
        mod = ".".join(base + ([node.module] if node.module else []))
      else:
        mod = node.module or ""
      out.append((node.lineno, mod))
      # `from jaxrl_suite import envs` imports a subpackage by name
      out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
  return out


def _sources(package: str):
  for root, _, files in os.walk(os.path.join(_PKG, package)):
    for f in sorted(files):
      if f.endswith(".py"):
        yield os.path.join(root, f)


def test_the_import_resolver_sees_lazy_relative_and_aliased_imports(tmp_path):
  pkg = tmp_path / "jaxrl_suite" / "agents"
  pkg.mkdir(parents=True)
  src = pkg / "probe.py"
  src.write_text("import os\nfrom . import mlp\nfrom .. import envs\n"
                 "def f():\n  from jaxrl_suite.envs.rail import env as e\n  import jaxrl_suite.envs.serving\n")
  global _PKG
  saved, _PKG = _PKG, str(tmp_path / "jaxrl_suite")
  try:
    mods = {m for _, m in _imported_modules(str(src), "agents")}
  finally:
    _PKG = saved
  assert {"os", "jaxrl_suite.agents.mlp", "jaxrl_suite.envs", "jaxrl_suite.envs.rail",
          "jaxrl_suite.envs.serving"} <= mods


@pytest.mark.parametrize("package", sorted(_FORBIDDEN))
def test_package_does_not_import_the_layers_above_it(package):
  bad = {}   # (file, line) -> the shortest offending module named there
  for path in _sources(package):
    for line, mod in _imported_modules(path, package):
      parts = mod.split(".")
      if (parts[0] == "jaxrl_suite" and len(parts) > 1 and parts[1] in _FORBIDDEN[package]) \
          or parts[0] in ("experiments", "configs"):
        where = f"{os.path.relpath(path, os.path.dirname(_PKG))}:{line}"
        bad[where] = min(bad.get(where, mod), mod, key=len)
  bad = [f"{where} imports {mod}" for where, mod in sorted(bad.items())]
  assert not bad, (f"jaxrl_suite/{package} must not import {', '.join(_FORBIDDEN[package])}; "
                   "pass the env's functions and sizes in as arguments instead:\n"
                   + "\n".join(bad))
