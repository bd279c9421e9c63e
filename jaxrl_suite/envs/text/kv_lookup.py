"""KVLookup: a 3-turn key-value lookup probe for multi-turn LM agents (known optimum: success 1).

The task statement lists `num_pairs` pairs "letter : digit" and asks for the first key; each
later observation asks for another key of the table:

  turn 0 obs  <task> A : 3 , B : 7 , C : 1 , D : 5 <q> B      (4 * num_pairs + 2 tokens)
  action      7 <eoa>                                         (a digit, then <eoa>)
  turn 1 obs  <q> C  ...

By default the keys are A, B, C, ... in order, so the answer to key i sits at a fixed slot of the
task block (a one-hop lookup a 2-layer model learns in minutes); `shuffle_keys=True` draws random
distinct keys (an induction-style two-hop lookup, much slower to learn at this scale).

Reward 1 / num_queries per right answer; the episode terminates after `num_queries` valid
answers and is truncated at `max_steps_in_episode` steps. An action that is not exactly one digit
followed by <eoa> (or the length cap) gets the contract's error outcome: the `<err>` block, reward
0, the query unchanged, `info["invalid"] = True`. The optimal policy copies the value of the
queried key from the task block (success 1.0); a uniform guesser succeeds with 10^-num_queries.

`info`: invalid, correct (bool), success (all queries right, at termination), state_key (of the
pre-action state: query index * (num_queries + 1) + number right so far: the same-state groups of
GiGPO within a group of rollouts of one table).
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_suite.envs.text import base
from jaxrl_suite.envs.text import tokenizer


@struct.dataclass
class EnvParams:
  num_pairs: int = struct.field(pytree_node=False, default=4)    # table size (static: shapes)
  num_queries: int = struct.field(pytree_node=False, default=3)  # turns with a question
  num_keys: int = 8              # shuffled keys are drawn (distinct) from the first num_keys letters
  shuffle_keys: bool = False     # False: the keys are A, B, C, ... in order (a 1-hop lookup:
  #                                the value of key i sits at a fixed slot of the task block);
  #                                True: random distinct keys (a 2-hop, induction-style lookup)
  max_steps_in_episode: int = 3


@struct.dataclass
class EnvState:
  keys: jax.Array      # int32 [num_pairs] letter index of each key (distinct)
  values: jax.Array    # int32 [num_pairs] digit of each key
  queries: jax.Array   # int32 [num_queries] pair index asked at each query
  q: jax.Array         # int32 [] next query
  num_right: jax.Array  # int32 []
  time: jax.Array      # int32 []


class KVLookup(base.TextEnvironment):
  vocab = tokenizer.V2

  def __init__(self, params: EnvParams | None = None):
    super().__init__()
    p = params or EnvParams()
    if p.num_pairs > 26 or p.num_pairs < 1 or p.num_queries < 1:
      raise ValueError(f"KVLookup: bad num_pairs={p.num_pairs} or num_queries={p.num_queries}")
    if not p.num_pairs <= p.num_keys <= 26:
      raise ValueError(f"EnvParams.num_keys={p.num_keys} must be in [num_pairs={p.num_pairs}, 26]")
    self._params = p
    self.obs_len = 4 * p.num_pairs + 2
    self.max_action_len = 2

  @property
  def max_step_obs_len(self) -> int:
    return 2  # "<q> L", or the one-token error block

  @property
  def default_params(self) -> EnvParams:
    return self._params

  @property
  def name(self) -> str:
    return "KVLookup-v0"

  @property
  def num_actions(self) -> int:
    return 10

  def _query_obs(self, state: EnvState) -> base.TextObs:
    v = self.vocab
    letter = v.letter_id(state.keys[state.queries[jnp.minimum(state.q, state.queries.shape[0] - 1)]])
    return base.make_obs(jnp.array([v.id("<q>"), 0], jnp.int32).at[1].set(letter), 2,
                         self.obs_len)

  def reset_env(self, key: chex.PRNGKey, params: EnvParams):
    k1, k2, k3 = jax.random.split(key, 3)
    # Distinct keys among the first num_keys letters: the num_pairs smallest random scores.
    scores = jax.random.uniform(k1, (26,)) + (jnp.arange(26) >= params.num_keys)
    keys = jnp.where(params.shuffle_keys, jnp.argsort(scores)[:params.num_pairs],
                     jnp.arange(params.num_pairs)).astype(jnp.int32)
    values = jax.random.randint(k2, (params.num_pairs,), 0, 10, jnp.int32)
    queries = jax.random.randint(k3, (params.num_queries,), 0, params.num_pairs, jnp.int32)
    state = EnvState(keys, values, queries, jnp.int32(0), jnp.int32(0), jnp.int32(0))
    v = self.vocab
    pair = jnp.stack([v.letter_id(keys), jnp.full_like(keys, v.id(":")),
                      tokenizer.digit_id(values), jnp.full_like(keys, v.id(","))], 1).reshape(-1)
    ids = jnp.concatenate([jnp.array([v.id("<task>")], jnp.int32), pair[:-1],
                           jnp.array([v.id("<q>")], jnp.int32),
                           v.letter_id(keys[queries[0]])[None]])
    return base.make_obs(ids, ids.shape[0], self.obs_len), state

  def parse(self, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(digit int32 [], valid bool []) of an action block."""
    n = base.action_length(action, self.eoa_id)
    d = action[0] - tokenizer.DIGIT0
    return d, (n == 1) & (d >= 0) & (d <= 9)

  def step_env(self, key: chex.PRNGKey, state: EnvState, action: jax.Array, params: EnvParams):
    del key
    d, valid = self.parse(action)
    nq = params.num_queries
    target = state.values[state.queries[jnp.minimum(state.q, nq - 1)]]
    right = valid & (d == target)
    skey = self.state_key(state, params)
    new = state.replace(q=state.q + valid, num_right=state.num_right + right,
                        time=state.time + 1)
    terminated = new.q >= nq
    obs = jax.tree.map(lambda e, o: jnp.where(valid, o, e), self.error_obs(),
                       self._query_obs(new))
    reward = right.astype(jnp.float32) / nq
    info = {"invalid": ~valid, "correct": right, "state_key": skey,
            "success": terminated & (new.num_right == nq)}
    return obs, new, reward, terminated, info

  def state_key(self, state: EnvState, params: EnvParams) -> jax.Array:
    return (state.q * (params.num_queries + 1) + state.num_right).astype(jnp.int32)

  def is_terminal(self, state: EnvState, params: EnvParams) -> jax.Array:
    return (state.q >= params.num_queries) | (state.time >= params.max_steps_in_episode)

  def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
    return (state.time >= params.max_steps_in_episode) & (state.q < params.num_queries)

  def oracle_action(self, state: EnvState, params: EnvParams) -> jax.Array:
    """The optimal action [digit, <eoa>] for the current query."""
    target = state.values[state.queries[jnp.minimum(state.q, params.num_queries - 1)]]
    return jnp.array([0, self.eoa_id], jnp.int32).at[0].set(tokenizer.digit_id(target))


def noisy_oracle(env: KVLookup, p_right: float):
  """Scripted policy action_fn(key, state, params): the right digit with prob p_right, else a
  uniform digit (pretraining data for a partly-capable start)."""

  def act(key: jax.Array, state: EnvState, params: Any) -> jax.Array:
    k1, k2 = jax.random.split(key)
    best = env.oracle_action(state, params)
    rand = tokenizer.digit_id(jax.random.randint(k2, (), 0, 10))
    return best.at[0].set(jnp.where(jax.random.uniform(k1) < p_right, best[0], rand))

  return act


def make_kv_lookup(**overrides):
  """Registry factory: `make("KVLookup-v0", num_pairs=4)` -> (env, env_params)."""
  params = EnvParams(**overrides) if overrides else EnvParams()
  env = KVLookup(params)
  return env, env.default_params
