"""Section B2: the studentized interval with refusal rules (ope.interval) on a fresh severe pool.

`interval_rules(cfg)` maps the config's interval_* fields to interval.RefusalRules (the rules the
config does not name are off: ESS and rare-cell share removed estimates without raising coverage
on the development pools). `honest(cfg)` draws cfg.fresh_family_mdps severe MDPs (population FQE
diverges) with their own seed cfg.fresh_family_seed, untouched while the rules were chosen, and
returns coverage.interval_coverage's dict (per n: coverage among passing estimates with a Wilson
CI, refusal rate, the rules that refused, per-MDP minimum coverage) plus `seed`.
"""
from __future__ import annotations

import numpy as np

from jaxrl_suite.ope import coverage as C
from jaxrl_suite.ope import interval as I


def interval_rules(cfg) -> I.RefusalRules:
  """The refusal rules of `interval.fore_interval` from cfg.interval_* (see the module doc)."""
  return I.RefusalRules(max_cond=float(cfg.interval_max_cond),
                        min_ident_t=float(cfg.interval_min_ident_t),
                        min_cell_count=float(cfg.interval_min_cell_count),
                        max_cell_excess=float(cfg.interval_max_cell_excess),
                        min_df=float(cfg.interval_min_df), min_ess_frac=0.0, max_rare_share=1.0,
                        crit_df_power=float(cfg.interval_crit_df_power))


def honest(cfg) -> dict:
  """Coverage among passing estimates by n and the refusal rate on the fresh pool (module doc).
  Config fields read: fresh_family_seed, fresh_family_mdps, fresh_family_seeds, fresh_min_pass,
  ns and the interval_* fields."""
  rng = np.random.default_rng(cfg.fresh_family_seed)
  rules = interval_rules(cfg)
  pool = C.shifted_pool(rng, "severe", cfg.fresh_family_mdps)
  out = C.interval_coverage(pool, rng, cfg.ns, cfg.fresh_family_seeds, rules, cfg.fresh_min_pass)
  out["seed"] = int(cfg.fresh_family_seed)
  return out
