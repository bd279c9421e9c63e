"""FORE's speed benchmark (experiments/bench_fore.py): the contenders, their runs, the report.

  1. one dataset (n transitions, d features, float32):
     * floor (`floor_value`): one pass building the moment matrices M = zᵀ[x − γx', r] (one
       (n, d) x (n, d+1) matmul, the fused difference included) plus one d x d solve -- the
       least work any closed form of A θ = b must do;
     * the closed form `fore.fore_value` (A, b, LU solve) and the full estimator `fore_core`
       (+ sandwich SE, SVD diagnostics), with their ratios to the floor (bar: closed form <= 5x);
     * iterative linear FQE (`fqe_to_tol`: two O(n d) products per iteration) run until within
       rtol of the closed form.
     Floor, closed form and full FORE are timed interleaved (core/bench.py), medians reported.
  2. b datasets of n_batch transitions: `fore.fore_value_many` by its three paths -- "vmap" (one
     program, batched matmuls), "map" (one program, lax.map: datasets in sequence) and "loop" (a
     Python loop of one jitted call) -- interleaved in the same way; the library's default path
     and whether it was the fastest; vmapped full FORE and vmapped FQE for scale.

Shapes: phi, phi_next (n, d); rewards, weights (n,); nu0 (d,); batched: a leading (b,) axis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.core import bench
from jaxrl_suite.ope import fore as F

GAMMA = 0.9


def make_data(key, n: int, d: int, gamma: float = GAMMA):
  """(phi, phi_next, rewards, weights, nu0) of random features; the next features are those of
  another random sample, damped by gamma, which keeps FQE well inside contraction (rho < 1)."""
  k1, k2, k3 = jax.random.split(key, 3)
  phi = jax.nn.relu(jax.random.normal(k1, (n, d), jnp.float32) + 0.5)
  phi_next = phi[jax.random.permutation(k2, n)] * gamma
  r = jax.random.uniform(k3, (n,), jnp.float32)
  return phi, phi_next, r, jnp.ones(n, jnp.float32), phi[:256].mean(0)


def floor_value(phi, phi_next, rewards, weights, nu0, gamma):
  """The floor: M = phiᵀ[phi − γ phi', r] in one matmul, then one d x d solve (unit weights:
  the benchmark's data have them, so the weighting pass is not part of the least work)."""
  del weights
  n, d = phi.shape
  m = phi.T @ jnp.concatenate([phi - gamma * phi_next, rewards[:, None]], axis=1) / n
  return nu0 @ jnp.linalg.solve(m[:, :d], m[:, d])


def fqe_to_tol(phi, phn, r, w, nu0, target, gamma=GAMMA, rtol=1e-4):
  """Linear FQE iterated until its value is within rtol of `target` (the closed form), or until
  float32 round-off stalls it at its own fixed point. Fair: Sigma's Cholesky factor and the
  weighted design are hoisted out of the loop, so one iteration is two O(n d) matrix-vector
  products and one O(d^2) back-substitution. Returns (iterations, value)."""
  pw = phi * (w / w.sum())[:, None]
  chol = jax.scipy.linalg.cho_factor(pw.T @ phi)

  def body(c):
    k, th, _, jprev = c
    new = jax.scipy.linalg.cho_solve(chol, (r + gamma * (phn @ th)) @ pw)
    j = nu0 @ new
    stalled = jnp.abs(j - jprev) <= 1e-7 * jnp.abs(j)
    return k + 1, new, jnp.where(stalled, 0.0, jnp.abs(j - target)), j

  inf = jnp.array(jnp.inf, phi.dtype)
  k, th, _, _ = jax.lax.while_loop(
      lambda c: (c[2] > rtol * jnp.abs(target)) & (c[0] < 2_000), body,
      (0, jnp.zeros(phi.shape[1], phi.dtype), inf, inf))
  return k, nu0 @ th


def _medians(fns: dict, args, reps: int) -> dict:
  """{name: median wall s} of fns on args, interleaved after a warm-up call of each."""
  timings = bench.interleaved({k: (lambda f=f: f(*args)) for k, f in fns.items()}, reps)
  return {k: t.median_wall() for k, t in timings.items()}


def bench_single(n: int, d: int, reps: int, rtol: float) -> dict:
  """Section 1: floor vs closed form vs full FORE (interleaved), then FQE to tolerance.
  Returns {"t": {name: median s}, "vals": {name: value}, "fqe_iters", "fqe_value"}."""
  data = make_data(jax.random.PRNGKey(0), n, d)
  fns = {"floor": jax.jit(lambda *a: floor_value(*a, GAMMA)),
         "closed": jax.jit(lambda *a: F.fore_value(*a, GAMMA)),
         "full": jax.jit(lambda *a: F.fore_core(*a, GAMMA).value)}
  vals = {k: float(f(*data)) for k, f in fns.items()}
  t = _medians(fns, data, reps)
  fqe = jax.jit(lambda *a: fqe_to_tol(*a, rtol=rtol))
  iters, j_fqe = fqe(*data, vals["closed"])
  t["fqe"] = _medians({"fqe": fqe}, (*data, vals["closed"]), max(1, reps // 2))["fqe"]
  return dict(t=t, vals=vals, fqe_iters=int(iters), fqe_value=float(j_fqe))


def bench_many(b: int, n: int, d: int, reps: int, rtol: float) -> dict:
  """Section 2: fore_value_many's three paths (interleaved), vmapped full FORE and FQE. Returns
  {"t": {name: median s}, "agree" (largest relative gap to "loop"), "fqe_iters" (b,),
  "default" (the library's default path)}."""
  batch = jax.vmap(lambda k: make_data(k, n, d))(jax.random.split(jax.random.PRNGKey(1), b))
  paths = {p: (lambda *a, p=p: F.fore_value_many(*a, GAMMA, path=p)) for p in F.MANY_PATHS}
  ref = np.asarray(paths["loop"](*batch))
  agree = max(float(np.max(np.abs(np.asarray(f(*batch)) - ref) / np.abs(ref)))
              for f in paths.values())
  t = _medians(paths, batch, reps)
  vfull = jax.jit(jax.vmap(lambda *a: F.fore_core(*a, GAMMA).value))
  t["vmap_full"] = _medians({"f": vfull}, batch, max(1, reps // 2))["f"]
  vfqe = jax.jit(jax.vmap(lambda *a: fqe_to_tol(*a, rtol=rtol)))
  its, _ = vfqe(*batch, ref)
  t["vmap_fqe"] = _medians({"f": vfqe}, (*batch, ref), max(1, reps // 2))["f"]
  return dict(t=t, agree=agree, fqe_iters=np.asarray(its), default=F.default_many_path())


def report(s: dict, m: dict, n: int, d: int, b: int, nb: int, backend: str,
           rtol: float) -> list[str]:
  """The figures of `bench_single` (s) and `bench_many` (m) as markdown lines (printed, and
  written into docs/fore.md by the script)."""
  t, v, tm = s["t"], s["vals"], m["t"]
  fastest = min(("vmap", "map", "loop"), key=tm.get)
  single = [("floor: M = zᵀ[x − γx', r] (one matmul) + one d x d solve", t["floor"]),
            ("closed form `fore_value` (A, b, LU solve)", t["closed"]),
            ("full `fore_core` (+ sandwich SE, SVD diagnostics)", t["full"]),
            (f"iterative FQE to rtol {rtol:g} ({s['fqe_iters']} iterations)", t["fqe"])]
  many = [(p, tm[p]) for p in ("vmap", "map", "loop")] + [
      ("vmapped full `fore_core`", tm["vmap_full"]),
      (f"vmapped FQE to tolerance (iterations median {int(np.median(m['fqe_iters']))})",
       tm["vmap_fqe"])]
  verdict = ("the fastest in this run" if m["default"] == fastest
             else f"SLOWER than '{fastest}' in this run")
  return [
      f"Single dataset, n = {n:.0e}, d = {d}, float32, backend {backend}:", "",
      *bench.ratio_table(("what", "median wall", "/ floor"), single, t["floor"]), "",
      f"Values: floor {v['floor']:.5f}, closed form {v['closed']:.5f}, FQE {s['fqe_value']:.5f}.",
      "",
      f"{b} datasets x n = {nb}, d = {d} (`fore_value_many`; the three paths agree to "
      f"{m['agree']:.1e} relative):", "",
      *bench.ratio_table(("path", "median wall", "/ loop"), many, tm["loop"]), "",
      f"Default path on {backend}: '{m['default']}' ({verdict})."]
