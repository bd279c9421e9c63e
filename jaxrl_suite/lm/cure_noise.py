"""The verifier-noise prediction of the CuRe study: does one unverifiable claim pay?

With an exact verifier that accepts a false claim with probability eps and rejects a true one
with probability r, appending one false claim to a caption with t true and f false claims (n in
all) moves its expected verified precision from E[k]/n to (E[k] + eps)/(n + 1), E[k] = t (1-r) +
f eps: up iff eps > E[k]/n, i.e. (for true claims) iff eps > 1 - r.

  noise_check(config, env, params, cap_cfg, start) -> {"rows": [...], "reject": r,
      "threshold": 1 - r}

rows, one per eps of config.noise_eps_grid: {"eps", "measured" (mean over captions of the
sampled change, config.noise_draws verifier draws each), "measured_ci" [lo, hi] (95% over
captions), "analytic", "captions" (how many had a free slot), "verified_precision" (E[k]/n
before)}, on the base captioner's (`start`) captions of config.eval_scenes scenes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import stats
from jaxrl_suite.envs.text import claims
from jaxrl_suite.lm import reward_models as rmod
from jaxrl_suite.lm import sampling


def append_false_claim(env, x, cap, key):
  """(caption [response_len] with one false claim -- a random well-formed fact absent from
  scene x -- in its first free slot (the last slot is overwritten when the caption is full),
  the scene's true-fact mask)."""
  scn = env.unpack(x)
  true, _ = env.fact_masks(scn)
  p = claims.parse(env, cap)
  n = p["present"].sum()
  f = jax.random.categorical(key, jnp.where(true, -1e9, 0.0))
  fields = []
  for size in (env.F, env.A, env.S, env.C, env.E):   # the fact index, mixed radix
    fields.append(f % size)
    f = f // size
  fr, a, sh, co, e = fields
  claim = env.claim_tokens(e, co, sh, a, fr)
  slot = jnp.minimum(n, env.K - 1)
  keep = jnp.arange(env.K) < slot
  cl = cap[:env.K * 6].reshape(env.K, 6)
  cl = jnp.where(keep[:, None], cl, 0).at[slot].set(claim)
  return env.caption_from_claims(cl, jnp.arange(env.K) <= slot), true


def precision_change(env, x, cap, key, eps, reject, draws: int):
  """One caption: (measured mean change of verified precision over `draws` noisy-verifier draws
  when a false claim is appended, the analytic change, valid?, verified precision E[k]/n before).
  valid: the caption had at least one claim and a free slot (exactly n -> n + 1 claims)."""
  true, sal = env.fact_masks(env.unpack(x))
  cap2, _ = append_false_claim(env, x, cap, key)
  p1, p2 = claims.parse(env, cap), claims.parse(env, cap2)
  n1 = p1["present"].sum()
  n2 = p2["present"].sum()

  def draw(k):
    v1 = claims.noisy_verified(p1, true, eps, reject, k)
    v2 = claims.noisy_verified(p2, true, eps, reject, k)
    return (claims.precision_recall(p2, v2, sal)[0] - claims.precision_recall(p1, v1, sal)[0])

  measured = jax.vmap(draw)(jax.random.split(jax.random.fold_in(key, 1), draws)).mean()
  good = p1["first"]
  t = (good & true[jnp.maximum(p1["fact"], 0)]).sum()
  f = (good & ~true[jnp.maximum(p1["fact"], 0)]).sum()
  ek = t * (1 - reject) + f * eps
  analytic = (ek + eps) / (n1 + 1) - ek / jnp.maximum(n1, 1)
  valid = (n1 >= 1) & (n2 == n1 + 1)
  return measured, analytic, valid, ek / jnp.maximum(n1, 1)


def noise_check(config, env, params, cap_cfg, start) -> dict:
  """Analytic vs measured change of expected verified precision when one unverifiable (false)
  claim is appended to the base captioner's captions, over config.noise_eps_grid.

  Measured: the implementation itself (`claims.noisy_verified` + `claims.precision_recall` on
  the token caption with the claim appended). Analytic: mean over captions of
  (E[k] + eps)/(n + 1) - E[k]/n -- no sampling of the verifier."""
  task = rmod.CaptionTask(env, params, rmod.make_reward("exact_f1", env))
  ops = task.sample_train(jax.random.PRNGKey(20_000 + config.seed), config.eval_scenes)
  prompts = task.prompts(ops)
  s = sampling.sample(sampling.lm_stepper(cap_cfg, start), prompts, jax.random.PRNGKey(7),
                      env.response_len)
  r, draws = config.noise_reject, config.noise_draws

  def per(x, cap, key, eps):
    return precision_change(env, x, cap, key, eps, r, draws)

  rows = []
  for eps in config.noise_eps_grid:
    m, a, ok, pv = jax.vmap(per, in_axes=(0, 0, 0, None))(
        ops, s.tokens, jax.random.split(jax.random.PRNGKey(3), ops.shape[0]), float(eps))
    ok = np.asarray(ok)
    m, a, pv = np.asarray(m)[ok], np.asarray(a)[ok], np.asarray(pv)[ok]
    mm, lo, hi = stats.mean_ci(m)
    rows.append({"eps": float(eps), "measured": mm, "measured_ci": [lo, hi],
                 "analytic": float(a.mean()), "captions": int(ok.sum()),
                 "verified_precision": float(pv.mean())})
  return {"rows": rows, "reject": r, "threshold": 1.0 - r}
