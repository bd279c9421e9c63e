"""The rail pricing study's finished phases in its workdir, so that a rerun resumes.

  cache = PhaseCache(workdir, config);  cache.get(name) -> JSON value or None;
  cache.put(name, value);  arrays(value) -> the same with every list back to a float64 array

One file, <workdir>/rail_pricing_phases.json = {"config": canonical JSON of the config,
"phases": {name: value}}, values as plain JSON (arrays as lists). A file made under another
config is ignored (and replaced at the first put), so a rerun with the same config resumes after
the last finished phase instead of recomputing it. Writes are atomic (a temporary file, then
os.replace).
"""

from __future__ import annotations

import json
import os

import numpy as np

from jaxrl_suite.core import results

FILE = "rail_pricing_phases.json"


class PhaseCache:
  """Finished phases in `workdir`, keyed by the config `c` (see the module docstring)."""

  def __init__(self, workdir: str, c):
    self.path = os.path.join(workdir, FILE)
    self.key = json.dumps(results._to_jsonable(c), sort_keys=True)
    self.data = {}
    if os.path.exists(self.path):
      with open(self.path) as f:
        d = json.load(f)
      if d.get("config") == self.key:
        self.data = d["phases"]

  def get(self, name: str):
    return self.data.get(name)

  def put(self, name: str, value) -> None:
    self.data[name] = results._to_jsonable(value)
    with open(self.path + ".tmp", "w") as f:
      json.dump({"config": self.key, "phases": self.data}, f)
    os.replace(self.path + ".tmp", self.path)


def arrays(d):
  """JSON lists back to float64 arrays, nested dicts kept."""
  if isinstance(d, dict):
    return {k: arrays(v) for k, v in d.items()}
  return np.asarray(d, np.float64)
