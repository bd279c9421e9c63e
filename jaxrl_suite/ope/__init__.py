"""jaxrl_suite.ope: off-policy evaluation.

`interval`   studentized interval with refusal rules (returns which interval and why);
`coverage`   coverage of the intervals on tabular families with exact answers.
`fore`       closed-form FORE = linear MWL / IV-LSTDQ estimator, sandwich/bootstrap CIs,
             diagnostics, vmapped and chunked forms, (ratio-weighted) fitted Q iteration.
`baselines`  FQE, LSTDQ, BRM, MWL, DualDICE, GradientDICE, IS, WIS, PDIS, WPDIS, DR.
`metrics`    DOPE-style per-seed metrics: normalised error, Spearman, regret@k.
`mdps`       hub-and-spoke counterexample, random MDP families, exact values, samplers.
`datasets`   RLDS episodes through tensorflow-datasets (array_record, no TensorFlow).
`studies`    the FORE reproduction's sections (hub, families, sweep, DOPE table, RLDS round trip)
             as functions returning plain dicts; experiments/fore.py wires them and judges claims.

FORE is consistent under three assumptions, not one: the ratio d_pi/d_mu (or Q^pi) in the span of
the features, A nonsingular, and finite E[w^2 delta^2]; see `fore.py`.
"""

# Submodules are imported explicitly (`from jaxrl_suite.ope import fore`); the package does not
# re-export the `fore` function, which would shadow the `fore` submodule.
