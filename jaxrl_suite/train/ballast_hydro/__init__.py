"""jaxrl_suite.train.ballast_hydro: the BallastHydro-v0 study's stages that need the RL agent.

experiments/ballast_hydro.py wires them into stages, judges the claims with jaxrl_suite.repro and
writes the record. They live in train/ because they put the hydro env (envs/ballast), the
recurrent agent (agents/ballast_hydro.py) and the learner (algos/ballast.make_trainer) together,
which only this layer may do (ARCHITECTURE.md, "Layers"). The stages that need no agent (layout
picking, banks, baselines, statistics, tables, report) sit in envs/ballast/hydro_*.py.

`evaluators`  the jitted evaluators: baselines, RL policies over seeds, head and reference
              diagnosers.
`rl_stage`    every variant trained on S seeds across the training layouts, the greedy policy
              scored on the validation layouts at every budget checkpoint.
`scoring`     every policy on every evaluation bank (paired episodes) and the diagnosis counts.
"""
