r"""The SceneCap claim grammar, claim parsing and claim-level rewards (pure, jittable, per caption).

A caption is `response_len = 6K + 1` tokens: claims `ENT COLOR SHAPE ACT FRAME ;`, then <eos>
(`jaxrl_suite.envs.text.scene_cap` renders scenes and captions in this grammar, and scores its
episodes with `exact_scores`). Letters are assigned by slot so every field has its own range:
entities from letter 0, colours from `COLOR_BASE`, shapes from `SHAPE_BASE`, actions from
`ACT_BASE`. `parse` cuts a caption at the first <eos> and reshapes it to [K, CLAIM_WIDTH = 6]:

  present[k]  slot k starts before the first <eos> (it is a claim, well formed or not)
  fact[k]     the fact index of claim k, or -1 if it is malformed (a field out of its letter
              range, a missing `;`, or cut by <eos>)
  first[k]    claim k is the first occurrence of its fact (duplicates are not first)

Claim reward with a verifier's decisions `verified[k]` (bool; only meaningful where fact >= 0):

  n   = #present claims                              (duplicates and malformed count here)
  TP  = #{k : first[k], fact[k] >= 0, verified[k]}   (distinct verified claims)
  TPs = #{k : first[k], fact[k] >= 0, verified[k], salient[fact[k]]}
  P   = TP / max(1, n),   R = TPs / max(1, #salient)
  F_beta = (1 + beta^2) P R / (beta^2 P + R)   (0 when P = R = 0)

With the exact verifier (`verified = true[fact]`) this is the exact scene-graph precision, recall
and F1 (`exact_scores`), the evaluation metric that is never used as a training reward.

The omission control `precision_reward` is P alone. The verifier-noise prediction: a verifier
that accepts a false claim with probability eps gives a caption with k accepted of n claims the
expected precision (k + eps) / (n + 1) after one more unverifiable claim, which exceeds k / n
exactly when eps > k / n (`unverifiable_claim_gain`). For a verifier that also rejects a true
claim with probability r, a caption of true precision P has E[k/n] = P(1-r) + (1-P) eps, so the
unverifiable claim pays iff eps > 1 - r, whatever P (the verifier's true-accept rate is the
threshold).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_suite.envs.text import tokenizer

V = tokenizer.V2
# The grammar lives here, below the environment that renders it, so that the parser never
# imports scene_cap (scene_cap imports this module to score its episodes).
COLOR_BASE, SHAPE_BASE, ACT_BASE = 4, 8, 12   # letter offsets of the field ranges (A.. entities)
CLAIM_WIDTH = 6                               # ENT COLOR SHAPE ACT FRAME ;


def parse(env, caption: jax.Array) -> dict[str, jax.Array]:
  """caption int32 [response_len] -> {fields int32 [K, 5], fact, present, first}; `env` is a
  SceneCap (its sizes K, E, C, S, A, F and `fact_index`)."""
  K, W = env.K, CLAIM_WIDTH
  eos = caption == tokenizer.EOS
  end = jnp.where(eos.any(), jnp.argmax(eos), caption.shape[0])
  slots = caption[:K * W].reshape(K, W)
  pos = jnp.arange(K * W).reshape(K, W)
  present = pos[:, 0] < end
  whole = pos[:, -1] < end
  lo = jnp.array([0, COLOR_BASE, SHAPE_BASE, ACT_BASE])
  n = jnp.array([env.E, env.C, env.S, env.A])
  letters = slots[:, :4] - V.letter_id(0) - lo
  frame = slots[:, 4] - tokenizer.DIGIT0
  ok = (whole & jnp.all((letters >= 0) & (letters < n), axis=1)
        & (frame >= 0) & (frame < env.F) & (slots[:, 5] == tokenizer.SEMI))
  fields = jnp.concatenate([letters, frame[:, None]], axis=1)
  fields = jnp.where(ok[:, None], fields, 0)
  fact = jnp.where(ok & present, env.fact_index(*[fields[:, i] for i in range(5)]), -1)
  same = (fact[:, None] == fact[None, :]) & (fact[None, :] >= 0)
  earlier = jnp.tril(same, k=-1).any(axis=1)
  return {"fields": fields.astype(jnp.int32), "fact": fact.astype(jnp.int32),
          "present": present, "first": (fact >= 0) & ~earlier}


def precision_recall(parsed: dict, verified: jax.Array,
                     salient: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(P, R) of one parsed caption given verified bool [K] and salient bool [num_facts]."""
  claim_salient = salient[jnp.maximum(parsed["fact"], 0)]
  return precision_recall_counts(parsed, verified, claim_salient, salient.sum())


def precision_recall_counts(parsed: dict, verified: jax.Array, claim_salient: jax.Array,
                            num_salient: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(P, R) from per-claim decisions only: verified bool [K], claim_salient bool [K] (claim k
  states a salient fact) and num_salient [] (how many salient facts the scene has).

    P = #{first & verified} / max(1, #present),
    R = #{first & verified & claim_salient} / max(1, num_salient).

  The learned claim reward calls this with a learned verifier's and a learned salience
  extractor's outputs, so it never touches the scene's true fact masks."""
  good = parsed["first"] & verified
  n = parsed["present"].sum()
  tp = good.sum()
  tps = (good & claim_salient).sum()
  p = tp / jnp.maximum(n, 1)
  r = tps / jnp.maximum(num_salient, 1)
  return p.astype(jnp.float32), r.astype(jnp.float32)


def f_beta(p: jax.Array, r: jax.Array, beta: float = 1.0) -> jax.Array:
  b2 = beta * beta
  den = b2 * p + r
  return jnp.where(den > 0, (1 + b2) * p * r / jnp.where(den > 0, den, 1.0), 0.0)


def claim_reward(parsed: dict, verified: jax.Array, salient: jax.Array,
                 beta: float = 1.0) -> jax.Array:
  """F_beta of verified precision and salient recall (module docstring). Scalar float32."""
  p, r = precision_recall(parsed, verified, salient)
  return f_beta(p, r, beta)


def claim_reward_counts(parsed: dict, verified: jax.Array, claim_salient: jax.Array,
                        num_salient: jax.Array, beta: float = 1.0) -> jax.Array:
  """F_beta of `precision_recall_counts` (per-claim salience and a salient count, e.g. both
  predicted by a learned extractor). Scalar float32."""
  return f_beta(*precision_recall_counts(parsed, verified, claim_salient, num_salient), beta)


def precision_reward(parsed: dict, verified: jax.Array, salient: jax.Array) -> jax.Array:
  """Verified precision alone (the omission hack's control). Scalar float32."""
  return precision_recall(parsed, verified, salient)[0]


def exact_verified(parsed: dict, true: jax.Array) -> jax.Array:
  """The exact verifier: claim k is accepted iff it is well formed and its fact is true."""
  return (parsed["fact"] >= 0) & true[jnp.maximum(parsed["fact"], 0)]


def noisy_verified(parsed: dict, true: jax.Array, eps: jax.Array, reject: jax.Array,
                   key: jax.Array) -> jax.Array:
  """A noisy verifier: a well-formed false claim is accepted with probability eps (false
  accept), a true one rejected with probability `reject` (false reject); malformed claims never
  pass. The draw of claim k is u_k = U(fold_in(key, fact_k)), so with a per-scene key the
  verifier is consistently right or wrong about each (scene, fact), duplicates included."""
  fact = jnp.maximum(parsed["fact"], 0)
  u = jax.vmap(lambda f: jax.random.uniform(jax.random.fold_in(key, f)))(fact)
  ok = jnp.where(true[fact], u >= reject, u < eps)
  return (parsed["fact"] >= 0) & ok


def exact_scores(env, caption: jax.Array, true: jax.Array,
                 salient: jax.Array) -> dict[str, jax.Array]:
  """The exact scene-graph evaluator of one caption: precision, recall, F1, claim count,
  duplicates, malformed claims and caption length (tokens before <eos>)."""
  parsed = parse(env, caption)
  p, r = precision_recall(parsed, exact_verified(parsed, true), salient)
  eos = caption == tokenizer.EOS
  length = jnp.where(eos.any(), jnp.argmax(eos), caption.shape[0])
  n = parsed["present"].sum()
  return {"precision": p, "recall": r, "f1": f_beta(p, r),
          "claims": n.astype(jnp.float32),
          "duplicates": ((parsed["fact"] >= 0) & ~parsed["first"]).sum().astype(jnp.float32),
          "malformed": (parsed["present"] & (parsed["fact"] < 0)).sum().astype(jnp.float32),
          "length": length.astype(jnp.float32)}


def unverifiable_claim_gain(k, n, eps):
  """Expected change of verified precision when one unverifiable (false) claim is added to a
  caption with k accepted claims out of n: (k + eps)/(n + 1) - k/n = (eps - k/n)/(n + 1) > 0
  iff eps > k/n. Works on numbers and arrays; n >= 1."""
  return (k + eps) / (n + 1) - k / n
