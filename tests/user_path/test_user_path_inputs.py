"""User-supplied inputs are checked before any training and reported in a line or two naming the
file; workdir caches are read without pickle."""

import os
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

from jaxrl_suite.core import tree_io
from jaxrl_suite.envs.ballast.layout import LayoutError, load_layout
from jaxrl_suite.envs.serving import harness, traces

_AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _azure_csv(path, n):
  rows = [f"2023-11-16 18:15:{i // 10:02d}.{i % 10}000000,{100 + i},{20 + i}\n" for i in range(n)]
  path.write_text(_AZURE_HEAD + "".join(rows))
  return str(path)


# ------------------------------------------------------------------ traces

def test_binary_trace_is_a_trace_error_naming_the_file(tmp_path):
  p = tmp_path / "trace.csv"
  p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
  with pytest.raises(traces.TraceError, match=f"{p}: binary file"):
    traces.load_trace(str(p))
  p.write_bytes(_AZURE_HEAD.encode() + b"\xff\xfe 2023-11-16 18:15:46,1,1\n")
  with pytest.raises(traces.TraceError, match=f"{p}: not a UTF-8 text CSV"):
    traces.load_trace(str(p))
  with pytest.raises(traces.TraceError, match="is a directory"):
    traces.load_trace(str(tmp_path))


def test_shipped_traces_load_through_package_resources():
  tr = traces.load_shipped("azure_code")
  assert len(tr) > 100 and tr.name == "azure_code"
  with pytest.raises(traces.TraceError, match="no shipped trace 'nope'"):
    traces.load_shipped("nope")


def test_eval_trace_too_small_for_the_windows_is_refused(tmp_path):
  from configs import serving_batching as cfg
  from jaxrl_suite.envs.serving import replay
  c = cfg.get_config("quick")
  small = _azure_csv(tmp_path / "three.csv", 3)
  with pytest.raises(traces.TraceError, match=r"3 requests, too few for \d+ evaluation windows"):
    replay.load_traces(c, small)
  enough = _azure_csv(tmp_path / "enough.csv", c.eval_table + c.n_eval_windows - 1)
  _, test = replay.load_traces(c, enough)
  assert len(test) == c.eval_table + c.n_eval_windows - 1


def test_serving_script_reports_a_binary_eval_trace_in_two_lines(repo_root, tmp_path):
  p = tmp_path / "bin.csv"
  p.write_bytes(bytes(range(256)) * 4)
  out = subprocess.run([sys.executable, "-m", "experiments.serving_batching", "--quick",
                        f"--eval_trace={p}", f"--workdir={tmp_path / 'wd'}"],
                       capture_output=True, text=True, cwd=repo_root, timeout=300)
  assert out.returncode == 2, out.stderr[-3000:]
  err = out.stderr.strip()
  assert "Traceback" not in err and len(err.splitlines()) <= 2, err
  assert str(p) in err and "binary file" in err


# ------------------------------------------------------------------ layouts

def test_layout_errors_name_the_file(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text('{"name": "x", "nodes": []')
  with pytest.raises(LayoutError, match=f"{bad}: not valid JSON"):
    load_layout(str(bad))
  bad.write_bytes(b"\xff\xfe\x00binary")
  with pytest.raises(LayoutError, match=f"{bad}: not a UTF-8 text file"):
    load_layout(str(bad))
  bad.write_text('{"name": "x"}')
  with pytest.raises(LayoutError, match=f"{bad}: layout lacks required field 'nodes'"):
    load_layout(str(bad))
  assert load_layout("ring14")["name"]


def test_ballast_checks_the_layout_before_training(tmp_path):
  from configs import ballast as cfg
  from experiments import ballast
  bad = tmp_path / "bad.json"
  bad.write_text("[1, 2]")
  c = cfg.get_config("quick")
  wd = tmp_path / "wd"
  with pytest.raises(LayoutError, match=f"{bad}: a layout is a JSON object"):
    ballast.run(c, True, str(wd), layout_path=str(bad), results_dir=str(tmp_path / "res"))
  assert not wd.exists()          # failed before anything was set up, let alone trained


# ------------------------------------------------------------------ policy caches

def test_policy_cache_roundtrip_without_pickle(tmp_path):
  obj = {"params": {"ppo": {"Dense_0": {"kernel": np.ones((2, 3, 4), np.float32),
                                         "bias": np.zeros((2, 4), np.float32)}}},
         "curves": {"ppo": [[1.0, 2.0], [3.0, float("nan")]]}, "key": '[{"ppo": 10}, [0, 1]]',
         "train_time": {"ppo": np.float64(1.5)}, "shape": (3, 4), "flag": True, "none": None}
  path = str(tmp_path / "policies_static.npz")
  harness.save_policy(path, obj)
  back = harness.load_policy(path)
  assert back["key"] == obj["key"] and back["shape"] == (3, 4) and back["flag"] is True
  assert back["none"] is None and back["curves"]["ppo"][0] == [1.0, 2.0]
  np.testing.assert_array_equal(back["params"]["ppo"]["Dense_0"]["kernel"],
                                obj["params"]["ppo"]["Dense_0"]["kernel"])
  assert float(back["train_time"]["ppo"]) == 1.5
  with open(path, "rb") as f:
    assert f.read(2) == b"PK"     # a zip (npz), not a pickle stream


class _Exploit:
  def __reduce__(self):
    return (pathlib.Path.touch, (pathlib.Path(os.environ["EXPLOIT_MARK"]),))


def test_a_pickle_in_the_workdir_is_refused_not_executed(tmp_path, monkeypatch):
  mark = tmp_path / "pwned"
  monkeypatch.setenv("EXPLOIT_MARK", str(mark))
  path = tmp_path / "policies_static.pkl"
  path.write_bytes(pickle.dumps({"params": _Exploit()}))
  with pytest.raises(tree_io.TreeFileError, match=f"{path}: not a readable tree file"):
    harness.load_policy(str(path))
  assert not mark.exists()


def test_no_pickle_in_the_package(repo_root):
  offenders = []
  for root in ("jaxrl_suite", "experiments"):
    for dirpath, _, files in os.walk(os.path.join(repo_root, root)):
      for name in files:
        if name.endswith(".py"):
          text = open(os.path.join(dirpath, name)).read()
          if "import pickle" in text or "pickle.load" in text or "allow_pickle=True" in text:
            offenders.append(os.path.join(dirpath, name))
  assert not offenders, offenders


def test_unknown_config_field_in_a_script_is_two_lines(repo_root, tmp_path):
  # The error comes from inside absl's flag parsing (DEFINE_config_file applies the overrides).
  out = subprocess.run([sys.executable, "-m", "experiments.serving_routing", "--quick",
                        "--config.ppo.learning_rate=3", f"--workdir={tmp_path}"],
                       capture_output=True, text=True, cwd=repo_root, timeout=300)
  assert out.returncode == 2, out.stderr[-3000:]
  err = out.stderr.strip()
  assert "Traceback" not in err and len(err.splitlines()) <= 2, err
  assert "--config.ppo.learning_rate: unknown field; did you mean ppo.lr?" in err
