"""Tokenizers of Hugging Face checkpoint folders (`tokenizer.json`, read with `tokenizers`).

  tok = load(folder)                       # tokenizers.Tokenizer; ValueError if absent
  version = matching_version(tok)          # 1 / 2 if its id -> string table is one of our
                                           # `envs.text.tokenizer` vocabularies, else None
  write_vocab_tokenizer(path, version=1)   # a WordLevel tokenizer.json reproducing our ids
  assert_same_tokenizer(folder_a, folder_b)  # two checkpoints must agree id for id

`matching_version` is what lets a checkpoint run our verifiable tasks (whose prompts are our
ids): a real tokenizer (None) needs tasks that speak its ids. Nothing is downloaded.
"""

from __future__ import annotations

import os
from typing import Optional

from jaxrl_suite.envs.text import tokenizer as our_tokenizer


def load(folder: str):
  from tokenizers import Tokenizer
  path = os.path.join(folder, "tokenizer.json")
  if not os.path.isfile(path):
    raise ValueError(f"{folder}: no tokenizer.json (the checkpoint folder must carry its "
                     "tokenizer; tokenizer.model / vocab files alone are not read)")
  return Tokenizer.from_file(path)


def id_table(tok) -> dict[int, str]:
  """id -> token string, special/added tokens included."""
  return {i: s for s, i in tok.get_vocab(with_added_tokens=True).items()}


def matching_version(tok) -> Optional[int]:
  """Our vocabulary version whose ids mean exactly what `tok`'s ids mean, else None."""
  table = id_table(tok)
  for version, vocab in our_tokenizer.VERSIONS.items():
    if table == dict(enumerate(vocab.tokens)):
      return version
  return None


def assert_same_tokenizer(*folders: str) -> None:
  """ValueError naming the first id whose string differs between the folders' tokenizers."""
  tables = [id_table(load(f)) for f in folders]
  for f, t in zip(folders[1:], tables[1:]):
    if t != tables[0]:
      diff = sorted(set(t.items()) ^ set(tables[0].items()))[:1]
      raise ValueError(f"tokenizers differ between {folders[0]} and {f} (sizes {len(tables[0])}"
                       f" vs {len(t)}; first difference at id/token {diff}): Direct-OPD needs "
                       "checkpoints that share a tokenizer")


def write_vocab_tokenizer(path: str, version: int = 1) -> None:
  """Writes a WordLevel tokenizer.json whose ids are our vocabulary `version`'s ids.

  Whitespace-split words map to ids; every `<...>` token is registered as special."""
  from tokenizers import Tokenizer, models, pre_tokenizers
  vocab = our_tokenizer.get(version)
  tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab.tokens)},
                                   unk_token="<pad>"))
  tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  tok.add_special_tokens([t for t in vocab.tokens if t.startswith("<")])
  tok.save(path)
