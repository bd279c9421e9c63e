r"""Run every reproduction and write `results/SUMMARY.md` (one row per claim, with its verdict).

  python -m experiments.reproduce --quick              # smoke check of every stage (`make
                                                       # reproduce`), writes workdirs/results_quick/
  python -m experiments.reproduce                      # full mode (`make reproduce-full`)
  python -m experiments.reproduce --only=fore,ballast  # a subset
  python -m experiments.reproduce --quick --stream     # show each stage's own progress bar
  python -m experiments.reproduce --summary_only --readme   # rebuild SUMMARY.md + README block
  python -m experiments.reproduce --reanalyse          # re-judge the committed records

Each stage runs as its own process, `python -m experiments.<name> [--quick]`, so a crash in one
does not stop the others; its output goes to `workdirs/reproduce/<name>.log` (and to the terminal
with `--stream`) and the tail of that log is printed if it fails. A stage whose script does not
exist yet is skipped with a note. The exit status is non-zero if any stage failed (crashed, timed
out, or exited cleanly without writing a valid `<name>.json` of the requested mode where this
script reads it).

Quick mode is a smoke check of every stage's whole pipeline (train a little, evaluate, judge,
write the record and plot), not a small reproduction: its verdicts say nothing about the claims,
and its SUMMARY.md says so. Two stages run at once in quick mode (`--jobs`; a quick stage is
mostly single-threaded XLA compilation, so two share 2 cores well), the longest of the last run
first; full mode runs one at a time. Progress: a line per stage start (i/N, elapsed, ETA from
the last run's timings of that mode, kept in `workdirs/reproduce/timings_<mode>.json`), a line
per result, and every `--heartbeat_s` the last log line of each running stage.

Where results go: a stage never names its folder; the library does
(`jaxrl_suite.core.results.output_dir`), and this script hands each stage the folder it reads
through JAXRL_RESULTS_DIR: full mode `results/` (committed), quick mode
`workdirs/results_quick/` (with its own SUMMARY.md). A quick stage that writes into `results/`
anyway (a plot saved by a fixed path) has those files moved to the quick directory and the
committed ones put back, so `make reproduce` never changes a tracked file. Records of runs on
ad-hoc inputs (`adhoc_inputs`, e.g. `--eval_trace`) are never summarised.

The summary is generated from the records (never typed): reproduction, claim, paper's figure,
ours with 95% CI, verdict, links to `<name>.md`/`<name>.png`, and the mode (quick/full) and
commit of each record, so a stale or quick-mode number is visible as such. `--readme` rewrites
the block between `<!-- RESULTS:BEGIN -->` and `<!-- RESULTS:END -->` in README.md with a short
table (verdict counts per reproduction) and a link to `results/SUMMARY.md`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

from jaxrl_suite.core import results as _results  # noqa: E402  (needs REPO_ROOT on sys.path)
from jaxrl_suite.repro import runner as _runner  # noqa: E402
from jaxrl_suite.repro import summary as _summary  # noqa: E402

RESULTS_DIR = _results.RESULTS_DIR
QUICK_DIR = _results.QUICK_DIR
# The committed results: a quick stage must leave every file here as it found it.
PROTECTED_DIR = RESULTS_DIR
LOG_DIR = os.path.join(REPO_ROOT, "workdirs", "reproduce")
README_BEGIN, README_END = _summary.README_BEGIN, _summary.README_END


Stage = _runner.Stage


# Mooncake routing's RL budget (RL-only config fields: the tuned baselines are unchanged): the
# default 4 seeds, scratch PPO at 1x (its sweep was flat at 1x in the 2-seed record 6224363,
# last doubling -0.00 [-0.03, +0.03]; the fair-chance rule still checks it in this run).
MOONCAKE_RL_BUDGET = ("--config.budget_scale.scratch=1",)

# The reproductions, in the order they run (cheap and foundational first).
REGISTRY: list[Stage] = [
    Stage("ppo_gymnax", "experiments.ppo_gymnax", "PPO on gymnax vs purejaxrl"),
    Stage("fore", "experiments.fore", "FORE off-policy evaluation"),
    Stage("serving_batching", "experiments.serving_batching", "LLM serving: batching, 1 GPU"),
    Stage("serving_routing", "experiments.serving_routing", "LLM serving: routing, N GPUs"),
    Stage("serving_routing_azure_code", "experiments.serving_routing",
          "LLM serving: routing, N GPUs, Azure code", ("--config.trace=azure_code",)),
    # quick ~400 s on 2 shared cores since the prefix-cache lookups touch only the slots an
    # event admits or finishes (it was ~1,950 s: docs/serving.md, "Prefix caching"). Scratch PPO
    # at 1x budget (MOONCAKE_RL_BUDGET): at ~0.45 ms per cached event the full run is several
    # hours on 2 cores (docs/serving.md, "Mooncake conv"); it resumes from its workdir.
    Stage("serving_routing_mooncake_conv", "experiments.serving_routing",
          "LLM serving: routing, N GPUs, Mooncake (prefix cache)",
          ("--config.trace=mooncake_conv",) + MOONCAKE_RL_BUDGET),
    Stage("ballast", "experiments.ballast", "Ballast-water routing vs Dijkstra"),
    Stage("ballast_hydro", "experiments.ballast_hydro",
          "Ballast hydraulics: recurrent RL across layouts vs heel-aware Dijkstra"),
    Stage("direct_opd", "experiments.direct_opd", "Direct-OPD delta transfer"),
    Stage("compaction", "experiments.compaction", "CompactionRL: self-summarising agents"),
    Stage("stapo", "experiments.stapo", "STAPO: normalised entropy vs trajectory neglect"),
    Stage("cure", "experiments.cure", "Claim-level vs holistic caption rewards"),
    Stage("rail_pricing", "experiments.rail_pricing", "Rail pricing: relational MARL vs RM practice"),
]


# Quick-mode wall seconds of each stage run alone on 2 cores (measured; see the ETA note in
# run_all). Used only where workdirs/reproduce/ has no timings of an earlier quick run (a fresh
# clone): they order the stages (longest first, with two at a time) and give the first ETA.
QUICK_SECONDS: dict[str, float] = {   # f951f9a, fresh clone, two stages at a time: 14m14s
    "ppo_gymnax": 24, "fore": 48, "serving_batching": 66, "serving_routing": 95,
    "serving_routing_azure_code": 88, "serving_routing_mooncake_conv": 205, "ballast": 89,
    "ballast_hydro": 149, "direct_opd": 130, "compaction": 214, "stapo": 115, "cure": 211,
    "rail_pricing": 157,
}


StageResult = _runner.StageResult


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------
def select(only: str | None, registry: Sequence[Stage] | None = None) -> list[Stage]:
  """The stages named in `only` (comma list, registry order kept); all of them if empty."""
  registry = REGISTRY if registry is None else registry
  if not only:
    return list(registry)
  wanted = [n.strip() for n in only.split(",") if n.strip()]
  names = {s.name for s in registry}
  unknown = [n for n in wanted if n not in names]
  if unknown:
    raise ValueError(f"unknown reproduction(s) {unknown}; known: {sorted(names)}")
  return [s for s in registry if s.name in wanted]


# The stage runner is generic (jaxrl_suite.repro.runner); these names are this script's API.
module_exists, _schedule = _runner.module_exists, _runner.schedule
_fmt_s, _rel = _runner.fmt_s, _runner.rel


def default_results_dir(quick: bool) -> str:
  return QUICK_DIR if quick else RESULTS_DIR


def run_stage(stage: Stage, quick: bool, results_dir: str | None = None,
              log_dir: str = LOG_DIR, **kwargs) -> StageResult:
  """One stage in a subprocess (`jaxrl_suite.repro.runner.run_stage`), protecting this
  checkout's committed results (PROTECTED_DIR) in quick mode."""
  return _runner.run_stage(stage, quick, results_dir or default_results_dir(quick), log_dir,
                           protected_dir=PROTECTED_DIR, **kwargs)


def run_all(stages: Sequence[Stage], quick: bool, results_dir: str | None = None,
            log_dir: str = LOG_DIR, **kwargs) -> list[StageResult]:
  """The stages, `jobs` at a time (`jaxrl_suite.repro.runner.run_all`), with QUICK_SECONDS as
  the first ETA of a fresh clone."""
  return _runner.run_all(stages, quick, results_dir or default_results_dir(quick), log_dir,
                         protected_dir=PROTECTED_DIR, estimates=QUICK_SECONDS, **kwargs)


# ------------------------------------------------------------------------------------------------
# Summary (jaxrl_suite.repro.summary, in registry order)
# ------------------------------------------------------------------------------------------------
def _order(registry: Sequence[Stage] | None = None) -> list[str]:
  return [s.name for s in (REGISTRY if registry is None else registry)]


def load_records(results_dir: str = RESULTS_DIR,
                 order: Sequence[str] | None = None) -> list[dict]:
  """Every `results/*.json` record with claims, in registry order then alphabetical; records
  of runs on ad-hoc inputs (`adhoc_inputs`, e.g. --eval_trace) are left out."""
  return _summary.load_records(results_dir, _order() if order is None else list(order))


summary_table = _summary.summary_table


def write_summary(results_dir: str = RESULTS_DIR, run: Sequence[StageResult] = (),
                  registry: Sequence[Stage] | None = None) -> str:
  """Writes `<results_dir>/SUMMARY.md` from the records there; returns its path."""
  return _summary.write_summary(results_dir, _order(registry), run, committed_dir=RESULTS_DIR)


def update_readme(readme_path: str, results_dir: str = RESULTS_DIR,
                  modes: Sequence[str] = ("full",)) -> bool:
  """Rewrites README.md's RESULTS block from the records of `modes`; True if it changed."""
  return _summary.update_readme(readme_path, results_dir, _order(), modes)


def reanalyse(results_dir: str = RESULTS_DIR) -> int:
  """Re-judges every record in `results_dir` from its stored samples
  (`jaxrl_suite.repro.records.reanalyse`), prints its report; returns 0 when every verdict is
  the one recomputed, 1 on a mismatch, 2 when the folder is missing."""
  if not os.path.isdir(results_dir):
    print(f"--reanalyse: {results_dir} is not a directory; give --results_dir=<the folder "
          "holding <name>.json records> (default results/)", file=sys.stderr)
    return 2
  from jaxrl_suite.repro.records import reanalyse as _reanalyse   # the summary does not need it
  rep = _reanalyse(results_dir)
  print(rep.text())
  return 0 if rep.ok else 1


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
  import argparse
  p = argparse.ArgumentParser(description="Run the reproductions and write results/SUMMARY.md.")
  p.add_argument("--quick", action="store_true",
                 help="quick mode of every reproduction: a smoke check of each pipeline, "
                      "written to workdirs/results_quick/ (never results/)")
  p.add_argument("--only", default="", help="comma list of reproductions, e.g. fore,ballast")
  p.add_argument("--summary_only", action="store_true",
                 help="run nothing; rebuild SUMMARY.md from the existing results")
  p.add_argument("--readme", action="store_true",
                 help="also rewrite the RESULTS block of README.md (verdict counts per "
                      "reproduction and a link to results/SUMMARY.md)")
  p.add_argument("--readme_modes", default="full",
                 help="record modes counted in the README block (comma list; default full)")
  p.add_argument("--reanalyse", action="store_true",
                 help="run nothing; re-judge every record from its stored samples and exit "
                      "non-zero on a verdict that differs")
  p.add_argument("--results_dir", default=None,
                 help="where records are written and summarised (default: results/ in full "
                      "mode, workdirs/results_quick/ in quick mode)")
  p.add_argument("--log_dir", default=LOG_DIR)
  p.add_argument("--timeout_s", type=float, default=None, help="per-stage time limit")
  p.add_argument("--jobs", type=int, default=None,
                 help="stages run at once (default: 2 in quick mode, where each stage is mostly "
                      "single-threaded XLA compilation; 1 in full mode, whose stages use every "
                      "core)")
  p.add_argument("--heartbeat_s", type=float, default=60.0,
                 help="seconds between the lines that show each running stage's last log line")
  p.add_argument("--list", action="store_true", help="list the reproductions and exit")
  p.add_argument("--stream", action="store_true",
                 help="show each stage's own output (and progress bar) live, not only in its "
                      "log (runs one stage at a time)")
  p.add_argument("--no_progress", action="store_true")
  args = p.parse_args(argv)
  if args.list:
    for s in REGISTRY:
      print(f"{s.name:18s} {s.module:32s} {'' if module_exists(s.module) else '(missing) '}"
            f"{s.title}")
    return 0
  if args.reanalyse:
    return reanalyse(args.results_dir or RESULTS_DIR)
  stages = select(args.only)
  readme_dir = args.results_dir or RESULTS_DIR     # the README shows the committed results
  args.results_dir = args.results_dir or default_results_dir(args.quick)
  jobs = args.jobs if args.jobs is not None else (2 if args.quick else 1)
  results: list[StageResult] = []
  t0 = time.time()
  if not args.summary_only:
    print(f"{'quick' if args.quick else 'full'} mode: {len(stages)} stage(s), {jobs} at a time; "
          f"records go to {_rel(args.results_dir)}/, logs to {_rel(args.log_dir)}/", flush=True)
    results = run_all(stages, args.quick, args.results_dir, args.log_dir,
                      progress=not args.no_progress, timeout_s=args.timeout_s,
                      stream=args.stream, jobs=jobs, heartbeat_s=args.heartbeat_s)
  path = write_summary(args.results_dir, results)
  print(f"wrote {_rel(path)}" + (f" ({_fmt_s(time.time() - t0)} in all)" if results else ""))
  if args.quick:
    print(f"quick mode: records, reports and plots are in {_rel(args.results_dir)}/; their "
          f"verdicts are smoke checks of each pipeline, not reproductions (those are the "
          f"full-mode records in {_rel(RESULTS_DIR)}/)")
  if args.readme:
    changed = update_readme(os.path.join(REPO_ROOT, "README.md"), readme_dir,
                            tuple(m.strip() for m in args.readme_modes.split(",")))
    print("README.md results block " + ("updated" if changed else "unchanged"))
  failed = [r for r in results if r.status == "failed"]
  skipped = [r for r in results if r.status == "skipped"]
  if skipped:
    print(f"skipped (not written yet): {', '.join(r.name for r in skipped)}")
  if failed:
    print(f"FAILED: {', '.join(f'{r.name} ({r.note}; log {r.log})' for r in failed)}",
          file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
