"""repro.stage_cache is the one stage cache of core/ under the scripts' name (tests of the cache
itself: tests/core/test_core_stage_cache.py)."""

from jaxrl_suite.core import stage_cache as core_sc
from jaxrl_suite.repro import stage_cache as sc


def test_the_scripts_cache_is_the_core_cache(tmp_path):
  for name in sc.__all__:
    assert getattr(sc, name) is getattr(core_sc, name), name
  r = sc.run_stage("s", {"a": 1}, lambda: {"v": 1}, str(tmp_path), fingerprint="fp")
  assert core_sc.run_stage("s", {"a": 1}, None, str(tmp_path), fingerprint="fp").hit
  assert r.path.startswith(str(tmp_path / "stages"))
