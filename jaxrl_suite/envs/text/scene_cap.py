r"""SceneCap: synthetic scene-graph "videos" rendered as tokens, captioned in a fixed claim grammar.

A scene has up to E entities (entity i is named by the i-th capital letter), each with a colour
and a shape, and F frames; entity e does at most one action a in frame f (an *event*). Some
events are occluded (hidden from the rendering, still true in the world). Sizes are static
(`SceneCap(num_entities, ...)`), probabilities live in `SceneCapParams`.

Rendering (the captioner's prompt, `prompt_len = 2 + 4E + 2F + 3*max_events`, right-padded):

  <bos>  <ent> e c s  (per present entity)   <frame> f  <evt> e a ...  (per frame)   <sep>

Caption grammar (exact decomposition): up to K claims of 6 tokens, then <eos>:

  claim = ENT COLOR SHAPE ACT FRAME ;        e.g.  A E I M 0 ;
  response_len = 6K + 1

Letters are assigned by slot so every field has its own range: entities A.., colours from
`COLOR_BASE`, shapes from `SHAPE_BASE`, actions from `ACT_BASE` (letter offsets), frames digits.
A claim is one *fact* index  ((((e*C + c)*S + s)*A + a)*F + f)  in [0, num_facts).

Ground truth (`fact_masks`): a fact is true iff entity e is present, has colour c and shape s,
and does action a in frame f (occluded events are true too); *salient* facts are the visible
events (what a captioner can know). Precision is measured against truth, recall against
salience (`jaxrl_suite.envs.text.claims`, which also holds the grammar's constants).

Scenes travel through the RL code as one int32 vector (`pack` / `unpack`) because the GRPO
driver repeats problems with `jnp.repeat`. The gymnax environment is single-step: reset shows
the rendering, the action is a caption, the reward is the exact scene-graph F1 (evaluation
only, never a training reward).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from jaxrl_suite.envs.text import base
from jaxrl_suite.envs.text import claims as claims_lib
from jaxrl_suite.envs.text import tokenizer
# The caption grammar's constants are defined with the parser (claims.py) and named here too.
from jaxrl_suite.envs.text.claims import ACT_BASE, CLAIM_WIDTH, COLOR_BASE, SHAPE_BASE

V = tokenizer.V2


@struct.dataclass
class SceneCapParams:
  min_entities: int = 2          # present entities ~ U{min_entities .. num_entities}
  event_prob: float = 0.3        # P(entity e acts in frame f)
  occlusion_prob: float = 0.15   # P(an event is hidden from the rendering)
  # Pretraining-corpus noise (the captioner's imperfect start, and the label pool's spread):
  drop_prob: float = 0.15        # a visible event's claim is left out
  halluc_prob: float = 0.25      # each of `num_halluc` extra slots holds a hallucinated claim
  attr_error_prob: float = 0.3   # a hallucination is a true event with a wrong colour (else a
                                 # plausible event: true entity and attributes, random act/frame)
  max_steps_in_episode: int = 1  # one caption per scene


@struct.dataclass
class Scene:
  color: jax.Array    # int32 [E]
  shape: jax.Array    # int32 [E]
  present: jax.Array  # bool  [E]
  action: jax.Array   # int32 [E, F]; -1 = no event
  visible: jax.Array  # bool  [E, F]; event shown in the rendering


@struct.dataclass
class EnvState:
  scene: Scene
  time: int


class SceneCap(base.TextEnvironment):
  """Static sizes: entities E, frames F, colours C, shapes S, actions A, event cap, claim cap K."""

  def __init__(self, num_entities: int = 3, num_frames: int = 4, num_colors: int = 4,
               num_shapes: int = 4, num_actions: int = 4, max_events: int = 6,
               max_claims: int = 7, num_halluc: int = 3):
    super().__init__()
    for name, n, hi in (("num_entities", num_entities, COLOR_BASE),
                        ("num_colors", num_colors, SHAPE_BASE - COLOR_BASE),
                        ("num_shapes", num_shapes, ACT_BASE - SHAPE_BASE),
                        ("num_actions", num_actions, 26 - ACT_BASE),
                        ("num_frames", num_frames, 10)):
      if not 1 <= n <= hi:
        raise ValueError(f"SceneCap.{name}={n} must be in [1, {hi}]")
    if max_events < 1 or max_claims < 1 or num_halluc < 0:
      raise ValueError("SceneCap.max_events and max_claims must be >= 1, num_halluc >= 0")
    self.E, self.F, self.C, self.S, self.A = (num_entities, num_frames, num_colors, num_shapes,
                                              num_actions)
    self.max_events, self.K, self.num_halluc = max_events, max_claims, num_halluc
    self.prompt_len = 2 + 4 * self.E + 2 * self.F + 3 * max_events
    self.response_len = CLAIM_WIDTH * self.K + 1
    self.obs_len = self.prompt_len
    self.max_action_len = self.response_len
    self.num_facts = self.E * self.C * self.S * self.A * self.F

  @property
  def name(self) -> str:
    return "SceneCap-v0"

  @property
  def default_params(self) -> SceneCapParams:
    return SceneCapParams()

  # ---- scenes -------------------------------------------------------------------------------
  def sample_scene(self, key: jax.Array, params: SceneCapParams) -> Scene:
    """A random scene. Entity 0 always acts visibly in frame 0, so every scene has a salient
    fact; at most `max_events` events (the first ones in frame-major order are kept)."""
    kn, kc, ks, ke, ka, ko = jax.random.split(key, 6)
    n = jax.random.randint(kn, (), params.min_entities, self.E + 1)
    present = jnp.arange(self.E) < n
    color = jax.random.randint(kc, (self.E,), 0, self.C)
    shape = jax.random.randint(ks, (self.E,), 0, self.S)
    ev = jax.random.bernoulli(ke, params.event_prob, (self.E, self.F)) & present[:, None]
    ev = ev.at[0, 0].set(True)
    order = jnp.cumsum(ev.T.reshape(-1)).reshape(self.F, self.E).T  # frame-major count
    ev = ev & (order <= self.max_events)
    action = jnp.where(ev, jax.random.randint(ka, (self.E, self.F), 0, self.A), -1)
    visible = ev & ~jax.random.bernoulli(ko, params.occlusion_prob, (self.E, self.F))
    visible = visible.at[0, 0].set(True)
    return Scene(color.astype(jnp.int32), shape.astype(jnp.int32), present,
                 action.astype(jnp.int32), visible)

  def pack(self, s: Scene) -> jax.Array:
    """int32 [..., 3E + 2EF]: colour, shape, present, action (flat), visible (flat)."""
    lead = s.color.shape[:-1]
    return jnp.concatenate([s.color, s.shape, s.present.astype(jnp.int32),
                            s.action.reshape(lead + (-1,)),
                            s.visible.astype(jnp.int32).reshape(lead + (-1,))],
                           axis=-1).astype(jnp.int32)

  def unpack(self, x: jax.Array) -> Scene:
    E, F = self.E, self.F
    lead = x.shape[:-1]
    return Scene(x[..., :E], x[..., E:2 * E], x[..., 2 * E:3 * E] > 0,
                 x[..., 3 * E:3 * E + E * F].reshape(lead + (E, F)),
                 x[..., 3 * E + E * F:].reshape(lead + (E, F)) > 0)

  # ---- facts --------------------------------------------------------------------------------
  def fact_index(self, e, c, s, a, f):
    return (((e * self.C + c) * self.S + s) * self.A + a) * self.F + f

  def fact_masks(self, s: Scene) -> tuple[jax.Array, jax.Array]:
    """(true bool [num_facts], salient bool [num_facts]) of one scene."""
    e = jnp.arange(self.E)[:, None]
    f = jnp.arange(self.F)[None, :]
    idx = self.fact_index(e, s.color[:, None], s.shape[:, None], jnp.maximum(s.action, 0), f)
    ev = (s.action >= 0) & s.present[:, None]
    true = jnp.zeros(self.num_facts, bool).at[idx.reshape(-1)].max(ev.reshape(-1))
    sal = jnp.zeros(self.num_facts, bool).at[idx.reshape(-1)].max((ev & s.visible).reshape(-1))
    return true, sal

  # ---- tokens -------------------------------------------------------------------------------
  def _letter(self, base_, i):
    return V.letter_id(base_ + i)

  def render(self, s: Scene) -> jax.Array:
    """The prompt: int32 [prompt_len] (see the module docstring), right-padded with <pad>."""
    E, F = self.E, self.F
    ent = jnp.stack([jnp.full((E,), V.id("<ent>")), self._letter(0, jnp.arange(E)),
                     self._letter(COLOR_BASE, s.color), self._letter(SHAPE_BASE, s.shape)], 1)
    ent_ok = jnp.repeat(s.present, 4)
    shown = (s.action >= 0) & s.visible & s.present[:, None]
    # Per frame: <frame> f, then one <evt> e a block per entity slot (kept only if shown).
    evt = jnp.stack([jnp.full((F, E), V.id("<evt>")),
                     jnp.broadcast_to(self._letter(0, jnp.arange(E))[None], (F, E)),
                     self._letter(ACT_BASE, jnp.maximum(s.action.T, 0))], -1)  # [F, E, 3]
    frame = jnp.stack([jnp.full((F,), V.id("<frame>")), tokenizer.digit_id(jnp.arange(F))], 1)
    frames = jnp.concatenate([frame, evt.reshape(F, 3 * E)], 1)              # [F, 2 + 3E]
    frames_ok = jnp.concatenate([jnp.ones((F, 2), bool), jnp.repeat(shown.T, 3, axis=1)], 1)
    toks = jnp.concatenate([jnp.array([tokenizer.BOS]), ent.reshape(-1), frames.reshape(-1),
                            jnp.array([tokenizer.SEP])])
    ok = jnp.concatenate([jnp.array([True]), ent_ok, frames_ok.reshape(-1), jnp.array([True])])
    return compact(toks, ok, self.prompt_len)

  def claim_tokens(self, e, c, s, a, f) -> jax.Array:
    """int32 [..., 6]: the claim `e c s a f ;` (fields as integers)."""
    return jnp.stack([self._letter(0, e), self._letter(COLOR_BASE, c),
                      self._letter(SHAPE_BASE, s), self._letter(ACT_BASE, a),
                      tokenizer.digit_id(f), jnp.full(jnp.shape(e), tokenizer.SEMI)],
                     -1).astype(jnp.int32)

  def caption_from_claims(self, claims: jax.Array, keep: jax.Array) -> jax.Array:
    """claims int32 [M, 6], keep bool [M] -> response int32 [response_len]: kept claims in
    order (at most K), then <eos>, then <pad>."""
    order = jnp.argsort(~keep, stable=True)
    n = jnp.minimum(keep.sum(), self.K)
    flat = jnp.pad(claims[order], ((0, max(self.K - claims.shape[0], 0)), (0, 0)))
    flat = flat[:self.K].reshape(-1)
    flat = jnp.concatenate([flat, jnp.array([tokenizer.PAD])])
    pos = jnp.arange(self.response_len)
    return jnp.where(pos < CLAIM_WIDTH * n, flat,
                     jnp.where(pos == CLAIM_WIDTH * n, tokenizer.EOS, tokenizer.PAD)
                     ).astype(jnp.int32)

  def _event_claims(self, s: Scene):
    """(claims [E*F, 6] in frame-major order, shown [E*F]) for every (frame, entity) slot."""
    f, e = jnp.meshgrid(jnp.arange(self.F), jnp.arange(self.E), indexing="ij")
    e, f = e.reshape(-1), f.reshape(-1)
    a = s.action.T.reshape(-1)
    claims = self.claim_tokens(e, s.color[e], s.shape[e], jnp.maximum(a, 0), f)
    shown = (a >= 0) & s.visible.T.reshape(-1) & s.present[e]
    return claims, shown, e, f

  def reference_caption(self, s: Scene) -> jax.Array:
    """The reference caption: one claim per visible event, frame-major. int32 [response_len]."""
    claims, shown, _, _ = self._event_claims(s)
    return self.caption_from_claims(claims, shown)

  def noisy_caption(self, key: jax.Array, s: Scene, params: SceneCapParams) -> jax.Array:
    """A pretraining-corpus caption: the reference with claims dropped (`drop_prob`) and up to
    `num_halluc` hallucinations (plausible events, wrong-colour copies of true events, or
    duplicates), merged in frame-major order. int32 [response_len]."""
    kd, kh, kt, ke, ka, kf, kc, kx = jax.random.split(key, 8)
    claims, shown, e, f = self._event_claims(s)
    keep = shown & ~jax.random.bernoulli(kd, params.drop_prob, shown.shape)
    H = self.num_halluc
    n_present = s.present.sum()
    he = jax.random.randint(ke, (H,), 0, jnp.maximum(n_present, 1))
    ha = jax.random.randint(ka, (H,), 0, self.A)
    hf = jax.random.randint(kf, (H,), 0, self.F)
    plaus = self.claim_tokens(he, s.color[he], s.shape[he], ha, hf)
    # wrong colour on a shown event (chosen uniformly among shown slots)
    pick = jax.random.categorical(kx, jnp.where(shown, 0.0, -1e9), shape=(H,))
    wrong_c = (s.color[e[pick]] + jax.random.randint(kc, (H,), 1, self.C)) % self.C
    attr = claims[pick].at[:, 1].set(self._letter(COLOR_BASE, wrong_c))
    use_attr = jax.random.bernoulli(kt, params.attr_error_prob, (H,)) & (self.C > 1)
    hall = jnp.where(use_attr[:, None], attr, plaus)
    hall_f = jnp.where(use_attr, f[pick], hf)
    hall_e = jnp.where(use_attr, e[pick], he)
    hkeep = jax.random.bernoulli(kh, params.halluc_prob, (H,))
    allc = jnp.concatenate([claims, hall])
    allk = jnp.concatenate([keep, hkeep])
    sort_key = jnp.concatenate([f * self.E + e, hall_f * self.E + hall_e]) * 2 + \
        jnp.concatenate([jnp.zeros_like(e), jnp.ones_like(he)])
    order = jnp.argsort(jnp.where(allk, sort_key, 1 << 20), stable=True)
    return self.caption_from_claims(allc[order], allk[order])

  # ---- gymnax interface ---------------------------------------------------------------------
  def reset_env(self, key, params):
    s = self.sample_scene(key, params)
    obs = base.make_obs(self.render(s), self.prompt_len, self.obs_len)
    return obs, EnvState(scene=s, time=0)

  def step_env(self, key, state, action, params):
    true, sal = self.fact_masks(state.scene)
    m = claims_lib.exact_scores(self, action, true, sal)
    obs = base.make_obs(self.render(state.scene), self.prompt_len, self.obs_len)
    return (obs, state.replace(time=state.time + 1), m["f1"], jnp.bool_(True),
            {"precision": m["precision"], "recall": m["recall"]})

  def action_space(self, params=None):
    return spaces.Box(0, V.size - 1, (self.response_len,), jnp.int32)


def compact(tokens: jax.Array, keep: jax.Array, length: int) -> jax.Array:
  """Kept tokens moved to the front in order, <pad> after, cut or padded to `length`."""
  order = jnp.argsort(~keep, stable=True)
  out = jnp.where(keep[order], tokens[order], tokenizer.PAD)
  if out.shape[0] < length:
    out = jnp.pad(out, (0, length - out.shape[0]))
  return out[:length].astype(jnp.int32)


def make_scene_cap(**kwargs):
  """Registry-style factory: (env, env_params)."""
  env = SceneCap(**kwargs)
  return env, env.default_params
