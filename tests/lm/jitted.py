"""Library calls the LM tests share, jitted once per config.

Called eagerly, a model's `init` dispatches (and compiles) each op on its own: 2-4 CPU-s per
call on a tiny model, paid in every test that makes parameters. Jitted, each config compiles once
per process. The values can differ from the eager call's in the last bit (XLA fuses the
initialisers), so no test compares these parameters with ones the library made eagerly.
"""

import jax

from jaxrl_suite.lm import model as lm_model

init_params = jax.jit(lm_model.init_params, static_argnums=0)
