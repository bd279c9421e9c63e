r"""Benchmark: FORE's closed form against a floor for the same work, iterative FQE, and the three
ways to evaluate many datasets (float32, jitted); what is timed: jaxrl_suite/ope/bench_workloads.py.

  python -m experiments.bench_fore [--n 1000000] [--d 64] [--batch 256] [--n_batch 4096]

Prints wall-clock medians and the ratios; at the default sizes (and --docs) writes the figures
between the `fore:bench` markers of docs/fore.md. Not timed in tests (a shared CPU is noisy).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "jax" not in sys.modules:  # see experiments/fore.py: avoids an Eigen thread-pool hang on CPU
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

from absl import app, flags  # noqa: E402

_N = flags.DEFINE_integer("n", 1_000_000, "Transitions in the single-dataset benchmark.")
_D = flags.DEFINE_integer("d", 64, "Feature dimension.")
_B = flags.DEFINE_integer("batch", 256, "Datasets in the many-dataset benchmark.")
_NB = flags.DEFINE_integer("n_batch", 4096, "Transitions per dataset in the many-dataset benchmark.")
_RTOL = flags.DEFINE_float("rtol", 1e-4, "FQE stops when |J_k - J_closed| <= rtol |J_closed|.")
_REPS = flags.DEFINE_integer("reps", 5, "Timed repetitions of each contender (median).")
_DOCS = flags.DEFINE_bool("docs", True, "At the default sizes, write the figures into docs/fore.md.")
_DEFAULTS = dict(n=1_000_000, d=64, batch=256, n_batch=4096)


def main(argv):
  del argv
  import jax
  from jaxrl_suite.ope import bench_workloads as W
  backend = jax.default_backend()
  print(f"backend {backend}, devices {jax.devices()}")
  s = W.bench_single(_N.value, _D.value, _REPS.value, _RTOL.value)
  m = W.bench_many(_B.value, _NB.value, _D.value, _REPS.value, _RTOL.value)
  lines = W.report(s, m, _N.value, _D.value, _B.value, _NB.value, backend, _RTOL.value)
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
