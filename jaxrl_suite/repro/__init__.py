"""jaxrl_suite.repro: the reproduction layer. Every verdict comes from here.

  claims     -- a Claim registered before its run (kind, margin, unit, why)
  intervals  -- CIs that cover at 2-10 seeds (t, log-ratio, Fieller, crossed, BCa)
  verdicts   -- the verdict vocabulary and judge(claim, interval)
  flatness   -- the "RL had a fair chance" rule on a budget sweep
  selection  -- choices made on training data, with their record
  aggregate  -- rliable-style IQM / probability of improvement across tasks
  grid       -- a claim about where an effect is reachable, judged on one grid of conditions
  records    -- claim records (JSON) and the reanalysis that re-judges them
  format     -- the one "mean [lo, hi]" formatter
  stage_cache -- finished stages in the workdir, keyed by config + library (JSON / npz, no pickle)
  entry      -- a script's --quick/--workdir/--config, output folder and user errors
  workers    -- helper processes sharing a run's stage cache (--workers)
  summary    -- verdict tables of a folder of records (results/SUMMARY.md, the README block)
  runner     -- reproduction scripts run as subprocesses, logged, their records checked
See docs/reproduction.md. Depends on numpy, scipy, absl + ml_collections (entry) and
jaxrl_suite.core only.
"""

from jaxrl_suite.repro.claims import Claim
from jaxrl_suite.repro.intervals import Interval
from jaxrl_suite.repro.records import claim_record, reanalyse, rejudge
from jaxrl_suite.repro.verdicts import Verdict, judge

__all__ = ["Claim", "Interval", "Verdict", "claim_record", "judge", "reanalyse", "rejudge"]
