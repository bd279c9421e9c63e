"""Re-judge every committed claim from its stored samples.

  python -m jaxrl_suite.repro.reanalyse [DIR]     (DIR defaults to the repository's results/)

Prints the report (agreements, mismatches, legacy claims not on the layer yet) and exits 1 on
any mismatch, 0 otherwise: a verdict in a record must be the one the layer computes.
"""

from __future__ import annotations

import os
import sys

from jaxrl_suite.core.results import RESULTS_DIR
from jaxrl_suite.repro.records import reanalyse


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if len(argv) > 1 or (argv and argv[0].startswith("-")):
    print(__doc__.strip(), file=sys.stderr)
    return 2
  d = argv[0] if argv else RESULTS_DIR
  if not os.path.isdir(d):
    print(f"reanalyse: {d} is not a directory (give the folder holding <name>.json records)",
          file=sys.stderr)
    return 2
  rep = reanalyse(d)
  print(rep.text())
  return 0 if rep.ok else 1


if __name__ == "__main__":
  sys.exit(main())
