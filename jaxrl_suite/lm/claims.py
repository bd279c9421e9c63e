"""SceneCap claim parsing and claim-level rewards, defined in `jaxrl_suite.envs.text.claims`
(a re-export).

The parser lives with the SceneCap environment, which scores its episodes with it, because
envs/ sits below lm/ in the layer order (ARCHITECTURE.md). This name stays importable for
notebooks and user code written against it; the library imports the defining module.
"""

from jaxrl_suite.envs.text.claims import *  # noqa: F401,F403
