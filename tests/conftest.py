"""Test-wide setup: JAX's persistent compilation cache (compiles dominate CI time on 2 cores)
and a hypothesis profile that keeps property tests quick.

float64 is NOT enabled globally: tests that need it use `jax.experimental.enable_x64()`.
"""

import os
import sys

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


def run_with_8_host_devices(script: str, timeout: float = 600) -> str:
  """Runs `script` in a fresh interpreter whose JAX sees 8 CPU devices (the flag must be set
  before jax is imported, so it cannot run in this process); returns its stdout, or fails the
  test with its output."""
  import subprocess
  env = dict(os.environ, PYTHONPATH=REPO_ROOT,
             XLA_FLAGS="--xla_force_host_platform_device_count=8")
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=REPO_ROOT)
  assert out.returncode == 0, out.stdout + out.stderr
  return out.stdout


# Tests measured as the heaviest of the suite (CPU seconds with a cold compilation cache, written
# beside each id in heavy_tests.txt) run in `make test-slow`, not `make test`, so that the default
# suite stays inside its time budget on a 2-core machine. Each one's file keeps cheaper default
# tests of the same code. Re-measure and edit the list when tests change.
_HEAVY_LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heavy_tests.txt")


def _heavy_ids() -> set[str]:
  if not os.path.exists(_HEAVY_LIST):
    return set()
  with open(_HEAVY_LIST) as f:
    rows = [line.split("#")[0].split() for line in f]
  return {r[-1] for r in rows if r}


@pytest.hookimpl(tryfirst=True)   # before `-m "not slow"` deselects by marker
def pytest_collection_modifyitems(config, items):
  heavy = _heavy_ids()
  for item in items:
    if item.nodeid in heavy:
      item.add_marker(pytest.mark.slow)


def assert_config_rejects(config_module, field: str, value, match: str | None = None) -> None:
  """A fresh `config_module.get_config()` with `field` (dotted path) set to `value` (or to
  `value(config)` when callable) makes `config_module.validate` raise a ValueError matching
  `match` (default: the field's last name), i.e. the error names the field."""
  c = config_module.get_config()
  *parents, leaf = field.split(".")
  node = c
  for p in parents:
    node = node[p]
  node[leaf] = value(c) if callable(value) else value
  with pytest.raises(ValueError, match=match or leaf):
    config_module.validate(c)



# --- CPU accounting ---------------------------------------------------------------------------
# The suite's budget is CPU, not wall: CI has 2 cores, so wall >= CPU / 2. Every run prints one
# line with the suite's CPU time (this process + every xdist worker, their compiler threads and
# the subprocesses tests wait for included) beside its wall time. With JAXRL_TEST_CPU_LOG=<path>
# it also writes each test's CPU seconds there, heaviest first (setup + call + teardown, so a
# module- or session-scoped fixture is charged to the first test that uses it on its worker):
# the numbers tests/heavy_tests.txt records.
import resource  # noqa: E402
import time  # noqa: E402

_T0_WALL = time.monotonic()
_START_KEY = pytest.StashKey[float]()
_WORKER_CPU_S: dict[str, float] = {}
_TEST_CPU_S: dict[str, float] = {}


def _cpu_s() -> float:
  """CPU seconds of this process and of its waited-for children."""
  total = 0.0
  for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
    r = resource.getrusage(who)
    total += r.ru_utime + r.ru_stime
  return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  item.stash[_START_KEY] = _cpu_s()
  yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  outcome = yield
  if call.when == "teardown" and _START_KEY in item.stash:
    # On the report, so that it reaches the controller under xdist.
    outcome.get_result().user_properties.append(("cpu_s", _cpu_s() - item.stash[_START_KEY]))


def pytest_runtest_logreport(report):
  if report.when == "teardown":
    for name, value in report.user_properties:
      if name == "cpu_s":
        _TEST_CPU_S[report.nodeid] = value


def pytest_sessionfinish(session):
  workeroutput = getattr(session.config, "workeroutput", None)
  if workeroutput is not None:   # an xdist worker: hand its total to the controller
    workeroutput["jaxrl_cpu_s"] = _cpu_s()


def pytest_testnodedown(node, error):
  out = getattr(node, "workeroutput", None) or {}
  if "jaxrl_cpu_s" in out:
    _WORKER_CPU_S[str(node.gateway.id)] = out["jaxrl_cpu_s"]


def pytest_terminal_summary(terminalreporter, config):
  if hasattr(config, "workeroutput"):
    return
  main = resource.getrusage(resource.RUSAGE_SELF)
  main_s = main.ru_utime + main.ru_stime
  if not _WORKER_CPU_S:   # no xdist: tests ran here, their subprocesses are this one's children
    main_s = _cpu_s()
  workers_s = sum(_WORKER_CPU_S.values())
  wall_s = time.monotonic() - _T0_WALL
  terminalreporter.write_line(
      f"suite CPU {(main_s + workers_s) / 60:.1f} min (main {main_s:.0f} s + "
      f"{len(_WORKER_CPU_S)} workers {workers_s:.0f} s), wall {wall_s / 60:.1f} min")
  log = os.environ.get("JAXRL_TEST_CPU_LOG")
  if log:
    with open(log, "w") as f:
      for nodeid, s in sorted(_TEST_CPU_S.items(), key=lambda kv: -kv[1]):
        f.write(f"{s:7.1f}  {nodeid}\n")
