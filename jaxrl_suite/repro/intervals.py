"""Confidence intervals that cover at the sample sizes reproductions use (2-10 seeds).

Every public function returns an `Interval` that names its method and says why it applies. The
vectorised kernels (`t_bounds`, `fieller_bounds`, `crossed_bounds`) take batches of draws over
their leading axes so the calibration tests can simulate thousands of experiments at once.

Which interval (the measured coverage of the nominal 95% interval is in docs/reproduction.md):

  unit = seed, one number per seed   -> `t_mean` / `paired_difference` / `log_ratio` / `fieller`
  unit = seed x episode              -> `per_seed_means` first, then as above
  unit = seed x window (crossed)     -> `crossed` (variance components, Satterthwaite df);
                                        `crossed_fieller` for a ratio of means (cells may be 0);
                                        `two_way_bootstrap` only with >= 16 seeds and windows
  many independent units (>= 30)     -> `bca` (scipy.stats.bootstrap, BCa, paired)

A percentile bootstrap over 2-5 seeds is not offered: it covers 0.79 at n = 4 (its spread is the
plug-in SD, which is biased low by sqrt((n-1)/n), and it has no t tail).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy import stats as _st

SCALES = ("difference", "log_ratio", "ratio")
# Below these sizes the two-way percentile bootstrap under-covers (calibration, 95% nominal:
# 0.84-0.90 at 4 x 8, 0.90-0.92 at 8 x 8, 0.91-0.94 at 10 x 10, 0.93-0.95 at 16 x 16).
TWO_WAY_MIN_SEEDS = 16
TWO_WAY_MIN_WINDOWS = 16
# Below this many units BCa under-covers (normal units: 0.91 at n = 10, 0.92 at 20, 0.94 at 30).
BCA_MIN_UNITS = 30


@dataclasses.dataclass(frozen=True)
class Interval:
  """A confidence interval of an effect and how it was obtained.

  estimate, lo, hi: on `scale` ("difference": a mean of per-unit values or differences;
    "log_ratio": a mean of per-unit log-ratios; "ratio": a ratio of means).
  method: the function that made it; why: the sentence saying why this method applies.
  n_units: independent replicates (seeds for a crossed design); df: degrees of freedom of the t
    quantile (None for bootstraps); sd: the per-unit SD on the additive scale (log scale for
    ratios) that a sample-size estimate scales, sd / sqrt(n_units) ~ the standard error.
  extra: method-specific numbers (geometric-mean ratio, variance components, ...).
  """
  estimate: float
  lo: float
  hi: float
  method: str
  n_units: int
  scale: str = "difference"
  df: float | None = None
  sd: float | None = None
  confidence: float = 0.95
  why: str = ""
  extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if self.scale not in SCALES:
      raise ValueError(f"Interval.scale {self.scale!r} is not one of {SCALES}")

  @property
  def half_width(self) -> float:
    return 0.5 * (self.hi - self.lo)

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    return {k: _json_float(v) for k, v in d.items()}

  @classmethod
  def from_dict(cls, d: Mapping[str, Any]) -> "Interval":
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
      raise ValueError(f"Interval record has unknown fields {unknown}; known: {sorted(names)}")
    return cls(**{k: _from_json_float(v) for k, v in d.items()})


def _json_float(v):
  """JSON has no inf/nan: they are stored as the strings "inf", "-inf", "nan"."""
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)
  if isinstance(v, dict):
    return {k: _json_float(x) for k, x in v.items()}
  return v


def _from_json_float(v):
  if v in ("inf", "-inf", "nan"):
    return float(v)
  if isinstance(v, dict):
    return {k: _from_json_float(x) for k, x in v.items()}
  return v


def _q(confidence: float, df):
  """Two-sided Student-t quantile t_{1 - alpha/2, df}."""
  return _st.t.ppf(0.5 + confidence / 2, df)


# ----------------------------------------------------------------------------------------------
# Per-episode samples


def per_seed_means(samples) -> np.ndarray:
  """[S] means of per-episode samples, one row per seed (rows may differ in length).

  Episodes within a seed share the seed's policy and are not independent replicates of a claim
  about training: the seed is the unit, so the interval is taken over these S means.
  """
  if isinstance(samples, np.ndarray) and samples.ndim == 2:
    rows = list(samples)
  else:
    rows = [np.asarray(r, np.float64).ravel() for r in samples]
  if not rows or any(r.size == 0 for r in rows):
    raise ValueError("per_seed_means: every seed needs at least one episode (got an empty row)")
  return np.array([float(np.mean(r)) for r in rows])


def _units(x, name: str) -> np.ndarray:
  x = np.asarray(x, np.float64)
  if x.ndim != 1:
    raise ValueError(f"{name}: expected one value per unit (1-D), got shape {x.shape}; average "
                     "episodes per seed first (per_seed_means) or use crossed() for seeds x "
                     "windows")
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name}: non-finite per-unit values {x.tolist()}")
  return x


def _unbounded(estimate: float, method: str, n: int, scale: str, confidence: float, why: str,
               **extra) -> Interval:
  return Interval(float(estimate), -math.inf, math.inf, method, n, scale, 0.0, None, confidence,
                  why, extra)


# ----------------------------------------------------------------------------------------------
# Student-t


def t_bounds(x: np.ndarray, confidence: float = 0.95):
  """Vectorised Student-t interval of the mean over the last axis.

  mean +- t_{1-a/2, n-1} * s / sqrt(n), s the sample SD (ddof 1). Returns
  (mean, lo, hi, df, s), each of the batch shape x.shape[:-1].
  """
  x = np.asarray(x, np.float64)
  n = x.shape[-1]
  m = x.mean(-1)
  s = x.std(-1, ddof=1)
  half = _q(confidence, n - 1) * s / np.sqrt(n)
  return m, m - half, m + half, n - 1, s


def t_mean(x, confidence: float = 0.95, scale: str = "difference",
           why: str = "few independent units: Student-t on the per-unit values") -> Interval:
  """Student-t CI of the mean of per-unit values x [n] (e.g. per-seed paired differences)."""
  x = _units(x, "t_mean")
  n = x.size
  if n < 2:
    return _unbounded(x.mean() if n else math.nan, "t_mean", n, scale, confidence,
                      "one unit: no spread to estimate; use more seeds")
  m, lo, hi, df, s = t_bounds(x, confidence)
  return Interval(float(m), float(lo), float(hi), "t_mean", n, scale, float(df), float(s),
                  confidence, why)


def paired_difference(a, b, confidence: float = 0.95) -> Interval:
  """t CI of mean(a - b) over paired units (same seed for a and b): d_i = a_i - b_i."""
  a, b = _units(a, "paired_difference a"), _units(b, "paired_difference b")
  _same_units(a, b, "paired_difference")
  iv = t_mean(a - b, confidence, "difference",
              "paired units: Student-t on the per-unit differences a_i - b_i")
  return dataclasses.replace(iv, method="paired_difference")


def log_ratio(a, b, confidence: float = 0.95) -> Interval:
  """t CI of the mean per-unit log-ratio r_i = log(a_i / b_i) (a, b > 0, paired units).

  exp(mean r) is the geometric-mean ratio (reported in `extra` with its CI exp(lo), exp(hi)):
  a ratio that varies by seed is averaged on the log scale, where it is roughly normal.
  """
  a, b = _units(a, "log_ratio a"), _units(b, "log_ratio b")
  _same_units(a, b, "log_ratio")
  if np.any(a <= 0) or np.any(b <= 0):
    raise ValueError("log_ratio: needs positive per-unit values a and b (got "
                     f"min a = {a.min():.4g}, min b = {b.min():.4g}); use paired_difference")
  iv = t_mean(np.log(a / b), confidence, "log_ratio",
              "ratio per unit: Student-t on per-unit log-ratios (geometric-mean ratio)")
  return dataclasses.replace(iv, method="log_ratio", extra=_ratio_extra(iv))


def _ratio_extra(iv: Interval) -> dict[str, float]:
  return {"ratio": math.exp(iv.estimate), "ratio_lo": _exp(iv.lo), "ratio_hi": _exp(iv.hi)}


def _exp(v: float) -> float:
  return math.inf if v == math.inf else (0.0 if v == -math.inf else math.exp(v))


def _same_units(a: np.ndarray, b: np.ndarray, name: str):
  if a.shape != b.shape:
    raise ValueError(f"{name}: a and b must be paired per unit (same shape), got {a.shape} and "
                     f"{b.shape}")


# ----------------------------------------------------------------------------------------------
# Fieller


def fieller_bounds(a: np.ndarray, b: np.ndarray, confidence: float = 0.95, paired: bool = True):
  """Vectorised Fieller interval of rho = mean(a) / mean(b) over the last axis.

  The set {rho : (abar - rho bbar)^2 <= q^2 (v_aa - 2 rho v_ab + rho^2 v_bb)}, v the variances
  and covariance of the two means (v_ab = 0 unpaired), q the t quantile (df n - 1 paired; Welch
  df of the linearised a - rho b unpaired). It is the quadratic
    A rho^2 - 2 B rho + C <= 0,  A = bbar^2 - q^2 v_bb,  B = abar bbar - q^2 v_ab,
    C = abar^2 - q^2 v_aa,
  a bounded interval iff A > 0, i.e. bbar is significantly nonzero (g = q^2 v_bb / bbar^2 < 1);
  otherwise the set is unbounded and (-inf, inf) is returned.
  Returns (rho, lo, hi, df, sd_log): sd_log the delta-method per-unit SD of log rho.
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  na, nb = a.shape[-1], b.shape[-1]
  ma, mb = a.mean(-1), b.mean(-1)
  rho = ma / mb
  vaa, vbb = a.var(-1, ddof=1) / na, b.var(-1, ddof=1) / nb
  if paired:
    vab = ((a - ma[..., None]) * (b - mb[..., None])).sum(-1) / (na - 1) / na
    df = np.full(np.shape(rho), na - 1.0)
  else:
    vab = np.zeros_like(rho)
    df = (vaa + rho ** 2 * vbb) ** 2 / (vaa ** 2 / (na - 1) + rho ** 4 * vbb ** 2 / (nb - 1))
  q2 = _q(confidence, df) ** 2
  qa, qb, qc = mb ** 2 - q2 * vbb, ma * mb - q2 * vab, ma ** 2 - q2 * vaa
  disc = np.maximum(qb ** 2 - qa * qc, 0.0)
  bounded = qa > 0
  with np.errstate(divide="ignore", invalid="ignore"):
    lo = np.where(bounded, (qb - np.sqrt(disc)) / qa, -np.inf)
    hi = np.where(bounded, (qb + np.sqrt(disc)) / qa, np.inf)
    lin = np.maximum(vaa - 2 * rho * vab + rho ** 2 * vbb, 0.0)
    sd_log = np.sqrt(lin * min(na, nb)) / np.abs(ma)
  return rho, lo, hi, df, sd_log


def fieller(a, b, confidence: float = 0.95, paired: bool = True) -> Interval:
  """Fieller's CI of the ratio of means mean(a) / mean(b) (see `fieller_bounds`).

  Use it when the claim is about a ratio of averages (total goodput / total goodput) rather than
  an average of per-unit ratios (`log_ratio`). Unbounded when the denominator's mean is not
  significantly nonzero: a verdict on that ratio is then inconclusive, as it should be.
  """
  a, b = _units(a, "fieller a"), _units(b, "fieller b")
  if paired:
    _same_units(a, b, "fieller")
  n = min(a.size, b.size)
  if n < 2:
    return _unbounded(a.mean() / b.mean(), "fieller", n, "ratio", confidence,
                      "one unit: no spread to estimate; use more seeds")
  rho, lo, hi, df, sd = fieller_bounds(a, b, confidence, paired)
  why = ("ratio of means, paired units: Fieller's interval (t, df n - 1)" if paired else
         "ratio of means, independent groups: Fieller's interval (Welch df)")
  if not np.isfinite(lo):
    why += "; unbounded: the denominator's mean is not significantly different from 0"
  return Interval(float(rho), float(lo), float(hi), "fieller", n, "ratio", float(df), float(sd),
                  confidence, why, {"paired": bool(paired)})


# ----------------------------------------------------------------------------------------------
# Crossed seeds x windows


def crossed_bounds(x: np.ndarray, confidence: float = 0.95):
  """Vectorised variance-components interval of the grand mean of x [..., S, W].

  Two-way random effects with one value per cell, x_sw = mu + a_s + b_w + e_sw (seed, window and
  residual effects, all random: a new run draws new seeds AND new traffic windows). Mean squares
    MS_S = W sum_s (xbar_s. - xbar)^2 / (S-1)        E = s_e^2 + W s_a^2
    MS_W = S sum_w (xbar_.w - xbar)^2 / (W-1)        E = s_e^2 + S s_b^2
    MS_E = sum (x_sw - xbar_s. - xbar_.w + xbar)^2 / ((S-1)(W-1))   E = s_e^2
  Var(xbar) = s_a^2/S + s_b^2/W + s_e^2/(SW) is estimated with each component truncated at 0:
    S W Var = MS_E + [MS_S - MS_E]_+ + [MS_W - MS_E]_+,
  a linear combination sum_k c_k MS_k whose Satterthwaite df is
    (sum_k c_k MS_k)^2 / sum_k (c_k MS_k)^2 / df_k.
  (Without the truncation the df collapses towards 1 when a component is ~0 and the interval
  over-covers, 0.996-1.0 at 4 x 8 with small components; truncation keeps it at 0.94-0.97
  where both factors vary.)
  Returns (mean, lo, hi, df, sd_seed, (MS_S, MS_W, MS_E)): sd_seed = sqrt(S Var), the SD per
  seed at these windows.
  """
  x = np.asarray(x, np.float64)
  s, w = x.shape[-2], x.shape[-1]
  gm = x.mean((-2, -1))
  rm, cm = x.mean(-1), x.mean(-2)
  ms_s = w * ((rm - gm[..., None]) ** 2).sum(-1) / (s - 1)
  ms_w = s * ((cm - gm[..., None]) ** 2).sum(-1) / (w - 1)
  res = x - rm[..., :, None] - cm[..., None, :] + gm[..., None, None]
  df_e = (s - 1) * (w - 1)
  ms_e = (res ** 2).sum((-2, -1)) / df_e
  c_s, c_w = (ms_s > ms_e).astype(float), (ms_w > ms_e).astype(float)
  c_e = 1.0 - c_s - c_w
  v = c_s * ms_s + c_w * ms_w + c_e * ms_e
  den = (c_s * ms_s) ** 2 / (s - 1) + (c_w * ms_w) ** 2 / (w - 1) + (c_e * ms_e) ** 2 / df_e
  with np.errstate(divide="ignore", invalid="ignore"):
    df = np.where(den > 0, v ** 2 / np.where(den > 0, den, 1.0), float(df_e))
  half = _q(confidence, df) * np.sqrt(v / (s * w))
  return gm, gm - half, gm + half, df, np.sqrt(v / w), (ms_s, ms_w, ms_e)


def _cells(x, name: str) -> np.ndarray:
  x = np.asarray(x, np.float64)
  if x.ndim != 2:
    raise ValueError(f"{name}: expected per-cell values [seeds, windows], got shape {x.shape}")
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name}: non-finite cells; every (seed, window) pair needs a value (drop "
                     "the window for every seed or rerun the seed)")
  return x


def crossed(x, confidence: float = 0.95, scale: str = "difference") -> Interval:
  """Variance-components CI (Satterthwaite df) of the mean of per-cell values x [S, W].

  x holds the per-cell statistic (e.g. RL minus heuristic, or their log-ratio, on window w of
  seed s). See `crossed_bounds` for the model. With one window the windows cannot vary and the
  interval is a t over seeds; with one seed nothing about seeds can be shown.
  """
  x = _cells(x, "crossed")
  s, w = x.shape
  if s < 2:
    return _unbounded(x.mean(), "crossed", s, scale, confidence,
                      "one seed: seed-to-seed variance cannot be estimated; use >= 3 seeds")
  if w < 2:
    iv = t_mean(x[:, 0], confidence, scale,
                "one window: Student-t over seeds (the window is fixed, not resampled)")
    return dataclasses.replace(iv, method="crossed")
  m, lo, hi, df, sd, (ms_s, ms_w, ms_e) = crossed_bounds(x, confidence)
  why = (f"crossed random seeds x windows ({s} x {w}): variance components with "
         "Satterthwaite df")
  if s == 2:
    why += " (2 seeds: may under-cover, 0.90 when seeds dominate; use >= 3)"
  extra = {"ms_seed": float(ms_s), "ms_window": float(ms_w), "ms_residual": float(ms_e),
           "n_windows": int(w)}
  iv = Interval(float(m), float(lo), float(hi), "crossed", s, scale, float(df), float(sd),
                confidence, why, extra)
  return _with_ratio(iv)


# Test inversion for `crossed_fieller`: outward steps of |rho| * 2^k bracket each bound, then
# bisection (2^-60 of the bracket: below float64's resolution of any bound we report).
_FIELLER_STEPS = np.arange(-20, 41, dtype=np.float64)
_BISECTIONS = 60


def _rejects(a: np.ndarray, b: np.ndarray, theta: np.ndarray, confidence: float) -> np.ndarray:
  """Whether the crossed interval of the cells a - theta b excludes 0, i.e.
  (abar - theta bbar)^2 > q(df(theta))^2 Var(theta). a, b [..., S, W]; theta [..., K] -> [..., K].
  """
  x = a[..., None, :, :] - theta[..., None, None] * b[..., None, :, :]
  _, lo, hi, _, _, _ = crossed_bounds(x, confidence)
  return (lo > 0) | (hi < 0)


def _fieller_bound(a, b, rho, step, direction: float, confidence: float) -> np.ndarray:
  """The accepted set's end on one side of rho ([...]); +-inf when no step up to |rho| 2^40
  (times `direction`) is rejected."""
  far = rho[..., None] + direction * step[..., None] * 2.0 ** _FIELLER_STEPS
  rej = _rejects(a, b, far, confidence)
  found = rej.any(-1)
  k = np.argmax(rej, -1)
  outer = np.take_along_axis(far, k[..., None], -1)[..., 0]
  inner = np.where(k > 0, np.take_along_axis(far, np.maximum(k - 1, 0)[..., None], -1)[..., 0],
                   rho)
  for _ in range(_BISECTIONS):
    mid = 0.5 * (inner + outer)
    r = _rejects(a, b, mid[..., None], confidence)[..., 0]
    outer, inner = np.where(r, mid, outer), np.where(r, inner, mid)
  return np.where(found, 0.5 * (inner + outer), direction * np.inf)


def crossed_fieller_bounds(a: np.ndarray, b: np.ndarray, confidence: float = 0.95):
  """Vectorised Fieller interval of rho = mean(a) / mean(b) over crossed seeds x windows.

  a, b [..., S, W], paired by cell (the same seed and traffic window). The set
    {rho : (abar - rho bbar)^2 <= q(df_rho)^2 Var(abar - rho bbar)},
  with Var and its Satterthwaite df those of `crossed_bounds` on the cells a_sw - rho b_sw
  (seeds and windows both random). The truncated variance components make Var piecewise
  quadratic in rho, so the set is found by test inversion from rho-hat outward (bracketing,
  then bisection), not by the closed form of `fieller_bounds`. Zero cells are fine (no logs).
  Returns (rho, lo, hi, df, sd_log): df at rho-hat, sd_log the delta-method SD of log rho per
  seed at these windows.
  """
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  ma, mb = a.mean((-2, -1)), b.mean((-2, -1))
  with np.errstate(divide="ignore", invalid="ignore"):
    rho = ma / mb
    ok = np.isfinite(rho)
    r = np.where(ok, rho, 0.0)
    step = np.where(r != 0, np.abs(r), 1.0)
    _, _, _, df, sd, _ = crossed_bounds(a - r[..., None, None] * b, confidence)
    lo = _fieller_bound(a, b, r, step, -1.0, confidence)
    hi = _fieller_bound(a, b, r, step, 1.0, confidence)
    sd_log = sd / np.abs(ma)
  # An unbounded side means the set is a half-line or the complement of an interval (the
  # denominator may be 0): reported as (-inf, inf), as `fieller_bounds` does.
  bounded = ok & np.isfinite(lo) & np.isfinite(hi)
  return (rho, np.where(bounded, lo, -np.inf), np.where(bounded, hi, np.inf), df,
          np.where(ok, sd_log, np.nan))


def crossed_fieller(a, b, confidence: float = 0.95) -> Interval:
  """Fieller's CI of mean(a) / mean(b) over crossed seeds x windows (`crossed_fieller_bounds`).

  For a claim about a ratio of total goodputs on a design where a new run draws new seeds AND
  new traffic windows: a per-seed Fieller over window means treats the windows as fixed (and is
  near zero width when a deterministic policy meets the same windows on every seed); a crossed
  log-ratio fails on a window with zero goodput. With one window this is the paired Fieller
  over seeds.
  """
  a, b = _cells(a, "crossed_fieller a"), _cells(b, "crossed_fieller b")
  _same_units(a, b, "crossed_fieller")
  s, w = a.shape
  if s < 2:
    return _unbounded(a.mean() / b.mean() if b.mean() else math.nan, "crossed_fieller", s,
                      "ratio", confidence, "one seed: seed-to-seed variance cannot be "
                      "estimated; use >= 3 seeds")
  if w < 2:
    iv = fieller(a[:, 0], b[:, 0], confidence)
    return dataclasses.replace(iv, method="crossed_fieller", why="one window: " + iv.why)
  rho, lo, hi, df, sd = crossed_fieller_bounds(a, b, confidence)
  why = (f"ratio of means over crossed seeds x windows ({s} x {w}): Fieller by test inversion "
         "of the variance-components interval")
  if not np.isfinite(lo) or not np.isfinite(hi):
    why += "; unbounded: the denominator's mean is not significantly different from 0"
  return Interval(float(rho), float(lo), float(hi), "crossed_fieller", s, "ratio", float(df),
                  float(sd), confidence, why, {"n_windows": int(w)})


def _with_ratio(iv: Interval) -> Interval:
  if iv.scale != "log_ratio":
    return iv
  return dataclasses.replace(iv, extra={**iv.extra, **_ratio_extra(iv)})


def two_way_bootstrap(x, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0,
                      scale: str = "difference") -> Interval:
  """Percentile CI of the mean of x [S, W] resampling seeds and windows independently.

  A draw's mean is c_s^T x c_w / (S W), c_s ~ Multinomial(S, 1/S), c_w ~ Multinomial(W, 1/W)
  (resampling counts; same as indexing x[rows][:, cols]). Refused below
  TWO_WAY_MIN_SEEDS x TWO_WAY_MIN_WINDOWS, where it under-covers: use `crossed`.
  """
  x = _cells(x, "two_way_bootstrap")
  s, w = x.shape
  if s < TWO_WAY_MIN_SEEDS or w < TWO_WAY_MIN_WINDOWS:
    raise ValueError(f"two_way_bootstrap: {s} seeds x {w} windows is below the calibrated "
                     f"{TWO_WAY_MIN_SEEDS} x {TWO_WAY_MIN_WINDOWS} (it would cover < 0.92); "
                     "use intervals.crossed")
  rng = np.random.default_rng(seed)
  cs = rng.multinomial(s, np.full(s, 1.0 / s), size=n_boot).astype(np.float64)
  cw = rng.multinomial(w, np.full(w, 1.0 / w), size=n_boot).astype(np.float64)
  boots = np.einsum("bs,sw,bw->b", cs, x, cw) / (s * w)
  a = (1 - confidence) / 2
  lo, hi = np.quantile(boots, [a, 1 - a])
  iv = Interval(float(x.mean()), float(lo), float(hi), "two_way_bootstrap", s, scale, None,
                float(np.std(boots, ddof=1) * math.sqrt(s)), confidence,
                f"crossed seeds x windows with >= {TWO_WAY_MIN_SEEDS} levels each: two-way "
                "percentile bootstrap", {"n_boot": int(n_boot), "seed": int(seed),
                                         "n_windows": int(w)})
  return _with_ratio(iv)


# ----------------------------------------------------------------------------------------------
# BCa bootstrap (many units)

_BCA_STATISTICS: dict[str, tuple[Callable, str, int]] = {
    # name -> (statistic(*samples, axis), scale, number of samples)
    "mean": (lambda x, axis: np.mean(x, axis), "difference", 1),
    "mean_difference": (lambda a, b, axis: np.mean(a - b, axis), "difference", 2),
    "mean_log_ratio": (lambda a, b, axis: np.mean(np.log(a / b), axis), "log_ratio", 2),
    "ratio_of_means": (lambda a, b, axis: np.mean(a, axis) / np.mean(b, axis), "ratio", 2),
}


def bca(*samples, statistic: str = "mean", confidence: float = 0.95, n_resamples: int = 9999,
        seed: int = 0) -> Interval:
  """BCa bootstrap CI (scipy.stats.bootstrap, method="BCa", paired=True for two samples).

  statistic: "mean" (one sample), "mean_difference", "mean_log_ratio" or "ratio_of_means"
  (two paired samples a, b: units resampled together). Refused below BCA_MIN_UNITS units, where
  BCa under-covers; with few units use the t intervals.
  """
  if statistic not in _BCA_STATISTICS:
    raise ValueError(f"bca: statistic {statistic!r} not in {sorted(_BCA_STATISTICS)}")
  fn, scale, k = _BCA_STATISTICS[statistic]
  if len(samples) != k:
    raise ValueError(f"bca: statistic {statistic!r} takes {k} sample(s), got {len(samples)}")
  arrays = [_units(x, f"bca sample {i}") for i, x in enumerate(samples)]
  n = arrays[0].size
  for x in arrays[1:]:
    _same_units(arrays[0], x, "bca")
  if n < BCA_MIN_UNITS:
    raise ValueError(f"bca: {n} units is below the calibrated {BCA_MIN_UNITS} (BCa covers < 0.93 "
                     "there); use intervals.t_mean / paired_difference / log_ratio / fieller")
  res = _st.bootstrap(tuple(arrays), fn, n_resamples=n_resamples, vectorized=True,
                      paired=k > 1, confidence_level=confidence, method="BCa",
                      rng=np.random.default_rng(seed))
  est = float(fn(*arrays, axis=-1))
  se = float(res.standard_error)
  sd = se * math.sqrt(n) / (abs(est) if scale == "ratio" and est else 1.0)
  iv = Interval(est, float(res.confidence_interval.low), float(res.confidence_interval.high),
                "bca", n, scale, None, sd, confidence,
                f"{n} independent units (>= {BCA_MIN_UNITS}): BCa bootstrap"
                + (", paired" if k > 1 else ""),
                {"statistic": statistic, "n_resamples": int(n_resamples), "seed": int(seed)})
  return _with_ratio(iv)


# ----------------------------------------------------------------------------------------------
# Recompute from stored samples

METHODS = ("t_mean", "paired_difference", "log_ratio", "fieller", "crossed", "crossed_fieller",
           "two_way_bootstrap", "bca")


def compute(method: str, samples: Mapping[str, Any], params: Mapping[str, Any] | None = None
            ) -> Interval:
  """The interval `method` on stored `samples` (as a claim record keeps them).

  samples: {"x": per-unit values} for one-sample methods, {"a", "b"} for paired ones; for
  "crossed" / "two_way_bootstrap" {"x": [S][W]} or {"a", "b": [S][W]} turned into per-cell
  differences or log-ratios by params["transform"]. params["average_episodes"] = True averages
  ragged per-episode rows per seed first (unit "seed x episode").
  """
  params = dict(params or {})
  if method not in METHODS:
    raise ValueError(f"interval method {method!r} is not one of {METHODS}")
  if samples and all(_count(v) == 0 for v in samples.values()):
    return no_units(method, params)
  avg = params.pop("average_episodes", False)
  data = {k: (per_seed_means(v) if avg else v) for k, v in samples.items()}
  conf = params.pop("confidence", 0.95)

  def need(*keys):
    missing = [k for k in keys if k not in data]
    if missing:
      raise ValueError(f"interval method {method!r} needs samples {list(keys)}; missing "
                       f"{missing} (have {sorted(data)})")
    return [data[k] for k in keys]

  if method == "t_mean":
    return t_mean(*need("x"), confidence=conf, scale=params.pop("scale", "difference"))
  if method == "paired_difference":
    return paired_difference(*need("a", "b"), confidence=conf)
  if method == "log_ratio":
    return log_ratio(*need("a", "b"), confidence=conf)
  if method == "fieller":
    return fieller(*need("a", "b"), confidence=conf, paired=params.pop("paired", True))
  if method == "crossed_fieller":
    return crossed_fieller(*need("a", "b"), confidence=conf)
  if method in ("crossed", "two_way_bootstrap"):
    x, scale = _crossed_input(data, params.pop("transform", None), method)
    if method == "crossed":
      return crossed(x, confidence=conf, scale=scale)
    return two_way_bootstrap(x, confidence=conf, scale=scale, **params)
  stat = params.pop("statistic", "mean")
  keys = ("x",) if stat == "mean" else ("a", "b")
  return bca(*need(*keys), statistic=stat, confidence=conf, **params)


def _count(v) -> int:
  """How many numbers a (possibly ragged, nested) sample holds."""
  if isinstance(v, np.ndarray):
    return int(v.size)
  if isinstance(v, Sequence) and not isinstance(v, str):
    return sum(_count(u) for u in v)
  return 1


def no_units(method: str, params: Mapping[str, Any] | None = None) -> Interval:
  """The interval of a claim with no samples at all (0 units): unbounded, estimate nan.

  A claim the testbed cannot express, or a stage that produced nothing, still gets a row: the
  verdict is then "inconclusive" (cannot express, or underpowered with 0 units), never a crash.
  The scale is the one the method would have reported, so the claim's scale check still holds.
  """
  params = dict(params or {})
  if method == "fieller":
    scale = "ratio"
  elif method == "log_ratio":
    scale = "log_ratio"
  elif method in ("crossed", "two_way_bootstrap"):
    scale = "log_ratio" if params.get("transform") == "log_ratio" else "difference"
  else:
    scale = params.get("scale", "difference")
  return _unbounded(math.nan, method, 0, scale, params.get("confidence", 0.95),
                    "no units: nothing was measured, so nothing can be estimated")


def _crossed_input(data: Mapping[str, Any], transform: str | None, method: str):
  if "x" in data:
    return _cells(data["x"], method), (transform or "difference")
  if "a" not in data or "b" not in data:
    raise ValueError(f"interval method {method!r} needs samples 'x' or 'a' and 'b' [S][W]")
  a, b = _cells(data["a"], f"{method} a"), _cells(data["b"], f"{method} b")
  _same_units(a, b, method)
  if transform == "log_ratio":
    if np.any(a <= 0) or np.any(b <= 0):
      raise ValueError(f"{method}: log_ratio transform needs positive cells")
    return np.log(a / b), "log_ratio"
  if transform in (None, "difference"):
    return a - b, "difference"
  raise ValueError(f"{method}: params transform {transform!r} must be 'difference' or "
                   "'log_ratio'")


def interval_for(unit: str, a, b=None, ratio: bool = False, confidence: float = 0.95
                 ) -> tuple[str, dict, dict, Interval]:
  """The default interval for a claim's unit of replication; returns (method, samples, params,
  interval) so a record can store how to recompute it.

  unit "seed": paired per-seed values (or one per-seed effect `a` when b is None; log-ratios
  already when ratio=True);
  "seed x episode": per-episode rows per seed, averaged per seed first;
  "seed x window": [S, W] cells, variance-components interval.
  ratio=True works on log-ratios (geometric-mean ratio) instead of differences.
  """
  samples: dict[str, Any] = {"a": a} if b is None else {"a": a, "b": b}
  params: dict[str, Any] = {"confidence": confidence}
  if unit == "seed x window":
    method = "crossed"
    # b None: `a` holds per-cell effects already (log-ratios when ratio=True).
    samples = {"x": a} if b is None else samples
    params["transform"] = "log_ratio" if ratio else "difference"
  else:
    if unit == "seed x episode":
      params["average_episodes"] = True
    elif unit != "seed":
      raise ValueError(f"interval_for: unit {unit!r} must be 'seed', 'seed x window' or "
                       "'seed x episode'")
    if b is None:
      method, samples = "t_mean", {"x": a}
      if ratio:
        params["scale"] = "log_ratio"
    else:
      method = "log_ratio" if ratio else "paired_difference"
  samples = {k: _listify(v) for k, v in samples.items()}
  return method, samples, params, compute(method, samples, params)


def _listify(v) -> list:
  """Per-unit samples as (nested) float lists, ragged rows allowed, for JSON."""
  if isinstance(v, np.ndarray):
    return v.astype(np.float64).tolist()
  if isinstance(v, Sequence) and v and not np.isscalar(v[0]):
    return [_listify(r) for r in v]
  return [float(u) for u in np.asarray(v, np.float64).ravel()]
