"""What a run's numbers depend on beyond code, config and seeds: the host.

  host_info() -> {"cpus": int, "xla_flags": str, "backend": str}

XLA:CPU splits large reductions over an intra-op thread pool sized by the CPUs this process may
use, so the same commit and seeds round differently on a different CPU count (and PPO then
diverges: docs/ballast.md, "Determinism"); two runs are bitwise comparable only when these
fields agree. Records store it beside their results.
"""

from __future__ import annotations

import os
from typing import Any

import jax


def host_info() -> dict[str, Any]:
  """CPUs this process may run on (its affinity where the OS tells), XLA_FLAGS, jax backend."""
  cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  return {"cpus": int(cpus or 0), "xla_flags": os.environ.get("XLA_FLAGS", ""),
          "backend": jax.default_backend()}
