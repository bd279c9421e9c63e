r"""Benchmark: FORE's closed form against a floor for the same work, iterative FQE, and the three
ways to evaluate many datasets (float32, jitted).

  1. one dataset, n = 1e6 transitions, d = 64:
     * floor: one pass building the moment matrices M = zᵀ[x − γx', r] (one (n, d) x (n, d+1)
       matmul, the fused difference included) plus one d x d solve -- the least work any closed
       form of A θ = b must do;
     * the closed form `fore.fore_value` (A, b, LU solve) and the full estimator `fore_core`
       (+ sandwich SE, SVD diagnostics), with their ratios to the floor (bar: closed form <= 5x);
     * iterative linear FQE (two O(n d) products per iteration) run until within `--rtol` of the
       closed form.
     The floor and the closed form are timed interleaved (floor, closed, floor, closed, ...) so a
     load change on a shared machine hits both; the medians' ratio is reported.
  2. 256 datasets (n = 4096 each, d = 64): `fore.fore_value_many` by its three paths -- "vmap"
     (one program, batched matmuls), "map" (one program, lax.map: datasets in sequence) and
     "loop" (a Python loop of one jitted call) -- interleaved in the same way; the library's
     default path and whether it was the fastest; vmapped full FORE and vmapped FQE for scale.
Prints wall-clock medians and the ratios; at the default sizes (and --docs) writes the figures
between the `fore:bench` markers of docs/fore.md. Run: python -m experiments.bench_fore
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
_B = flags.DEFINE_integer("batch", 256, "Datasets in the many-dataset benchmark.")
_NB = flags.DEFINE_integer("n_batch", 4096, "Transitions per dataset in the many-dataset benchmark.")
_RTOL = flags.DEFINE_float("rtol", 1e-4, "FQE stops when |J_k - J_closed| <= rtol |J_closed|.")
_REPS = flags.DEFINE_integer("reps", 5, "Timed repetitions of each contender (median).")
_DOCS = flags.DEFINE_bool("docs", True, "At the default sizes, write the figures into docs/fore.md.")
_GAMMA = 0.9
_DEFAULTS = dict(n=1_000_000, d=64, batch=256, n_batch=4096)


def make_data(key, n, d, gamma=_GAMMA):
  """Random features; next features are those of another random sample (FQE contracts: rho<1)."""
  import jax
  import jax.numpy as jnp
  k1, k2, k3 = jax.random.split(key, 3)
  phi = jax.nn.relu(jax.random.normal(k1, (n, d), jnp.float32) + 0.5)
  phi_next = phi[jax.random.permutation(k2, n)] * gamma  # damped: keeps FQE well inside rho < 1
  r = jax.random.uniform(k3, (n,), jnp.float32)
  return phi, phi_next, r, jnp.ones(n, jnp.float32), phi[:256].mean(0)


def timeit(f, *args, reps=3):
  """Median wall time of `reps` calls after one compile-and-warm call."""
  return interleaved({"f": f}, args, reps)["f"]


def interleaved(fns: dict, args, reps: int) -> dict:
  """Median wall time of each function in `fns` on `args`, the calls interleaved round-robin
  (each compiled and warmed first), so that load drift on a shared machine hits all alike."""
  import jax
  for f in fns.values():
    jax.block_until_ready(f(*args))
  ts = {k: [] for k in fns}
  for _ in range(reps):
    for k, f in fns.items():
      t = time.perf_counter()
      jax.block_until_ready(f(*args))
      ts[k].append(time.perf_counter() - t)
  return {k: float(np.median(v)) for k, v in ts.items()}


def floor_value(phi, phi_next, rewards, weights, nu0, gamma):
  """The floor: M = phiᵀ[phi − γ phi', r] in one matmul, then one d x d solve (unit weights:
  the benchmark's data have them, so the weighting pass is not part of the least work)."""
  import jax.numpy as jnp
  del weights
  n, d = phi.shape
  m = phi.T @ jnp.concatenate([phi - gamma * phi_next, rewards[:, None]], axis=1) / n
  return nu0 @ jnp.linalg.solve(m[:, :d], m[:, d])


def fqe_to_tol(phi, phn, r, w, nu0, target, gamma=_GAMMA, rtol=1e-4):
  """Linear FQE iterated until its value is within rtol of `target` (the closed form), or until
  float32 round-off stalls it at its own fixed point. Fair: Sigma's Cholesky factor and the
  weighted design are hoisted out of the loop, so one iteration is two O(n d) matrix-vector
  products and one O(d^2) back-substitution. Returns (iterations, value)."""
  import jax
  import jax.numpy as jnp
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


def bench_single(n, d, reps, rtol):
  """Section 1: floor vs closed form vs full FORE (interleaved), then FQE to tolerance."""
  import jax
  from jaxrl_suite.ope import fore as F
  data = make_data(jax.random.PRNGKey(0), n, d)
  fns = {"floor": jax.jit(lambda *a: floor_value(*a, _GAMMA)),
         "closed": jax.jit(lambda *a: F.fore_value(*a, _GAMMA)),
         "full": jax.jit(lambda *a: F.fore_core(*a, _GAMMA).value)}
  vals = {k: float(f(*data)) for k, f in fns.items()}
  t = interleaved(fns, data, reps)
  fqe = jax.jit(lambda *a: fqe_to_tol(*a, rtol=rtol))
  iters, j_fqe = fqe(*data, vals["closed"])
  t["fqe"] = timeit(fqe, *data, vals["closed"], reps=max(1, reps // 2))
  return dict(t=t, vals=vals, fqe_iters=int(iters), fqe_value=float(j_fqe))


def bench_many(b, n, d, reps, rtol):
  """Section 2: fore_value_many's three paths (interleaved), vmapped full FORE and FQE."""
  import jax
  from jaxrl_suite.ope import fore as F
  batch = jax.vmap(lambda k: make_data(k, n, d))(jax.random.split(jax.random.PRNGKey(1), b))
  paths = {p: (lambda *a, p=p: F.fore_value_many(*a, _GAMMA, path=p)) for p in F.MANY_PATHS}
  ref = np.asarray(paths["loop"](*batch))
  agree = max(float(np.max(np.abs(np.asarray(f(*batch)) - ref) / np.abs(ref))) for f in paths.values())
  t = interleaved(paths, batch, reps)
  vfull = jax.jit(jax.vmap(lambda *a: F.fore_core(*a, _GAMMA).value))
  t["vmap_full"] = timeit(vfull, *batch, reps=max(1, reps // 2))
  vfqe = jax.jit(jax.vmap(lambda *a: fqe_to_tol(*a, rtol=rtol)))
  its, _ = vfqe(*batch, ref)
  t["vmap_fqe"] = timeit(vfqe, *batch, ref, reps=max(1, reps // 2))
  return dict(t=t, agree=agree, fqe_iters=np.asarray(its), default=F.default_many_path())


def report(s, m, n, d, b, nb, backend, rtol) -> list[str]:
  """The benchmark's figures as markdown lines (printed, and written into docs/fore.md)."""
  t, v = s["t"], s["vals"]
  tm = m["t"]
  fastest = min(("vmap", "map", "loop"), key=tm.get)
  ms = lambda x: f"{x * 1e3:.1f} ms"
  return [
      f"Single dataset, n = {n:.0e}, d = {d}, float32, backend {backend}:", "",
      "| what | median wall | / floor |", "|---|---|---|",
      f"| floor: M = zᵀ[x − γx', r] (one matmul) + one d x d solve | {ms(t['floor'])} | 1.00 |",
      f"| closed form `fore_value` (A, b, LU solve) | {ms(t['closed'])} | "
      f"{t['closed'] / t['floor']:.2f} |",
      f"| full `fore_core` (+ sandwich SE, SVD diagnostics) | {ms(t['full'])} | "
      f"{t['full'] / t['floor']:.2f} |",
      f"| iterative FQE to rtol {rtol:g} ({s['fqe_iters']} iterations) | {ms(t['fqe'])} | "
      f"{t['fqe'] / t['floor']:.2f} |", "",
      f"Values: floor {v['floor']:.5f}, closed form {v['closed']:.5f}, FQE {s['fqe_value']:.5f}.",
      "",
      f"{b} datasets x n = {nb}, d = {d} (`fore_value_many`; the three paths agree to "
      f"{m['agree']:.1e} relative):", "",
      "| path | median wall | / loop |", "|---|---|---|",
      *[f"| {p} | {ms(tm[p])} | {tm[p] / tm['loop']:.2f} |" for p in ("vmap", "map", "loop")],
      f"| vmapped full `fore_core` | {ms(tm['vmap_full'])} | {tm['vmap_full'] / tm['loop']:.2f} |",
      f"| vmapped FQE to tolerance (iterations median {int(np.median(m['fqe_iters']))}) | "
      f"{ms(tm['vmap_fqe'])} | {tm['vmap_fqe'] / tm['loop']:.2f} |", "",
      f"Default path on {backend}: '{m['default']}' ("
      + ("the fastest in this run" if m["default"] == fastest else f"SLOWER than '{fastest}' in this run")
      + ")."]


def main(argv):
  del argv
  import jax
  backend = jax.default_backend()
  print(f"backend {backend}, devices {jax.devices()}")
  s = bench_single(_N.value, _D.value, _REPS.value, _RTOL.value)
  m = bench_many(_B.value, _NB.value, _D.value, _REPS.value, _RTOL.value)
  lines = report(s, m, _N.value, _D.value, _B.value, _NB.value, backend, _RTOL.value)
  print("\n".join(lines))
  sizes = dict(n=_N.value, d=_D.value, batch=_B.value, n_batch=_NB.value)
  if _DOCS.value and sizes == _DEFAULTS:
    from experiments.fore import write_docs_block
    write_docs_block("fore:bench", [
        f"Written by `python -m experiments.bench_fore` ({_REPS.value} interleaved repetitions, "
        f"medians) on {time.strftime('%Y-%m-%d', time.gmtime())}; a shared 2-core CPU box, so "
        "absolute times vary run to run, the ratios less.", ""] + lines)
    print("wrote the figures into docs/fore.md (fore:bench)")


if __name__ == "__main__":
  app.run(main)
