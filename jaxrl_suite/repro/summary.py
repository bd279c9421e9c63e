"""Tables of the verdicts in a folder of results records (`<name>.json`, `core.results` schema).

Generated from the records, never typed: `experiments/reproduce.py` writes them into
`results/SUMMARY.md` and the README's results block.

  load_records(dir, order)      every record with claims, in `order` then alphabetical
                                (records of runs on ad-hoc inputs are left out)
  summary_table(records, dir)   one row per claim: reproduction, claim, paper, ours (95% CI),
                                verdict, links to <name>.md / .png, mode, commit
  verdict_counts(records)       {verdict: number of claims}
  readme_table(records, dir)    one row per reproduction: its claims per verdict
  replace_block(text, begin, end, block)   `text` with the part between two markers replaced
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any, Mapping, Sequence

from jaxrl_suite.core import results as _results


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
