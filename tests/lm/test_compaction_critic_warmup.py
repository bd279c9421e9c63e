"""Critic warm-up in the compaction learner (`comp.make_mixed_train_step` with
`critic_warmup_steps`): during warm-up only the value head moves, fitted on the warm start's own
rollouts, and its loss falls; the first iteration after warm-up moves the policy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.text import stream_ledger as sl
from jaxrl_suite.lm import compaction as comp
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import token_ppo
from jaxrl_suite.lm import value as lm_value
from tests.lm import jitted

ENV = sl.StreamLedger(max_events=16, max_events_per_obs=4)
P = ENV.default_params.replace(num_events=8, max_steps_in_episode=64)
CFG = lm_model.LMConfig("t", vocab_size=sl.V.size, d_model=16, num_layers=1, num_heads=2,
                        d_ff=32, max_len=56, tokenizer_version=2)
WARMUP = 6


@pytest.mark.slow
def test_critic_loss_falls_during_warmup_and_policy_is_frozen():
  pcfg = token_ppo.TokenPPOConfig(epochs=2, num_minibatches=1, critic_lr=0.1,
                                  critic_warmup_steps=WARMUP)
  vcfg = lm_value.ValueConfig("shared")
  rcfg = comp.rollout_config("compaction", ENV, P.replace(num_events=8), 52)
  init, step = comp.make_mixed_train_step(CFG, vcfg, pcfg, ENV, P, rcfg, 4, (4, 8))
  params = jitted.init_params(CFG, jax.random.PRNGKey(0))
  vparams = lm_value.init_value_params(vcfg, CFG, jax.random.PRNGKey(1))
  # A value head that starts 1.0 off every target (returns are in [0, 1.25]): the loss starts
  # near 4 and can only fall by fitting the warm start's returns.
  vparams["head"]["out"]["bias"] = vparams["head"]["out"]["bias"] + 2.0
  carry = init(params, vparams, params)
  run = jax.jit(step)
  losses = []
  for i in range(WARMUP + 1):
    before = carry[0].params
    carry, m = run(carry, jax.random.PRNGKey(10 + i))
    losses.append(float(m["vf_loss"]))
    moved = max(float(jnp.abs(a - b).max()) for a, b in
                zip(jax.tree.leaves(before), jax.tree.leaves(carry[0].params)))
    if i < WARMUP:
      assert moved == 0.0, f"warm-up iteration {i} moved the policy by {moved}"
    else:
      assert moved > 0.0, "the first iteration after warm-up must move the policy"
  assert np.all(np.isfinite(losses))
  # Fitting, not noise: the last warm-up loss is well under the first.
  assert losses[WARMUP - 1] < 0.5 * losses[0], losses
