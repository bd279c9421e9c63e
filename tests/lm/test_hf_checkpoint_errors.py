"""Loader errors name the tensor (missing, wrong shape) or the config field (unsupported)."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from jaxrl_suite.lm import hf_checkpoint, hf_tokenizer
from test_llama_reference import write_tiny


def test_missing_tensor_is_named(tmp_path):
  t = write_tiny(tmp_path, "llama")
  del t["model.layers.1.mlp.up_proj.weight"]
  save_file(t, os.path.join(tmp_path, "model.safetensors"))
  with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj\.weight is missing"):
    hf_checkpoint.load(str(tmp_path))


def test_shape_mismatch_is_named(tmp_path):
  t = write_tiny(tmp_path, "qwen3")
  t["model.layers.0.self_attn.k_norm.weight"] = np.ones(4, np.float32)
  save_file(t, os.path.join(tmp_path, "model.safetensors"))
  with pytest.raises(ValueError, match=r"k_norm\.weight has shape \(4,\).*\(8,\)"):
    hf_checkpoint.load(str(tmp_path))


@pytest.mark.parametrize("field,value", [("model_type", "gemma"), ("rope_scaling",
                         {"rope_type": "llama3", "factor": 8.0}), ("attention_bias", True)])
def test_unsupported_config_names_the_field(tmp_path, field, value):
  write_tiny(tmp_path, "llama", **{field: value})
  with pytest.raises(ValueError, match=field):
    hf_checkpoint.read_config(str(tmp_path))


def test_tokenizer_matches_our_v1_ids(tmp_path):
  write_tiny(tmp_path, "qwen3")
  tok = hf_tokenizer.load(str(tmp_path))
  assert hf_tokenizer.matching_version(tok) == 1
  assert tok.encode("1 + 2 =").ids == [5, 14, 6, 15]
