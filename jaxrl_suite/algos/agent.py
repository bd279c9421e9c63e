"""The agent interface of the one on-policy learner, defined in `jaxrl_suite.agents.interface`
(every agent implements it, and agents/ sits below algos/ in the layer order, ARCHITECTURE.md).
Named here for the learner's modules and for code written against `jaxrl_suite.algos.agent`.
"""

from jaxrl_suite.agents.interface import (ZERO, Agent, Eval, Step,  # noqa: F401
                                          feed_forward, no_carry)
