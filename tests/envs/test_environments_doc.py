"""docs/environments.md stays true: every python block runs, every environment of the project has
a section, and each section's machine-readable `shapes:` line equals what the environment returns.

The shapes come from `jax.eval_shape` of reset / action_mask / step (tracing only, no compile), on
the (env, params) that the section's example built, or `registry.make(name)` for sections without
one (the probes share one example). Budget: each block compiles one vmapped reset and step; the
whole file takes ~42 CPU-s with a cold compilation cache on 2 cores (the conftest's -O0 XLA
flags; BallastHydro-v0's bank build is the largest part, ~10 s), ~20 s warm.
"""

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs import arguments, registry

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "environments.md")
_HEADING = re.compile(r"^(#{2,3}) `([A-Za-z0-9_-]+)`", re.M)
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
_SHAPES = re.compile(r"^`shapes: (.*)`$", re.M)
_ROW = re.compile(r"^\| `([A-Za-z0-9_-]+)` \| (\S+) \| (\S+) \|$", re.M)


def _text() -> str:
  with open(DOC) as f:
    return f.read()


def sections(text: str) -> dict[str, str]:
  """Environment name -> its section's text (up to the next `## ` / `### ` heading)."""
  marks = [(m.start(), m.group(2)) for m in _HEADING.finditer(text)]
  heads = [m.start() for m in re.finditer(r"^#{1,3} ", text, re.M)]
  out = {}
  for start, name in marks:
    end = min([h for h in heads if h > start] + [len(text)])
    out[name] = text[start:end]
  return out


def _arr(x) -> str:
  return f"{np.dtype(x.dtype).name}[{','.join(str(d) for d in x.shape)}]"


def _tree(x) -> str:
  if hasattr(x, "shape") and hasattr(x, "dtype"):
    return _arr(x)
  leaves, _ = jax.tree_util.tree_flatten_with_path(x)
  return "{" + ", ".join(f"{jax.tree_util.keystr(p).lstrip('.')}: {_arr(v)}"
                         for p, v in leaves) + "}"


def shapes_line(env, params, ran: dict | None = None) -> str:
  """`obs ...; action ...; [action_mask ...;] [agent_mask ...;] reward ...; terminated ...;
  truncated ...`: the one-env shapes, traced (no compile) from reset / masks / step; `ran`: the
  batched (leading axis 4) obs / reward / terminated / truncated an example computed, whose
  per-env shapes are used instead of tracing reset and step again."""
  key = jax.random.PRNGKey(0)
  obs, state = jax.eval_shape(env.reset, key, params)
  space = env.action_space(params)
  parts = [f"obs {_tree(obs)}"]
  mask = (jax.eval_shape(env.action_mask, state, params) if hasattr(env, "action_mask")
          else None)
  agents = (jax.eval_shape(env.agent_mask, state, params) if hasattr(env, "agent_mask")
            else None)
  if hasattr(space, "n"):   # Discrete: one index per agent slot (rail, coordination) or one
    shape = (mask.shape[:-1] if mask is not None else agents.shape if agents is not None
             else ())
    dtype = jnp.int32
    parts.append(f"action int32[{','.join(map(str, shape))}] in [0, {int(space.n)})")
  else:                     # Box: token blocks (text), one command per pump (BallastHydro)
    shape, dtype = tuple(space.shape), space.dtype
    lo, hi = np.asarray(space.low), np.asarray(space.high)
    parts.append(f"action {np.dtype(dtype).name}[{','.join(map(str, shape))}] in "
                 f"[{lo.min().item()}, {hi.max().item()}]")
  if mask is not None:
    parts.append(f"action_mask {_arr(mask)}")
  if agents is not None:
    parts.append(f"agent_mask {_arr(agents)}")
  if ran is None:
    _, _, reward, term, trunc, _ = jax.eval_shape(env.step, key, state,
                                                  jnp.zeros(shape, dtype), params)
  else:   # the example's own results, less their batch axis
    one = lambda x: jax.ShapeDtypeStruct(np.shape(x)[1:], x.dtype)   # noqa: E731
    obs_ran, reward, term, trunc = jax.tree.map(
        one, (ran["obs"], ran["reward"], ran["terminated"], ran["truncated"]))
    assert _tree(obs_ran) == _tree(obs), (_tree(obs_ran), _tree(obs))
  parts += [f"reward {_arr(reward)}", f"terminated {_arr(term)}", f"truncated {_arr(trunc)}"]
  return "; ".join(parts)


def test_every_project_environment_has_a_section_with_one_shapes_line():
  secs = sections(_text())
  missing = [n for n in registry.project_names() if n not in secs]
  assert not missing, f"docs/environments.md has no '## `NAME`' section for {missing}"
  unknown = [n for n in secs if not registry.is_registered(n)]
  assert not unknown, f"docs/environments.md documents unregistered names {unknown}"
  for name in registry.project_names():
    lines = _SHAPES.findall(secs[name])
    assert len(lines) == 1, f"section {name}: want one '`shapes: ...`' line, found {len(lines)}"
    assert registry.summary(name), name


def space_str(space) -> str:
  """`discrete(n)` or `dtype[shape]` of a gymnax space (the gymnax table's notation)."""
  if hasattr(space, "n"):
    return f"discrete({int(space.n)})"
  return f"{np.dtype(space.dtype).name}[{','.join(str(d) for d in space.shape)}]"


# gymnax's MNISTBandit downloads MNIST when it is made (network): named, not made
_NOT_MADE = ("MNISTBandit-bsuite",)


def test_every_gymnax_environment_is_listed_with_its_spaces():
  text = _text()
  rows = dict((n, (o, a)) for n, o, a in _ROW.findall(text))
  for name in registry.registered_names():
    if name in registry.project_names():
      continue
    assert f"`{name}`" in text, f"docs/environments.md does not list gymnax's {name}"
    if name in _NOT_MADE:
      continue
    env, params = registry.make(name)
    got = (space_str(env.observation_space(params)), space_str(env.action_space(params)))
    assert rows.get(name) == got, f"{name}: the table says {rows.get(name)}, gymnax gives {got}"


def test_documented_arguments_are_arguments_and_the_factorys_own_are_documented():
  """A section's `Arguments` paragraph names only real keywords of `make` (no stale names), and
  every non-probe section names all of its factory's own: the first of the registry's sources
  (factory, then what its **overrides reach) with named parameters."""
  for name, sec in sections(_text()).items():
    m = re.search(r"Arguments[^:]*: (.*?)(?:\n\n|\Z)", sec, re.S)
    if name.startswith("Probe") and m is None:
      continue
    assert m is not None, f"section {name}: no 'Arguments (defaults): ...' paragraph"
    args = set(re.findall(r"`([a-z_0-9]+)=", m.group(1)))
    bad = sorted(args - set(registry.valid_kwargs(name)))
    assert not bad, f"section {name}: {bad} are not arguments of make({name!r}, ...)"
    sources, exclude = registry._sources(name)
    own = next(k for k in (arguments.keywords(s) - exclude for s in sources) if k)
    if not name.startswith("Probe"):
      missing = sorted(own - args)
      assert not missing, f"section {name}: arguments {missing} are not documented"


def _cases():
  return [pytest.param(name, sec, id=name) for name, sec in sections(_text()).items()]


@pytest.mark.parametrize("name,section", _cases())
def test_section_example_runs_and_shapes_match(name, section):
  blocks = _BLOCK.findall(section)
  if not name.startswith("Probe"):   # the probes share one example (test_shared_blocks_run)
    assert len(blocks) == 1, f"section {name}: want one python example, found {len(blocks)}"
  ns = {}
  for code in blocks:
    assert f'registry.make("{name}"' in code, f"{name}: its example must make {name}"
    ns = {"__name__": f"docs_environments_{name}"}
    exec(compile(code, f"docs/environments.md[{name}]", "exec"), ns)   # noqa: S102
  ran = None
  if "env" in ns and "params" in ns:
    env, params = ns["env"], ns["params"]
    keys = ("obs", "reward", "terminated", "truncated")
    if all(k in ns for k in keys):   # the example stepped 4 envs: its results give the shapes
      ran = {k: ns[k] for k in keys}
      assert ran["reward"].shape[:1] == (4,), f"{name}: the example should vmap over 4 keys"
  else:
    env, params = registry.make(name)
  want = _SHAPES.findall(section)
  assert want, f"{name}: no '`shapes: ...`' line"
  got = shapes_line(env, params, ran)
  assert want[0] == got, f"{name}: the doc says\n  {want[0]}\nthe env gives\n  {got}"


def test_shared_blocks_run():
  """Python blocks outside the environment sections (the quick start, the probes' loop)."""
  text = _text()
  spans = [(m.start(), m.end()) for m in _BLOCK.finditer(text)]
  inside = set()
  for sec in sections(text).values():
    start = text.index(sec)
    inside |= {s for s, _ in spans if start <= s < start + len(sec)}
  shared = [m.group(1) for m in _BLOCK.finditer(text) if m.start() not in inside]
  assert shared, "docs/environments.md lost its quick-start block"
  for i, code in enumerate(shared):
    exec(compile(code, f"docs/environments.md[shared {i}]", "exec"),   # noqa: S102
         {"__name__": f"docs_environments_shared_{i}"})
