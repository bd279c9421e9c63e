"""jaxrl_suite.train.serving: the LLM serving studies' stages over envs/serving.

experiments/serving_batching.py and experiments/serving_routing.py wire them into stages, judge
the claims with jaxrl_suite.repro and write the records. They live in train/ because they put
the serving envs, the agents and the learners (PPO, REINFORCE, behaviour cloning) together,
which only this layer may do (ARCHITECTURE.md, "Layers"); choices and verdicts stay in the
scripts. The measurement protocol below them (tuning, capacity, tables, replays) is
envs/serving/protocol.py and envs/serving/replay.py.

`training`        RL on S seeds vmapped in one jit: budget checkpoints, resume, BC warm start,
                  the one network policy every learned variant runs under, cache fingerprint.
`routing_setup`   what a trace fixes (Setup), each cluster's env (Cluster), one evaluator.
`routing_stages`  the heuristic stage (capacity, tuning) and the RL stage, cached in the workdir.
`routing_tables`  budget sweep tables, display ratios and gains, the record's payload.
`routing_report`  the routing record's markdown.
`batching_study`  the batching study: env per trace and mode, capacity, tuning, RL, tables.
`batching_report` the batching record's markdown and figure.
`figures`         learning-curve panels (both studies) and the routing figure.
"""
