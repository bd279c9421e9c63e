r"""The root-n rate of an estimator: log-log RMSE slope over n, pooled and per data seed.

With estimates \hat J_{n,i} for sample sizes n in `ns` and seeds i, and truth J:

  pooled slope  b = slope of log10 RMSE(n) on log10 n, RMSE(n) = sqrt(mean_i (\hat J_{n,i}-J)^2),
                over n >= 1e3 (the asymptotic range); root-n consistency means b ~ -1/2;
  per seed      b_i = slope of log10 |\hat J_{n,i} - J| on log10 n (least squares), one
                independent replicate per seed because the draws at different n are independent.

`rmse_slope` returns (b, (lo, hi)) with a 500-draw seed-bootstrap 95% percentile interval;
`per_seed_rates` returns the b_i and each seed's Wald-coverage share, the samples the registered
claims are judged on.
"""
from __future__ import annotations

import numpy as np

MIN_N = 1000  # the slope is fitted over n >= MIN_N (below it the second-order terms dominate)
BOOT_DRAWS = 500
BOOT_SEED = 123


def _log_rmse(raw: dict, ns, truth: float, idx=None) -> list[float]:
  """log10 RMSE at each n of `ns`; `idx` maps n to a resample of the seeds (None: all)."""
  out = []
  for n in ns:
    v = raw[n] if idx is None else raw[n][idx[n]]
    out.append(np.sqrt(np.mean((v - truth) ** 2)))
  return np.log10(out)


def rmse_slope(ns, raw: dict, truth: float) -> tuple[float, tuple[float, float]]:
  """Slope of log10 RMSE on log10 n over n >= MIN_N, and its seed-bootstrap 95% CI.

  ns: the sample sizes (ascending); raw: {n: [seeds_n] valid estimates at n}; truth: J."""
  big = [n for n in ns if n >= MIN_N]
  x = np.log10(big)
  slope = float(np.polyfit(x, np.log10([np.sqrt(np.mean((raw[n] - truth) ** 2)) for n in big]),
                           1)[0])
  brng = np.random.default_rng(BOOT_SEED)
  bs = []
  for _ in range(BOOT_DRAWS):
    # one resample per n, drawn in n order (the order fixes the bootstrap stream)
    idx = {n: brng.integers(0, len(raw[n]), len(raw[n])) for n in big}
    bs.append(np.polyfit(x, _log_rmse(raw, big, truth, idx), 1)[0])
  return slope, (float(np.quantile(bs, 0.025)), float(np.quantile(bs, 0.975)))


def per_seed_rates(ns, err_big, cov_big) -> dict:
  """Per-seed slope of log10 |err| on log10 n and per-seed coverage share over n >= MIN_N.

  err_big, cov_big: one [seeds] array per n >= MIN_N (ascending), signed error and Wald hit
  (0/1), nan where the seed's estimate was refused. A seed refused at some n has no slope and is
  left out (counted in slope_dropped); its coverage share is over the n where it has an estimate.
  Returns dict(slope [kept], slope_dropped, coverage [kept], coverage_dropped)."""
  big = np.log10([n for n in ns if n >= MIN_N])
  err, cov = np.abs(np.stack(err_big)), np.stack(cov_big)           # [n, seeds]
  ok = np.all(np.isfinite(err) & (err > 0), axis=0)
  xc = big - big.mean()
  slopes = (xc[:, None] * np.log10(err[:, ok])).sum(0) / (xc ** 2).sum()
  has = np.isfinite(cov).any(0)
  share = np.nanmean(cov[:, has], axis=0)
  return dict(slope=slopes, slope_dropped=int((~ok).sum()), coverage=share,
              coverage_dropped=int((~has).sum()))
