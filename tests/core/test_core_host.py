"""core/host.py: the host fields a record stores beside its numbers."""

from jaxrl_suite.core.host import host_info


def test_host_info_names_cpus_flags_and_backend(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_foo=1")
  h = host_info()
  assert set(h) == {"cpus", "xla_flags", "backend"}
  assert isinstance(h["cpus"], int) and h["cpus"] >= 1
  assert h["xla_flags"] == "--xla_cpu_foo=1" and h["backend"] == "cpu"
