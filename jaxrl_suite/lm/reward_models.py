r"""Rewards for SceneCap captions, each a pure function reward(scene_vec, caption) -> float32 [].

* claim-level (`claims.claim_reward_counts` / `claims.precision_reward`): the learned claim
  verifier (`Scorer` trained on `label_budget` (scene, claim, true?) labels) decides each claim
  and the learned salience extractor (`train_extractor`, `label_budget` (scene, entity, frame,
  salient action or none) labels) says which claims are salient and how many salient facts the
  scene has; the reward never reads the scene's true fact masks. The noise sweep's
  `claim_f1_noisy` is the exception by design: an exact verifier and exact salience with
  false-accept noise eps (it tests the analytic threshold, not a learned reward);
* holistic proxies:
  - `token_recall`: unigram recall of the reference caption's tokens (multiset overlap /
    reference length) + `fluency` x (fraction of well-formed claim slots, length-free);
  - the learned holistic reward model (`Scorer` regressing the exact F1 of (scene, caption)
    pairs) trained on the SAME number of labels as the verifier;
  - `qa_utility`: a frozen learned reader (a tiny DecoderLM trained once on `label_budget`
    (caption, question, true answer) labels, `train_reader`) answers "what does entity e do in
    frame f?" for every salient event from the caption alone; reward = its accuracy. Like
    CapRL's vision-free QA reward it pays for answers and never for what is wrong. `qa_rule`
    is the same with a fixed rule reader (first well-formed claim about (e, f)).

A `Scorer` is a `DecoderLM` read out at its last position: score = logit[<yes>] - logit[<no>],
trained with binary cross-entropy against a target in [0, 1] (a claim label, or an F1).
`CaptionTask` adapts SceneCap + one reward to the `lm.grpo` task interface.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from jaxrl_suite.envs.text import claims
from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.envs.text import tokenizer
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import pretrain as lm_pretrain

V = tokenizer.V2
YES, NO, QUERY = V.id("<yes>"), V.id("<no>"), V.id("<q>")


# ---- the GRPO task adaptor ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class CaptionTask:
  """SceneCap under one reward, in the `lm.grpo` task interface (problems = packed scenes)."""
  env: sc.SceneCap
  params: sc.SceneCapParams
  reward_fn: Callable[[jax.Array, jax.Array], jax.Array]   # (scene_vec, caption) -> []
  name: str = "scene_cap"

  @property
  def prompt_len(self) -> int:
    return self.env.prompt_len

  @property
  def response_len(self) -> int:
    return self.env.response_len

  def sample_train(self, key: jax.Array, n: int) -> jax.Array:
    scenes = jax.vmap(lambda k: self.env.sample_scene(k, self.params))(jax.random.split(key, n))
    return self.env.pack(scenes)

  def prompts(self, ops: jax.Array) -> jax.Array:
    return jax.vmap(lambda x: self.env.render(self.env.unpack(x)))(ops)

  def reward(self, ops: jax.Array, tokens: jax.Array) -> jax.Array:
    return jax.vmap(self.reward_fn)(ops, tokens).astype(jnp.float32)

  def pretrain_batch(self, key: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """Noisy-caption corpus: (tokens [n, P + R], loss mask on the response incl. <eos>)."""
    k1, k2 = jax.random.split(key)
    ops = self.sample_train(k1, n)
    caps = jax.vmap(lambda k, x: self.env.noisy_caption(k, self.env.unpack(x), self.params))(
        jax.random.split(k2, n), ops)
    seq = jnp.concatenate([self.prompts(ops), caps], axis=1)
    resp = jnp.arange(seq.shape[1]) >= self.prompt_len
    eos_pos = jnp.argmax(caps == tokenizer.EOS, axis=1) + self.prompt_len
    mask = resp[None] & (jnp.arange(seq.shape[1])[None] <= eos_pos[:, None])
    return seq, mask.astype(jnp.float32)


def scene_masks(env: sc.SceneCap, x: jax.Array):
  return env.fact_masks(env.unpack(x))


# ---- holistic proxies -----------------------------------------------------------------------
def token_recall(env: sc.SceneCap, x: jax.Array, caption: jax.Array,
                 fluency: float = 0.1) -> jax.Array:
  """Unigram recall of the reference caption + fluency * well-formed fraction of claim slots."""
  ref = env.reference_caption(env.unpack(x))

  def counts(toks):
    eos = toks == tokenizer.EOS
    end = jnp.where(eos.any(), jnp.argmax(eos), toks.shape[0])
    live = jnp.arange(toks.shape[0]) < end
    return jnp.zeros(V.size).at[toks].add(live.astype(jnp.float32))

  cr, cc = counts(ref), counts(caption)
  recall = jnp.minimum(cr, cc).sum() / jnp.maximum(cr.sum(), 1.0)
  p = claims.parse(env, caption)
  wf = (p["fact"] >= 0).sum() / jnp.maximum(p["present"].sum(), 1)
  return recall + fluency * wf


def qa_rule(env: sc.SceneCap, x: jax.Array, caption: jax.Array) -> jax.Array:
  """Accuracy of the frozen reader on one question per salient event (module docstring)."""
  s = env.unpack(x)
  p = claims.parse(env, caption)
  ok = p["fact"] >= 0
  e, a, f = p["fields"][:, 0], p["fields"][:, 3], p["fields"][:, 4]
  # about[k, e, f]: claim k is the reader's source for question (e, f) (first such claim)
  about = ok[:, None, None] & (e[:, None, None] == jnp.arange(env.E)[None, :, None]) & \
      (f[:, None, None] == jnp.arange(env.F)[None, None, :])
  has = about.any(0)
  first = jnp.argmax(about, axis=0)
  answer = jnp.where(has, a[first], -1)                       # [E, F]
  asked = (s.action >= 0) & s.visible & s.present[:, None]
  right = asked & (answer == s.action)
  return right.sum() / jnp.maximum(asked.sum(), 1)


# ---- learned scorers ------------------------------------------------------------------------
def v2_config(name: str, **kw) -> lm_model.LMConfig:
  """An LMConfig over tokenizer v2 (V=96); records the tokenizer version where LMConfig has
  that field."""
  fields = {f.name for f in dataclasses.fields(lm_model.LMConfig)}
  if "tokenizer_version" in fields:
    kw["tokenizer_version"] = tokenizer.V2.version
  return lm_model.LMConfig(name, vocab_size=V.size, **kw)


def scorer_config(env: sc.SceneCap, d_model: int = 32, num_layers: int = 2,
                  num_heads: int = 2) -> lm_model.LMConfig:
  """A DecoderLM long enough for (prompt, caption, <q>)."""
  return v2_config("scorer", d_model=d_model, num_layers=num_layers, num_heads=num_heads,
                   d_ff=4 * d_model, max_len=env.prompt_len + env.response_len + 1)


def score(cfg: lm_model.LMConfig, params: Any, inputs: jax.Array) -> jax.Array:
  """inputs int32 [N, T] (ending in <q>) -> score logit [N] = logit(<yes>) - logit(<no>)."""
  logits, _ = lm_model.DecoderLM(cfg).apply({"params": params}, inputs)
  return logits[:, -1, YES] - logits[:, -1, NO]


def verifier_inputs(env: sc.SceneCap, prompt: jax.Array, fields: jax.Array) -> jax.Array:
  """prompt [P], claim fields [K, 5] -> [K, P + 6]: prompt, claim tokens (no ';'), <q>."""
  toks = env.claim_tokens(*[fields[:, i] for i in range(5)])[:, :5]
  k = fields.shape[0]
  return jnp.concatenate([jnp.broadcast_to(prompt, (k,) + prompt.shape), toks,
                          jnp.full((k, 1), QUERY, jnp.int32)], axis=1)


def rm_inputs(prompt: jax.Array, caption: jax.Array) -> jax.Array:
  """[P + R + 1]: prompt, caption, <q>."""
  return jnp.concatenate([prompt, caption, jnp.array([QUERY], jnp.int32)])


def fit(cfg: lm_model.LMConfig, loss_fn: Callable, inputs: jax.Array, targets: jax.Array,
        key: jax.Array, steps: int, batch: int = 64, lr: float = 3e-3, weight_decay: float = 0.01,
        progress: bool = True, desc: str = "scorer") -> tuple[Any, Any]:
  """Fits a fresh DecoderLM of `cfg` on a fixed labelled set: loss_fn(params, x [B, T], y [B])
  on minibatches drawn with replacement from the N labelled examples. Returns (params, loss per
  step). The one training loop of the verifier, the holistic RM and the QA reader."""
  k_init, k_train = jax.random.split(key)
  params = lm_model.init_params(cfg, k_init)
  opt = lm_pretrain.make_optimizer(lr, steps, warmup=min(50, steps // 5),
                                   weight_decay=weight_decay)
  n = inputs.shape[0]

  def step(state, k):
    p, o = state
    idx = jax.random.randint(k, (batch,), 0, n)
    loss, g = jax.value_and_grad(loss_fn)(p, inputs[idx], targets[idx])
    upd, o = opt.update(g, o, p)
    return (optax.apply_updates(p, upd), o), {"loss": loss}

  (params, _), m = lm_pretrain.run_chunked(step, (params, opt.init(params)), k_train, steps,
                                           max(steps // 10, 1), desc, progress)
  return params, m["loss"]


def train_scorer(cfg: lm_model.LMConfig, inputs: jax.Array, targets: jax.Array, key: jax.Array,
                 steps: int, batch: int = 64, lr: float = 3e-3, weight_decay: float = 0.01,
                 progress: bool = True, desc: str = "scorer") -> tuple[Any, Any]:
  """A Scorer fitted with BCE(sigmoid(score), target in [0, 1]) (`fit`)."""
  def loss_fn(p, x, y):
    return optax.sigmoid_binary_cross_entropy(score(cfg, p, x), y).mean()
  return fit(cfg, loss_fn, inputs, targets, key, steps, batch, lr, weight_decay, progress, desc)


# ---- the learned QA reader (CapRL-style: answers from the caption alone) --------------------
def reader_config(env: sc.SceneCap, d_model: int = 32, num_layers: int = 2,
                  num_heads: int = 2) -> lm_model.LMConfig:
  """A DecoderLM long enough for (caption, question ENT FRAME, <q>)."""
  return v2_config("qa_reader", d_model=d_model, num_layers=num_layers, num_heads=num_heads,
                   d_ff=4 * d_model, max_len=env.response_len + 3)


def reader_inputs(env: sc.SceneCap, caption: jax.Array) -> jax.Array:
  """caption [R] -> [E*F, R + 3]: the caption, then question (e, f) as `ENT FRAME <q>`, for
  every (entity, frame) pair in entity-major order (question q = e * F + f). The reader never
  sees the scene: it answers from the caption alone."""
  e, f = jnp.meshgrid(jnp.arange(env.E), jnp.arange(env.F), indexing="ij")
  q = jnp.stack([V.letter_id(e.reshape(-1)), tokenizer.digit_id(f.reshape(-1)),
                 jnp.full((env.E * env.F,), QUERY)], 1).astype(jnp.int32)
  return jnp.concatenate([jnp.broadcast_to(caption, (q.shape[0],) + caption.shape), q], axis=1)


def reader_logits(env: sc.SceneCap, cfg: lm_model.LMConfig, params: Any,
                  inputs: jax.Array) -> jax.Array:
  """inputs int32 [N, R + 3] -> answer logits [N, A] over the action letters."""
  logits, _ = lm_model.DecoderLM(cfg).apply({"params": params}, inputs)
  return logits[:, -1, V.letter_id(sc.ACT_BASE + jnp.arange(env.A))]


def questions(env: sc.SceneCap, x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(asked bool [E*F], answer int32 [E*F]): one question per salient event (visible event of
  a present entity), entity-major like `reader_inputs`; answer = its true action."""
  s = env.unpack(x)
  asked = (s.action >= 0) & s.visible & s.present[:, None]
  return asked.reshape(-1), jnp.maximum(s.action, 0).reshape(-1)


def train_reader(env: sc.SceneCap, cfg: lm_model.LMConfig, inputs: jax.Array,
                 answers: jax.Array, key: jax.Array, steps: int, batch: int = 64,
                 lr: float = 3e-3, weight_decay: float = 0.01, progress: bool = True,
                 desc: str = "qa_reader") -> tuple[Any, Any]:
  """The QA reader fitted with softmax cross-entropy over the A actions (`fit`)."""
  def loss_fn(p, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(
        reader_logits(env, cfg, p, x), y).mean()
  return fit(cfg, loss_fn, inputs, answers, key, steps, batch, lr, weight_decay, progress, desc)


def qa_learned(env: sc.SceneCap, reader: tuple[lm_model.LMConfig, Any], x: jax.Array,
               caption: jax.Array) -> jax.Array:
  """QA utility with the frozen learned reader: fraction of the scene's salient-event
  questions whose argmax answer (from the caption alone) is the true action."""
  asked, answer = questions(env, x)
  pred = jnp.argmax(reader_logits(env, *reader, reader_inputs(env, caption)), axis=-1)
  return (asked & (pred == answer)).sum() / jnp.maximum(asked.sum(), 1)


# ---- the learned salience extractor (reads the prompt, never the fact masks) -----------------
def extractor_config(env: sc.SceneCap, d_model: int = 32, num_layers: int = 2,
                     num_heads: int = 2) -> lm_model.LMConfig:
  """A DecoderLM long enough for (prompt, ENT FRAME <q>)."""
  return v2_config("salience", d_model=d_model, num_layers=num_layers, num_heads=num_heads,
                   d_ff=4 * d_model, max_len=env.prompt_len + 3)


def extractor_inputs(env: sc.SceneCap, prompt: jax.Array) -> jax.Array:
  """prompt [P] -> [E*F, P + 3]: the prompt, then `ENT FRAME <q>` for every (entity, frame)
  pair, entity-major (question q = e * F + f)."""
  e, f = jnp.meshgrid(jnp.arange(env.E), jnp.arange(env.F), indexing="ij")
  q = jnp.stack([V.letter_id(e.reshape(-1)), tokenizer.digit_id(f.reshape(-1)),
                 jnp.full((env.E * env.F,), QUERY)], 1).astype(jnp.int32)
  return jnp.concatenate([jnp.broadcast_to(prompt, (q.shape[0],) + prompt.shape), q], axis=1)


def extractor_logits(env: sc.SceneCap, cfg: lm_model.LMConfig, params: Any,
                     inputs: jax.Array) -> jax.Array:
  """inputs int32 [N, P + 3] -> logits [N, A + 1]: the A action letters, then <no> (class A:
  no salient event of this entity in this frame)."""
  logits, _ = lm_model.DecoderLM(cfg).apply({"params": params}, inputs)
  ids = jnp.concatenate([V.letter_id(sc.ACT_BASE + jnp.arange(env.A)), jnp.array([NO])])
  return logits[:, -1, ids]


def salience_targets(env: sc.SceneCap, x: jax.Array) -> jax.Array:
  """int32 [E*F] labels of one scene, entity-major: the action of the salient event of entity e
  in frame f (a visible event of a present entity), or A when there is none."""
  s = env.unpack(x)
  salient = (s.action >= 0) & s.visible & s.present[:, None]
  return jnp.where(salient, s.action, env.A).reshape(-1).astype(jnp.int32)


def train_extractor(env: sc.SceneCap, cfg: lm_model.LMConfig, inputs: jax.Array,
                    labels: jax.Array, key: jax.Array, steps: int, batch: int = 64,
                    lr: float = 3e-3, weight_decay: float = 0.01, progress: bool = True,
                    desc: str = "salience") -> tuple[Any, Any]:
  """The salience extractor fitted with softmax cross-entropy over A + 1 classes (`fit`)."""
  def loss_fn(p, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(
        extractor_logits(env, cfg, p, x), y).mean()
  return fit(cfg, loss_fn, inputs, labels, key, steps, batch, lr, weight_decay, progress, desc)


def predicted_salience(env: sc.SceneCap, extractor: tuple[lm_model.LMConfig, Any],
                       prompt: jax.Array) -> jax.Array:
  """int32 [E, F]: the extractor's argmax class per (entity, frame); A = no salient event."""
  logits = extractor_logits(env, *extractor, extractor_inputs(env, prompt))
  return jnp.argmax(logits, axis=-1).reshape(env.E, env.F)


def learned_salience(env: sc.SceneCap, extractor: tuple[lm_model.LMConfig, Any],
                     prompt: jax.Array, parsed: dict) -> tuple[jax.Array, jax.Array]:
  """(claim_salient bool [K], num_salient []) from the extractor alone: claim k
  `e c s a f` is salient iff it is well formed and the extractor predicts action a for (e, f);
  num_salient = #(e, f) with a predicted event. Colour and shape are the verifier's to check."""
  pred = predicted_salience(env, extractor, prompt)
  e, a, f = parsed["fields"][:, 0], parsed["fields"][:, 3], parsed["fields"][:, 4]
  claim_salient = (parsed["fact"] >= 0) & (pred[e, f] == a)
  return claim_salient, (pred < env.A).sum()


def label_pool(task: CaptionTask, key: jax.Array, budget: int,
               pool_params: sc.SceneCapParams) -> dict[str, jax.Array]:
  """The labelled data of the three learned scorers, from the same scenes and captions, the
  same number of labels each (one label = one supervised example): `budget` (scene, claim,
  true?) examples for the verifier (well-formed claims of noisy captions under `pool_params`),
  `budget` (scene, caption, exact F1) examples for the holistic RM, `budget` (caption,
  question, true answer) examples for the QA reader (questions about the salient events), and
  `budget` (scene, entity, frame, salient action or none) examples for the salience extractor.
  Returns {ver_x [budget, P+6], ver_y, rm_x [budget, P+R+1], rm_y, qa_x [budget, R+3], qa_y,
  sal_x [budget, P+3], sal_y, ver_visible} (ver_visible: the claim is a visible event, i.e. checkable in the prompt; used
  only to report the evidence ceiling of a prompt-reading verifier, never as a feature)."""
  env = task.env
  pool = dataclasses.replace(task, params=pool_params)
  ops = pool.sample_train(key, budget)
  caps = jax.vmap(lambda k, x: env.noisy_caption(k, env.unpack(x), pool_params))(
      jax.random.split(jax.random.fold_in(key, 1), budget), ops)
  prompts = pool.prompts(ops)

  def per_caption(x, prompt, cap):
    true, sal = scene_masks(env, x)
    p = claims.parse(env, cap)
    lab = claims.exact_verified(p, true)
    f1 = claims.exact_scores(env, cap, true, sal)["f1"]
    asked, answer = questions(env, x)
    vx = jnp.concatenate([verifier_inputs(env, prompt, p["fields"]),
                          sal[jnp.maximum(p["fact"], 0)][:, None].astype(jnp.int32)], axis=1)
    return (vx, lab, p["fact"] >= 0, rm_inputs(prompt, cap), f1, reader_inputs(env, cap),
            answer, asked, extractor_inputs(env, prompt), salience_targets(env, x))

  vx, vy, vok, rx, ry, qx, qy, qok, sx, sy = jax.vmap(per_caption)(ops, prompts, caps)
  # The salience pool: the first `budget` (scene, entity, frame) questions (budget scenes give
  # E*F >= 1 questions each, so there are always enough).
  sx, sy = sx.reshape(-1, sx.shape[-1])[:budget], sy.reshape(-1)[:budget]

  def first(x, y, ok):   # the first `budget` examples that exist (well-formed / asked)
    order = jnp.argsort(~ok.reshape(-1), stable=True)[:budget]
    return x.reshape(-1, x.shape[-1])[order], y.reshape(-1)[order]

  vx, vy = first(vx, vy, vok)
  qx, qy = first(qx, qy, qok)
  return {"ver_x": vx[:, :-1], "ver_y": vy.astype(jnp.float32), "rm_x": rx,
          "rm_y": ry.astype(jnp.float32), "qa_x": qx, "qa_y": qy.astype(jnp.int32),
          "sal_x": sx, "sal_y": sy, "ver_visible": vx[:, -1] > 0}


# ---- reward functions (scene_vec, caption) -> [] --------------------------------------------
def make_reward(kind: str, env: sc.SceneCap, *, verifier=None, rm=None, reader=None,
                extractor=None, eps: float = 0.0,
                reject: float = 0.0, noise_seed: int = 0, fluency: float = 0.1, beta: float = 1.0):
  """The reward `kind` as a pure function of (scene_vec, caption).

  kinds: claim_f1 (learned verifier: verifier=(cfg, params), and learned salience:
  extractor=(cfg, params); reads the prompt rendered from the scene and the caption, never the
  fact masks), precision_only (learned verifier; salience unused), claim_f1_noisy (exact verifier with false-accept rate eps and false-reject rate `reject`;
  each decision is a fixed function of (scene, fact): consistently wrong on some claims),
  token_recall, holistic_rm (rm=(cfg, params)), qa_utility (the frozen learned reader:
  reader=(cfg, params)), qa_rule (the rule reader), exact_f1 (evaluation only).
  """
  def verified_learned(prompt, p):
    ok = score(verifier[0], verifier[1], verifier_inputs(env, prompt, p["fields"])) > 0
    return ok & (p["fact"] >= 0)

  def claim_learned(x, cap):
    # Only the prompt (what the captioner sees) and the caption feed the learned models.
    prompt = env.render(env.unpack(x))
    p = claims.parse(env, cap)
    claim_salient, num_salient = learned_salience(env, extractor, prompt, p)
    return claims.claim_reward_counts(p, verified_learned(prompt, p), claim_salient,
                                      num_salient, beta)

  def precision_learned(x, cap):
    p = claims.parse(env, cap)
    return claims.precision_recall_counts(
        p, verified_learned(env.render(env.unpack(x)), p), p["first"], 1)[0]

  def verified_noisy(x, p):
    true, _ = scene_masks(env, x)
    h = jnp.sum(x * (jnp.arange(x.shape[0]) * 7919 + 1))
    return claims.noisy_verified(p, true, eps, reject,
                                 jax.random.fold_in(jax.random.PRNGKey(noise_seed), h))

  def claim_based(ver, agg):
    def fn(x, cap):
      p = claims.parse(env, cap)
      _, sal = scene_masks(env, x)
      return agg(p, ver(x, p), sal)
    return fn

  f1 = lambda p, v, s: claims.claim_reward(p, v, s, beta)
  if kind == "claim_f1":
    if verifier is None or extractor is None:
      raise ValueError("reward 'claim_f1' needs verifier=(cfg, params) and "
                       "extractor=(cfg, params) (train_scorer / train_extractor)")
    return claim_learned
  if kind == "precision_only":
    if verifier is None:
      raise ValueError("reward 'precision_only' needs verifier=(cfg, params) (train_scorer)")
    return precision_learned
  if kind == "claim_f1_noisy":
    return claim_based(verified_noisy, f1)
  if kind == "token_recall":
    return lambda x, cap: token_recall(env, x, cap, fluency)
  if kind == "qa_utility":
    return lambda x, cap: qa_learned(env, reader, x, cap)
  if kind == "qa_rule":
    return lambda x, cap: qa_rule(env, x, cap)
  if kind == "holistic_rm":
    def rm_fn(x, cap):
      prompt = env.render(env.unpack(x))
      return jax.nn.sigmoid(score(rm[0], rm[1], rm_inputs(prompt, cap)[None])[0])
    return rm_fn
  if kind == "exact_f1":
    def ex(x, cap):
      true, sal = scene_masks(env, x)
      return claims.exact_scores(env, cap, true, sal)["f1"]
    return ex
  raise ValueError(f"unknown reward kind {kind!r}")


REWARD_KINDS = ("claim_f1", "precision_only", "claim_f1_noisy", "token_recall", "holistic_rm",
                "qa_utility", "qa_rule", "exact_f1")
