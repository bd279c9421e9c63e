"""Coverage of FORE's intervals on tabular families, with exact answers (used by ope/studies/honest.py).

`shifted_pool` draws random MDPs of a family (mdps.random_mdp), keeping the ones whose population
FQE diverges when asked (the "severe" pool); `interval_coverage` draws n i.i.d. transitions per
data seed (multinomial cell counts, the exact law), runs `interval.fore_interval` vmapped over
seeds, and tabulates, per n, the coverage among estimates that pass the refusal rules, the
refusal rate and which rules refused. Pure numpy around jitted JAX kernels; float64 needs
`jax_enable_x64`.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.ope import interval as I
from jaxrl_suite.ope import mdps as M


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
  """Wilson score 95% interval for a binomial share k/n ((nan, nan) when n = 0)."""
  if n == 0:
    return (math.nan, math.nan)
  p = k / n
  den = 1 + z * z / n
  mid = (p + z * z / (2 * n)) / den
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
  return (max(0.0, mid - half), min(1.0, mid + half))


def shifted_pool(rng: np.random.Generator, family: str, num: int, diverging: bool = True,
                 max_tries: int = 5000) -> list:
  """`num` (problem, exact) pairs of `family`; with `diverging`, only MDPs whose population FQE
  spectral radius exceeds 1 (the design's severe-shift pool). Raises if too few are found."""
  pool, tries = [], 0
  while len(pool) < num and tries < max_tries:
    p = M.random_mdp(rng, family)
    ex = M.problem_exact(p)
    tries += 1
    if diverging:
      _, rho = M.population_fqe(p.phi, p.dmu, ex, p.gamma, iters=(1,))
      if not rho > 1:
        continue
    pool.append((p, ex))
  if len(pool) < num:
    raise RuntimeError(f"shifted_pool: found {len(pool)}/{num} {family} MDPs in {max_tries} tries")
  return pool


@functools.partial(jax.jit, static_argnames=("rules", "num_sa", "num_s"))
def _intervals(phi, phn, r, w, nu0, gamma, rules, num_sa, num_s):
  # rows are (s, a, s') cells; the rules' cells are (s, a)
  cell = jnp.arange(num_sa * num_s) // num_s
  return jax.vmap(lambda ww: I.fore_interval(phi, phn, r, ww, nu0, gamma, rules, cell, num_sa))(w)


def _one_n(pool, rng, n, seeds, rules):
  """Per MDP: (hit of the t interval, pass, reason codes, Wald hit) over `seeds` draws."""
  out = []
  for p, ex in pool:
    phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p))
    counts = rng.multinomial(int(n), M.cell_probs(p), size=seeds).astype(np.float64)
    c = _intervals(phi, phn, r, jnp.asarray(counts), nu0, p.gamma, rules,
                   p.num_states * p.num_actions, p.num_states)
    v, se, crit = np.asarray(c.value), np.asarray(c.se), np.asarray(c.crit)
    err = np.abs(v - ex["J"])
    reason = np.asarray(c.reason)
    out.append((err <= crit * se, reason == 0, reason, err <= 1.959963984540054 * se))
  return out


def interval_coverage(pool: list, rng: np.random.Generator, ns, seeds: int,
                      rules: I.RefusalRules, min_pass: int = 10) -> dict:
  """Coverage among passing estimates by n, refusal rates and per-MDP values.

  Returns dict(rows=[per n: n, passed, total, refused_frac, coverage_pass (pooled over MDPs and
  seeds, None when nothing passed), coverage_pass_ci (Wilson), wald_coverage_pass (1.96 se on
  the same passing estimates), refused_by {rule: share of all estimates}, coverage_pass_per_mdp
  (None where an MDP has fewer than `min_pass` passing estimates)],
  min_coverage_per_mdp: per MDP, the lowest passing coverage over the n where it has at least
  `min_pass` passing estimates (None when there is no such n) -- the "at every n" statistic).
  """
  rows, per_n = [], []
  for n in ns:
    res = _one_n(pool, rng, n, seeds, rules)
    hit = np.concatenate([h for h, _, _, _ in res])
    ok = np.concatenate([o for _, o, _, _ in res])
    reason = np.concatenate([c for _, _, c, _ in res])
    wald = np.concatenate([w for _, _, _, w in res])
    k, m = int(hit[ok].sum()), int(ok.sum())
    mdp = [float(h[o].mean()) if o.sum() >= min_pass else None for h, o, _, _ in res]
    per_n.append(mdp)
    rows.append(dict(
        n=int(n), passed=m, total=int(ok.size), refused_frac=float(1 - ok.mean()),
        coverage_pass=k / m if m else None, coverage_pass_ci=wilson(k, m),
        wald_coverage_pass=float(wald[ok].mean()) if m else None,
        refused_by={name: float((reason >> i & 1).mean()) for i, name in enumerate(I.REASONS)},
        coverage_pass_per_mdp=mdp))
  mins = []
  for j in range(len(pool)):
    vals = [col[j] for col in per_n if col[j] is not None]
    mins.append(min(vals) if vals else None)
  return dict(rows=rows, min_coverage_per_mdp=mins, rules=rules._asdict(), mdps=len(pool),
              seeds=int(seeds), min_pass=int(min_pass))
