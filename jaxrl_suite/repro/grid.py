"""A claim about where an effect is reachable, tested as one grid of conditions.

  grid_record(claim, cells, expected, a_label="ours", b_label="reference") -> claim row
  judge_grid(claim, intervals, expected) -> Verdict

Some claims are about a region, not a point: "32% fewer steps is reachable only against a weak
baseline or at a coarse step". Testing each condition separately loses the "only": a 33% saving
against a weak baseline and a 20% saving against the strong one are two half-verdicts. Here the
claim registers its cell rule (a superiority claim of size c on the effect d, claims.py) and,
before the run, which cells it says reach the size (`expected[cell]` True) and which it says do
not (False). Each cell's interval is the cell rule's (the claim's unit and interval method);
with the CI [lo, hi] of d in a cell:

  reaches:  lo >= c  (the whole CI at or beyond the claimed size)
  misses:   hi <  c  (the whole CI short of it)
  unsure:   otherwise

and the grid's verdict (the one vocabulary, verdicts.py):

  contradicted     some cell expected to miss reaches the size (reachable where the claim says
                   it is not);
  reproduced       every cell expected to miss misses, and some cell expected to reach reaches;
  not reproduced   every cell misses (the size is reached nowhere on the grid);
  inconclusive     otherwise (underpowered: the unsure cells are named).

A grid row stores each cell's samples, interval method and result beside the rule and the
expectation, so `records.recompute` re-derives the verdict from the record alone.
"""

from __future__ import annotations

from typing import Any, Mapping

from jaxrl_suite.repro import intervals as _iv
from jaxrl_suite.repro import verdicts as _v
from jaxrl_suite.repro.claims import Claim
from jaxrl_suite.repro.format import fmt_interval

GRID_VERSION = 1


def _cell_state(claim: Claim, iv: _iv.Interval) -> str:
  c = claim.to_d(claim.size)
  _, lo, hi = _v.effect_interval(claim, iv)     # oriented: "better" > 0
  if lo >= c:
    return "reaches"
  if hi < c:
    return "misses"
  return "unsure"


def _check(claim: Claim, expected: Mapping[str, bool], cells) -> None:
  if claim.kind != "superiority" or claim.size is None:
    raise ValueError(f"grid claim {claim.id!r}: the cell rule must be a superiority claim with "
                     "a size (the amount the grid says is or is not reachable)")
  if set(expected) != set(cells):
    raise ValueError(f"grid claim {claim.id!r}: expected names cells {sorted(expected)}, the "
                     f"samples name {sorted(cells)}; register one expectation per cell")
  if not any(expected.values()) or all(expected.values()):
    raise ValueError(f"grid claim {claim.id!r}: the grid needs cells expected to reach the size "
                     "and cells expected to miss it (else it is a plain superiority claim)")


def judge_grid(claim: Claim, ivs: Mapping[str, _iv.Interval], expected: Mapping[str, bool]
               ) -> _v.Verdict:
  """The grid verdict (module doc) from each cell's interval."""
  _check(claim, expected, ivs)
  state = {k: _cell_state(claim, iv) for k, iv in ivs.items()}
  size = f"{claim.from_d(claim.to_d(claim.size)):g}"
  wrong = [k for k in ivs if not expected[k] and state[k] == "reaches"]
  if wrong:
    return _v.Verdict(_v.CONTRADICTED, f"the size {size} is reached where the claim says it "
                                       f"is not: {', '.join(wrong)}")
  held = all(state[k] == "misses" for k in ivs if not expected[k])
  hits = [k for k in ivs if expected[k] and state[k] == "reaches"]
  if held and hits:
    return _v.Verdict(_v.REPRODUCED, f"the size {size} is missed in every cell expected to "
                                     f"miss it and reached in {', '.join(hits)}")
  if all(s == "misses" for s in state.values()):
    return _v.Verdict(_v.NOT_REPRODUCED, f"the size {size} is reached in no cell of the grid")
  unsure = [k for k, s in state.items() if s == "unsure"]
  return _v.Verdict(_v.INCONCLUSIVE, f"{_v.UNDERPOWERED}: the CI straddles the size {size} in "
                                     f"{', '.join(unsure)}")


def grid_record(claim: Claim, cells: Mapping[str, tuple[Any, Any]],
                expected: Mapping[str, bool]) -> dict[str, Any]:
  """One claim row for a grid claim: cells {name: (a, b)} per-unit samples of ours and the
  reference in that condition (paired by unit, shapes as records.claim_record); expected {name:
  bool} registered before the run. The row's "ours" lists every cell's interval."""
  _check(claim, expected, cells)
  stored, ivs = {}, {}
  for name, (a, b) in cells.items():
    method, samples, params, iv = _iv.interval_for(claim.unit, a, b,
                                                   ratio=claim.scale == "log_ratio")
    ivs[name] = iv
    stored[name] = {"samples": samples, "method": method, "params": dict(params),
                    "result": iv.to_dict(), "state": _cell_state(claim, iv),
                    "expected_to_reach": bool(expected[name])}
  verdict = judge_grid(claim, ivs, expected)
  ours = "; ".join(f"{k}: {fmt_interval(iv)}" for k, iv in ivs.items())
  repro = {"layer_version": GRID_VERSION, "rule": claim.to_dict(),
           "grid": {"version": GRID_VERSION, "cells": stored}, "verdict": verdict.to_dict()}
  return {"claim": claim.text, "paper": claim.paper, "ours": ours, "ci95": None,
          "verdict": verdict.word, "detail": verdict.reason, "repro": repro}


def recompute_grid(repro: Mapping[str, Any]) -> tuple[_v.Verdict, dict[str, _iv.Interval]]:
  """(verdict, {cell: interval}) re-derived from a grid row's repro block."""
  claim = Claim.from_dict(repro["rule"])
  cells = repro["grid"]["cells"]
  ivs = {k: _iv.compute(c["method"], c["samples"], c.get("params", {})) for k, c in cells.items()}
  expected = {k: bool(c["expected_to_reach"]) for k, c in cells.items()}
  return judge_grid(claim, ivs, expected), ivs
