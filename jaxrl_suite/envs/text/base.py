"""The text-environment interface that LM agents act in (gymnax 1.x conventions).

An observation is a fixed-size block of token ids plus its length; an action is a fixed-size
block of token ids that the agent ended with `<eoa>` (or that hit the length cap). Everything is
a pure function of arrays and keys, so `reset`/`step` jit and vmap like any gymnax environment:

  obs = TextObs(tokens=int32[obs_len], length=int32[])     # tokens[length:] are <pad>
  action: int32[max_action_len]                            # <eoa>-terminated, padded after it
  env.step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)

The first observation after `reset` is the task statement: a rollout harness that compacts its
context restarts the window from [task][summary], so the task must be a block of its own. An
action that does not parse gets a defined outcome: `error_obs` (a one-token `<err>` block), no
state change beyond the step counter, reward 0, and `info["invalid"] = True`. Environments may
add their own info fields (ground-truth labels, ...); `step_env` must return the same info keys
on every call (the rollout stacks them over turns).

Same-state grouping (GiGPO / STAPO): `state_key(state, params) -> int32 []` hashes the state an
action is taken IN (the rollout calls it before `step`). The default -1 means "no key": such
turns form singleton groups (step-level advantage 0), never one big group.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_suite.envs.text import tokenizer


@struct.dataclass
class TextObs:
  tokens: jax.Array  # int32 [obs_len]
  length: jax.Array  # int32 []


def make_obs(ids: jax.Array, length: jax.Array, obs_len: int) -> TextObs:
  """Pads or cuts `ids` (int32 [n]) to obs_len and zeroes everything at index >= length."""
  ids = jnp.asarray(ids, jnp.int32)
  n = ids.shape[0]
  if n < obs_len:
    ids = jnp.concatenate([ids, jnp.full((obs_len - n,), tokenizer.PAD, jnp.int32)])
  ids = ids[:obs_len]
  length = jnp.minimum(jnp.asarray(length, jnp.int32), obs_len)
  ids = jnp.where(jnp.arange(obs_len) < length, ids, tokenizer.PAD)
  return TextObs(tokens=ids, length=length)


def action_length(action: jax.Array, eoa_id: int) -> jax.Array:
  """Number of tokens before the first `<eoa>` (the whole block if there is none)."""
  is_eoa = action == eoa_id
  return jnp.where(is_eoa.any(), jnp.argmax(is_eoa), action.shape[0]).astype(jnp.int32)


class TextEnvironment(environment.Environment):
  """Base class: subclasses set `obs_len`, `max_action_len` and implement gymnax's
  `step_env`/`reset_env`/`default_params`; observations must be `TextObs` built by `make_obs`."""

  vocab: tokenizer.Vocab = tokenizer.V2
  obs_len: int = 16
  max_action_len: int = 4

  @property
  def max_step_obs_len(self) -> int:
    """Longest observation `step` can return (<= obs_len; the task block may be longer).

    Rollout harnesses use it for their static "does it fit" checks; override it when later
    observations are shorter than the task statement."""
    return self.obs_len

  @property
  def eoa_id(self) -> int:
    return self.vocab.id("<eoa>")

  def state_key(self, state, params) -> jax.Array:
    """int32 [] key of the decision state (override for GiGPO-style grouping; -1 = no key)."""
    del state, params
    return jnp.int32(-1)

  def error_obs(self) -> TextObs:
    return make_obs(jnp.array([self.vocab.id("<err>")], jnp.int32), 1, self.obs_len)

  def action_space(self, params=None):
    return spaces.Box(0, self.vocab.size - 1, (self.max_action_len,), jnp.int32)

  def observation_space(self, params=None):
    return spaces.Dict({
        "tokens": spaces.Box(0, self.vocab.size - 1, (self.obs_len,), jnp.int32),
        "length": spaces.Discrete(self.obs_len + 1),
    })
