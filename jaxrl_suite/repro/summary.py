"""Tables of the verdicts in a folder of results records (`<name>.json`, `core.results` schema).

Generated from the records, never typed: `experiments/reproduce.py` writes them into
`results/SUMMARY.md` and the README's results block with the two writers at the end.

  load_records(dir, order)      every record with claims, in `order` then alphabetical
                                (records of runs on ad-hoc inputs are left out)
  summary_table(records, dir)   one row per claim: reproduction, claim, paper, ours (95% CI),
                                verdict, links to <name>.md / .png, mode, commit
  verdict_counts(records)       {verdict: number of claims}
  readme_table(records, dir)    one row per reproduction: its claims per verdict
  replace_block(text, begin, end, block)   `text` with the part between two markers replaced
  write_summary(dir, order, run)   `<dir>/SUMMARY.md`: the cross-domain section (and its figure,
                                crossdomain.png), every claim, what has no record, the last run
  update_readme(path, dir, order, modes)   the README block between README_BEGIN and README_END
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Mapping, Sequence

from jaxrl_suite.core import results as _results
from jaxrl_suite.repro.runner import rel as _rel

README_BEGIN = "<!-- RESULTS:BEGIN -->"
README_END = "<!-- RESULTS:END -->"
CROSSDOMAIN_PNG = "crossdomain.png"     # the cross-domain figure, next to SUMMARY.md


def load_records(results_dir: str, order: Sequence[str] = ()) -> list[dict]:
  """Every `<results_dir>/*.json` record with claims, sorted by `order` (names) then by name.

  Unreadable files and JSON that is not a record are skipped; records of runs on ad-hoc inputs
  (`adhoc_inputs`, e.g. --eval_trace) are left out. Each record gets `_file`, its file stem.
  """
  records = []
  for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
    try:
      with open(path) as f:
        rec = json.load(f)
    except (OSError, json.JSONDecodeError):
      continue
    if isinstance(rec, dict) and "claims" in rec and "name" in rec and not rec.get(
        "adhoc_inputs"):
      rec["_file"] = os.path.splitext(os.path.basename(path))[0]
      records.append(rec)
  rank = {n: i for i, n in enumerate(order)}
  return sorted(records, key=lambda r: (rank.get(r["name"], len(rank)), r["name"]))


def cell(x: Any) -> str:
  """A markdown table cell: pipes escaped, newlines flattened."""
  return str(x).replace("|", "\\|").replace("\n", " ").strip()


def _links(f: str, results_dir: str, link_prefix: str) -> str:
  """`[report](<prefix><f>.md)`, and `[plot](<prefix><f>.png)` when the PNG exists."""
  links = [f"[report]({link_prefix}{f}.md)"]
  if os.path.exists(os.path.join(results_dir, f"{f}.png")):
    links.append(f"[plot]({link_prefix}{f}.png)")
  return " ".join(links)


def summary_table(records: Sequence[Mapping[str, Any]], results_dir: str,
                  link_prefix: str = "") -> str:
  """The verdict table: one row per claim of every record.

  Links are `<link_prefix><name>.md` and `.png` (prefix "" inside results/, "results/" from the
  repository root); the plot link appears only if the PNG exists.
  """
  rows = ["| reproduction | claim | paper | ours (95% CI) | verdict | details | mode | commit |",
          "|---|---|---|---|---|---|---|---|"]
  for rec in records:
    links = _links(rec.get("_file", rec["name"]), results_dir, link_prefix)
    prov = rec.get("provenance", {})
    commit = str(prov.get("commit", "unknown"))[:8] + ("+dirty" if prov.get("dirty") else "")
    for c in rec["claims"]:
      rows.append("| " + " | ".join([
          cell(rec["name"]), cell(c.get("claim", "")), cell(c.get("paper", "")),
          cell(_results.ours_with_ci(c)), f"**{cell(c.get('verdict', ''))}**", links,
          cell(rec.get("mode", "?")), f"`{commit}`"]) + " |")
  return "\n".join(rows)


def verdict_counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
  """{verdict: number of claims with it} over every record."""
  counts: dict[str, int] = {}
  for rec in records:
    for c in rec["claims"]:
      counts[c.get("verdict", "?")] = counts.get(c.get("verdict", "?"), 0) + 1
  return counts


def counts_text(counts: Mapping[str, int]) -> str:
  """"contradicted 1, reproduced 2" (sorted by verdict), or "none"."""
  return ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) or "none"


def readme_table(records: Sequence[Mapping[str, Any]], results_dir: str,
                 link_prefix: str = "results/") -> str:
  """One row per reproduction: its number of claims and how many got each verdict (columns in
  `core.results.ROW_VERDICTS` order, a verdict no claim got left out), with report/plot links."""
  per: dict[str, list[Mapping[str, Any]]] = {}
  for rec in records:
    per.setdefault(rec.get("_file", rec["name"]), []).append(rec)
  used = [v for v in _results.ROW_VERDICTS if any(c.get("verdict") == v for rec in records
                                                  for c in rec["claims"])]
  rows = ["| reproduction | claims | " + " | ".join(used) + " | details |",
          "|---|---:|" + "---:|" * len(used) + "---|"]
  for f, recs in per.items():
    claims = [c for rec in recs for c in rec["claims"]]
    n = [sum(c.get("verdict") == v for c in claims) for v in used]
    rows.append(f"| {cell(f)} | {len(claims)} | " + " | ".join(str(k) for k in n)
                + f" | {_links(f, results_dir, link_prefix)} |")
  return "\n".join(rows)


def replace_block(text: str, begin: str, end: str, block: str, where: str = "the file") -> str:
  """`text` with everything from `begin` up to (not including) `end` replaced by `block` (which
  starts with `begin` itself). Raises ValueError naming `where` when the markers are missing."""
  i, j = text.find(begin), text.find(end)
  if i < 0 or j < i:
    raise ValueError(f"{where} lacks the markers {begin} ... {end}; put them around the place "
                     "the results block goes")
  return text[:i] + block + text[j:]


def write_summary(results_dir: str, order: Sequence[str], run: Sequence[Any] = (),
                  committed_dir: str = _results.RESULTS_DIR) -> str:
  """Writes `<results_dir>/SUMMARY.md` from the records there; returns its path.

  `order` names the reproductions (rows in that order; those with no record are listed as
  missing); `run` is the last run's stage results (`runner.StageResult`), a table of them when
  given. The header names the folder the records were read from and, when any record is a quick
  one, says that its verdicts are smoke checks (the pipeline ran on a tiny budget), not results,
  pointing at the full-mode records in `committed_dir`.
  """
  records = load_records(results_dir, order)
  modes = sorted({r.get("mode", "?") for r in records})
  counts = verdict_counts(records)
  where, committed = _rel(results_dir), _rel(committed_dir)
  lines = ["# Reproduction summary", "",
           f"Generated by `python -m experiments.reproduce` from the records in `{where}/` "
           "(`<name>.json`, one per reproduction); do not edit. "
           f"Modes present: {', '.join(modes) or 'none'} (quick mode is a CI smoke run; only "
           "full-mode rows are the reproductions' numbers).", ""]
  if "quick" in modes:
    lines += [f"**Quick mode: the verdicts below are smoke checks.** Each stage ran its whole "
              "pipeline (train a little, evaluate, judge, write the record and plot) on a tiny "
              "budget; they say nothing about the claims. The reproductions' numbers are the "
              f"full-mode records in `{committed}/` (`{committed}/SUMMARY.md`).", ""]
  lines += [crossdomain_section(records, results_dir), "## Every claim", "",
            "Verdicts: " + counts_text(counts),
            "", summary_table(records, results_dir, link_prefix=""), ""]
  have = {r["name"] for r in records}
  missing = [n for n in order if n not in have]
  if missing:
    lines += [f"No results yet for: {', '.join(missing)}.", ""]
  if run:
    lines += ["## Last run", "", "| reproduction | status | wall time | CPU time | note |",
              "|---|---|---|---|---|"]
    lines += [f"| {r.name} | {r.status} | {r.wall_s:.0f} s | {r.cpu_s:.0f} s | {cell(r.note)} |"
              for r in run]
    lines.append("")
  os.makedirs(results_dir, exist_ok=True)
  path = os.path.join(results_dir, "SUMMARY.md")
  with open(path, "w") as f:
    f.write("\n".join(lines))
  return path


def crossdomain_section(records: Sequence[Mapping[str, Any]], results_dir: str) -> str:
  """The cross-domain section (`crossdomain.section`) with its figure, drawn next to SUMMARY.md
  as CROSSDOMAIN_PNG (removed when no row has an interval, so no stale plot stays)."""
  from jaxrl_suite.repro import crossdomain   # numpy, scipy: only when a summary is written
  os.makedirs(results_dir, exist_ok=True)
  png = os.path.join(results_dir, CROSSDOMAIN_PNG)
  drawn = crossdomain.figure(records, png)
  if drawn is None and os.path.exists(png):
    os.remove(png)
  return crossdomain.section(records, CROSSDOMAIN_PNG if drawn else None)


def update_readme(readme_path: str, results_dir: str, order: Sequence[str],
                  modes: Sequence[str] = ("full",)) -> bool:
  """Replaces the text between README_BEGIN and README_END of README.md with a short block: the
  verdict counts per reproduction of the records whose mode is in `modes` (by default only
  full-mode numbers reach the README), the reproductions of `order` with none, and a link to
  `results/SUMMARY.md`, which has every claim.

  Returns True if the file changed. Raises ValueError if the markers are missing.
  """
  with open(readme_path) as f:
    text = f.read()
  records = [r for r in load_records(results_dir, order) if r.get("mode") in modes]
  have = {r["name"] for r in records}
  missing = [n for n in order if n not in have]
  counts = verdict_counts(records)
  block = (f"{README_BEGIN}\n<!-- generated by `python -m experiments.reproduce --summary_only "
           f"--readme` from results/*.json; do not edit by hand -->\n\n"
           f"Mode: {'/'.join(modes)}. {sum(counts.values())} claims; verdicts: "
           + counts_text(counts) + ". "
           "Every claim with the paper's figure, ours with its 95% CI and the verdict: "
           "[results/SUMMARY.md](results/SUMMARY.md).\n\n"
           + readme_table(records, results_dir, link_prefix="results/") + "\n\n"
           + (f"No {'/'.join(modes)}-mode results yet for: {', '.join(missing)}.\n\n"
              if missing else ""))
  new = replace_block(text, README_BEGIN, README_END, block, readme_path)
  if new != text:
    with open(readme_path, "w") as f:
      f.write(new)
  return new != text
