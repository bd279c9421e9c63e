"""The suite's symbol tokenizers, defined in `jaxrl_suite.envs.text.tokenizer` (a re-export).

The vocabulary lives with the text environments because their observations are token blocks in
it, and envs/ sits below lm/ in the layer order (ARCHITECTURE.md): lm/ may import envs/, never
the reverse. This name stays importable for notebooks and user code written against it; the
library imports the defining module.
"""

from jaxrl_suite.envs.text.tokenizer import *  # noqa: F401,F403
