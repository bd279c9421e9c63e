"""The suite's symbol tokenizers: v1 (V=32, Direct-OPD) and v2 (V=96, text environments).

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

Version 2 (`V2`, V=96) keeps ids 0..31 exactly as above and adds symbols for text environments
(multi-turn agents, CompactionRL, STAPO, SceneCap):
  32 <eoa> 33 <obs> 34 <task> 35 <err> 36 <note> 37 <compact> 38 <q> 39 <ans>
  40 -  41 :  42 ,  43 (  44 )  45 .
  46..71   capital letters A..Z (entity / item / room names)
  72 <go> 73 <open> 74 <take> 75 <put> 76 <look> 77 <in> 78 <done> 79 <yes> 80 <no>
  81 <room> 82 <ent> 83 <evt> 84 <frame> 85 <item> 86 <goal> 87 <hold>
  88..95   <x88> .. <x95> spares
A v1 model and a v2 model can never be mixed: `assert_same_vocab(a, b)` compares versions, and a
model checkpoint records its tokenizer version.

`encode` is greedy longest-match over the token strings. No token string is a proper prefix of a
concatenation that would parse differently (special tokens are `<...>`, carry marks start with a
letter that is not itself a token; v2 letters are capitals, so "c0" never splits), so `encode(decode(ids)) == ids` for every id sequence.
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


# --------------------------------------------------------------------------------------------
# Versioned vocabularies. The module-level constants and functions above are version 1.

V2_EXTRA: tuple[str, ...] = (
    "<eoa>", "<obs>", "<task>", "<err>", "<note>", "<compact>", "<q>", "<ans>",
    "-", ":", ",", "(", ")", ".",
    *[chr(ord("A") + i) for i in range(26)],
    "<go>", "<open>", "<take>", "<put>", "<look>", "<in>", "<done>", "<yes>", "<no>",
    "<room>", "<ent>", "<evt>", "<frame>", "<item>", "<goal>", "<hold>",
    *[f"<x{i}>" for i in range(88, 96)],
)


class Vocab:
  """An immutable, versioned symbol vocabulary with greedy longest-match encoding.

  Ids and strings: `vocab.id("<eoa>")`, `vocab.tokens[i]`; `vocab.size` is V. Ids 0..31 are the
  same in every version (PAD=0, BOS=1, EOS=2, SEP=3, digits at 4..13).
  """

  def __init__(self, version: int, tokens: Sequence[str]):
    self.version = int(version)
    self.tokens = tuple(tokens)
    if len(set(self.tokens)) != len(self.tokens):
      raise ValueError(f"tokenizer v{version}: duplicate token strings")
    self.size = len(self.tokens)
    self._to_id = {t: i for i, t in enumerate(self.tokens)}
    self._max_len = max(len(t) for t in self.tokens)

  def id(self, token: str) -> int:
    """Id of one token string; KeyError names the token and the version."""
    try:
      return self._to_id[token]
    except KeyError:
      raise KeyError(f"token {token!r} is not in tokenizer v{self.version}") from None

  def letter_id(self, i):
    """Id of the i-th capital letter (v2 only; works on ints and arrays)."""
    return self.id("A") + i

  def encode(self, text: str) -> list[int]:
    """Greedy longest-match encoding. Raises ValueError on an unknown symbol."""
    ids, i = [], 0
    while i < len(text):
      for n in range(min(self._max_len, len(text) - i), 0, -1):
        tid = self._to_id.get(text[i:i + n])
        if tid is not None:
          ids.append(tid)
          i += n
          break
      else:
        raise ValueError(f"tokenizer v{self.version} cannot tokenize "
                         f"{text[i:i + self._max_len]!r} at position {i}")
    return ids

  def decode(self, ids: Sequence[int] | np.ndarray, strip_pad: bool = False) -> str:
    """Concatenates token strings; `strip_pad` drops <pad> tokens."""
    flat = np.asarray(ids).reshape(-1).tolist()
    return "".join(self.tokens[int(i)] for i in flat if not (strip_pad and i == PAD))

  def __repr__(self):
    return f"Vocab(v{self.version}, V={self.size})"


V1 = Vocab(1, TOKENS)
V2 = Vocab(2, TOKENS + V2_EXTRA)
assert V2.size == 96 and V2.tokens[:32] == TOKENS
VERSIONS = {1: V1, 2: V2}


def get(version: int) -> Vocab:
  """The vocabulary of a tokenizer version; ValueError lists the known versions."""
  if version not in VERSIONS:
    raise ValueError(f"unknown tokenizer version {version!r}; known: {sorted(VERSIONS)}")
  return VERSIONS[version]


def for_vocab_size(vocab_size: int) -> Vocab:
  """The vocabulary whose size is `vocab_size` (v1: 32, v2: 96)."""
  for v in VERSIONS.values():
    if v.size == int(vocab_size):
      return v
  raise ValueError(f"no tokenizer version has vocab size {vocab_size}; "
                   f"known: {[(k, v.size) for k, v in VERSIONS.items()]}")
