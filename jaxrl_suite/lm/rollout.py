"""Multi-turn LM rollouts against a `TextEnvironment`, in one jitted program.

Usage (a 3-turn probe; every argument but the config objects is an array or a key):

  from jaxrl_suite.envs.text import kv_lookup
  from jaxrl_suite.lm import model as lm_model, rollout, value

  env = kv_lookup.KVLookup(); env_params = env.default_params
  cfg = lm_model.FAMILY_V2["xs"]
  params = lm_model.init_params(cfg, jax.random.PRNGKey(0))
  rcfg = rollout.RolloutConfig(num_turns=3, window=64)           # overflow=None: must fit
  vcfg = value.ValueConfig("shared")
  vparams = value.init_value_params(vcfg, cfg, jax.random.PRNGKey(1))
  run = jax.jit(lambda k: rollout.multi_turn_rollout(
      cfg, params, env, env_params, k, 64, rcfg, group_size=8,
      value_fn=value.make_value_fn(cfg, vcfg, params, vparams)))
  ro = run(jax.random.PRNGKey(2))      # Rollout: tokens [64, K, 64], rewards [64, 3], ...
  ro.returns.mean(), ro.trainable.sum()   # policy tokens are the only trainable ones

Layout. Each trajectory owns K = `max_segments` context windows ("segments") of W = `window`
slots. A segment is a packed token sequence: observation blocks (only their `length` tokens) and
sampled actions follow each other with no padding in between, so teacher-forced training on the
segment (`value.policy_and_values`) sees exactly the context the sampler saw. Per token the record
holds the turn, the segment, the kind (`KIND_*`), whether the policy generated it (`trainable`),
its log-prob under the (filtered) sampling distribution, and the value V(context before it).

Sampling is KV-cached: an observation block is prefilled into the cache in one model call (its
padded slots land in scratch slots that are overwritten before anything reads them), each action
token is one cached decode step. Sequences have different lengths, so positions are per sequence
(`model.DecoderLM` accepts positions [B, S]).

Overflow. Before turn t the harness checks that the next observation, a full action and the
policy's reserve fit into the window. If not, `overflow` decides:
  * None            nothing may overflow: a trace-time ValueError if H turns of the largest blocks
                    could exceed W (the "length overflow raises a clear error" contract).
  * TruncateOldest  start a new segment [task][most recent whole turns that fit] (copied tokens).
  * Compaction      append the compaction prompt (observed), let the policy write a summary
                    (trainable; or `summary_fn` writes an oracle summary), then start a new segment
                    [task][<sum>][summary] (copied, masked). Optionally the agent triggers it: an
                    action whose first token is `agent_trigger_id` is not sent to the environment
                    and compacts before the next turn (which re-shows the same observation).

Keys: per trajectory b, k_b = split(key, B)[b]; turn t uses fold_in(k_b, t) split into
(action, summary) keys, token i of a generation uses fold_in(that key, i). Environment resets and
steps use the group key (members of a GRPO group share the task instance and its dynamics).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.text import base as text_base
from jaxrl_suite.envs.text import tokenizer
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import sampling

# Token kinds (int8 per slot).
KIND_PAD = 0      # empty slot
KIND_OBS = 1      # observation block of turn t >= 1 (or an error observation)
KIND_ACTION = 2   # action token sampled by the policy (trainable)
KIND_COPIED = 3   # copied into a new window by the overflow policy (masked)
KIND_SUMMARY = 4  # summary written by the policy during compaction (trainable unless oracle)
KIND_PROMPT = 5   # compaction prompt shown to the policy (observed)
KIND_TASK = 6     # the task statement: the first observation, and its copies in later windows


@dataclasses.dataclass(frozen=True)
class TruncateOldest:
  """On overflow, restart the window from [task][the most recent whole turns that fit].

  keep_task=False drops the task too once it no longer fits (how GoalHouse makes goals scroll
  out of view)."""
  keep_task: bool = True


@dataclasses.dataclass(frozen=True)
class Compaction:
  """On overflow, the policy summarises and the window restarts from [task][prefix][summary].

  prompt: token ids shown before the summary (None: [<compact>]); summary_len: most summary
  tokens (the policy stops at `end_id`, None: <eoa>); prefix: ids put before the copied summary
  (None: [<sum>]); trainable: whether the summary tokens get gradient (False: a frozen
  summarizer baseline; pass `summary_params` to `multi_turn_rollout` so the tokens are sampled
  by the frozen parameters, not the policy); summary_fn(env_state,
  env_params) -> (ids int32 [summary_len], length int32 []) replaces the policy's summary by a
  harness-written one (oracle baseline: no prompt, not trainable); agent_trigger_id: an action
  starting with this id requests compaction (agent-triggered variant).
  """
  prompt: Optional[tuple[int, ...]] = None
  summary_len: int = 8
  end_id: Optional[int] = None
  prefix: Optional[tuple[int, ...]] = None
  trainable: bool = True
  summary_fn: Optional[Callable[[Any, Any], tuple[jax.Array, jax.Array]]] = None
  agent_trigger_id: Optional[int] = None

  def resolved(self, vocab: tokenizer.Vocab) -> "Compaction":
    return dataclasses.replace(
        self,
        prompt=(vocab.id("<compact>"),) if self.prompt is None else tuple(self.prompt),
        end_id=vocab.id("<eoa>") if self.end_id is None else int(self.end_id),
        prefix=(vocab.id("<sum>"),) if self.prefix is None else tuple(self.prefix))

  @property
  def reserve(self) -> int:
    """Slots the harness keeps free in every window for the prompt and the summary."""
    return 0 if self.summary_fn is not None else len(self.prompt or (0,)) + self.summary_len


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
  """num_turns H, window W (<= LMConfig.max_len), max_segments K (None: 1 without an overflow
  policy, else H: an overflow starts at most one segment per turn), sampling filters, and
  `recompute`: True recomputes the whole window for every token instead of using the KV cache
  (same samples; the baseline of `experiments/bench_lm.py`)."""
  num_turns: int = 3
  window: int = 64
  overflow: Optional[Any] = None
  max_segments: Optional[int] = None
  temperature: float = 1.0
  top_k: int = 0
  top_p: float = 1.0
  recompute: bool = False

  def __post_init__(self):
    if self.num_turns <= 0:
      raise ValueError(f"RolloutConfig.num_turns must be positive, got {self.num_turns}")
    if self.window <= 1:
      raise ValueError(f"RolloutConfig.window must be > 1, got {self.window}")
    if self.overflow is not None and not isinstance(self.overflow, (TruncateOldest, Compaction)):
      raise ValueError(f"RolloutConfig.overflow must be None, TruncateOldest or Compaction, got "
                       f"{self.overflow!r}")
    if self.max_segments is not None and self.max_segments <= 0:
      raise ValueError(f"RolloutConfig.max_segments must be positive, got {self.max_segments}")
    if self.temperature <= 0:
      raise ValueError(f"RolloutConfig.temperature must be > 0, got {self.temperature}")

  @property
  def num_segments(self) -> int:
    if self.max_segments is not None:
      return self.max_segments
    return 1 if self.overflow is None else self.num_turns


class Rollout(NamedTuple):
  """The record of B trajectories (token arrays [B, K, W]; per-turn arrays [B, H])."""
  tokens: jax.Array        # int32 [B, K, W]
  kind: jax.Array          # int8  [B, K, W]  KIND_*
  turn: jax.Array          # int32 [B, K, W]  turn index of the token (-1 on empty slots)
  trainable: jax.Array     # bool  [B, K, W]  generated by the policy (gets gradient)
  log_probs: jax.Array     # float [B, K, W]  sampling log-prob (0 where not trainable)
  values: jax.Array        # float [B, K, W]  V(context before the token) (0 without value_fn)
  seg_len: jax.Array       # int32 [B, K]     tokens in each segment
  num_segments: jax.Array  # int32 [B]        segments used
  rewards: jax.Array       # float [B, H]
  terminated: jax.Array    # bool  [B, H]
  truncated: jax.Array     # bool  [B, H]
  turn_valid: jax.Array    # bool  [B, H]     the turn happened (not after the episode ended)
  actions: jax.Array       # int32 [B, H, A]  action blocks sent to the env (<eoa>-terminated)
  action_end: jax.Array    # int32 [B, H]     flat index k*W + j of the turn's last action token
  state_key: jax.Array     # int32 [B, H]     info["state_key"] if the env gives it, else
  #                                           env.state_key(state) of the pre-action state
  info: dict               # env info fields stacked over turns: {name: [B, H, ...]}
  compacted: jax.Array     # bool  [B, H]     an overflow/compaction started a new window here
  segment_overflow: jax.Array  # bool [B]     more windows were needed than max_segments
  group: jax.Array         # int32 [B]        index of the reset group (GRPO/GiGPO groups)

  @property
  def segment(self) -> jax.Array:
    """int32 [B, K, W]: the segment (window) index of every token."""
    b, k, w = self.tokens.shape
    return jnp.broadcast_to(jnp.arange(k, dtype=jnp.int32)[None, :, None], (b, k, w))

  @property
  def returns(self) -> jax.Array:
    """float [B]: undiscounted return."""
    return (self.rewards * self.turn_valid).sum(-1)

  @property
  def done(self) -> jax.Array:
    return ((self.terminated | self.truncated) & self.turn_valid).any(-1)


class _Carry(NamedTuple):
  tokens: jax.Array     # [B, K, Wp]
  kind: jax.Array
  turn: jax.Array
  trainable: jax.Array
  logp: jax.Array
  seg: jax.Array        # [B]
  pos: jax.Array        # [B]
  cache: Any            # KV cache [B, Wp, H, Dh] per layer (unused when recompute)
  logits: jax.Array     # [B, V] next-token logits after slot pos - 1
  seg_overflow: jax.Array  # [B]


def check_fits(rcfg: RolloutConfig, cfg: lm_model.LMConfig, env: text_base.TextEnvironment,
               compaction: Optional[Compaction] = None) -> None:
  """Trace-time checks of the static sizes; every message names the sizes involved."""
  w, o, a, h = rcfg.window, env.obs_len, env.max_action_len, rcfg.num_turns
  so = min(env.max_step_obs_len, o)  # later observations may be shorter than the task
  if env.vocab.version != cfg.tokenizer_version:
    raise ValueError(f"env {type(env).__name__} speaks tokenizer v{env.vocab.version}, model "
                     f"{cfg.name} v{cfg.tokenizer_version}: mixing tokenizer versions")
  if w > cfg.max_len:
    raise ValueError(f"RolloutConfig.window={w} exceeds LMConfig.max_len={cfg.max_len} of {cfg.name}")
  ov = rcfg.overflow
  if ov is None:
    need = o + (h - 1) * so + h * a
    if need > w:
      raise ValueError(
          f"context overflow: a task of up to obs_len={o} tokens, {h - 1} more observations of "
          f"up to {so} and {h} actions of up to max_action_len={a} need {need} > window={w} "
          "slots; raise the window or set RolloutConfig.overflow to TruncateOldest() or "
          "Compaction(...)")
  elif isinstance(ov, TruncateOldest):
    need = (o if ov.keep_task else 0) + so + a
    if need > w:
      raise ValueError(f"TruncateOldest: [task {o}] + obs {so} + action {a} = {need} > "
                       f"window={w}")
  else:
    r = compaction.reserve
    first = o + a + r
    later = o + len(compaction.prefix) + compaction.summary_len + so + a + r
    if max(first, later) > w:
      raise ValueError(
          f"Compaction: a window must hold [task {o}][prefix {len(compaction.prefix)}][summary "
          f"{compaction.summary_len}] + obs {so} + action {a} + reserve {r} = {later} "
          f"(first window {first}) > window={w}")


def _put(arr, seg, pos, vals, valid):
  """arr [K, Wp]; writes vals [S] at (seg, pos + i) where valid [S]."""
  s = vals.shape[0]
  old = jax.lax.dynamic_slice(arr, (seg, pos), (1, s))[0]
  new = jnp.where(valid, vals.astype(arr.dtype), old)
  return jax.lax.dynamic_update_slice(arr, new[None], (seg, pos))


_put_b = jax.vmap(_put)


def _cur_segment(arr, seg):
  """arr [B, K, Wp] -> [B, Wp] the current segment of each trajectory."""
  return jnp.take_along_axis(arr, seg[:, None, None], axis=1)[:, 0]


def _step_envs(env, env_params, env_keys, t, state, obs, act, stepped):
  """Steps every env (keys fold_in(env_key, t + 1)) and keeps the new obs/state only where
  `stepped`. Returns (obs, state, reward, terminated, truncated, info, state_key), masked."""
  b = act.shape[0]
  skey_pre = jax.vmap(env.state_key, in_axes=(0, None))(state, env_params)
  env_k = jax.vmap(jax.random.fold_in, in_axes=(0, None))(env_keys, t + 1)
  obs2, state2, rew, term, info = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))(
      env_k, state, act, env_params)
  trunc = jax.vmap(env.is_truncated, in_axes=(0, None))(state2, env_params)
  sel = lambda new, old: jax.tree.map(
      lambda x, y: jnp.where(stepped.reshape((b,) + (1,) * (x.ndim - 1)), x, y), new, old)
  skey = info.get("state_key", skey_pre) if isinstance(info, dict) else skey_pre
  return (sel(obs2, obs), sel(state2, state), jnp.where(stepped, rew, 0.0).astype(jnp.float32),
          term & stepped, trunc & stepped, info, jnp.asarray(skey, jnp.int32))


def multi_turn_rollout(cfg: lm_model.LMConfig, params: Any, env: text_base.TextEnvironment,
                       env_params: Any, key: jax.Array, num_envs: int, rcfg: RolloutConfig,
                       *, group_size: int = 1,
                       value_fn: Optional[Callable[[jax.Array], jax.Array]] = None,
                       summary_params: Any = None) -> Rollout:
  """Runs `num_envs` trajectories of up to H turns; pure, jittable, vmappable over keys.

  group_size G: trajectories b and b' with b // G == b' // G share the reset (and step) keys, so
  they face the same task instance (GRPO / GiGPO groups). value_fn(tokens [N, W]) -> [N, W]
  (`value.make_value_fn`) fills `values` after sampling (one pass over every window).
  summary_params: parameters that write the summaries (a frozen summariser: the warm start).
  None: the policy writes them. With them, each summary token is sampled from
  p_frozen(x_i | window so far), the current window recomputed under summary_params (a
  compaction is rare, so no second KV cache is kept); the policy's cache is still fed the tokens
  (it is discarded when the new window starts).
  """
  if num_envs % group_size:
    raise ValueError(f"num_envs={num_envs} is not a multiple of group_size={group_size}")
  ov = rcfg.overflow
  comp = ov.resolved(env.vocab) if isinstance(ov, Compaction) else None
  check_fits(rcfg, cfg, env, comp)
  b, h_turns = num_envs, rcfg.num_turns
  k_seg, w, o, a = rcfg.num_segments, rcfg.window, env.obs_len, env.max_action_len
  wp = w + o  # scratch slots: a padded obs block written at pos <= W - 1 stays in bounds
  so = min(env.max_step_obs_len, o)  # slots of the observation blocks after the task
  eoa = env.eoa_id
  model = lm_model.DecoderLM(cfg)
  max_pos = cfg.max_len - 1

  k_reset, k_pol = jax.random.split(key)
  group_keys = jax.random.split(k_reset, b // group_size)
  env_keys = jnp.repeat(group_keys, group_size, axis=0)               # [B, 2]
  pol_keys = jax.random.split(k_pol, b)                               # [B, 2]
  obs, state = jax.vmap(env.reset, in_axes=(0, None))(env_keys, env_params)
  task_tokens, task_len = obs.tokens, obs.length

  def feed(c: _Carry, toks, n_valid):
    """Feeds toks [B, S] at per-sequence slots pos..pos+S-1; returns (cache, logits at the last
    valid token [B, V]). Positions past max_len (padding only) are clipped: never read."""
    s = toks.shape[1]
    if rcfg.recompute:
      seq = _cur_segment(c.tokens, c.seg)                              # already written
      lg, _ = model.apply({"params": params}, seq[:, :w])
      last = jnp.clip(c.pos + n_valid - 1, 0, w - 1)
      return c.cache, jnp.take_along_axis(lg, last[:, None, None], axis=1)[:, 0]
    positions = jnp.minimum(c.pos[:, None] + jnp.arange(s)[None], max_pos)
    lg, cache = model.apply({"params": params}, toks, positions, c.cache)
    last = jnp.clip(n_valid - 1, 0, s - 1)
    return cache, jnp.take_along_axis(lg, last[:, None, None], axis=1)[:, 0]

  def write(c: _Carry, toks, valid, kind, turn, logp=None, trainable=False):
    s = toks.shape[1]
    kinds = jnp.full((b, s), kind, jnp.int8)
    turns = jnp.broadcast_to(jnp.asarray(turn, jnp.int32), (b, s))
    lp = jnp.zeros((b, s), jnp.float32) if logp is None else logp
    tr = jnp.broadcast_to(jnp.asarray(trainable), (b, s))
    return c._replace(
        tokens=_put_b(c.tokens, c.seg, c.pos, toks, valid),
        kind=_put_b(c.kind, c.seg, c.pos, kinds, valid),
        turn=_put_b(c.turn, c.seg, c.pos, turns, valid),
        logp=_put_b(c.logp, c.seg, c.pos, lp, valid),
        trainable=_put_b(c.trainable, c.seg, c.pos, tr & valid, valid))

  def append_block(c: _Carry, toks, length, active, kind, turn):
    """Writes and prefills an observed block toks [B, S] (first `length` valid) where active."""
    s = toks.shape[1]
    valid = (jnp.arange(s)[None] < length[:, None]) & active[:, None]
    c = write(c, toks, valid, kind, turn)
    cache, lg = feed(c, toks, length)
    take = active & (length > 0)
    return c._replace(cache=cache, logits=jnp.where(take[:, None], lg, c.logits),
                      pos=c.pos + jnp.where(active, length, 0))

  def frozen_logits(c: _Carry):
    """Next-token logits [B, V] of summary_params at the current window's last written slot."""
    seq = _cur_segment(c.tokens, c.seg)
    lg, _ = model.apply({"params": summary_params}, seq[:, :w])
    last = jnp.clip(c.pos - 1, 0, w - 1)
    return jnp.take_along_axis(lg, last[:, None, None], axis=1)[:, 0]

  def generate(c: _Carry, keys, n_max, end_id, kind, turn, active, trainable, frozen=False):
    """Samples up to n_max tokens (stopping after end_id) where active; returns (carry,
    tokens [B, n_max] padded with <pad>, last flat index [B]). frozen: sample from
    summary_params instead of the policy."""

    def body(carry, noise):
      c, ended, last = carry
      logits = frozen_logits(c) if frozen else c.logits
      x = sampling.filter_logits(logits, rcfg.temperature, rcfg.top_k, rcfg.top_p)
      tok = sampling.gumbel_argmax(noise, x)
      logp = lm_model.token_log_probs(x, tok)
      live = active & ~ended
      tok = jnp.where(live, tok, tokenizer.PAD)
      c = write(c, tok[:, None], live[:, None], kind, turn, logp[:, None], trainable)
      cache, lg = feed(c, tok[:, None], jnp.ones((b,), jnp.int32))
      last = jnp.where(live, c.seg * w + c.pos, last)
      c = c._replace(cache=cache, logits=jnp.where(live[:, None], lg, c.logits),
                     pos=c.pos + live)
      return (c, ended | (live & (tok == end_id)), last), tok

    # Token i draws categorical(fold_in(keys[b], i), x). The Gumbel noise of all n_max tokens
    # comes from one call before the loop: the same bits, but one threefry call (on CPU a
    # rolled 5-step loop of small ops) per generation instead of one per token.
    ks = jax.vmap(lambda i: jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, i))(
        jnp.arange(n_max))                                              # [n_max, B] keys
    gumbel = lambda k: jax.random.gumbel(k, (cfg.vocab_size,), c.logits.dtype)
    noise = jax.vmap(jax.vmap(gumbel))(ks)                              # [n_max, B, V]
    init = (c, jnp.zeros((b,), bool), jnp.full((b,), -1, jnp.int32))
    (c, _, last), toks = jax.lax.scan(body, init, noise)
    return c, toks.T, last

  def new_window(c: _Carry, go, prefix_toks, prefix_kind, prefix_turn, prefix_len, turn):
    """Starts segment seg+1 where `go`, holding prefix_toks [B, Wp] (first prefix_len valid) as
    copied/task tokens, prefilled in one call."""
    seg_new = jnp.where(go, jnp.minimum(c.seg + 1, k_seg - 1), c.seg)
    over = go & (c.seg + 1 >= k_seg)
    valid = (jnp.arange(wp)[None] < prefix_len[:, None]) & go[:, None]
    def upd(arr, vals, fill=0):
      # Overwrite the whole row seg_new (stale data from a clamped last segment included).
      row = jnp.where(valid, vals, fill).astype(arr.dtype)
      written = jax.vmap(lambda r, s, v: jax.lax.dynamic_update_slice(r, v[None], (s, 0)))(
          arr, seg_new, row)
      return jnp.where(go[:, None, None], written, arr)
    c2 = c._replace(
        tokens=upd(c.tokens, prefix_toks), kind=upd(c.kind, prefix_kind),
        turn=upd(c.turn, prefix_turn, -1),
        logp=upd(c.logp, jnp.zeros((b, wp), jnp.float32)),
        trainable=upd(c.trainable, jnp.zeros((b, wp), bool)),
        seg=seg_new, pos=jnp.where(go, 0, c.pos), seg_overflow=c.seg_overflow | over)
    if rcfg.recompute:
      cache = c.cache
      lg, _ = model.apply({"params": params}, prefix_toks[:, :w])
      last = jnp.clip(prefix_len - 1, 0, w - 1)
    else:
      fresh = lm_model.init_cache(cfg, b, length=wp)
      positions = jnp.minimum(jnp.broadcast_to(jnp.arange(wp), (b, wp)), max_pos)
      lg, cache = model.apply({"params": params}, prefix_toks, positions, fresh)
      cache = jax.tree.map(lambda n, old: jnp.where(
          go.reshape((b,) + (1,) * (n.ndim - 1)), n, old), cache, c.cache)
      last = jnp.clip(prefix_len - 1, 0, wp - 1)
    lg = jnp.take_along_axis(lg, last[:, None, None], axis=1)[:, 0]
    return c2._replace(cache=cache, logits=jnp.where(go[:, None], lg, c.logits),
                       pos=jnp.where(go, prefix_len, c.pos))

  def task_prefix(extra_toks, extra_len):
    """[task][extra] packed into [B, Wp] with its length and kinds (task: KIND_TASK)."""
    idx = jnp.arange(wp)[None]
    in_task = idx < task_len[:, None]
    j = jnp.clip(idx - task_len[:, None], 0, extra_toks.shape[1] - 1)
    extra = jnp.take_along_axis(extra_toks, j, axis=1)
    toks = jnp.where(in_task, jnp.pad(task_tokens, ((0, 0), (0, wp - o))), extra)
    kinds = jnp.where(in_task, KIND_TASK, KIND_COPIED).astype(jnp.int8)
    return toks, kinds, task_len + extra_len

  def truncate(c: _Carry, go, obs_len_next, turn):
    keep_task = rcfg.overflow.keep_task
    tok_c, kind_c, turn_c = (_cur_segment(x, c.seg) for x in (c.tokens, c.kind, c.turn))
    idx = jnp.arange(wp)[None]
    prev_turn = jnp.pad(turn_c, ((0, 0), (1, 0)), constant_values=-2)[:, :-1]
    is_task = kind_c == KIND_TASK
    prev_task = jnp.pad(is_task, ((0, 0), (1, 0)))[:, :-1]
    start = (idx == 0) | (turn_c != prev_turn) | (is_task != prev_task)
    if keep_task:
      start &= ~is_task
    budget = w - a - obs_len_next - (task_len if keep_task else 0)
    ok = start & (idx < c.pos[:, None]) & (c.pos[:, None] - idx <= budget[:, None])
    s0 = jnp.where(ok.any(1), jnp.argmax(ok, axis=1), c.pos)
    n_keep = c.pos - s0
    plen = task_len if keep_task else jnp.zeros_like(task_len)
    src = jnp.clip(s0[:, None] + idx - plen[:, None], 0, wp - 1)
    kept_tok = jnp.take_along_axis(tok_c, src, axis=1)
    kept_kind = jnp.take_along_axis(kind_c, src, axis=1)
    kept_turn = jnp.take_along_axis(turn_c, src, axis=1)
    in_prefix = idx < plen[:, None]
    toks = jnp.where(in_prefix, jnp.pad(task_tokens, ((0, 0), (0, wp - o))), kept_tok)
    kinds = jnp.where(in_prefix | (kept_kind == KIND_TASK), KIND_TASK, KIND_COPIED)
    turns = jnp.where(in_prefix, 0, kept_turn)
    return new_window(c, go, toks, kinds.astype(jnp.int8), turns, plen + n_keep, turn)

  def compact(c: _Carry, go, turn, env_state, k_sum):
    if comp.summary_fn is not None:
      ids, n = jax.vmap(comp.summary_fn, in_axes=(0, None))(env_state, env_params)
      summ = jnp.where(jnp.arange(ids.shape[1])[None] < n[:, None], ids, tokenizer.PAD)
      summ_len = n
    else:
      p = jnp.broadcast_to(jnp.asarray(comp.prompt, jnp.int32), (b, len(comp.prompt)))
      c = append_block(c, p, jnp.full((b,), len(comp.prompt), jnp.int32), go, KIND_PROMPT, turn)
      c, summ, _ = generate(c, k_sum, comp.summary_len, comp.end_id, KIND_SUMMARY, turn, go,
                            comp.trainable, frozen=summary_params is not None)
      is_end = summ == comp.end_id
      summ_len = jnp.where(is_end.any(1), jnp.argmax(is_end, axis=1), comp.summary_len)
      summ = jnp.where(jnp.arange(comp.summary_len)[None] < summ_len[:, None], summ,
                       tokenizer.PAD)
    pre = jnp.broadcast_to(jnp.asarray(comp.prefix, jnp.int32), (b, len(comp.prefix)))
    extra = jnp.concatenate([pre, summ], axis=1)
    # pack [prefix][summary[:summ_len]]: the prefix is full-length, so a plain concat is packed
    toks, kinds, n = task_prefix(extra, len(comp.prefix) + summ_len)
    turns = jnp.full((b, wp), turn, jnp.int32)
    return new_window(c, go, toks, kinds, turns, n, turn)

  def turn_body(carry, t, block):
    """One turn; block: static slots of the observation block fed (obs_len on turn 0, so
    after)."""
    c, obs, state, done, pending = carry
    active = ~done
    keys_t = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, t), 2))(pol_keys)
    k_act, k_sum = keys_t[:, 0], keys_t[:, 1]
    reserve = comp.reserve if comp is not None else 0
    overflow = active & (pending | (c.pos + obs.length + a + reserve > w))
    if ov is not None:
      if isinstance(ov, TruncateOldest):
        fn = lambda c: truncate(c, overflow, obs.length, t)
      else:
        fn = lambda c: compact(c, overflow, t, state, k_sum)
      c = jax.lax.cond(overflow.any(), fn, lambda c: c, c)
    # The first observation is the task statement.
    kind = jnp.where(t == 0, KIND_TASK, KIND_OBS).astype(jnp.int8)
    c = append_block(c, obs.tokens[:, :block], obs.length, active, kind, t)
    c, act, last = generate(c, k_act, a, eoa, KIND_ACTION, t, active, True)
    trig = jnp.zeros((b,), bool)
    if comp is not None and comp.agent_trigger_id is not None:
      trig = active & (act[:, 0] == comp.agent_trigger_id)
    obs, state, rew, term, trunc, info, skey = _step_envs(env, env_params, env_keys, t, state,
                                                          obs, act, active & ~trig)
    out = dict(rewards=rew, terminated=term, truncated=trunc,
               turn_valid=active, actions=act, action_end=jnp.where(active, last, -1),
               state_key=skey, info=info, compacted=overflow)
    return (c, obs, state, done | term | trunc, trig), out

  kz = lambda dt: jnp.zeros((b, k_seg, wp), dt)
  c0 = _Carry(tokens=kz(jnp.int32), kind=kz(jnp.int8), turn=kz(jnp.int32) - 1,
              trainable=kz(bool), logp=kz(jnp.float32), seg=jnp.zeros((b,), jnp.int32),
              pos=jnp.zeros((b,), jnp.int32),
              cache=lm_model.init_cache(cfg, b, length=wp) if not rcfg.recompute else None,
              logits=jnp.zeros((b, cfg.vocab_size), jnp.float32),
              seg_overflow=jnp.zeros((b,), bool))
  init = (c0, obs, state, jnp.zeros((b,), bool), jnp.zeros((b,), bool))
  # Turn 0 shows the task (up to obs_len tokens); later observations are at most
  # so = max_step_obs_len long (the env's contract, which check_fits relies on too), so turns
  # 1.. feed blocks of so slots: prefilling padding costs as much as tokens, and KVLookup's
  # 2-token questions in 18-slot blocks took ~70% of a cached turn at batch 64.
  if so < o:
    init, out0 = turn_body(init, 0, o)
    (c, _, _, _, _), out = jax.lax.scan(lambda cr, t: turn_body(cr, t, so), init,
                                        jnp.arange(1, h_turns))
    out = jax.tree.map(lambda x0, x: jnp.concatenate([x0[None], x]), out0, out)
  else:
    (c, _, _, _, _), out = jax.lax.scan(lambda cr, t: turn_body(cr, t, o), init,
                                        jnp.arange(h_turns))
  out = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), out)             # [B, H, ...]

  tokens, kind, turn = c.tokens[..., :w], c.kind[..., :w], c.turn[..., :w]
  seg_len = (kind != KIND_PAD).sum(-1).astype(jnp.int32)
  values = jnp.zeros((b, k_seg, w), jnp.float32)
  if value_fn is not None:
    values = value_fn(tokens.reshape(b * k_seg, w)).reshape(b, k_seg, w)
    values = jnp.where(kind != KIND_PAD, values, 0.0)
  return Rollout(
      tokens=tokens, kind=kind, turn=turn, trainable=c.trainable[..., :w],
      log_probs=c.logp[..., :w], values=values, seg_len=seg_len,
      num_segments=c.seg + 1, rewards=out["rewards"], terminated=out["terminated"],
      truncated=out["truncated"], turn_valid=out["turn_valid"], actions=out["actions"],
      action_end=out["action_end"], state_key=out["state_key"], info=out["info"],
      compacted=out["compacted"], segment_overflow=c.seg_overflow,
      group=jnp.arange(b, dtype=jnp.int32) // group_size)


def flat(x: jax.Array) -> jax.Array:
  """[B, K, W, ...] -> [B, K*W, ...]: every token of a trajectory in chronological order."""
  return x.reshape((x.shape[0], x.shape[1] * x.shape[2]) + x.shape[3:])


def scripted_rollout(env: text_base.TextEnvironment, env_params: Any, key: jax.Array,
                     num_envs: int, num_turns: int, window: int,
                     action_fn: Callable[[jax.Array, Any, Any], jax.Array],
                     group_size: int = 1) -> Rollout:
  """Records trajectories of a scripted policy action_fn(key, env_state, env_params) ->
  action int32 [max_action_len] in the same layout as `multi_turn_rollout` (one window, no
  overflow policy; log-probs 0). Its `trainable` tokens are the actions: behaviour-cloning data
  (`lm.behaviour_cloning`) for a pretrained start.
  """
  o, a = env.obs_len, env.max_action_len
  if num_turns * (o + a) > window:
    raise ValueError(f"scripted_rollout: {num_turns} turns x (obs_len {o} + action {a}) = "
                     f"{num_turns * (o + a)} > window={window}")
  b, wp = num_envs, window + o
  eoa = env.eoa_id
  k_reset, k_act = jax.random.split(key)
  env_keys = jnp.repeat(jax.random.split(k_reset, b // group_size), group_size, axis=0)
  act_keys = jax.random.split(k_act, b)
  obs, state = jax.vmap(env.reset, in_axes=(0, None))(env_keys, env_params)

  def put(arr, pos, vals, valid):
    return jax.vmap(lambda r, p, v, ok: jax.lax.dynamic_update_slice(
        r, jnp.where(ok, v, jax.lax.dynamic_slice(r, (p,), v.shape)).astype(r.dtype), (p,)))(
            arr, pos, vals, valid)

  def body(carry, t):
    toks, kind, turn, pos, obs, state, done = carry
    active = ~done
    v = (jnp.arange(o)[None] < obs.length[:, None]) & active[:, None]
    kd = jnp.where(t == 0, KIND_TASK, KIND_OBS).astype(jnp.int8)
    toks = put(toks, pos, obs.tokens, v)
    kind = put(kind, pos, jnp.full((b, o), kd), v)
    turn = put(turn, pos, jnp.full((b, o), t, jnp.int32), v)
    pos = pos + jnp.where(active, obs.length, 0)
    ks = jax.vmap(jax.random.fold_in, in_axes=(0, None))(act_keys, t)
    act = jax.vmap(action_fn, in_axes=(0, 0, None))(ks, state, env_params).astype(jnp.int32)
    alen = jax.vmap(text_base.action_length, in_axes=(0, None))(act, eoa)
    n = jnp.minimum(alen + 1, a)                                        # include <eoa>
    va = (jnp.arange(a)[None] < n[:, None]) & active[:, None]
    toks = put(toks, pos, act, va)
    kind = put(kind, pos, jnp.full((b, a), KIND_ACTION, jnp.int8), va)
    turn = put(turn, pos, jnp.full((b, a), t, jnp.int32), va)
    last = jnp.where(active, pos + n - 1, -1)
    pos = pos + jnp.where(active, n, 0)
    obs, state, rew, term, trunc, info, skey = _step_envs(env, env_params, env_keys, t, state,
                                                          obs, act, active)
    out = dict(rewards=rew, terminated=term, truncated=trunc, turn_valid=active,
               actions=act, action_end=last, state_key=skey, info=info)
    return (toks, kind, turn, pos, obs, state, done | term | trunc), out

  z = lambda dt: jnp.zeros((b, wp), dt)
  init = (z(jnp.int32), z(jnp.int8), z(jnp.int32) - 1, jnp.zeros((b,), jnp.int32), obs, state,
          jnp.zeros((b,), bool))
  (toks, kind, turn, _, _, _, _), out = jax.lax.scan(body, init, jnp.arange(num_turns))
  out = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), out)
  toks, kind, turn = (x[:, None, :window] for x in (toks, kind, turn))
  return Rollout(
      tokens=toks, kind=kind, turn=turn, trainable=kind == KIND_ACTION,
      log_probs=jnp.zeros(toks.shape, jnp.float32), values=jnp.zeros(toks.shape, jnp.float32),
      seg_len=(kind != KIND_PAD).sum(-1).astype(jnp.int32), num_segments=jnp.ones((b,), jnp.int32),
      rewards=out["rewards"], terminated=out["terminated"], truncated=out["truncated"],
      turn_valid=out["turn_valid"], actions=out["actions"], action_end=out["action_end"],
      state_key=out["state_key"], info=out["info"],
      compacted=jnp.zeros((b, num_turns), bool), segment_overflow=jnp.zeros((b,), bool),
      group=jnp.arange(b, dtype=jnp.int32) // group_size)
