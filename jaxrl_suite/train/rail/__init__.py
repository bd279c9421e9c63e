"""jaxrl_suite.train.rail: the rail pricing study's stages over RailRM-v0 (envs/rail).

experiments/rail_pricing.py wires them into stages, judges the claims with jaxrl_suite.repro and
writes the record. They live in train/ because they put the rail env, the rail agent
(agents/rail_features.py) and the one on-policy learner together, which only this layer may do
(ARCHITECTURE.md, "Layers"); repro's rules and intervals come in as callables.

`variants`  variant names ("mappo_rel_delta"), the variant's env, agent and PPO learner.
`rl_stage`  one variant trained on S seeds over the budget sweep, scored on tuning episodes at
            every budget and on held-out episodes at the main budget.
`report`    the record's tables (policies x metrics with CIs, the upper bound) and markdown.
`figure`    the record's figure (training curves, budget sweep, held-out revenue).
"""
