"""Save and load nested containers of arrays without pickle: one `.npz` file, arrays + JSON.

`save_tree(path, tree)` stores every array leaf (numpy or jax, any dtype numpy can hold) as an
npz member `a<i>` and the structure, with the non-array leaves (str, int, float, bool, None),
as JSON in the member `__tree__`. Dicts need string keys; tuples come back as tuples, lists as
lists. `load_tree` reads it with `allow_pickle=False`, so a file from an untrusted workdir can
only yield arrays and JSON values, never run code (as unpickling a file can).
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

import numpy as np

FORMAT = "jaxrl_suite.tree_io/1"


class TreeFileError(ValueError):
  """A file is not a tree written by `save_tree` (or is damaged); the message names it."""


def _encode(x: Any, arrays: list[np.ndarray]) -> Any:
  if isinstance(x, dict):
    bad = [k for k in x if not isinstance(k, str)]
    if bad:
      raise TypeError(f"save_tree: dict keys must be str, got {bad[:3]!r}")
    return {"dict": {k: _encode(v, arrays) for k, v in x.items()}}
  if isinstance(x, (list, tuple)):
    return {"tuple" if isinstance(x, tuple) else "list": [_encode(v, arrays) for v in x]}
  if x is None or isinstance(x, (bool, int, float, str)):
    return {"value": x}
  if hasattr(x, "items") and hasattr(x, "keys"):   # FrozenDict and other mappings
    return _encode(dict(x.items()), arrays)
  arr = np.asarray(x)
  if arr.dtype == object:
    raise TypeError(f"save_tree: cannot store a leaf of type {type(x).__name__}")
  arrays.append(arr)
  return {"array": len(arrays) - 1}


def _decode(node: Any, arrays) -> Any:
  (kind, val), = node.items()
  if kind == "dict":
    return {k: _decode(v, arrays) for k, v in val.items()}
  if kind in ("list", "tuple"):
    out = [_decode(v, arrays) for v in val]
    return tuple(out) if kind == "tuple" else out
  if kind == "value":
    return val
  if kind == "array":
    return arrays[f"a{val}"]
  raise TreeFileError(f"unknown node kind {kind!r}")


def save_tree(path: str, tree: Any) -> None:
  """Writes `tree` to `path` (npz format, whatever the extension), atomically."""
  arrays: list[np.ndarray] = []
  structure = {"format": FORMAT, "tree": _encode(tree, arrays)}
  members = {f"a{i}": a for i, a in enumerate(arrays)}
  members["__tree__"] = np.frombuffer(json.dumps(structure).encode(), np.uint8)
  tmp = f"{path}.tmp"
  with open(tmp, "wb") as f:   # a file object: numpy must not append ".npz" to the name
    np.savez(f, **members)
  os.replace(tmp, path)


def load_tree(path: str) -> Any:
  """Reads a tree written by `save_tree`. Raises TreeFileError naming `path` otherwise."""
  try:
    with np.load(path, allow_pickle=False) as z:
      if "__tree__" not in z.files:
        raise TreeFileError(f"{path}: not a tree file written by save_tree (no __tree__ member)")
      structure = json.loads(z["__tree__"].tobytes().decode())
      if structure.get("format") != FORMAT:
        raise TreeFileError(f"{path}: format {structure.get('format')!r}, expected {FORMAT!r}")
      arrays = {k: z[k] for k in z.files if k != "__tree__"}
  except TreeFileError:
    raise
  except (OSError, ValueError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError) as e:
    raise TreeFileError(f"{path}: not a readable tree file ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:160] if str(e) else ''}); delete it to "
                        "recompute it") from None
  return _decode(structure["tree"], arrays)
