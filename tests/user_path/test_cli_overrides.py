"""`--quick --config.x=v` runs the quick preset with x = v (experiments/cli.py)."""

import importlib

import pytest

from experiments import cli


@pytest.mark.parametrize("name", ["serving_routing", "serving_batching", "fore", "ppo_gymnax",
                                  "direct_opd", "ballast"])
def test_quick_preset_keeps_command_line_overrides(name):
  m = importlib.import_module(f"configs.{name}")
  parsed = m.get_config()                    # what --config parses to, before overrides
  default, quick = m.get_config(), m.get_config("quick")
  # override one top-level scalar and, where there is one, one nested field
  top = next(k for k in parsed.keys() if isinstance(parsed[k], (int, float))
             and not isinstance(parsed[k], bool))
  parsed[top] = parsed[top] + 7
  num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
  nested = [k for k in parsed.keys()
            if hasattr(parsed[k], "keys") and any(num(v) for v in parsed[k].values())]
  if nested:
    sub = parsed[nested[0]]
    leaf = next(k for k in sub.keys() if num(sub[k]))
    sub[leaf] = sub[leaf] * 3 + 1
  out = cli.config_for(m, parsed, quick=True)
  assert out[top] == default[top] + 7
  if nested:
    assert out[nested[0]][leaf] == default[nested[0]][leaf] * 3 + 1
  # everything not overridden is the quick preset
  for k in quick.keys():
    if k != top and (not nested or k != nested[0]):
      assert out[k] == quick[k], k
  assert cli.config_for(m, parsed, quick=False) is parsed


def test_an_override_equal_to_the_full_default_still_replaces_the_quick_value():
  from configs import serving_batching as m
  parsed, quick = m.get_config(), m.get_config("quick")
  # a field whose quick and full values differ; the user asks for the full value in quick mode
  key = next(k for k in parsed.keys() if not hasattr(parsed[k], "keys") and parsed[k] != quick[k])
  assert cli.config_for(m, parsed, quick=True, argv=[])[key] == quick[key]
  out = cli.config_for(m, parsed, quick=True, argv=["prog", "--quick", f"--config.{key}="])
  assert out[key] == parsed[key]
  assert cli.override_paths(["--config.ppo.lr=1e-3", "--config.seed", "3", "--quick"]) == [
      "ppo.lr", "seed"]
