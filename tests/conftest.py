"""Test-wide setup: JAX's persistent compilation cache (compiles dominate CI time on 2 cores)
and a hypothesis profile that keeps property tests quick.

float64 is NOT enabled globally: tests that need it use `jax.experimental.enable_x64()`.
"""

import os
import sys
import time

_T0_WALL = time.monotonic()   # before jax's import: the summary's wall time is the whole run's

# Most of the suite's CPU time is XLA compiling many small programs, most of that in LLVM's
# optimisation passes; the programs then run for milliseconds. LLVM at -O0 cuts the cold suite's
# CPU by about a quarter (measured 2026-12-05: tests/lm/test_lm_rollout.py 27 -> 20 CPU-s,
# tests/agents entities+custom 23 -> 18 CPU-s). XLA's own HLO passes and the numerics are the
# same (no fast-math either way). Set before jax's CPU client starts, so the test processes and
# the subprocesses they start (CLI runs, notebook kernels) inherit it. A run that sets its own
# level keeps it: XLA_FLAGS=--xla_backend_optimization_level=2 tests what users' runs compile.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                             + " --xla_backend_optimization_level=0").strip()

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

_CACHE = os.environ.get("JAX_COMPILATION_CACHE_DIR", os.path.join(REPO_ROOT, ".jax_cache"))
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

# derandomize: the same examples on every run, so that a CI verdict does not depend on the draw
# (a property found false locally with random examples is kept as an explicit case)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
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
             XLA_FLAGS=(os.environ.get("XLA_FLAGS", "")
                        + " --xla_force_host_platform_device_count=8").strip())
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


def stale_heavy_ids(heavy: set[str], nodeids: list[str], args: list[str], root: str,
                    cwd: str | None = None) -> list[str]:
  """The ids of `heavy` that name no test: their file is gone, or their file was collected whole
  (not narrowed by a `file::name` argument) and holds no such id. A file this run did not
  collect (another path was selected) is not judged; `-k`/`-m`/`--deselect` act after this
  check, so they do not hide ids."""
  collected_files = {n.split("::")[0] for n in nodeids}
  narrowed = set()
  for a in args:
    if "::" in a:
      path = os.path.relpath(os.path.abspath(os.path.join(cwd or root, a.split("::")[0])), root)
      narrowed.add(path.replace(os.sep, "/"))
  present = set(nodeids)
  stale = []
  for hid in sorted(heavy):
    path = hid.split("::")[0]
    if not os.path.isfile(os.path.join(root, path)):
      stale.append(hid)
    elif path in collected_files and path not in narrowed and hid not in present:
      stale.append(hid)
  return stale


@pytest.hookimpl(tryfirst=True)   # before `-m "not slow"`, `-k` and `--deselect` drop items
def pytest_collection_modifyitems(session, config, items):
  heavy = _heavy_ids()
  for item in items:
    if item.nodeid in heavy:
      item.add_marker(pytest.mark.slow)
  stale = stale_heavy_ids(heavy, [i.nodeid for i in items], list(config.args),
                          str(config.rootpath), str(config.invocation_params.dir))
  if stale:
    # A renamed or deleted test would otherwise silently return to (or vanish from) the default
    # suite's budget.
    # Reported as a collection error (not raised: an exception here is an INTERNALERROR under
    # xdist), which stops the run before any test, with and without xdist.
    config.hook.pytest_collectreport(report=pytest.CollectReport(
        os.path.relpath(_HEAVY_LIST, str(config.rootpath)), "failed",
        f"{os.path.relpath(_HEAVY_LIST, REPO_ROOT)} lists ids that name no test (renamed, moved "
        "or deleted? fix the list):\n  " + "\n  ".join(stale), []))


_CONFIG: list[pytest.Config] = []


def pytest_configure(config):
  _CONFIG.append(config)


def pytest_collectreport(report):
  # Under xdist a worker's collection error fails the run only at its end; a stale heavy list
  # stops it before the tests, as it does without xdist (setting the controller's `shouldstop`
  # is how xdist's own --maxfail stops a run).
  if report.failed and report.nodeid == os.path.relpath(_HEAVY_LIST, REPO_ROOT) and _CONFIG:
    dsession = _CONFIG[-1].pluginmanager.get_plugin("dsession")
    if dsession is not None and not dsession.shouldstop:
      dsession.shouldstop = "tests/heavy_tests.txt names tests that do not exist"


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


@pytest.hookimpl(optionalhook=True)   # an xdist hook: runs without xdist (-p no:xdist) too
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
  cpu_s = main_s + workers_s
  terminalreporter.write_line(
      f"suite CPU {cpu_s / 60:.1f} min = {cpu_s:.0f} s (main {main_s:.0f} s + "
      f"{len(_WORKER_CPU_S)} workers {workers_s:.0f} s), wall {wall_s / 60:.1f} min")
  log = os.environ.get("JAXRL_TEST_CPU_LOG")
  if log:
    with open(log, "w") as f:
      for nodeid, s in sorted(_TEST_CPU_S.items(), key=lambda kv: -kv[1]):
        f.write(f"{s:7.1f}  {nodeid}\n")
