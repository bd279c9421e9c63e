"""Shared check of the documented clog prior (tests of v1 and v2 episode generation)."""

import numpy as np


def assert_clog_prior(clog, can_block, atol: float) -> None:
  """clog [N, E] drawn at reset: blocked (0) only where `can_block` [E]; partial clogs in
  [0.15, 0.5]; P(#blocked = 0..3) = .3/.4/.2/.1 within `atol`."""
  clog = np.asarray(clog)
  blocked = clog == 0
  assert not (blocked & ~np.asarray(can_block)).any()
  part = (clog > 0) & (clog < 1)
  assert ((clog[part] >= 0.15) & (clog[part] <= 0.5)).all()
  n_b = np.bincount(blocked.sum(1), minlength=4) / len(clog)
  np.testing.assert_allclose(n_b, [.3, .4, .2, .1], atol=atol)
