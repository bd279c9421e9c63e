"""Verifiable tasks for the tiny LMs: column addition with written carries.

`AdditionTask(num_operands, num_digits, bug_rate)` -- prompt and response, digits LSB-first:

  prompt    <bos> a_0 b_0 [c_0]  a_1 b_1 [c_1] ... a_{n-1} b_{n-1} [c_{n-1}] =
  response  d_0 k_0 [|]  d_1 k_1 [|] ... d_{n-1} k_{n-1} [|]  d_n  <eos>

(operand digits interleaved column by column; the bracketed third slot exists for 3 operands)

d_i is the i-th sum digit, k_i the carry out of column i (carry marks c0/c1 for two operands, a
digit 0..m-1 for m operands), d_n the final carry. Reward is 1 iff the response has this format
and the parsed sum is exact (a pure, jittable function of prompt problems and response tokens).

Pretraining corpus: with probability `bug_rate` a whole solution follows a systematic bug, the
carry is *dropped* (written as c0 and not propagated), otherwise the correct procedure.

* `carry_add()` (the spec's CarryAdd): 2 operands of 3-4 digits, 40% carry-dropping solutions.
  Every model size learns the same forking decision (write c1 or c0 where a carry occurs) with
  p ~ 0.6, so an RL delta lives on the carry tokens; bigger models make fewer unsystematic digit
  errors, so base accuracy rises with size.
* `add_three()` (control): 3 operands of 3 digits, all pretraining solutions correct. Whatever the
  small model gets wrong is a capacity failure (it must add three digits and a carry mod 10).

Held-out split: problem x is held out iff hash(x) % 17 == 0. Training problems (pretraining, RL,
distillation) are drawn from the complement; evaluation sets only from the held-out part.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.text import tokenizer as tok

_HASH_MOD = 17
_HASH_MULT = (7919, 104729, 1299709)


@dataclasses.dataclass(frozen=True)
class AdditionTask:
  """Column addition of `num_operands` numbers of `num_digits` digits (see module doc)."""
  name: str
  num_operands: int = 2
  num_digits: int = 4
  min_value: int = 100
  bug_rate: float = 0.4

  def __post_init__(self):
    if self.num_operands < 2 or self.num_operands > 3:
      raise ValueError(f"num_operands must be 2 or 3, got {self.num_operands}")
    if self.num_digits < 1 or not 0.0 <= self.bug_rate <= 1.0:
      raise ValueError(f"bad num_digits={self.num_digits} or bug_rate={self.bug_rate}")

  @property
  def group(self) -> int:
    """Tokens per column: num_operands in the prompt, the same in the response (d_i k_i [|])."""
    return self.num_operands

  @property
  def prompt_len(self) -> int:
    return 2 + self.num_operands * self.num_digits

  @property
  def response_len(self) -> int:
    return self.group * self.num_digits + 2

  @property
  def max_value(self) -> int:
    return 10 ** self.num_digits - 1

  # ---- problems -------------------------------------------------------------------------------
  def _hash(self, operands):
    h = 0
    for j in range(self.num_operands):
      h = h + operands[..., j] * _HASH_MULT[j]
    return h % _HASH_MOD

  def is_heldout(self, operands) -> jax.Array:
    return self._hash(operands) == 0

  def sample_train(self, key: jax.Array, n: int) -> jax.Array:
    """int32 [n, num_operands] training problems (held-out ones are resampled; 4 tries)."""
    cand = jax.random.randint(key, (4, n, self.num_operands), self.min_value, self.max_value + 1)
    ok = ~self.is_heldout(cand)
    idx = jnp.argmax(ok, axis=0)
    return jnp.take_along_axis(cand, idx[None, :, None], axis=0)[0].astype(jnp.int32)

  def heldout_set(self, n: int, seed: int = 12345) -> np.ndarray:
    """A fixed held-out set: int32 [n, num_operands] (numpy rejection sampling)."""
    rng = np.random.default_rng(seed)
    out = []
    while sum(len(o) for o in out) < n:
      cand = rng.integers(self.min_value, self.max_value + 1, (20 * n, self.num_operands))
      out.append(cand[self._hash(cand) == 0])
    return np.concatenate(out)[:n].astype(np.int32)

  # ---- tokens ---------------------------------------------------------------------------------
  def _digits(self, x):
    return (x[..., None] // (10 ** jnp.arange(self.num_digits))) % 10  # LSB-first

  def prompts(self, operands: jax.Array) -> jax.Array:
    """int32 [n, prompt_len]: <bos>, then the operands' digits interleaved column by column.

    Interleaving makes "find column i" a fixed-offset attention lookup for every column (a
    response group of the same width follows), which tiny models learn in a few hundred steps.
    """
    n = operands.shape[0]
    digits = tok.digit_id(self._digits(operands))  # [n, ops, nd]
    cols = jnp.swapaxes(digits, 1, 2).reshape(n, -1)  # a_0 b_0 [c_0] a_1 b_1 ...
    return jnp.concatenate([jnp.full((n, 1), tok.BOS), cols, jnp.full((n, 1), tok.EQUALS)],
                           axis=1).astype(jnp.int32)

  def _carry_token(self, c):
    if self.num_operands == 2:
      return jnp.where(c > 0, tok.C1, tok.C0)
    return tok.digit_id(c)

  def solutions(self, operands: jax.Array, buggy: jax.Array) -> jax.Array:
    """Pretraining-style responses int32 [n, response_len]; `buggy` bool [n] drops carries."""
    digits = self._digits(operands)  # [n, ops, nd]
    n = operands.shape[0]
    carry = jnp.zeros((n,), jnp.int32)
    out = []
    for i in range(self.num_digits):
      s = digits[:, :, i].sum(-1) + carry
      carry = jnp.where(buggy, 0, s // 10)
      out += [tok.digit_id(s % 10), self._carry_token(carry)]
      out += [jnp.full((n,), tok.BAR)] * (self.group - 2)
    out += [tok.digit_id(carry), jnp.full((n,), tok.EOS)]
    return jnp.stack(out, axis=1).astype(jnp.int32)

  def pretrain_batch(self, key: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """(tokens int32 [n, prompt_len + response_len], loss mask float [n, same])."""
    k1, k2 = jax.random.split(key)
    ops = self.sample_train(k1, n)
    buggy = jax.random.bernoulli(k2, self.bug_rate, (n,))
    seq = jnp.concatenate([self.prompts(ops), self.solutions(ops, buggy)], axis=1)
    mask = jnp.arange(seq.shape[1]) >= self.prompt_len
    return seq, jnp.broadcast_to(mask, seq.shape).astype(jnp.float32)

  # ---- reward ---------------------------------------------------------------------------------
  def parse(self, responses: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(parsed sum int32 [n], well-formed bool [n]) of responses [n, response_len]."""
    nd, g = self.num_digits, self.group
    dig_pos = jnp.arange(nd + 1) * g
    d = responses[:, dig_pos] - tok.DIGIT0
    ok = jnp.all((d >= 0) & (d <= 9), axis=1)
    carry = responses[:, self._carry_pos()]
    if self.num_operands == 2:
      ok &= jnp.all((carry == tok.C0) | (carry == tok.C1), axis=1)
    else:
      cd = carry - tok.DIGIT0
      ok &= jnp.all((cd >= 0) & (cd < self.num_operands), axis=1)
      ok &= jnp.all(responses[:, np.arange(nd) * g + 2] == tok.BAR, axis=1)
    ok &= responses[:, g * nd + 1] == tok.EOS
    value = (jnp.clip(d, 0, 9) * (10 ** jnp.arange(nd + 1))).sum(1)
    return value.astype(jnp.int32), ok

  def _carry_pos(self) -> np.ndarray:
    return np.arange(self.num_digits) * self.group + 1

  def reward(self, operands: jax.Array, responses: jax.Array) -> jax.Array:
    """float32 [n]: 1 iff well formed and the parsed sum equals the true sum."""
    value, ok = self.parse(responses)
    return (ok & (value == operands.sum(-1))).astype(jnp.float32)

  def carry_positions(self) -> np.ndarray:
    """bool [response_len]: positions that hold a carry mark (where the CarryAdd fork lives)."""
    m = np.zeros(self.response_len, bool)
    m[self._carry_pos()] = True
    return m


def carry_add(**overrides) -> AdditionTask:
  return AdditionTask(**{"name": "carry_add", "num_operands": 2, "num_digits": 4,
                         "min_value": 100, "bug_rate": 0.4, **overrides})


def add_three(**overrides) -> AdditionTask:
  return AdditionTask(**{"name": "add_three", "num_operands": 3, "num_digits": 3,
                         "min_value": 100, "bug_rate": 0.0, **overrides})


TASKS = {"carry_add": carry_add, "add_three": add_three}


def mixture_batch(tasks, weights, key: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
  """Pretraining batch mixing tasks with static counts round(w * n); shorter tasks are padded."""
  counts = [int(round(w * n)) for w in weights]
  counts[-1] = n - sum(counts[:-1])
  keys = jax.random.split(key, len(tasks))
  seqs, masks = zip(*[t.pretrain_batch(k, c) for t, k, c in zip(tasks, keys, counts)])
  t_max = max(s.shape[1] for s in seqs)
  pad = lambda x, v: jnp.pad(x, ((0, 0), (0, t_max - x.shape[1])), constant_values=v)
  return (jnp.concatenate([pad(s, tok.PAD) for s in seqs]),
          jnp.concatenate([pad(m, 0.0) for m in masks]))
