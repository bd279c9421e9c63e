"""train/__init__.py is the usage text and a lazy forwarder: importing a sibling or subpackage
(sweep, rail, serving, ballast_hydro) must not import the host loop (train/host.py, and with it
jax, orbax, the env registry and every trainer), while `jaxrl_suite.train.X` still reaches the
host loop's public names."""

import json
import os
import subprocess
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = """
import json, sys
import jaxrl_suite.train.sweep
from jaxrl_suite.train import sweep
loaded = 'jaxrl_suite.train.host' in sys.modules
from jaxrl_suite import train
try:
  train.no_such_name
  missing = False
except AttributeError:
  missing = True
from jaxrl_suite.train import host
print(json.dumps([loaded, missing, train.run_training is host.run_training,
                  train.validate_run_config is host.validate_run_config,
                  'run_training' in dir(train)]))
"""


def test_importing_sweep_does_not_import_the_host_loop_and_train_x_still_works():
  out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=_REPO,
                       timeout=600, check=True)
  loaded, missing, same_run, same_validate, listed = json.loads(out.stdout.strip().splitlines()[-1])
  assert not loaded, "importing jaxrl_suite.train.sweep imported jaxrl_suite.train.host"
  assert missing and same_run and same_validate and listed
