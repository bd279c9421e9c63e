"""An interval for FORE that says when it can be trusted: studentized on influence values, with
refusal rules (see docs/fore.md, "Intervals under heavy ratio tails").

Why the plain Wald interval fails under heavy ratio tails: Ĵ - J ≈ E_n[ψ] with the influence
value ψ_i = (z_i^T u) δ_i (u = A^{-T} ν0, δ the TD error at the fitted fixed point). When the
occupancy ratio w has a heavy tail, Var(ψ) is dominated by a few rare cells; in a sample that
under-visits them, the sandwich variance is too SMALL exactly when the estimate is off, so the
estimates with the narrowest intervals are the ones that miss. Two things help:

  1. studentize with a Student-t critical value whose degrees of freedom grow with the effective
     number of influence contributions, ν = (Σ m ψc²)² / Σ m ψc⁴ (ψc = ψ - mean; Kish's effective
     size of the squared deviations): t_{0.975, √ν} (RefusalRules.crit_df_power). When a handful
     of samples carry the variance, ν is small and the interval widens (t_{0.975, 2} = 4.3 at
     ν = 4); with ν = 1e4 it is t_{0.975, 100} = 1.98;
  2. refuse (return no interval) when an in-sample statistic shows the normal approximation has
     nothing to stand on: A numerically or statistically singular, a fitted ratio whose ESS is a
     tiny share of n, influence concentrated in a few samples (ν < df_min), or a large share of
     the fitted target mass on cells with fewer than k samples.

None of these can see target mass on cells the data never visited (module docstring of fore.py):
the rules are calibrated, not certified. Their thresholds are fixed in configs/fore.py and the
reproduction reports coverage among passing estimates on families drawn with seeds never used
while choosing them, plus the refusal rate.

Shapes: n samples (rows; count data = one row per cell with weight = count), d features.
All functions are pure, jittable and vmappable over datasets (weights).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import flax.struct
import jax
import jax.numpy as jnp

from jaxrl_suite.ope import fore as F

Array = jax.Array

# method codes (IntervalChoice.method)
REFUSED, STUDENTIZED = 0, 1
METHODS = ("refused", "studentized_t")
# reason bits (IntervalChoice.reason); 0 = every rule passed
REASONS = ("ill_conditioned", "weak_identification", "unvisited_cells", "dominant_cell",
           "low_ess", "influence_concentrated", "rare_support")


class RefusalRules(NamedTuple):
  """Thresholds of the refusal rules (hashable: a static argument under jit).

  max_cond: refuse when cond(A_n) exceeds it (numerically singular).
  min_ident_t: refuse when σ_min(A_n)/se(σ_min) is below it (statistically singular).
  min_cell_count: refuse when some cell has fewer samples (needs cell ids; 1 = every cell seen).
    Target mass on an unseen cell is invisible to every other statistic; this rule is the only
    one that looks at it, and it can only when the user can enumerate the cells.
  max_cell_excess: refuse when one cell carries more than this multiple of the uniform share
    1/num_cells of the fitted target mass |Σ_{i in c} m_i ŵ_i| (the "max ratio" rule: the
    estimate rests on one cell; 4 = a 20% share with 20 cells).
  min_ess_frac: refuse when the fitted ratio's ESS/n is below it.
  min_df: refuse when the influence values' effective count ν is below it (off by default: on
    the development pools the low-ν estimates are the ones the wide t interval below covers, so
    refusing them lowered coverage among passing estimates).
  crit_df_power: the critical value is t_{0.975, ν^p} with p = crit_df_power (0.5 by default;
    1 is the plain effective-count t). Why ν^p < ν: ν is itself computed from the visited
    samples, and a sample that under-visits a heavy cell underestimates the fourth moment, so ν
    overstates how much information the variance estimate holds. p = 0.5 was chosen on the
    development pools (seeds 12345, 777), where every MDP's worst coverage among passing
    estimates over n was >= 0.92 with p = 0.5 and 0.84 with p = 1 (docs/fore.md).
  max_rare_share: refuse when more than this share of the fitted target mass sits on cells with
    fewer than `k` samples.
  k: the "rare cell" count.
  """
  max_cond: float = 1e10
  min_ident_t: float = 2.0
  min_cell_count: float = 1.0
  max_cell_excess: float = 4.0
  min_ess_frac: float = 0.0
  min_df: float = 0.0
  max_rare_share: float = 1.0
  k: int = 10
  crit_df_power: float = 0.5


@flax.struct.dataclass
class IntervalChoice:
  """Which interval was used and why (leaves are arrays; batched under vmap).

  value: Ĵ. lo, hi: the 95% interval (nan when refused). se: sandwich standard error.
  crit: the critical value used (t_{0.975, ν^p}, p = RefusalRules.crit_df_power). df: ν, the
    effective count of influence values.
  method: REFUSED or STUDENTIZED (index into METHODS).
  reason: bitmask over REASONS (bit i set = rule i failed); 0 when the interval was given.
  ess_frac, rare_share, ident_t, cond, min_count, max_share: the statistics the rules read.
  """
  value: Array
  lo: Array
  hi: Array
  se: Array
  crit: Array
  df: Array
  method: Array
  reason: Array
  ess_frac: Array
  rare_share: Array
  ident_t: Array
  cond: Array
  min_count: Array
  max_share: Array


def t_quantile_975(df: Array) -> Array:
  """Student-t 0.975 quantile for df >= 1 (Cornish-Fisher expansion in 1/df, 4 terms).

  Error < 2e-3 for df >= 4 and < 1e-5 for df >= 30 (checked against scipy in tests); below 4 it
  is still >= 4.2 at df = 2 and >= 11 at df = 1 (true 4.30, 12.7) and decreasing in df: the
  interval is then very wide whatever the exact value, which is what it should say.
  """
  z = F.Z95
  g1 = (z ** 3 + z) / 4
  g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
  g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
  g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
  v = jnp.maximum(df, 1.0)
  return z + g1 / v + g2 / v ** 2 + g3 / v ** 3 + g4 / v ** 4


def influence_df(psi: Array, weights: Array) -> Array:
  """ν = (Σ m ψc²)² / Σ m ψc⁴, ψc = ψ - E_n[ψ]: how many samples effectively carry Var(ψ).

  Equals n for constant |ψc|; equals 1 when one sample carries all of the variance.
  """
  m = weights
  pc = psi - (m * psi).sum() / m.sum()
  s2 = (m * pc ** 2).sum()
  s4 = (m * pc ** 4).sum()
  return s2 ** 2 / jnp.maximum(s4, jnp.finfo(s2.dtype).tiny)


def cell_mass(w_hat: Array, weights: Array, cell_ids: Optional[Array] = None,
              num_cells: int = 0) -> dict:
  """Per-cell sample counts and fitted target mass |Σ_{i in c} m_i ŵ_i|.

  Returns dict(min_count: smallest cell count (0 = a cell never visited; with cell_ids=None the
  rows are the cells, so a zero-weight row counts as unvisited), num_cells, max_share: largest
  cell's share of the fitted target mass).
  """
  if cell_ids is None:
    counts, mass = weights, weights * w_hat
  else:
    counts = jax.ops.segment_sum(weights, cell_ids, num_segments=num_cells)
    mass = jax.ops.segment_sum(weights * w_hat, cell_ids, num_segments=num_cells)
  am = jnp.abs(mass)
  return dict(min_count=counts.min(), num_cells=counts.shape[0],
              max_share=am.max() / jnp.maximum(am.sum(), jnp.finfo(am.dtype).tiny))


def fore_interval(phi: Array, phi_next: Array, rewards: Array, weights: Array, nu0: Array,
                  gamma: float, rules: RefusalRules = RefusalRules(),
                  cell_ids: Optional[Array] = None, num_cells: int = 0) -> IntervalChoice:
  """FORE estimate with the studentized interval, or a refusal with its reasons.

  Args: as `fore.fore_core` (phi (n, d), phi_next (n, d), rewards (n,), weights (n,), nu0 (d,),
    gamma); rules: RefusalRules (static); cell_ids/num_cells: as `fore.support_diagnostic` (omit
    for count data with one row per cell).
  Returns: IntervalChoice. Interval: Ĵ ∓ t_{0.975, ν^p} · se, p = rules.crit_df_power.
  """
  res = F.fore_core(phi, phi_next, rewards, weights, nu0, gamma)
  dtype = res.value.dtype
  m = weights.astype(dtype)
  zu = res.alpha @ phi.astype(dtype).T / (1 - gamma)
  delta = (rewards.astype(dtype) + gamma * (phi_next.astype(dtype) @ res.theta)
           - phi.astype(dtype) @ res.theta)
  df = influence_df(zu * delta, m)
  sup = F.support_diagnostic((1 - gamma) * zu, m, cell_ids, num_cells, rules.k)
  cell = cell_mass((1 - gamma) * zu, m, cell_ids, num_cells)
  fails = jnp.stack([
      ~(jnp.isfinite(res.cond) & (res.cond <= rules.max_cond) & jnp.isfinite(res.value)),
      ~(res.ident_t >= rules.min_ident_t),
      ~(cell["min_count"] >= rules.min_cell_count),
      ~(cell["max_share"] * cell["num_cells"] <= rules.max_cell_excess),
      ~(sup["ess_frac"] >= rules.min_ess_frac),
      ~(df >= rules.min_df),
      ~(sup["rare_mass_share"] <= rules.max_rare_share)])
  reason = (fails.astype(jnp.int32) * (2 ** jnp.arange(len(REASONS), dtype=jnp.int32))).sum()
  crit = t_quantile_975(df ** rules.crit_df_power)
  ok = reason == 0
  nan = jnp.asarray(jnp.nan, dtype)
  return IntervalChoice(
      value=res.value, lo=jnp.where(ok, res.value - crit * res.se, nan),
      hi=jnp.where(ok, res.value + crit * res.se, nan), se=res.se, crit=crit, df=df,
      method=jnp.where(ok, STUDENTIZED, REFUSED).astype(jnp.int32), reason=reason,
      ess_frac=sup["ess_frac"], rare_share=sup["rare_mass_share"], ident_t=res.ident_t,
      cond=res.cond, min_count=cell["min_count"], max_share=cell["max_share"])


def explain(choice: IntervalChoice) -> str:
  """One line for a single (unbatched) IntervalChoice: the method and the failed rules."""
  code = int(choice.reason)
  failed = [name for i, name in enumerate(REASONS) if code >> i & 1]
  if not failed:
    return (f"{METHODS[int(choice.method)]}: [{float(choice.lo):.6g}, {float(choice.hi):.6g}] "
            f"(t crit {float(choice.crit):.3g}, df {float(choice.df):.3g})")
  return "refused: " + ", ".join(failed)
