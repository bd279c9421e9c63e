"""experiments/direct_opd.py folder mode (jaxrl_suite/lm/opd_folders.py): user checkpoint folders
are checked before any compute (errors name the file and the field), and a tiny transfer runs end
to end."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxrl_suite.core import results as results_lib
from jaxrl_suite.lm import hf_checkpoint, hf_tokenizer, opd_folders, tasks
from test_llama_reference import TINY, write_tiny

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK = tasks.carry_add(num_digits=2, min_value=10)
LARGE = dict(TINY["llama"], hidden_size=40, num_hidden_layers=3, num_key_value_heads=2)


def folders(tmp_path, rl=False):
  write_tiny(tmp_path / "small", "qwen3", seed=1)
  write_tiny(tmp_path / "large", "llama", seed=2, **LARGE)
  out = {"small_dir": str(tmp_path / "small"), "large_dir": str(tmp_path / "large")}
  if rl:
    write_tiny(tmp_path / "small_rl", "qwen3", seed=3)
    out["small_rl_dir"] = str(tmp_path / "small_rl")
  return out


def test_valid_folders_load_with_the_task_context(tmp_path):
  f = folders(tmp_path, rl=True)
  ck = opd_folders.load_folders(f, TASK)
  assert set(ck) == {"small_dir", "large_dir", "small_rl_dir"}
  cfg, params, stored = ck["large_dir"]
  assert cfg.max_len == TASK.prompt_len + TASK.response_len and stored.max_len == 64
  assert cfg.tokenizer_version == 1 and not cfg.qk_norm and ck["small_dir"][0].qk_norm
  assert params["layers_2"]["mlp"]["up_proj"]["kernel"].shape == (40, 48)


@pytest.mark.parametrize("break_it,match", [
    (lambda t, f: f.pop("large_dir"), r"needs both --small_dir and --large_dir"),
    (lambda t, f: f.update(large_dir=str(t / "nowhere")), r"--large_dir=.*nowhere: not a dir"),
    (lambda t, f: os.remove(t / "small" / "tokenizer.json"), r"small: no tokenizer\.json"),
    (lambda t, f: hf_tokenizer.write_vocab_tokenizer(str(t / "large" / "tokenizer.json"), 2),
     r"large/tokenizer\.json \(--large_dir\): its ids are not our v1"),
    (lambda t, f: write_tiny(t / "large", "llama", max_position_embeddings=8),
     r"large/config\.json \(--large_dir\): max_position_embeddings=8 is below the 12"),
    (lambda t, f: write_tiny(t / "small_rl", "qwen3", hidden_size=16),
     r"small_rl/config\.json: field hidden_size=16 differs from --small_dir's 24"),
    (lambda t, f: write_tiny(t / "small", "qwen3", rope_scaling={"rope_type": "yarn"}),
     r"small/config\.json: field rope_scaling"),
])
def test_bad_folders_are_named_before_any_compute(tmp_path, break_it, match):
  f = folders(tmp_path, rl=True)
  break_it(tmp_path, f)
  with pytest.raises(ValueError, match=match):
    opd_folders.load_folders(f, TASK)


def test_missing_tensor_is_named_with_its_folder(tmp_path):
  from safetensors.numpy import load_file, save_file
  f = folders(tmp_path)
  path = os.path.join(f["large_dir"], "model.safetensors")
  t = load_file(path)
  del t["model.layers.2.self_attn.o_proj.weight"]
  save_file(t, path)
  with pytest.raises(ValueError, match=r"large: tensor model\.layers\.2\.self_attn\.o_proj"):
    opd_folders.load_folders(f, TASK)


def _run(tmp_path, f, *extra):
  cmd = [sys.executable, "-m", "experiments.direct_opd", "--quick",
         f"--workdir={tmp_path / 'work'}", f"--results_dir={tmp_path / 'res'}",
         *(f"--{k}={v}" for k, v in f.items()), *extra]
  return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)


def test_cli_reports_a_bad_folder_in_two_lines(tmp_path):
  f = folders(tmp_path)
  hf_tokenizer.write_vocab_tokenizer(os.path.join(f["small_dir"], "tokenizer.json"), 2)
  p = _run(tmp_path, f)
  assert p.returncode == 2, p.stderr[-2000:]
  assert "small/tokenizer.json (--small_dir): its ids are not our v1" in p.stderr
  assert "Traceback" not in p.stderr and not (tmp_path / "res").exists()


@pytest.mark.slow
def test_folder_mode_runs_a_transfer_end_to_end(tmp_path):
  f = folders(tmp_path)
  p = _run(tmp_path, f, "--config.grpo_steps=2", "--config.distill_steps=2", "--config.chunk=2",
           "--config.eval_problems=16")
  assert p.returncode == 0, p.stderr[-3000:]
  rec = json.load(open(tmp_path / "res" / "direct_opd_folders.json"))
  results_lib.validate_record(rec)
  assert rec["claims"] == [] and rec["adhoc_inputs"] and rec["task"] == "carry_add"
  acc = rec["runs"]["acc"]
  assert set(acc) == {"teacher_ref", "teacher_rl", "large_base", "large_decode",
                      "large_direct_opd"}
  assert all(len(v) == 2 and all(0 <= x <= 1 for x in v) for v in acc.values())
  assert len(rec["runs"]["cost"]["teacher_grpo"]["reward_curve"]) == 2
  # The distilled student is a checkpoint folder: same architecture, moved weights.
  cfg0, p0 = hf_checkpoint.load(f["large_dir"])
  cfg1, p1 = hf_checkpoint.load(rec["student_dir"])
  assert hf_checkpoint.config_dict(cfg0) == hf_checkpoint.config_dict(cfg1)
  assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(p0), jax.tree.leaves(p1)))
  assert os.path.isfile(os.path.join(rec["student_dir"], "tokenizer.json"))
