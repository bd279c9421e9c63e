"""The one `mean [lo, hi]` formatter: digits chosen from the CI width.

An interval of half-width h is printed with decimals so that h shows two significant digits,
  decimals = max(0, 1 - floor(log10 h)),
e.g. 1.1752 [1.1462, 1.2006] -> "1.175 [1.146, 1.201]"; 48.3 [12.1, 84.6] -> "48 [12, 85]".
More digits would print noise; fewer would hide what the CI resolves.
"""

from __future__ import annotations

import math

from jaxrl_suite.repro.intervals import Interval


def decimals_for(lo: float, hi: float, default: int = 4) -> int:
  """Decimals that show the half-width (hi - lo) / 2 with two significant digits."""
  h = 0.5 * (hi - lo)
  if not math.isfinite(h) or h <= 0:
    return default
  return max(0, 1 - math.floor(math.log10(h)))


def _num(v: float, dec: int, suffix: str) -> str:
  if math.isinf(v):
    return ("-inf" if v < 0 else "inf")
  if math.isnan(v):
    return "nan"
  return f"{v:.{dec}f}{suffix}"


def fmt_ci(estimate: float, lo: float, hi: float, suffix: str = "") -> str:
  """"mean [lo, hi]" with decimals from the CI width (module doc); `suffix` e.g. "x" or "%"."""
  if math.isfinite(lo) and math.isfinite(hi):
    dec = decimals_for(lo, hi)
  else:
    # No width to read digits from: 4 significant digits of the estimate (3 decimals if 0/nan).
    ok = math.isfinite(estimate) and estimate != 0
    dec = max(0, 3 - math.floor(math.log10(abs(estimate)))) if ok else 3
  return f"{_num(estimate, dec, suffix)} [{_num(lo, dec, suffix)}, {_num(hi, dec, suffix)}]"


def fmt_interval(iv: Interval, as_ratio: bool = True) -> str:
  """An Interval in the paper's units: a log-ratio interval as the geometric-mean ratio
  "1.175x [1.146x, 1.201x]" (as_ratio), a ratio as "x", a difference as is."""
  if iv.scale == "log_ratio" and as_ratio:
    f = lambda v: math.inf if v == math.inf else (0.0 if v == -math.inf else math.exp(v))
    return fmt_ci(f(iv.estimate), f(iv.lo), f(iv.hi), "x")
  return fmt_ci(iv.estimate, iv.lo, iv.hi, "x" if iv.scale == "ratio" else "")
