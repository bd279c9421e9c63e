"""Sampling with temperature / top-k / top-p as one `lax.scan`, and teacher-forced scoring.

A decoder is seen through a `Stepper`, a pair of pure functions

  prefill(prompts [B, P]) -> (next_logits [B, V], state)
  step(state, tokens [B], pos) -> (next_logits [B, V], state)     # pos: absolute position of tokens

so a plain LM (`lm_stepper`) and a composition of several LMs evaluated in lockstep
(`combine_steppers`, e.g. decode-time delta  log pi_L + beta (log pi_RL - log pi_ref)) are
sampled by the same `sample` function. Everything is jittable and vmappable.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.text import tokenizer
from jaxrl_suite.lm import model as lm_model

NEG_INF = -1e9


class Stepper(NamedTuple):
  prefill: Callable[[jax.Array], tuple[jax.Array, Any]]
  step: Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, Any]]
  max_len: Optional[int] = None  # longest context (prompt + response) it can hold; None: unknown


def check_context(max_len: Optional[int], prompt_len: int, response_len: int,
                  where: str = "") -> None:
  """Raises ValueError (at trace time: shapes are static) if prompt + response > max_len.

  Past max_len the learned position table has no row (jnp.take returns NaN embeddings) and the
  KV-cache write is clamped onto the last slot, so the failure would otherwise be silent.
  """
  if max_len is not None and prompt_len + response_len > max_len:
    raise ValueError(f"{where}prompt ({prompt_len}) + response ({response_len}) = "
                     f"{prompt_len + response_len} tokens exceeds the model's max_len={max_len}")


class Samples(NamedTuple):
  tokens: jax.Array     # int32 [B, R]; <pad> after the first <eos>
  mask: jax.Array       # bool  [B, R]; True up to and including the first <eos>
  log_probs: jax.Array  # float [B, R]; log-prob of each token under the (filtered) sampling dist.


def filter_logits(logits: jax.Array, temperature: float = 1.0, top_k: int = 0,
                  top_p: float = 1.0) -> jax.Array:
  """Temperature, then top-k, then nucleus (top-p) filtering; removed entries get NEG_INF.

  logits [..., V]. top_k=0 and top_p=1 disable the filters (static Python values). The nucleus
  keeps the smallest set of most-probable tokens whose mass reaches top_p (always >= 1 token).
  """
  if temperature <= 0:
    raise ValueError(f"temperature must be > 0, got {temperature}")
  x = logits / temperature
  if top_k and top_k < x.shape[-1]:
    kth = jax.lax.top_k(x, top_k)[0][..., -1:]
    x = jnp.where(x < kth, NEG_INF, x)
  if top_p < 1.0:
    order = jnp.argsort(-x, axis=-1)
    sorted_x = jnp.take_along_axis(x, order, axis=-1)
    probs = jax.nn.softmax(sorted_x, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    keep_sorted = mass_before < top_p
    keep = jnp.take_along_axis(keep_sorted, jnp.argsort(order, axis=-1), axis=-1)
    x = jnp.where(keep, x, NEG_INF)
  return x


def gumbel_argmax(gumbel: jax.Array, logits: jax.Array) -> jax.Array:
  """argmax(gumbel + logits, axis=-1) as int32 [...]: a categorical draw (Gumbel-max trick).

  gumbel, logits [..., V]. The first index that reaches the max (the first NaN if there is one),
  as jnp.argmax, but as a max and then a min: XLA:CPU fuses the noise into jnp.argmax's
  (value, index) reduction, whose loop is slow (at batch 64 it took longer than a decode step).
  """
  y = gumbel + logits
  hit = (y == y.max(axis=-1, keepdims=True)) | jnp.isnan(y)
  v = y.shape[-1]
  return jnp.min(jnp.where(hit, jnp.arange(v, dtype=jnp.int32), v), axis=-1)


def categorical(key: jax.Array, logits: jax.Array) -> jax.Array:
  """jax.random.categorical(key, logits, axis=-1), the same draws, cheaper on CPU: int32 [...]."""
  return gumbel_argmax(jax.random.gumbel(key, logits.shape, logits.dtype), logits)


def lm_stepper(cfg: lm_model.LMConfig, params: Any) -> Stepper:
  """Stepper of one DecoderLM with a KV cache of cfg.max_len slots."""
  model = lm_model.DecoderLM(cfg)

  def prefill(prompts):
    cache = lm_model.init_cache(cfg, prompts.shape[0])
    logits, cache = model.apply({"params": params}, prompts, jnp.arange(prompts.shape[1]), cache)
    return logits[:, -1], cache

  def step(cache, tokens, pos):
    logits, cache = model.apply({"params": params}, tokens[:, None], jnp.reshape(pos, (1,)),
                                cache)
    return logits[:, 0], cache

  return Stepper(prefill, step, cfg.max_len)


def combine_steppers(steppers: Sequence[Stepper],
                     combine: Callable[..., jax.Array]) -> Stepper:
  """Runs several steppers in lockstep; next logits = combine(*their logits)."""

  def prefill(prompts):
    outs = [s.prefill(prompts) for s in steppers]
    return combine(*[o[0] for o in outs]), tuple(o[1] for o in outs)

  def step(states, tokens, pos):
    outs = [s.step(st, tokens, pos) for s, st in zip(steppers, states)]
    return combine(*[o[0] for o in outs]), tuple(o[1] for o in outs)

  lens = [s.max_len for s in steppers if s.max_len is not None]
  return Stepper(prefill, step, min(lens) if lens else None)


def sample(stepper: Stepper, prompts: jax.Array, key: jax.Array, num_steps: int,
           temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           eos_id: int = tokenizer.EOS) -> Samples:
  """Autoregressively samples `num_steps` tokens after `prompts` [B, P] in one lax.scan.

  Raises ValueError at trace time if P + num_steps exceeds the stepper's max_len.
  """
  check_context(stepper.max_len, prompts.shape[1], num_steps, "sample: ")
  logits, state = stepper.prefill(prompts)
  b, p = prompts.shape
  done = jnp.zeros((b,), bool)

  def body(carry, key_t):
    logits, state, done, pos = carry
    x = filter_logits(logits, temperature, top_k, top_p)
    tok = categorical(key_t, x)
    logp = lm_model.token_log_probs(x, tok)
    valid = ~done
    tok = jnp.where(done, tokenizer.PAD, tok).astype(jnp.int32)
    done = done | (tok == eos_id)
    logits, state = stepper.step(state, tok, pos)
    return (logits, state, done, pos + 1), (tok, valid, logp)

  keys = jax.random.split(key, num_steps)
  _, (toks, valid, logp) = jax.lax.scan(body, (logits, state, done, jnp.int32(p)), keys)
  return Samples(toks.T, valid.T, logp.T)


def response_logits(cfg: lm_model.LMConfig, params: Any, prompts: jax.Array,
                    responses: jax.Array) -> jax.Array:
  """Teacher-forced logits that predict each response token: [B, R, V].

  One full causal pass over concat(prompts, responses); the logits at positions P-1..P+R-2.
  Raises ValueError at trace time if P + R exceeds cfg.max_len (the same limit as `sample`).
  """
  check_context(cfg.max_len, prompts.shape[1], responses.shape[1], "response_logits: ")
  seq = jnp.concatenate([prompts, responses], axis=1)
  logits, _ = lm_model.DecoderLM(cfg).apply({"params": params}, seq[:, :-1])
  return logits[:, prompts.shape[1] - 1:]
