"""Claim records you can re-judge: rule + per-unit samples + interval method + selection +
verdict, as JSON, and the reanalysis that recomputes every committed verdict.

A claim row in `results/<name>.json` keeps the legacy fields that `core.results` tables read
("claim", "paper", "ours", "ci95", "verdict", "detail") and adds everything needed to recompute
them under "repro":

    {"claim": text, "paper": ..., "ours": "1.175x [1.146x, 1.201x]", "ci95": [lo, hi],
     "verdict": word, "detail": reason,
     "repro": {"layer_version": 1,
               "rule": Claim.to_dict(),
               "samples": {"a": [...], "b": [...]} | {"x": [...]},   # per unit, [S][W] crossed
               "interval": {"method": str, "params": {...}, "result": Interval.to_dict()},
               "selection": [Selection.to_dict(), ...],
               "fair_chance": {"scores", "budgets", "delta", "scale", "better",
                               "result": Flatness.to_dict()} | null,
               "cannot_express": str | null,
               "verdict": Verdict.to_dict()}}

`rejudge(row)` recomputes the verdict from the stored samples; `reanalyse(dir)` does it for every
claim in `dir/*.json` and lists mismatches; rows without "repro" are legacy ("not on the layer
yet": counted, not mismatches).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
from typing import Any, Mapping, Sequence

from jaxrl_suite.repro import flatness as _flatness
from jaxrl_suite.repro import grid as _grid
from jaxrl_suite.repro import intervals as _iv
from jaxrl_suite.repro import verdicts as _v
from jaxrl_suite.repro.claims import Claim
from jaxrl_suite.repro.format import fmt_interval
from jaxrl_suite.repro.selection import Selection

LAYER_VERSION = 1


def claim_record(claim: Claim, a, b=None, *, method: str | None = None,
                 params: Mapping[str, Any] | None = None,
                 selection: Selection | Sequence[Selection] | None = None,
                 sweep: Mapping[str, Any] | None = None,
                 cannot_express: str | None = None) -> dict[str, Any]:
  """One claim row: computes the interval, judges it, and stores what recomputes both.

  a, b: per-unit samples of ours and the reference (paired by unit), or only `a` holding the
    per-unit effect (differences, or log-ratios on a log_ratio claim). Shapes follow the claim's
    unit: [S] for "seed", [S][W] for "seed x window", ragged [S][episodes] for "seed x episode".
  method/params: an interval method of `intervals.compute` (default: `intervals.interval_for`
    the claim's unit, on log-ratios when the claim's scale is "log_ratio").
  selection: what was chosen on training data for this claim (selection.py).
  sweep: RL's budget sweep on validation data, {"scores": [K, S(, W)], "budgets": [K]}; the
    threshold is the claim's flat_delta (needed when the claim registers fair_chance=True).
  cannot_express: why the testbed cannot express the claim (the verdict is then inconclusive).
  """
  if method is None:
    method, samples, params, iv = _iv.interval_for(claim.unit, a, b,
                                                   ratio=claim.scale == "log_ratio")
  else:
    samples = {"x": _iv._listify(a)} if b is None else {"a": _iv._listify(a),
                                                         "b": _iv._listify(b)}
    params = dict(params or {})
    if claim.unit == "seed x episode":
      params.setdefault("average_episodes", True)
    check_method(claim, method, params)
    iv = _iv.compute(method, samples, params)
  sels = _as_list(selection)
  fair = None
  flat = None
  if sweep is not None:
    if claim.flat_delta is None:
      raise ValueError(f"claim {claim.id!r}: a budget sweep needs the claim's flat_delta "
                       "(register fair_chance=True, flat_delta=...)")
    # The gain is on the claim's scale unless the sweep says otherwise (e.g. returns that can
    # be negative have no log-ratio); flat_delta is on the gain's scale.
    fair = {"scores": _iv._listify(sweep["scores"]),
            "budgets": [float(x) for x in sweep["budgets"]], "delta": float(claim.flat_delta),
            "scale": sweep.get("scale", claim.scale), "better": sweep.get("better", claim.better)}
    flat = _flatness.from_record(fair)
    fair["result"] = flat.to_dict()
  verdict = _v.judge(claim, iv, fair_chance=flat, selection=sels or None,
                     cannot_express=cannot_express)
  repro = {"layer_version": LAYER_VERSION, "rule": claim.to_dict(), "samples": samples,
           "interval": {"method": method, "params": dict(params), "result": iv.to_dict()},
           "selection": [s.to_dict() for s in sels], "fair_chance": fair,
           "cannot_express": cannot_express, "verdict": verdict.to_dict()}
  return {"claim": claim.text, "paper": claim.paper, "ours": fmt_interval(iv),
          "ci95": _paper_ci(claim, iv), "verdict": verdict.word, "detail": verdict.reason,
          "repro": repro}


# Which interval methods treat each unit of replication as the claim registers it.
_METHODS_FOR_UNIT = {
    "seed": ("t_mean", "paired_difference", "log_ratio", "fieller", "bca"),
    "seed x episode": ("t_mean", "paired_difference", "log_ratio", "fieller", "bca"),
    "seed x window": ("crossed", "crossed_fieller", "two_way_bootstrap"),
}


def check_method(claim: Claim, method: str, params: Mapping[str, Any]):
  """Raises ValueError when `method` does not match the claim's unit: seeds x windows need a
  crossed interval (a t over the S W cells treats windows and seeds as independent units);
  per-episode samples must be averaged per seed first."""
  allowed = _METHODS_FOR_UNIT[claim.unit]
  if method not in allowed:
    raise ValueError(f"claim {claim.id!r}: unit {claim.unit!r} needs an interval method in "
                     f"{allowed}, got {method!r}")
  if claim.unit == "seed x episode" and not params.get("average_episodes"):
    raise ValueError(f"claim {claim.id!r}: unit 'seed x episode' needs params "
                     "average_episodes=True (episodes are averaged per seed first)")


def _paper_ci(claim: Claim, iv: _iv.Interval) -> list[float] | None:
  """The CI in the paper's units (a ratio for log-ratio intervals); None when unbounded (the
  legacy "ci95" field holds finite numbers or null)."""
  lo, hi = iv.lo, iv.hi
  if iv.scale == "log_ratio":
    lo, hi = _iv._exp(lo), _iv._exp(hi)
  if not (math.isfinite(lo) and math.isfinite(hi)):
    return None
  return [float(lo), float(hi)]


def _as_list(selection) -> list[Selection]:
  if selection is None:
    return []
  return list(selection) if isinstance(selection, (list, tuple)) else [selection]


def on_layer(row: Mapping[str, Any]) -> bool:
  """Whether a claim row carries a rule and samples (else it is a legacy row)."""
  return isinstance(row.get("repro"), Mapping)


def recompute(row: Mapping[str, Any]) -> tuple[_v.Verdict, _iv.Interval]:
  """(verdict, interval) recomputed from a row's stored rule, samples, selection and sweep."""
  if not on_layer(row):
    raise ValueError("claim row has no 'repro' block (a legacy row): nothing to recompute")
  r = row["repro"]
  for field in ("rule", "samples", "interval"):
    if field not in r:
      raise ValueError(f"claim row's repro block lacks {field!r}")
  claim = Claim.from_dict(r["rule"])
  check_method(claim, r["interval"]["method"], r["interval"].get("params", {}))
  iv = _iv.compute(r["interval"]["method"], r["samples"], r["interval"].get("params", {}))
  flat = _flatness.from_record(r["fair_chance"]) if r.get("fair_chance") else None
  sels = []
  for d in r.get("selection") or []:
    s = Selection.from_dict(d)
    again = s.recheck()
    if again.choice != s.choice or again.ok != s.ok:
      s = dataclasses.replace(s, ok=False, reason=f"the stored choice {s.choice!r} is not the "
                              f"best of its stored scores ({again.choice!r})")
    sels.append(s)
  v = _v.judge(claim, iv, fair_chance=flat, selection=sels or None,
               cannot_express=r.get("cannot_express"))
  return v, iv


def rejudge(row: Mapping[str, Any]) -> _v.Verdict:
  """The verdict recomputed from a claim row's stored samples (see `recompute`)."""
  return recompute(row)[0]


@dataclasses.dataclass
class Report:
  """What `reanalyse` found: counts, mismatches (file, claim, stored, recomputed, why) and the
  legacy rows not on the layer yet (file, claim)."""
  directory: str
  files: int = 0
  checked: int = 0
  agree: int = 0
  mismatches: list[tuple[str, str, str, str, str]] = dataclasses.field(default_factory=list)
  legacy: list[tuple[str, str]] = dataclasses.field(default_factory=list)
  skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)

  @property
  def ok(self) -> bool:
    return not self.mismatches

  def text(self) -> str:
    lines = [f"reanalysis of {self.directory}: {self.files} record(s), {self.checked} claim(s) "
             f"on the layer re-judged, {self.agree} agree, {len(self.mismatches)} mismatch(es); "
             f"{len(self.legacy)} legacy claim(s) not on the layer yet"]
    for f, c, stored, new, why in self.mismatches:
      lines.append(f"MISMATCH {f}: {c}: stored {stored!r}, recomputed {new!r} ({why})")
    for f, c in self.legacy:
      lines.append(f"not on the layer yet {f}: {c}")
    for f, why in self.skipped:
      lines.append(f"skipped {f}: {why}")
    return "\n".join(lines)


def _close(x, y) -> bool:
  x, y = _iv._from_json_float(x), _iv._from_json_float(y)
  if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
    return x == y
  if math.isinf(x) or math.isinf(y) or math.isnan(x) or math.isnan(y):
    return str(x) == str(y)
  return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def _check_grid_row(row: Mapping[str, Any]) -> str | None:
  """check_row for a grid claim (grid.py): the verdict and every cell's interval."""
  try:
    v, ivs = _grid.recompute_grid(row["repro"])
  except (ValueError, KeyError, TypeError) as e:
    return f"cannot recompute: {e}"
  if row.get("verdict") != v.word or row["repro"].get("verdict", {}).get("word") != v.word:
    return f"verdict: stored {row.get('verdict')!r}, recomputed {v.word!r}"
  for name, iv in ivs.items():
    res = row["repro"]["grid"]["cells"][name].get("result", {})
    for k in ("estimate", "lo", "hi"):
      if not _close(res.get(k), getattr(iv, k)):
        return f"cell {name} interval {k}: stored {res.get(k)!r}, recomputed {getattr(iv, k)!r}"
  return None


def check_row(row: Mapping[str, Any]) -> str | None:
  """None when the row's stored verdict and interval are what the layer recomputes; else why
  not (one line). Grid claims (grid.py) are re-judged cell by cell."""
  if on_layer(row) and "grid" in row["repro"]:
    return _check_grid_row(row)
  try:
    v, iv = recompute(row)
  except (ValueError, KeyError, TypeError) as e:
    return f"cannot recompute: {e}"
  stored = row["repro"].get("verdict", {})
  if row.get("verdict") != v.word or stored.get("word") != v.word:
    return f"verdict: stored {row.get('verdict')!r}, recomputed {v.word!r}"
  if stored.get("label", v.word) != v.label:
    return f"label: stored {stored.get('label')!r}, recomputed {v.label!r}"
  res = row["repro"]["interval"].get("result", {})
  for k in ("estimate", "lo", "hi"):
    if not _close(res.get(k), getattr(iv, k)):
      return f"interval {k}: stored {res.get(k)!r}, recomputed {getattr(iv, k)!r}"
  return None


def reanalyse(results_dir: str) -> Report:
  """Re-judges every claim on the layer in `results_dir/*.json` (see the module doc)."""
  rep = Report(results_dir)
  for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
    name = os.path.basename(path)
    try:
      with open(path) as f:
        record = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
      rep.skipped.append((name, f"not readable JSON: {e}"))
      continue
    if not isinstance(record, Mapping) or not isinstance(record.get("claims"), list):
      rep.skipped.append((name, "no 'claims' list: not a results record"))
      continue
    rep.files += 1
    for i, row in enumerate(record["claims"]):
      if not isinstance(row, Mapping):
        rep.mismatches.append((name, f"claims[{i}]", repr(row)[:40], "(none)",
                               "a claim row must be a JSON object"))
        continue
      label = str(row.get("claim", f"claims[{i}]"))[:80]
      if not on_layer(row):
        rep.legacy.append((name, label))
        continue
      rep.checked += 1
      cid = row["repro"].get("rule", {}).get("id", label)
      why = check_row(row)
      if why is None:
        rep.agree += 1
      else:
        rep.mismatches.append((name, cid, str(row.get("verdict")), _recomputed_word(row), why))
  return rep


def _recomputed_word(row) -> str:
  try:
    if "grid" in row["repro"]:
      return _grid.recompute_grid(row["repro"])[0].label
    return rejudge(row).label
  except (ValueError, KeyError, TypeError):
    return "(error)"
