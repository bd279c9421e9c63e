"""The stage cache: hit, miss on a config or library change, no pickle, damaged files named."""

import json
import os
import shutil

import ml_collections
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxrl_suite.core import stage_cache as sc

FP = "fingerprint-a"


class Counter:
  """A stage function that counts its calls."""

  def __init__(self, value):
    self.value, self.calls = value, 0

  def __call__(self):
    self.calls += 1
    return self.value


def test_second_call_is_a_hit_and_keeps_the_measured_wall_time(tmp_path):
  fn = Counter({"score": 1.5, "seeds": [0, 1], "tag": "x", "ok": True, "none": None})
  first = sc.run_stage("tuning", {"lr": 1e-3}, fn, str(tmp_path), fingerprint=FP)
  again = sc.run_stage("tuning", {"lr": 1e-3}, fn, str(tmp_path), fingerprint=FP)
  assert fn.calls == 1 and not first.hit and again.hit
  assert again.value == first.value == fn.value
  assert again.wall_s == first.wall_s and again.path == first.path
  assert first.path.endswith(".json")   # plain JSON values are stored readable
  with open(first.path) as f:
    rec = json.load(f)
  assert rec["config"] == {"lr": 1e-3} and rec["fingerprint"] == FP and rec["name"] == "tuning"


def test_a_changed_config_is_a_miss_and_key_order_is_not_a_change(tmp_path):
  fn = Counter([1.0])
  sc.cached_stage("s", {"a": 1, "b": [1, 2]}, fn, str(tmp_path), fingerprint=FP)
  sc.cached_stage("s", {"b": [1, 2], "a": 1}, fn, str(tmp_path), fingerprint=FP)
  assert fn.calls == 1
  sc.cached_stage("s", {"a": 2, "b": [1, 2]}, fn, str(tmp_path), fingerprint=FP)
  assert fn.calls == 2
  sc.cached_stage("s", {"a": 1, "b": [1, 2, 3]}, fn, str(tmp_path), fingerprint=FP)
  assert fn.calls == 3
  sc.cached_stage("other", {"a": 1, "b": [1, 2]}, fn, str(tmp_path), fingerprint=FP)
  assert fn.calls == 4   # another stage name never reads this one's value


def test_a_configdict_keys_like_its_dict_and_numpy_scalars_like_python_ones():
  cd = ml_collections.ConfigDict({"lr": 1e-3, "net": {"hidden": (64, 64)}, "seeds": 4})
  plain = {"seeds": np.int64(4), "net": {"hidden": [64, 64]}, "lr": np.float64(1e-3)}
  assert sc.stage_key(cd, FP) == sc.stage_key(plain, FP)
  assert sc.stage_key(cd, FP) != sc.stage_key(cd, "fingerprint-b")


def test_a_library_change_is_a_miss(tmp_path):
  lib = tmp_path / "lib"
  (lib / "sub").mkdir(parents=True)
  (lib / "a.py").write_text("x = 1\n")
  (lib / "sub" / "b.py").write_text("y = 2\n")
  fp0 = sc.library_fingerprint(str(lib))
  (lib / "notes.txt").write_text("not code")            # only .py files count
  os.makedirs(lib / "__pycache__")
  (lib / "__pycache__" / "c.py").write_text("stale")
  assert sc.library_fingerprint(str(lib)) == fp0
  (lib / "sub" / "b.py").write_text("y = 3\n")
  fp1 = sc.library_fingerprint(str(lib))
  assert fp1 != fp0
  fn = Counter({"v": 1})
  wd = str(tmp_path / "wd")
  sc.cached_stage("s", {}, fn, wd, fingerprint=fp0)
  sc.cached_stage("s", {}, fn, wd, fingerprint=fp1)
  sc.cached_stage("s", {}, fn, wd, fingerprint=fp0)
  assert fn.calls == 2   # both values kept side by side; going back is a hit


def test_the_default_fingerprint_is_the_jaxrl_suite_sources():
  import jaxrl_suite
  root = os.path.dirname(jaxrl_suite.__file__)
  assert sc.library_fingerprint() == sc.library_fingerprint(root)
  assert sc.library_fingerprint(extra_sources=[__file__]) != sc.library_fingerprint()


def test_arrays_go_to_npz_without_pickle_and_come_back_equal(tmp_path):
  value = {"curve": np.arange(12, dtype=np.float32).reshape(3, 4), "ids": np.arange(3),
           "pair": (np.ones(2), 2.5), "meta": {"n": 3, "name": "ppo"}}
  r = sc.run_stage("rl/ppo", {"seed": 0}, lambda: value, str(tmp_path), fingerprint=FP)
  assert r.path.endswith(".npz") and os.path.dirname(r.path).endswith(os.path.join("stages", "rl"))
  with np.load(r.path, allow_pickle=False) as z:   # loads with pickle off: data only
    assert "__tree__" in z.files
  for res in (r, sc.run_stage("rl/ppo", {"seed": 0}, None, str(tmp_path), fingerprint=FP)):
    v = res.value   # a miss returns what a hit reads: the same arrays, dtypes and containers
    assert v["curve"].dtype == np.float32
    np.testing.assert_array_equal(v["curve"], value["curve"])
    np.testing.assert_array_equal(v["ids"], value["ids"])
    assert isinstance(v["pair"], tuple) and v["pair"][1] == 2.5
    assert v["meta"] == {"n": 3, "name": "ppo"}


def test_jax_arrays_come_back_as_numpy(tmp_path):
  import jax.numpy as jnp
  r = sc.run_stage("j", {}, lambda: {"w": jnp.ones((2, 2))}, str(tmp_path), fingerprint=FP)
  assert isinstance(r.value["w"], np.ndarray) and r.value["w"].sum() == 4


@pytest.mark.parametrize("content", [b"{not json", b"", b"PK\x03\x04 truncated zip"])
@pytest.mark.parametrize("ext", [".json", ".npz"])
def test_a_damaged_file_is_an_error_naming_it(tmp_path, content, ext):
  value = {"v": 1.0} if ext == ".json" else {"v": np.ones(2)}
  r = sc.run_stage("s", {"k": 1}, lambda: value, str(tmp_path), fingerprint=FP)
  assert r.path.endswith(ext)
  with open(r.path, "wb") as f:
    f.write(content)
  with pytest.raises(sc.StageCacheError) as e:
    sc.cached_stage("s", {"k": 1}, lambda: value, str(tmp_path), fingerprint=FP)
  assert r.path in str(e.value) and "delete it and rerun" in str(e.value)


def test_a_foreign_or_renamed_file_is_an_error_naming_it(tmp_path):
  r = sc.run_stage("a", {}, lambda: {"v": 1}, str(tmp_path), fingerprint=FP)
  other = sc.stage_paths("b", r.key, str(tmp_path))[0]
  shutil.copy(r.path, other)                                  # a's file under b's name
  with pytest.raises(sc.StageCacheError, match="holds stage 'a'"):
    sc.cached_stage("b", {}, lambda: {"v": 2}, str(tmp_path), fingerprint=FP)
  with open(r.path, "w") as f:
    json.dump({"some": "other json"}, f)
  with pytest.raises(sc.StageCacheError, match="not a stage cache file") as e:
    sc.cached_stage("a", {}, lambda: {"v": 1}, str(tmp_path), fingerprint=FP)
  assert r.path in str(e.value)


def test_bad_names_and_unstorable_values_are_refused(tmp_path):
  for name in ("", "../up", "a b", "/abs", "a//b"):
    with pytest.raises(ValueError, match="stage name"):
      sc.cached_stage(name, {}, lambda: 1, str(tmp_path), fingerprint=FP)
  with pytest.raises(TypeError, match="stage 'h'.*without pickle"):
    sc.cached_stage("h", {}, lambda: {1: np.ones(2)}, str(tmp_path), fingerprint=FP)
  with pytest.raises(TypeError, match="stage config"):
    sc.stage_key({"f": object()}, FP)
  assert not os.path.exists(os.path.join(tmp_path, "stages", f"h.{sc.stage_key({}, FP)}.npz"))


def test_an_interrupted_write_leaves_no_stage(tmp_path):
  def boom():
    raise KeyboardInterrupt
  with pytest.raises(KeyboardInterrupt):
    sc.cached_stage("s", {}, boom, str(tmp_path), fingerprint=FP)
  fn = Counter({"v": 1})
  sc.cached_stage("s", {}, fn, str(tmp_path), fingerprint=FP)
  assert fn.calls == 1


_leaf = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, width=32),
                  st.text(max_size=5), st.booleans(), st.none())
_configs = st.recursive(_leaf, lambda c: st.one_of(
    st.lists(c, max_size=4), st.dictionaries(st.text(max_size=4), c, max_size=4)), max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(_configs, st.randoms(use_true_random=False))
def test_canonical_json_ignores_dict_order_and_round_trips(config, rnd):
  def shuffled(x):
    if isinstance(x, dict):
      items = list(x.items())
      rnd.shuffle(items)
      return {k: shuffled(v) for k, v in items}
    if isinstance(x, list):
      return [shuffled(v) for v in x]
    return x
  assert sc.canonical_json(shuffled(config)) == sc.canonical_json(config)
  assert sc.stage_key(shuffled(config), FP) == sc.stage_key(config, FP)
  back = json.loads(sc.canonical_json(config))
  assert sc.canonical_json(back) == sc.canonical_json(config)


def test_the_default_key_uses_one_fingerprint_per_process(tmp_path):
  fp = sc.process_fingerprint()
  r = sc.run_stage("d", {"x": 1}, lambda: 1, str(tmp_path))
  assert r.key == sc.stage_key({"x": 1}, fp) and sc.process_fingerprint() == fp
  assert sc.run_stage("d", {"x": 1}, lambda: 2, str(tmp_path)).value == 1
