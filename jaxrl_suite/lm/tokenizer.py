"""One shared V=32 symbol tokenizer for every tiny LM in the suite.

Every model, task and method (Direct-OPD, CompactionRL, STAPO, CuRe) uses this vocabulary, so a
teacher, a reference and a student always index the same symbols (the cross-tokenizer bugs of
larger OPD stacks cannot happen here; `assert_same_vocab` checks it at the API boundary).

Vocabulary (id: string):
  0 <pad>  1 <bos>  2 <eos>  3 <sep>
  4..13    digits 0..9
  14 +  15 =  16 ;  17 |  18 ?  19 *
  20 c0  21 c1            carry marks ("no carry" / "carry")
  22 <user> 23 <asst> 24 <tool> 25 <sum>    role / tool / summary tokens
  26..31   <x26> .. <x31> spares

`encode` is greedy longest-match over the token strings. No token string is a proper prefix of a
concatenation that would parse differently (special tokens are `<...>`, carry marks start with a
letter that is not itself a token), so `encode(decode(ids)) == ids` for every id sequence.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

TOKENS: tuple[str, ...] = (
    "<pad>", "<bos>", "<eos>", "<sep>",
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    "+", "=", ";", "|", "?", "*",
    "c0", "c1",
    "<user>", "<asst>", "<tool>", "<sum>",
    "<x26>", "<x27>", "<x28>", "<x29>", "<x30>", "<x31>",
)
VOCAB_SIZE = len(TOKENS)
assert VOCAB_SIZE == 32

TOKEN_TO_ID = {t: i for i, t in enumerate(TOKENS)}
PAD, BOS, EOS, SEP = 0, 1, 2, 3
DIGIT0 = 4  # id of "0"; digit d has id DIGIT0 + d
PLUS, EQUALS, SEMI, BAR, QUERY, TIMES = 14, 15, 16, 17, 18, 19
C0, C1 = 20, 21
USER, ASSISTANT, TOOL, SUMMARY = 22, 23, 24, 25

_MAX_TOKEN_LEN = max(len(t) for t in TOKENS)


def digit_id(d):
  """Token id of digit d (works on ints and arrays)."""
  return DIGIT0 + d


def encode(text: str) -> list[int]:
  """Greedy longest-match encoding. Raises ValueError on an unknown symbol."""
  ids, i = [], 0
  while i < len(text):
    for n in range(min(_MAX_TOKEN_LEN, len(text) - i), 0, -1):
      tid = TOKEN_TO_ID.get(text[i:i + n])
      if tid is not None:
        ids.append(tid)
        i += n
        break
    else:
      raise ValueError(f"cannot tokenize {text[i:i + _MAX_TOKEN_LEN]!r} at position {i}")
  return ids


def decode(ids: Sequence[int] | np.ndarray, strip_pad: bool = False) -> str:
  """Concatenates token strings; `strip_pad` drops <pad> tokens."""
  out = []
  for i in np.asarray(ids).reshape(-1).tolist():
    if strip_pad and i == PAD:
      continue
    out.append(TOKENS[int(i)])
  return "".join(out)


def assert_same_vocab(*vocab_sizes: int) -> None:
  """Raises ValueError unless every model uses this tokenizer's vocabulary size."""
  for v in vocab_sizes:
    if int(v) != VOCAB_SIZE:
      raise ValueError(f"vocab size {v} != shared tokenizer size {VOCAB_SIZE}")
