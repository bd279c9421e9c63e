"""experiments/ballast_hydro.py on the reproduction layer: registered claims, the claim rows built
from per-seed samples (synthetic scores with known answers), the fair-chance sweep read from the
validation layouts, and the config's disjoint layout seed ranges."""

import numpy as np
import pytest

from configs import ballast_hydro as cfg
from jaxrl_suite.repro import Claim, records, selection


def test_claims_register_and_seed_ranges_are_disjoint():
  regs = [Claim.from_dict(d) for d in cfg.claims()]
  assert len({r.id for r in regs}) == len(regs) == 10
  assert all(r.why and r.selection for r in regs)
  assert all(r.fair_chance for r in regs if r.kind != "descriptive")
  c = cfg.get_config("quick")
  cfg.validate(c)
  c.val_seed0 = c.heldout_seed0 + 10
  with pytest.raises(ValueError, match="val_seed0"):
    cfg.validate(c)


def _scores(rng, S, N, rl_steps, base_steps):
  nb = np.r_[np.zeros(N // 4, int), np.ones(N - N // 4, int)]
  def pol(steps, s):
    x = steps + rng.normal(0, 0.5, (s, N))
    return {"steps_eff": x if s > 1 else x[0], "violated": np.zeros((s, N)) if s > 1 else
            np.zeros(N)}
  sc = {"rl_gru": pol(rl_steps, S), "heel_aware": pol(base_steps, 1),
        "replan": pol(base_steps * 2, 1), "_n_blocked": nb}
  counts = lambda: {"tp": np.full((S, N), 3), "fp": np.full((S, N), 1), "fn": np.full((S, N), 1)}
  return sc, {"rl_gru": {"head": counts(), "reference": counts()}}


def test_claim_rows_have_known_answers():
  from experiments import ballast_hydro as X
  rng = np.random.default_rng(0)
  S, N = 3, 40
  scores, diag = {}, {}
  for name in ("gen5000", "ring14"):
    scores[name], diag[name] = _scores(rng, S, N, rl_steps=10.0, base_steps=20.0)
  evals = {"gen5000": ("held_out",), "ring14": ("shipped",)}
  # a flat validation sweep (budgets 10 -> 20 updates, per-seed steps_eff [S, L, n])
  sweep = [{"updates": u, "steps_eff": np.full((S, 1, 8), 12.0) + rng.normal(0, 0.01, (S, 1, 8))}
           for u in (10, 20)]
  comp = selection.pick_best("heel-aware comparator", {"heel_replan_1": [20.0],
                                                      "heel_replan_multi": [21.0]},
                             data="training banks", better="lower")
  c = cfg.get_config("quick")
  mode = selection.pick_best("rl_gru action mode", {"greedy": [10.0, 10.2],
                                                    "sampled": [11.0, 11.5]},
                             data="training banks", better="lower")
  rows = X._claims(c, scores, diag, evals, sweep, comp, mode)
  assert len(rows) == 10
  by_id = {r["repro"]["rule"]["id"]: r for r in rows}
  for r in rows:
    assert records.check_row(r) is None
  # RL takes half the heel-aware replanner's steps: 50% fewer > 32%
  r = by_id["ballast_hydro.rl_vs_heel_aware_32_held_out.v1"]
  assert r["verdict"] == "reproduced", r["detail"]
  assert len(r["repro"]["samples"]["a"]) == S
  assert r["repro"]["fair_chance"]["budgets"] == [10.0, 20.0]
  assert [s["choice"] for s in r["repro"]["selection"]] == ["heel_replan_1", "greedy"]
  # the heel-blind replanner is a descriptive row (no verdict), with its interval
  d = by_id["ballast_hydro.rl_vs_replan_held_out.v2"]
  assert d["verdict"] == "descriptive" and d["repro"]["rule"]["kind"] == "descriptive"
  # both diagnosis forms are registered and judged: equal counts are non-inferior, not superior
  assert by_id["ballast_hydro.diagnosis_superior_shipped.v1"]["verdict"] != "reproduced"
  # same head and reference counts: the diagnosis is non-inferior
  assert by_id["ballast_hydro.diagnosis_noninferior_shipped.v1"]["verdict"] == "reproduced"
  # no violations on either side: no difference shown, and the sweep is flat
  v = by_id["ballast_hydro.rl_fewer_limit_violations_held_out.v2"]
  assert v["verdict"] != "reproduced"
