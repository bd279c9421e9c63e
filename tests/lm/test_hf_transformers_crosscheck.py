"""Optional cross-check against Hugging Face `transformers` (skipped unless torch is installed).

The tiny Qwen3 / Llama folders written by test_llama_reference.py are loaded by
`transformers.AutoModelForCausalLM` (float32, eager attention) and by `lm.hf_checkpoint`; the two
must give the same logits. The float64 numpy reference already pins our model; this test pins our
reading of the config fields (rope_theta, head_dim, tie_word_embeddings, q/k norms) against the
library the checkpoints come from. Nothing is downloaded.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
# Qwen3 (model_type "qwen3") is in transformers from 4.51: older versions are skipped here, at
# import, rather than inside the test.
transformers = pytest.importorskip("transformers", minversion="4.51.0")

import jax.numpy as jnp  # noqa: E402

from jaxrl_suite.lm import hf_checkpoint, llama  # noqa: E402
from test_llama_reference import write_tiny  # noqa: E402


@pytest.mark.parametrize("kind", ["qwen3", "llama"])
def test_logits_match_transformers(tmp_path, kind):
  write_tiny(tmp_path, kind, seed=9)
  hf = transformers.AutoModelForCausalLM.from_pretrained(
      str(tmp_path), torch_dtype=torch.float32, attn_implementation="eager")
  hf.eval()
  tokens = np.random.default_rng(0).integers(0, 32, (2, 9))
  with torch.no_grad():
    want = hf(torch.as_tensor(tokens)).logits.double().numpy()
  cfg, params = hf_checkpoint.load(str(tmp_path))
  got, _ = llama.LlamaLM(cfg).apply({"params": params}, jnp.asarray(tokens))
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-4 * max(1.0, np.abs(want).max()),
                             rtol=2e-4)
