"""The library's layer order and import graph, checked on the source (ARCHITECTURE.md, "Layers").

Every import statement counts: module level, inside functions (a lazy import is still a
dependency, and an import cycle hidden behind one is still a cycle) and under
`if TYPE_CHECKING:`. Checks:

  1. no import cycle among jaxrl_suite's modules: the strongly connected components of the
     module graph (packages count as their `__init__`) are single modules;
  2. every import from one top-level package of jaxrl_suite into another is one that
     ARCHITECTURE.md's layer table allows (`<package> may import: a, b`), that table is an order
     (acyclic) and names every package there is; no library module imports `experiments` or
     `configs` (the layers above the library);
  3. configs/ imports no experiments module (a config is data; experiment code imports configs,
     never the reverse).

The graph is built with `ast` alone (nothing is imported), so the test runs in well under a
second. What it cannot see: modules imported by a name in a string (`importlib.import_module`,
the registry's factory table); those must follow the same order (a factory does not call back
into the registry that loads it).
"""

import ast
import os
import re

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PKG = "jaxrl_suite"
# Above the library: nothing in jaxrl_suite/ may import these.
_ABOVE_THE_LIBRARY = ("experiments", "configs")


# ---- the import graph ---------------------------------------------------------------------------

def module_files(root: str, pkg: str = _PKG) -> dict[str, str]:
  """{dotted module name: path} of every .py under `root/pkg`; a package is its `__init__`."""
  mods = {}
  for d, _, files in os.walk(os.path.join(root, pkg)):
    for f in sorted(files):
      if f.endswith(".py"):
        path = os.path.join(d, f)
        name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        mods[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
  return mods


def imported_names(path: str, module: str, is_package: bool) -> list[tuple[int, str, bool]]:
  """(line, dotted name, is_container) for every import statement in the file (ast.walk: lazy
  and TYPE_CHECKING imports too). Relative imports are resolved against the module's package.
  `from X import a` yields X.a and X itself, the latter marked as the container of the names."""
  tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
  base = module if is_package else module.rpartition(".")[0]
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out += [(node.lineno, a.name, False) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        b = base
        for _ in range(node.level - 1):
          b = b.rpartition(".")[0]
        mod = f"{b}.{node.module}" if node.module else b
      else:
        mod = node.module or ""
      out += [(node.lineno, f"{mod}.{a.name}", False) for a in node.names if a.name != "*"]
      out.append((node.lineno, mod, True))
  return out


def import_graph(root: str, pkg: str = _PKG):
  """(mods, edges, where, outside): edges {module: set of modules of `pkg` it imports};
  where[(a, b)] = the first 'path:line' of an import a -> b; outside = [(path:line, name)] of
  imports whose top-level name is in _ABOVE_THE_LIBRARY."""
  mods = module_files(root, pkg)

  def resolve(name):
    """The longest prefix of a dotted name that is one of our modules (`from m import f`
    names module m; `from pkg import sub` names the submodule)."""
    while name and name not in mods:
      name = name.rpartition(".")[0]
    return name or None

  edges, where, outside = {m: set() for m in mods}, {}, []
  for m, path in mods.items():
    is_package = path.endswith("__init__.py")
    parent = m if is_package else m.rpartition(".")[0]
    for line, name, container in imported_names(path, m, is_package):
      loc = f"{os.path.relpath(path, root)}:{line}"
      top = name.split(".")[0]
      if top in _ABOVE_THE_LIBRARY:
        outside.append((loc, name))
      if top != pkg:
        continue
      r = resolve(name)
      # `from our_package import sibling` inside our_package names the sibling, not our own
      # package's __init__ (as the interpreter has already run it to get here).
      if r is None or r == m or (container and r == parent):
        continue
      edges[m].add(r)
      where.setdefault((m, r), loc)
  return mods, edges, where, outside


def strongly_connected_components(edges: dict[str, set[str]]) -> list[list[str]]:
  """Tarjan's algorithm; the components with more than one node, each sorted."""
  index, low, stack, on_stack, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges.get(v, ())):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  for v in sorted(edges):
    if v not in index:
      visit(v)
  return out


def layer_of(module: str) -> str:
  """The top-level package (or module, e.g. `train`) of jaxrl_suite a module belongs to; "" for
  the root package itself."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else ""


# ---- the layer table (ARCHITECTURE.md) ----------------------------------------------------------

def layer_table(text: str) -> dict[str, set[str]]:
  """{package: packages it may import} from the `<package> may import: a, b` lines of the
  "## Layers" section ("nothing" for none)."""
  m = re.search(r"^## Layers\b.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
  assert m, "ARCHITECTURE.md has no '## Layers' section: restore the layer table there"
  table = {}
  for line in m.group(1).splitlines():
    hit = re.match(r"^\s*([a-z_]+)\s+may import:\s*(.*?)\s*$", line)
    if hit:
      names = [n.strip() for n in hit.group(2).split("#")[0].split(",") if n.strip()]
      table[hit.group(1)] = set() if names == ["nothing"] else set(names)
  assert table, "ARCHITECTURE.md's '## Layers' section has no '<package> may import: ...' line"
  return table


def layer_violations(edges, where, table) -> list[str]:
  """'path:line: a imports b (layer A may import: ...)' for every edge the table forbids, one
  per import statement and layer (`from pkg.algos import ppo` names algos and algos.ppo: the
  longer is shown)."""
  worst = {}
  for a in sorted(edges):
    for b in sorted(edges[a]):
      la, lb = layer_of(a), layer_of(b)
      if la == lb or lb == "":     # inside one package, or the root package (imports nothing)
        continue
      if lb not in table.get(la, set()):
        key = (where[(a, b)], a, lb)
        worst[key] = max(worst.get(key, b), b, key=len)
  return [f"{loc}: {a} imports {b} (layer {layer_of(a)} may import: "
          f"{', '.join(sorted(table.get(layer_of(a), ()))) or 'nothing'})"
          for (loc, a, _), b in sorted(worst.items(), key=lambda kv: _by_place(kv[0][0]))]


def _by_place(loc: str):
  """'path:line' sorted by path, then line number."""
  path, _, line = loc.rpartition(":")
  return path, int(line)


@pytest.fixture(scope="module")
def graph():
  return import_graph(_REPO)


@pytest.fixture(scope="module")
def table():
  return layer_table(open(os.path.join(_REPO, "ARCHITECTURE.md"), encoding="utf-8").read())


# ---- the checks ---------------------------------------------------------------------------------

def test_the_library_has_no_import_cycle(graph):
  _, edges, where, _ = graph
  cycles = strongly_connected_components(edges)
  lines = []
  for comp in cycles:
    inside = set(comp)
    lines.append(" <-> ".join(comp))
    lines += [f"    {where[(a, b)]}: {a} -> {b}"
              for a in comp for b in sorted(edges[a] & inside)]
  assert not cycles, (f"{len(cycles)} import cycle(s) in jaxrl_suite/ (lazy imports count): "
                      "move the shared code down a layer (or into its own module) so that "
                      "one direction of each edge goes away:\n" + "\n".join(lines))


def test_imports_follow_the_layer_order(graph, table):
  mods, edges, where, outside = graph
  bad = layer_violations(edges, where, table)
  bad += [f"{loc}: imports {name} (the library never imports experiments/ or configs/)"
          for loc, name in outside]
  assert not bad, ("imports against the layer order of ARCHITECTURE.md ('## Layers'); move the "
                   "code to the layer that may use it, or pass the function in as an argument:\n"
                   + "\n".join(bad))


def test_the_root_package_imports_nothing_of_ours(graph):
  _, edges, where, _ = graph
  assert not edges[_PKG], ("jaxrl_suite/__init__.py must import no subpackage (every layer "
                           "imports it): " + ", ".join(where[(_PKG, b)] for b in edges[_PKG]))


def test_the_layer_table_is_an_order_over_the_packages_there_are(graph, table):
  mods = graph[0]
  present = {layer_of(m) for m in mods} - {""}
  missing, stale = sorted(present - set(table)), sorted(set(table) - present)
  assert not missing, (f"jaxrl_suite/{{{', '.join(missing)}}} not in ARCHITECTURE.md's layer "
                       "table: add a '<package> may import: ...' line for each")
  assert not stale, f"ARCHITECTURE.md's layer table names packages that do not exist: {stale}"
  unknown = sorted({f"{a}: {b}" for a, bs in table.items() for b in bs if b not in table})
  assert not unknown, f"ARCHITECTURE.md's layer table allows unknown packages: {unknown}"
  loops = strongly_connected_components(table)
  assert not loops and not any(a in bs for a, bs in table.items()), (
      f"ARCHITECTURE.md's layer table is not an order (layers that may import each other): "
      f"{loops}")


def test_configs_import_no_experiment_module():
  bad = []
  for d, _, files in os.walk(os.path.join(_REPO, "configs")):
    for f in sorted(files):
      if not f.endswith(".py"):
        continue
      path = os.path.join(d, f)
      module = os.path.relpath(path, _REPO)[:-3].replace(os.sep, ".")
      for line, name, _ in imported_names(path, module, f == "__init__.py"):
        if name.split(".")[0] == "experiments":
          bad.append(f"{os.path.relpath(path, _REPO)}:{line} imports {name}")
  assert not bad, ("configs/ must not import experiments/ (a config is data that experiments "
                   "read; put what both need in jaxrl_suite/ or configs/):\n" + "\n".join(bad))


# ---- the checker checks itself on planted packages ----------------------------------------------

def _write(root, files: dict[str, str]):
  for rel, text in files.items():
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_graph_sees_lazy_relative_aliased_and_type_checking_imports(tmp_path):
  _write(tmp_path, {
      "jaxrl_suite/__init__.py": "",
      "jaxrl_suite/core/__init__.py": "",
      "jaxrl_suite/core/util.py": "X = 1\n",
      "jaxrl_suite/envs/__init__.py": "",
      "jaxrl_suite/envs/serving/__init__.py": "",
      "jaxrl_suite/envs/rail/__init__.py": "",
      "jaxrl_suite/envs/rail/env.py": "",
      "jaxrl_suite/agents/__init__.py": "",
      "jaxrl_suite/agents/mlp.py": "",
      "jaxrl_suite/agents/probe.py": (
          "import os\nfrom typing import TYPE_CHECKING\nfrom . import mlp\nfrom .. import envs\n"
          "from ..core.util import X\nif TYPE_CHECKING:\n  import jaxrl_suite.envs.serving as s\n"
          "def f():\n  from jaxrl_suite.envs.rail import env as e\n  import experiments.x\n"),
  })
  _, edges, where, outside = import_graph(str(tmp_path))
  # `from .. import envs` runs jaxrl_suite/__init__.py too (the root, which every layer may use)
  # and `from jaxrl_suite.envs.rail import env` rail/__init__.py; `from . import mlp` names the
  # sibling, not agents/__init__.py (already running).
  assert edges["jaxrl_suite.agents.probe"] == {
      "jaxrl_suite", "jaxrl_suite.agents.mlp", "jaxrl_suite.envs", "jaxrl_suite.core.util",
      "jaxrl_suite.envs.serving", "jaxrl_suite.envs.rail", "jaxrl_suite.envs.rail.env"}
  assert where[("jaxrl_suite.agents.probe", "jaxrl_suite.envs.rail.env")].endswith("probe.py:9")
  assert [n for _, n in outside] == ["experiments.x"]


def test_a_planted_cycle_and_an_upward_import_are_reported(tmp_path):
  _write(tmp_path, {
      "jaxrl_suite/__init__.py": "",
      "jaxrl_suite/core/__init__.py": "",
      "jaxrl_suite/core/a.py": "def f():\n  from jaxrl_suite.core import b  # lazy\n",
      "jaxrl_suite/core/b.py": "from jaxrl_suite.core.a import f\n",
      "jaxrl_suite/algos/__init__.py": "",
      "jaxrl_suite/algos/ppo.py": "from jaxrl_suite.core import a\n",
      "jaxrl_suite/agents/__init__.py": "",
      "jaxrl_suite/agents/mlp.py": "from jaxrl_suite.algos import ppo\n",
  })
  _, edges, where, _ = import_graph(str(tmp_path))
  assert strongly_connected_components(edges) == [["jaxrl_suite.core.a", "jaxrl_suite.core.b"]]
  table = layer_table("## Layers\n  core may import: nothing\n  agents may import: core\n"
                      "  algos may import: core, agents\n## Next\n  ope may import: all\n")
  assert table == {"core": set(), "agents": {"core"}, "algos": {"core", "agents"}}
  bad = layer_violations(edges, where, table)
  assert bad == ["jaxrl_suite/agents/mlp.py:1: jaxrl_suite.agents.mlp imports "
                 "jaxrl_suite.algos.ppo (layer agents may import: core)"], bad
