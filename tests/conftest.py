"""Test-wide setup: JAX's persistent compilation cache (compiles dominate CI time on 2 cores)
and a hypothesis profile that keeps property tests quick.

float64 is NOT enabled globally: tests that need it use `jax.experimental.enable_x64()`.
"""

import os
import sys

# XLA's multi-threaded Eigen on CPU has been seen to deadlock (all threads in futex wait) in
# large vmapped jits on this 2-core machine under load; single-threaded Eigen avoids it and
# costs nothing measurable for our small networks. Must be set before JAX is imported.
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_cpu_multi_thread_eigen=false").strip()

import jax
import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

_CACHE = os.environ.get("JAX_COMPILATION_CACHE_DIR", os.path.join(REPO_ROOT, ".jax_cache"))
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

settings.register_profile("ci", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@pytest.fixture(scope="session")
def repo_root() -> str:
  return REPO_ROOT
