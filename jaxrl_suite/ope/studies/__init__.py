"""jaxrl_suite.ope.studies: the FORE reproduction's studies, as functions over tabular MDPs.

Each module is one study (or one tool the studies share); the script experiments/fore.py wires
them into stages, judges the claims with jaxrl_suite.repro and writes the record. Every study
runs in float64 (the caller enables `jax_enable_x64`) and returns plain dicts of floats and
lists, plus a `units` entry of per-seed (or per-MDP) numpy samples where a claim is judged on
them.

`kernels`       jitted estimators vmapped over multinomial cell-count weight vectors.
`summaries`     Wilson and t intervals, NaN-aware means (the tables' small statistics).
`rates`         the root-n rate: log-log RMSE slope with a seed bootstrap, per-seed slopes.
`hub`           section A: hub-and-spoke MDP, population values and finite-n behaviour.
`families`      section B: random "moderate" / "severe" families, population and pools.
`family_stats`  section B at one n: per-MDP seed statistics and the pooled table row.
`honest`        section B2: the studentized interval with refusal rules on a fresh pool.
`sweep`         section C: ratio realizable while sigma_min(A) -> 0.
`dope`          section D: DOPE-style table over target policies, FORE and every baseline.
`cartpole`      section E: CartPole-v1 rollouts through RLDS (array_record) and back into FORE.
`report`        the record's markdown (sections A-E and the claims' details).
`figure`        the record's 2 x 2 summary figure (returned, not saved).
"""
