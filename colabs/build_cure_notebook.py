r"""Builds colabs/cure.ipynb (python colabs/build_cure_notebook.py): SceneCap, claim rewards and
why holistic proxies get hacked, in seconds on a CPU (no training; the GRPO study's curves are
loaded from results/cure.json when it exists)."""

from __future__ import annotations

import os
import sys

import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_notebooks as bn  # noqa: E402  (shared cells and the notebook builder)
from build_notebooks import _code, _md  # noqa: E402


def cure() -> nbformat.NotebookNode:
  cells = [
      _md(r"""
# Claim-level verified rewards vs holistic rewards (SceneCap)

A synthetic "video" (a scene graph over 4 frames) is rendered as tokens; a captioner writes
claims in the fixed grammar `ENT COLOR SHAPE ACT FRAME ;`, so every caption decomposes into
atomic claims exactly and its true precision / recall / F1 are known. This notebook shows the
environment, the rewards, and why the holistic proxies are hackable while the claim-level F1 is
not (unless the verifier is too noisy). The full GRPO study is `python -m experiments.cure`.
"""),
      _code(r"""
import json
import jax, jax.numpy as jnp, numpy as np
import matplotlib.pyplot as plt
from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.lm import claims, reward_models as rmod, tokenizer
V = tokenizer.V2
env, params = sc.make_scene_cap()
scene = env.sample_scene(jax.random.PRNGKey(4), params)
print("prompt   ", V.decode(env.render(scene), strip_pad=True))
ref = env.reference_caption(scene)
print("reference", V.decode(ref, strip_pad=True))
"""),
      _md(r"""
## Hacking a caption by enumeration

Fill the free claim slots with plausible events that did not happen. Token recall and the QA
utility (here with the rule reader `qa_rule`, a perfect reader; the study's `qa_utility` is a
frozen learned reader) never go down (they pay for coverage and answers); the exact F1 and the
claim-level F1 (exact verifier here) go down with every false claim.
"""),
      _code(r"""
true, sal = env.fact_masks(scene)
x = env.pack(scene)
n = int(claims.exact_scores(env, ref, true, sal)["claims"])
rows, cap = [], ref
cl = ref[:env.K * 6].reshape(env.K, 6)
rng = np.random.default_rng(0)
for extra in range(env.K - n + 1):
  if extra:
    e = int(rng.integers(0, int(scene.present.sum())))
    cl = cl.at[n + extra - 1].set(env.claim_tokens(jnp.int32(e), scene.color[e], scene.shape[e],
                                                   jnp.int32(rng.integers(0, env.A)),
                                                   jnp.int32(rng.integers(0, env.F))))
    cap = env.caption_from_claims(cl, jnp.arange(env.K) < n + extra)
  ex = claims.exact_scores(env, cap, true, sal)
  rows.append((extra, float(rmod.token_recall(env, x, cap)), float(rmod.qa_rule(env, x, cap)),
               float(ex["f1"])))
  print(f"+{extra} claims  token-recall {rows[-1][1]:.3f}  QA {rows[-1][2]:.3f}  "
        f"exact F1 {rows[-1][3]:.3f}   {V.decode(cap, strip_pad=True)}")
r = np.array(rows)
plt.figure(figsize=(5, 3))
for j, name in ((1, "token recall"), (2, "QA (rule reader)"), (3, "exact F1")):
  plt.plot(r[:, 0], r[:, j], marker="o", label=name)
plt.xlabel("appended claims (may be false)"); plt.legend(); plt.show()
"""),
      _md(r"""
## The verifier-noise threshold

With false-accept rate eps, one unverifiable claim moves expected precision from k/n to
(k + eps)/(n + 1): it pays exactly when eps > k/n. With a false-reject rate r, E[k/n] =
P(1-r) + (1-P) eps, so the threshold is eps > 1 - r for any true precision P.
"""),
      _code(r"""
eps = np.linspace(0, 1, 21)
for k, n in ((3, 4), (2, 4), (1, 4)):
  plt.plot(eps, claims.unverifiable_claim_gain(k, n, eps), label=f"k/n = {k}/{n}")
plt.axhline(0, color="grey", lw=0.5); plt.xlabel("false-accept rate eps")
plt.ylabel("E[change of precision]"); plt.legend(); plt.show()
"""),
      _md(r"""
## The GRPO study (from `results/cure.json`, if it has been run)

True F1 under each training reward vs GRPO step and vs sqrt(KL) to the start (mean over
seeds), then the verdicts of the committed full run.
"""),
      _code(r"""
from jaxrl_suite.core import results as R
path = os.path.join(R.REPO_ROOT, "results", "cure.json")
if os.path.exists(path):
  rec = json.load(open(path))
  fig, ax = plt.subplots(1, 2, figsize=(11, 3.5))
  for name, run in rec["runs"].items():
    f1 = np.mean(run["curves"]["f1"], 0)
    ax[0].plot(rec["steps"], f1, marker=".", label=name)
    ax[1].plot(np.mean(run["curves"]["sqrt_kl"], 0), f1, marker=".", label=name)
  ax[0].set_xlabel("GRPO step"); ax[1].set_xlabel("sqrt KL to the start")
  ax[0].set_ylabel("true F1"); ax[0].legend(fontsize=7); plt.show()
"""),
      bn.verdicts_cell("cure"),
  ]
  return bn.notebook(cells)


if __name__ == "__main__":
  bn.write(cure(), "cure.ipynb")
