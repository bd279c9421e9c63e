"""Token-level LLM-serving simulator: cost model, traces, batching and routing environments.

    env, params = make_batching(mode="static")   # ServingBatch-v0 (one GPU)
    env, params = make_routing()                 # ServingRoute-v0 (H100 + A100 + 2 x L4)

See `engine.py` for the iteration-level rules, `cost_model.py` for the cited constants,
`reference_sim.py` for the plain-Python event-driven reference, `heuristics.py` for baselines.
"""

from jaxrl_suite.envs.serving.batching import make_batching
from jaxrl_suite.envs.serving.routing import make_routing

__all__ = ["make_batching", "make_routing"]
