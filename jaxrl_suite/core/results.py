"""Results records: every file in `results/` is written through this module.

Where a record goes (`output_dir`): full-mode runs write `results/` (committed: the
reproductions' numbers); quick-mode runs (CI smoke runs, `make reproduce`) write
`workdirs/results_quick/`, and runs on ad-hoc inputs (`--eval_trace`, `--layout`,
`--reuse_policies` on the command line) write `workdirs/results_adhoc/` and are marked
`adhoc_inputs`, so neither can overwrite the committed results or reach SUMMARY.md. The
environment variable JAXRL_RESULTS_DIR overrides all three (reproduce.py's --results_dir).

A record carries what is needed to trust and re-run a number: the config, the seeds, package
versions, the git commit (and whether the tree was dirty), the wall time, and one entry per claim
with the paper's figure, our figure with a 95% CI, and a verdict.

Schema (version `SCHEMA_VERSION`) of `results/<name>.json`::

    {"schema_version": 1, "name": str, "mode": "quick"|"full", "config": dict, "seeds": [int],
     "provenance": {"commit": str, "dirty": bool, "versions": {...}, "python": str,
                    "platform": str, "wall_time_s": float, "created": iso8601, "command": str},
     "claims": [{"claim": str, "paper": str, "ours": str, "ci95": [lo, hi] | null,
                 "verdict": one of VERDICTS, "detail": str}],
     ... free-form payload (tables, curves) ...}
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import re
import subprocess
import sys
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

SCHEMA_VERSION = 1
VERDICTS = ("reproduced", "partly reproduced", "not reproduced", "contradicted", "inconclusive")
# A row may also be descriptive (a figure reported without a verdict: jaxrl_suite.repro's kind).
ROW_VERDICTS = VERDICTS + ("descriptive",)
_PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex", "gymnax",
             "ml-collections", "tensorflow-datasets", "numpy")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_DIR = os.path.join(REPO_ROOT, "results")
QUICK_DIR = os.path.join(REPO_ROOT, "workdirs", "results_quick")
ADHOC_DIR = os.path.join(REPO_ROOT, "workdirs", "results_adhoc")
# Command-line inputs that make a run's numbers about the user's data, not the reproduction's.
ADHOC_FLAGS = ("--eval_trace", "--layout", "--reuse_policies", "--small_dir", "--small_rl_dir",
               "--large_dir")
ENV_VAR = "JAXRL_RESULTS_DIR"


def adhoc_inputs(argv: Sequence[str] | None = None) -> list[str]:
  """The ad-hoc input flags given in `argv` (default sys.argv), e.g. ["--eval_trace=x.csv"]."""
  argv = sys.argv[1:] if argv is None else argv
  out = []
  for i, a in enumerate(argv):
    name = a.split("=", 1)[0]
    if name in ADHOC_FLAGS and not a.endswith(("=false", "=False", "=0")):
      has_value = "=" in a or i + 1 >= len(argv) or argv[i + 1].startswith("-")
      out.append(a if has_value else f"{a}={argv[i + 1]}")
  return out


def output_dir(mode: str, argv: Sequence[str] | None = None) -> str:
  """Directory a run of `mode` writes its record, report and plot to (see the module doc)."""
  if mode not in ("quick", "full"):
    raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
  if os.environ.get(ENV_VAR):
    return os.environ[ENV_VAR]
  if adhoc_inputs(argv):
    return ADHOC_DIR
  return QUICK_DIR if mode == "quick" else RESULTS_DIR


def figure_path(name: str, mode: str) -> str:
  """`<output_dir(mode)>/<name>.png` (directory created): where a script saves its plot."""
  d = output_dir(mode)
  os.makedirs(d, exist_ok=True)
  return os.path.join(d, f"{name}.png")


def git_commit(root: str = REPO_ROOT) -> tuple[str, bool]:
  """Returns (commit sha or "unknown", dirty flag) of the repository at `root`.

  `results/` is left out of the dirty check: it is what runs write, so a script that writes two
  records (or a second script after a first) must not call its own tree dirty.
  """
  try:
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                         text=True, check=True).stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                             ":(exclude)results"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.strip()
    return sha, bool(status)
  except (OSError, subprocess.CalledProcessError):
    return "unknown", True


def package_versions(packages: Iterable[str] = _PACKAGES) -> dict[str, str]:
  out = {}
  for p in packages:
    try:
      out[p] = importlib.metadata.version(p)
    except importlib.metadata.PackageNotFoundError:
      out[p] = "not installed"
  return out


def provenance(wall_time_s: float) -> dict[str, Any]:
  sha, dirty = git_commit()
  return {"commit": sha, "dirty": dirty, "versions": package_versions(),
          "python": sys.version.split()[0], "platform": platform.platform(),
          "wall_time_s": float(wall_time_s),
          "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
          "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])}


def claim(claim: str, paper: str, ours: str, verdict: str, ci95: Sequence[float] | None = None,
          detail: str = "") -> dict[str, Any]:
  """One row of the verdict table. `verdict` must be one of `VERDICTS`."""
  if verdict not in ROW_VERDICTS:
    raise ValueError(f"verdict {verdict!r} is not one of {ROW_VERDICTS}")
  return {"claim": claim, "paper": paper, "ours": ours, "verdict": verdict,
          "ci95": None if ci95 is None else [float(ci95[0]), float(ci95[1])], "detail": detail}


def to_jsonable(x: Any) -> Any:
  """`x` as JSON values, as a record stores it: mappings (str keys), lists (tuples too),
  ConfigDicts (`to_dict`), numpy / jax arrays (`tolist`; 0-d ones as scalars, their non-finite
  values left to json.dump), a non-finite float leaf as "inf" / "nan"; other leaves as they are."""
  if isinstance(x, Mapping):
    return {str(k): to_jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [to_jsonable(v) for v in x]
  if hasattr(x, "to_dict"):  # ml_collections.ConfigDict
    return to_jsonable(x.to_dict())
  if isinstance(x, (np.ndarray, np.generic)) or type(x).__module__.startswith("jax"):
    arr = np.asarray(x)
    return arr.item() if arr.ndim == 0 else arr.tolist()
  if isinstance(x, float) and not np.isfinite(x):
    return str(x)
  return x


def write_results(name: str, *, mode: str, config: Any, seeds: Sequence[int],
                  claims: Sequence[Mapping[str, Any]], wall_time_s: float,
                  payload: Mapping[str, Any] | None = None, markdown: str = "",
                  results_dir: str | None = None) -> str:
  """Writes `<name>.json` and `<name>.md` into `results_dir` (default `output_dir(mode)`: only
  full-mode runs on the shipped inputs write `results/`); returns the JSON path.

  `markdown` is the body of the readable report; a verdict table and the provenance block are
  added around it so that every report states where its numbers came from.
  """
  if mode not in ("quick", "full"):
    raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
  results_dir = results_dir or output_dir(mode)
  os.makedirs(results_dir, exist_ok=True)
  record = {"schema_version": SCHEMA_VERSION, "name": name, "mode": mode,
            "config": to_jsonable(config), "seeds": [int(s) for s in seeds],
            "provenance": provenance(wall_time_s), "claims": to_jsonable(list(claims))}
  adhoc = adhoc_inputs()
  if adhoc:
    record["adhoc_inputs"] = adhoc   # never summarised (reproduce.load_records skips these)
  record.update(to_jsonable(dict(payload or {})))
  path = os.path.join(results_dir, f"{name}.json")
  with open(path, "w") as f:
    json.dump(record, f, indent=1, sort_keys=False)
  prov = record["provenance"]
  smoke = ([f"Quick mode: a smoke check of the pipeline on a tiny budget; these verdicts say "
            "nothing about the claims (full-mode records: results/).", ""]
           if mode == "quick" else [])
  md = [f"# {name} ({mode} mode)", "", *smoke, verdict_table(record["claims"]), "", markdown, "",
        "## Provenance", "",
        f"- commit `{prov['commit']}`{' (dirty tree)' if prov['dirty'] else ''}",
        f"- command `{prov['command']}`, wall time {prov['wall_time_s']:.1f} s, {prov['created']}",
        f"- seeds {record['seeds']}",
        "- versions " + ", ".join(f"{k} {v}" for k, v in prov["versions"].items()), ""]
  with open(os.path.join(results_dir, f"{name}.md"), "w") as f:
    f.write("\n".join(md))
  print(f"wrote {path} and {name}.md" + (" (quick mode: a smoke check, not a reproduction)"
                                         if mode == "quick" else ""), flush=True)
  return path


# A printed interval "[lo, hi]", each end a number with an optional % or x after it.
_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*[%x]?"
_INTERVAL = re.compile(r"\[\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\]")


def _rounding_of(shown: str) -> float:
  """Half a unit in the last printed digit of a number as written ("-0.04" -> 0.005)."""
  mant, _, exp = shown.lower().partition("e")
  decimals = len(mant.split(".")[1]) if "." in mant else 0
  return 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))


def _ci_shown(ours: str, ci: Sequence[float]) -> bool:
  """Whether the `ours` text already prints `ci` as a bracketed interval "[lo, hi]": both ends
  equal to it up to the rounding the text printed them with (or 3 significant figures), so the
  table does not print it twice."""
  def close(shown: str, v: float) -> bool:
    return abs(float(shown) - v) <= max(5e-3 * abs(v) + 5e-4, _rounding_of(shown) * (1 + 1e-9))
  return any(close(a, ci[0]) and close(b, ci[1]) for a, b in _INTERVAL.findall(ours))


def ours_with_ci(c: Mapping[str, Any]) -> str:
  """A claim's `ours` text with its 95% CI appended, unless the text already prints it or the
  interval is not finite (a descriptive row with no sampling interval)."""
  ours, ci = c.get("ours", ""), c.get("ci95")
  finite = bool(ci) and all(math.isfinite(float(x)) for x in ci)
  ci_s = f" [{ci[0]:.4g}, {ci[1]:.4g}]" if finite and not _ci_shown(ours, ci) else ""
  return f"{ours}{ci_s}"


def verdict_table(claims: Sequence[Mapping[str, Any]]) -> str:
  rows = ["| claim | paper | ours (95% CI) | verdict |", "|---|---|---|---|"]
  for c in claims:
    # The layer's label says "reproduced (exceeds the paper)" where the verdict word alone would not.
    label = c.get("repro", {}).get("verdict", {}).get("label", c["verdict"])
    rows.append(f"| {c['claim']} | {c['paper']} | {ours_with_ci(c)} | {label} |")
  return "\n".join(rows)


def validate_record(record: Mapping[str, Any]) -> None:
  """Raises ValueError naming the first missing or malformed field of a results record."""
  for field in ("schema_version", "name", "mode", "config", "seeds", "provenance", "claims"):
    if field not in record:
      raise ValueError(f"results record lacks field {field!r}")
  if record["schema_version"] != SCHEMA_VERSION:
    raise ValueError(f"schema_version {record['schema_version']} != {SCHEMA_VERSION}")
  for field in ("commit", "dirty", "versions", "wall_time_s", "created"):
    if field not in record["provenance"]:
      raise ValueError(f"results record provenance lacks {field!r}")
  for i, c in enumerate(record["claims"]):
    for field in ("claim", "paper", "ours", "verdict"):
      if field not in c:
        raise ValueError(f"claims[{i}] lacks {field!r}")
    if c["verdict"] not in ROW_VERDICTS:
      raise ValueError(f"claims[{i}].verdict {c['verdict']!r} not in {ROW_VERDICTS}")
