"""StreamLedger-v0: keep running ledger totals over a stream longer than the agent's window.

A stream of H events `(item, sign, amount)` arrives in blocks of `events_per_obs` events. After
some blocks (probability `mid_query_prob`) and always after the last one the block ends with a
query `<q> X`: "what is the total of item X mod 10 so far?". The agent answers with one digit.
With a context window W shorter than the stream (H >= 16 at the defaults), the totals must
survive in summaries that the agent writes when its context is compacted, so both the answers
and the summaries carry credit.

Token layout (tokenizer v2):

  task block     <task> A B C D                                   (1 + num_items tokens)
  event          X + d  |  X - d        (item letter, sign, amount digit 1..max_amount)
  block          e_1 .. e_k [<q> X]     (k = events_per_obs; the query is optional mid-stream)
  action         d <eoa>   (answer)  |  <eoa>  (nothing to answer)  |  <compact> ... <eoa>
  summary        A d B d C d D d       (the canonical form: items in order, total mod 10)

Episode: reset -> task block; the first action is ignored (nothing is pending). Each step grades
the pending query (if any), then shows the next block. After the final query is graded the
episode terminates. An action that does not start with a digit while a query is pending is
invalid: `error_obs`, the stream does not advance (the contract of `envs.text.base`), and the
step cap `max_steps_in_episode` truncates an agent that never answers.

Rewards: `mid_reward` for each correct mid-stream answer, `final_reward` for a correct final one;
nothing else is ever rewarded. Agent-triggered compaction (variant b2): an action that contains
`<compact>` sets `info["compact"]`; the rollout harness decides what to do with it (the env's
dynamics do not change), optionally charging `compact_cost` per request.

Shapes: every array is fixed-size (`max_events` events, masks by `num_events`), so episodes with
different H share one compiled program and vmap together. All totals are kept mod 10.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl_suite.envs.text import base
from jaxrl_suite.envs.text import tokenizer

V = tokenizer.V2
TASK = V.id("<task>")
QUERY = V.id("<q>")
EOA = V.id("<eoa>")
COMPACT = V.id("<compact>")
PLUS = V.id("+")
MINUS = V.id("-")
LETTER_A = V.id("A")
DIGIT0 = tokenizer.DIGIT0
MOD = 10
MAX_ITEMS = 4


@struct.dataclass
class EnvParams:
  num_events: int = 32          # H: events in the stream (<= env.max_events)
  num_items: int = 4            # item types (letters A.., <= 4)
  events_per_obs: int = 4       # events per observation block (<= env.max_events_per_obs)
  max_amount: int = 3           # amounts are 1..max_amount, each sign with probability 1/2
  mid_query_prob: float = 0.5   # chance that a non-final block ends with a query
  mid_reward: float = 0.25      # reward for a correct mid-stream answer
  final_reward: float = 1.0     # reward for a correct final answer
  compact_cost: float = 0.0     # reward charged per agent COMPACT request (variant b2)
  max_steps_in_episode: int = 64  # step cap (gymnax truncation), counts invalid steps too


@struct.dataclass
class EnvState:
  items: jax.Array      # int32 [max_events] item index of each event
  amounts: jax.Array    # int32 [max_events] signed amount of each event
  query_item: jax.Array  # int32 [num_blocks] item asked after each block (-1: no query)
  pos: jax.Array        # int32 [] events shown so far
  prev_pos: jax.Array   # int32 [] events shown before the latest block
  block: jax.Array      # int32 [] blocks shown so far
  pending: jax.Array    # int32 [] item of the pending query, -1 if none
  pending_final: jax.Array  # bool [] the pending query is the final one
  time: jax.Array       # int32 [] steps taken


def totals_after(items, amounts, n, num_items: int = MAX_ITEMS):
  """Totals mod 10 of each item over the first n events: int32 [num_items]. Jittable."""
  idx = jnp.arange(items.shape[0])
  w = jnp.where(idx < n, amounts, 0)
  onehot = items[:, None] == jnp.arange(num_items)[None, :]
  return jnp.mod(jnp.sum(jnp.where(onehot, w[:, None], 0), axis=0), MOD).astype(jnp.int32)


def summary_tokens(totals, num_items: int = MAX_ITEMS):
  """Canonical summary `A d B d ..` of totals int32 [..., num_items] -> int32 [..., 2*num_items]."""
  letters = jnp.broadcast_to(LETTER_A + jnp.arange(num_items), totals.shape)
  return jnp.stack([letters, DIGIT0 + totals], axis=-1).reshape(*totals.shape[:-1], 2 * num_items)


def decode_summary(tokens, num_items: int = MAX_ITEMS):
  """Reads a summary token block int32 [..., L] back into totals.

  Returns (totals int32 [..., num_items], found bool [..., num_items]): for each item the digit
  right after the item's first letter (a summary that drops or garbles an item has found=False).
  """
  tokens = jnp.asarray(tokens)
  nxt = jnp.concatenate([tokens[..., 1:], jnp.full(tokens.shape[:-1] + (1,), tokenizer.PAD)], -1)
  is_digit_next = (nxt >= DIGIT0) & (nxt < DIGIT0 + MOD)
  letter = LETTER_A + jnp.arange(num_items)
  hit = (tokens[..., None, :] == letter[:, None]) & is_digit_next[..., None, :]  # [..., I, L]
  found = hit.any(-1)
  first = jnp.argmax(hit, axis=-1)
  digit = jnp.take_along_axis(jnp.broadcast_to(nxt[..., None, :], hit.shape), first[..., None],
                              -1)[..., 0] - DIGIT0
  return jnp.where(found, digit, 0).astype(jnp.int32), found


def summary_fidelity(tokens, true_totals, num_items: int = MAX_ITEMS):
  """1.0 where a summary block decodes to exactly the true totals (all items present)."""
  got, found = decode_summary(tokens, num_items)
  return (found & (got == true_totals)).all(-1).astype(jnp.float32)


class StreamLedger(base.TextEnvironment):
  """StreamLedger-v0 (see module docstring). `max_events`/`max_events_per_obs` fix array sizes."""

  def __init__(self, max_events: int = 128, max_events_per_obs: int = 4):
    self.max_events = int(max_events)
    self.max_events_per_obs = int(max_events_per_obs)
    self.num_blocks = -(-self.max_events // 1)  # worst case: one event per block
    self.obs_len = max(3 * self.max_events_per_obs + 2, 1 + MAX_ITEMS)
    self.max_action_len = 4

  @property
  def name(self) -> str:
    return "StreamLedger-v0"

  @property
  def default_params(self) -> EnvParams:
    return EnvParams()

  def num_actions(self):  # not a discrete env; kept for gymnax's interface
    return self.vocab.size

  # ---- pieces -----------------------------------------------------------------------------
  def task_obs(self, params: EnvParams) -> base.TextObs:
    ids = jnp.concatenate([jnp.array([TASK]), LETTER_A + jnp.arange(MAX_ITEMS)])
    return base.make_obs(ids, 1 + params.num_items, self.obs_len)

  def block_obs(self, state: EnvState, params: EnvParams) -> base.TextObs:
    """The block that starts at event `state.pos` (before pos advances) with its query."""
    k = self.max_events_per_obs
    j = jnp.arange(k)
    ev = state.pos + j
    valid = (j < params.events_per_obs) & (ev < params.num_events)
    n_ev = valid.sum()
    it = jax.lax.dynamic_slice(state.items, (state.pos,), (k,))
    am = jax.lax.dynamic_slice(state.amounts, (state.pos,), (k,))
    ev_tok = jnp.stack([LETTER_A + it, jnp.where(am < 0, MINUS, PLUS), DIGIT0 + jnp.abs(am)], -1)
    # Valid events are a prefix of the k slots, so a flat reshape keeps them contiguous.
    ids = ev_tok.reshape(-1)
    q_item = state.query_item[state.block]
    q = jnp.array([QUERY, 0]) + jnp.array([0, 1]) * (LETTER_A + q_item)
    L = 3 * n_ev
    ids = jnp.concatenate([ids, jnp.zeros((2,), ids.dtype)])
    ids = jax.lax.dynamic_update_slice(ids, jnp.where(q_item >= 0, q, ids[:2] * 0), (L,))
    return base.make_obs(ids, L + 2 * (q_item >= 0), self.obs_len)

  def sample_stream(self, key: jax.Array, params: EnvParams):
    """(items, amounts, query_item) of a fresh episode; queries only where a block exists."""
    k_it, k_am, k_sg, k_q, k_qi = jax.random.split(key, 5)
    items = jax.random.randint(k_it, (self.max_events,), 0, params.num_items)
    mag = jax.random.randint(k_am, (self.max_events,), 1, params.max_amount + 1)
    sign = jnp.where(jax.random.bernoulli(k_sg, 0.5, (self.max_events,)), 1, -1)
    ev = jnp.arange(self.max_events)
    amounts = jnp.where(ev < params.num_events, sign * mag, 0).astype(jnp.int32)
    items = jnp.where(ev < params.num_events, items, 0).astype(jnp.int32)
    n_blocks = -(-params.num_events // params.events_per_obs)
    b = jnp.arange(self.num_blocks)
    ask = jax.random.bernoulli(k_q, params.mid_query_prob, (self.num_blocks,)) | (b == n_blocks - 1)
    ask = ask & (b < n_blocks)
    q_item = jax.random.randint(k_qi, (self.num_blocks,), 0, params.num_items)
    return items, amounts, jnp.where(ask, q_item, -1).astype(jnp.int32)

  # ---- gymnax API -------------------------------------------------------------------------
  def reset_env(self, key: jax.Array, params: EnvParams):
    items, amounts, q_item = self.sample_stream(key, params)
    # Pad so block_obs can always slice max_events_per_obs events.
    pad = jnp.zeros((self.max_events_per_obs,), jnp.int32)
    state = EnvState(items=jnp.concatenate([items, pad]), amounts=jnp.concatenate([amounts, pad]),
                     query_item=q_item, pos=jnp.int32(0), prev_pos=jnp.int32(0), block=jnp.int32(0),
                     pending=jnp.int32(-1), pending_final=jnp.bool_(False), time=jnp.int32(0))
    return self.task_obs(params), state

  def state_key(self, state: EnvState, params: EnvParams) -> jax.Array:
    """No two ledger states are the same decision state (no GiGPO step groups): -1."""
    return jnp.int32(-1)

  def step_env(self, key: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
    del key
    first = action[0]
    is_digit = (first >= DIGIT0) & (first < DIGIT0 + MOD)
    has_query = state.pending >= 0
    invalid = has_query & ~is_digit
    truth = totals_after(state.items, state.amounts, state.pos)[jnp.maximum(state.pending, 0)]
    correct = has_query & is_digit & (first - DIGIT0 == truth)
    weight = jnp.where(state.pending_final, params.final_reward, params.mid_reward)
    n_act = base.action_length(action, self.eoa_id)
    compact = ((action == COMPACT) & (jnp.arange(action.shape[0]) < n_act)).any()
    reward = jnp.where(correct, weight, 0.0) - jnp.where(compact, params.compact_cost, 0.0)
    done_stream = state.pending_final & ~invalid
    time = state.time + 1

    # Next block (only used when the action was valid and the stream goes on).
    new_obs = self.block_obs(state, params)
    n_shown = jnp.minimum(params.events_per_obs, params.num_events - state.pos)
    q_item = state.query_item[state.block]
    advanced = state.replace(pos=state.pos + n_shown, prev_pos=state.pos, block=state.block + 1, pending=q_item,
                             pending_final=state.pos + n_shown >= params.num_events, time=time)
    stay = state.replace(time=time)
    end_obs = base.make_obs(jnp.zeros((1,), jnp.int32), 0, self.obs_len)
    obs = jax.tree.map(lambda e, i, n: jnp.where(done_stream, e, jnp.where(invalid, i, n)),
                       end_obs, self.error_obs(), new_obs)
    new_state = jax.tree.map(lambda s, a: jnp.where(invalid | done_stream, s, a), stay, advanced)
    info = {"invalid": invalid, "correct": correct, "answered": has_query & ~invalid,
            "final": state.pending_final & has_query, "query": has_query, "compact": compact,
            "pos": new_state.pos,
            # Ground truth for a summary written before this turn's block is appended (harness
            # compaction) or after the agent asked for one (the block is shown again).
            "summary_truth": totals_after(state.items, state.amounts, state.prev_pos)}
    return obs, new_state, reward.astype(jnp.float32), done_stream, info

  # ---- helpers for harnesses and baselines -------------------------------------------------
  def true_totals(self, state: EnvState, params: EnvParams) -> jax.Array:
    """Totals of the events shown so far, int32 [4] (items >= num_items stay 0)."""
    return totals_after(state.items, state.amounts, state.pos)

  def oracle_summary(self, state: EnvState, params: EnvParams):
    """The summary an oracle harness writes when it compacts before the latest block is shown
    (or shown again): the true totals of the earlier events, (ids int32 [2*4], length [])."""
    tot = totals_after(state.items, state.amounts, state.prev_pos)
    return summary_tokens(tot), jnp.int32(2 * params.num_items)


def make_stream_ledger(**kwargs: Any):
  """Registry entry point: (env, default params)."""
  env = StreamLedger(**{k: kwargs.pop(k) for k in ("max_events", "max_events_per_obs")
                        if k in kwargs})
  return env, env.default_params.replace(**kwargs)


def validate_params(params: EnvParams, env: StreamLedger) -> None:
  """Raises ValueError naming the field when params do not fit the env's fixed sizes."""
  checks = [("num_events", 1 <= params.num_events <= env.max_events),
            ("num_items", 1 <= params.num_items <= MAX_ITEMS),
            ("events_per_obs", 1 <= params.events_per_obs <= env.max_events_per_obs),
            ("max_amount", 1 <= params.max_amount <= 9),
            ("mid_query_prob", 0.0 <= params.mid_query_prob <= 1.0)]
  for field, ok in checks:
    if not ok:
      raise ValueError(f"StreamLedger EnvParams.{field}={getattr(params, field)!r} out of range "
                       f"(max_events={env.max_events}, max_events_per_obs={env.max_events_per_obs})")


def reference_episode(items: np.ndarray, amounts: np.ndarray, query_item: np.ndarray,
                      num_events: int, events_per_obs: int) -> list[tuple[int, int, bool]]:
  """Pure-Python reference: the (item, true total, is_final) of every query, in order."""
  out, tot = [], [0] * MAX_ITEMS
  n_blocks = -(-num_events // events_per_obs)
  for b in range(n_blocks):
    for e in range(b * events_per_obs, min((b + 1) * events_per_obs, num_events)):
      tot[int(items[e])] += int(amounts[e])
    if query_item[b] >= 0:
      out.append((int(query_item[b]), tot[int(query_item[b])] % MOD, b == n_blocks - 1))
  return out
