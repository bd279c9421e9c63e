"""Checkpoints of LM training states that record the model config and its tokenizer version.

  save_lm(directory, step, state, cfg, extra={...})   # orbax, via core.checkpoint (atomic)
  state = restore_lm(directory, like, cfg)            # bit-exact; refuses another tokenizer

The metadata holds `lm_config` (every LMConfig field, including `tokenizer_version`), so loading a
v1 checkpoint into a v2 model (or the reverse) is a ValueError naming both versions, never a
silent re-interpretation of token ids. Any pytree saves (params, a `token_ppo.TrainState`, ...).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from jaxrl_suite.core import checkpoint as core_ckpt
from jaxrl_suite.lm import model as lm_model


def save_lm(directory: str, step: int, state: Any, cfg: lm_model.LMConfig,
            extra: Optional[dict] = None, max_to_keep: int = 3) -> None:
  meta = {"lm_config": dataclasses.asdict(cfg), "tokenizer_version": cfg.tokenizer_version,
          **(extra or {})}
  with core_ckpt.Checkpointer(os.path.abspath(directory), max_to_keep=max_to_keep) as ck:
    ck.save(step, state, metadata=meta)


def restore_lm(directory: str, like: Any, cfg: lm_model.LMConfig,
               step: Optional[int] = None) -> tuple[Any, int, dict]:
  """(state, step, metadata) of `step` (default: the latest) after checking the tokenizer."""
  with core_ckpt.Checkpointer(os.path.abspath(directory)) as ck:
    step = ck.latest_step() if step is None else step
    if step is None:
      raise core_ckpt.CheckpointError(f"no checkpoints in {os.path.abspath(directory)}")
    meta = ck.metadata(step)
    version = meta.get("tokenizer_version", 1)  # checkpoints without it predate v2: v1
    if version != cfg.tokenizer_version:
      raise ValueError(f"checkpoint {directory} step {step} uses tokenizer v{version}, model "
                       f"{cfg.name} uses v{cfg.tokenizer_version}: mixing tokenizer versions")
    return ck.restore(step, like), step, meta
