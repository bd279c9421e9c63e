r"""Benchmark: FORE closed-form solve vs iterative FQE to the same tolerance (float32, jitted).

  1. one dataset, n = 1e6 transitions, d = 64: closed form (A, b, LU solve) and the full estimator
     (SE, SVD diagnostics), vs iterative linear FQE (one O(n d) regression per iteration) run until
     its value is within `--rtol` of the closed form;
  2. 256 datasets (n = 4096 each, d = 64): both paths of `fore.fore_value_many` -- one vmapped
     program vs a Python loop of single-dataset jitted calls -- the vmapped full estimator, and
     vmapped iterative FQE; prints which path the library picks by default (CPU: the loop) and
     whether it was the faster one in this run.
Prints wall-clock medians and the ratios. Run: python -m experiments.bench_fore [--n 1000000]
Not timed in tests (timings on a shared CPU are noisy).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "jax" not in sys.modules:  # see experiments/fore.py: avoids an Eigen thread-pool hang on CPU
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

from absl import app, flags  # noqa: E402
import numpy as np  # noqa: E402

_N = flags.DEFINE_integer("n", 1_000_000, "Transitions in the single-dataset benchmark.")
_D = flags.DEFINE_integer("d", 64, "Feature dimension.")
_B = flags.DEFINE_integer("batch", 256, "Datasets in the vmapped benchmark.")
_NB = flags.DEFINE_integer("n_batch", 4096, "Transitions per dataset in the vmapped benchmark.")
_RTOL = flags.DEFINE_float("rtol", 1e-4, "FQE stops when |J_k - J_closed| <= rtol |J_closed|.")
_REPS = flags.DEFINE_integer("reps", 2, "Timed repetitions (median).")


def make_data(key, n, d, gamma=0.9):
  """Random features; next features are those of another random sample (FQE contracts: rho<1)."""
  import jax
  import jax.numpy as jnp
  k1, k2, k3 = jax.random.split(key, 3)
  phi = jax.nn.relu(jax.random.normal(k1, (n, d), jnp.float32) + 0.5)
  phi_next = phi[jax.random.permutation(k2, n)] * gamma  # damped: keeps FQE well inside rho < 1
  r = jax.random.uniform(k3, (n,), jnp.float32)
  return phi, phi_next, r, jnp.ones(n, jnp.float32), phi[:256].mean(0)


def timeit(f, *args, reps=3):
  import jax
  jax.block_until_ready(f(*args))          # compile + warm
  ts = []
  for _ in range(reps):
    t = time.perf_counter()
    jax.block_until_ready(f(*args))
    ts.append(time.perf_counter() - t)
  return float(np.median(ts))


def main(argv):
  del argv
  import jax
  import jax.numpy as jnp
  from jaxrl_suite.ope import fore as F
  gamma = 0.9
  print(f"backend {jax.default_backend()}, devices {jax.devices()}")
  # ---------------------------------------------------------------- single large dataset
  data = make_data(jax.random.PRNGKey(0), _N.value, _D.value, gamma)
  closed = jax.jit(lambda *a: F.fore_value(*a, gamma))
  full = jax.jit(lambda *a: F.fore_core(*a, gamma).value)
  j_closed = float(closed(*data))
  t_closed = timeit(closed, *data, reps=_REPS.value)
  t_full = timeit(full, *data, reps=_REPS.value)

  def fqe_to_tol(phi, phn, r, w, nu0, target):
    # iterate until the value is within rtol of the closed form (same tolerance, same data)
    # fair FQE: Sigma's Cholesky factor and the weighted design are hoisted out of the loop, so an
    # iteration costs two O(n d) matrix-vector products and one O(d^2) back-substitution
    pw = phi * (w / w.sum())[:, None]
    sigma = pw.T @ phi
    chol = jax.scipy.linalg.cho_factor(sigma)

    def body(c):
      k, th, _, jprev = c
      y = r + gamma * (phn @ th)
      new = jax.scipy.linalg.cho_solve(chol, y @ pw)
      j = nu0 @ new
      # stop within rtol of the closed form, or when float32 round-off stalls the iterates at
      # FQE's own fixed point (|J_k - J_{k-1}| tiny); the achieved error is printed
      stalled = jnp.abs(j - jprev) <= 1e-7 * jnp.abs(j)
      return k + 1, new, jnp.where(stalled, 0.0, jnp.abs(j - target)), j

    d = phi.shape[1]
    k, th, err, _ = jax.lax.while_loop(
        lambda c: (c[2] > _RTOL.value * jnp.abs(target)) & (c[0] < 2_000), body,
        (0, jnp.zeros(d, phi.dtype), jnp.array(jnp.inf, phi.dtype), jnp.array(jnp.inf, phi.dtype)))
    return k, nu0 @ th

  fqe = jax.jit(fqe_to_tol)
  iters, j_fqe = fqe(*data, j_closed)
  t_fqe = timeit(fqe, *data, j_closed, reps=_REPS.value)
  rho = float(jax.jit(lambda p, q, w: F.fitted_q_iteration(p, q, jnp.zeros(p.shape[0]), w, data[4], gamma,
                                                           max_iters=1).spectral_radius)(data[0], data[1], data[3]))
  print(f"\n[1] n={_N.value:.0e}, d={_D.value}, float32, FQE spectral radius {rho:.3f}")
  print(f"  closed form (A, b, solve)        {t_closed * 1e3:9.1f} ms   J = {j_closed:.5f}")
  print(f"  full FORE (+SE, SVD diagnostics) {t_full * 1e3:9.1f} ms")
  print(f"  iterative FQE to rtol {_RTOL.value:g}      {t_fqe * 1e3:9.1f} ms   ({int(iters)} iterations, J = {float(j_fqe):.5f}, "
        f"rel. diff {abs(float(j_fqe) - j_closed) / abs(j_closed):.1e})")
  print(f"  RATIO FQE / closed form = {t_fqe / t_closed:.1f}x ; FQE / full FORE = {t_fqe / t_full:.1f}x")
  del data
  # ---------------------------------------------------------------- many datasets, vmapped
  keys = jax.random.split(jax.random.PRNGKey(1), _B.value)
  batch = jax.vmap(lambda k: make_data(k, _NB.value, _D.value, gamma))(keys)
  # the two ways `F.fore_value_many` evaluates many datasets: one vmapped program, or a Python
  # loop of one jitted single-dataset call; the library default is the one measured faster here
  many = {path: (lambda *a, path=path: F.fore_value_many(*a, gamma, path=path))
          for path in ("vmap", "loop")}
  vclosed = jax.jit(jax.vmap(lambda *a: F.fore_value(*a, gamma)))
  vfull = jax.jit(jax.vmap(lambda *a: F.fore_core(*a, gamma).value))
  targets = vclosed(*batch)
  t_path = {path: timeit(f, *batch, reps=_REPS.value) for path, f in many.items()}
  t_v = t_path["vmap"]
  t_vfull = timeit(vfull, *batch, reps=_REPS.value)
  t_loop = t_path["loop"]
  vfqe = jax.jit(jax.vmap(fqe_to_tol))
  its, _ = vfqe(*batch, targets)
  t_vfqe = timeit(vfqe, *batch, targets, reps=_REPS.value)
  print(f"\n[2] {_B.value} datasets x n={_NB.value}, d={_D.value}, vmapped")
  print(f"  vmapped closed form   {t_v * 1e3:9.1f} ms")
  print(f"  vmapped full FORE     {t_vfull * 1e3:9.1f} ms")
  print(f"  python loop of single {t_loop * 1e3:9.1f} ms")
  print(f"  vmapped FQE to tol    {t_vfqe * 1e3:9.1f} ms  (iterations: median {int(np.median(its))}, max {int(np.max(its))})")
  print(f"  RATIO loop / vmapped = {t_loop / t_v:.2f}x ; FQE / closed form = {t_vfqe / t_v:.1f}x")
  fastest = min(t_path, key=t_path.get)
  default = F.default_many_path()
  print(f"  fore_value_many default on {jax.default_backend()}: '{default}' "
        f"({'the faster path in this run' if default == fastest else f'SLOWER than {fastest} in this run'})")


if __name__ == "__main__":
  app.run(main)
