"""Network shapes, masking and the GRU core's episode resets."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.core import networks
from jaxrl_suite.core.losses import MASKED_LOGIT


def test_actor_critic_discrete_and_multi_discrete_shapes():
  x = jnp.ones((5, 7))
  net = networks.ActorCritic(num_actions=3)
  logits, value = net.apply(net.init(jax.random.key(0), x), x)
  assert logits.shape == (5, 3) and value.shape == (5,)
  multi = networks.ActorCritic(num_actions=4, num_heads=2, hidden_sizes=(8,))
  logits, value = multi.apply(multi.init(jax.random.key(0), x), x)
  assert logits.shape == (5, 2, 4) and value.shape == (5,)


def test_action_mask_blocks_invalid_actions():
  logits = jnp.zeros((2, 3))
  mask = jnp.array([[True, False, True], [False, False, True]])
  masked = networks.apply_action_mask(logits, mask)
  np.testing.assert_array_equal(masked == MASKED_LOGIT, ~mask)
  samples = jax.random.categorical(jax.random.key(0), masked, shape=(1000, 2))
  assert not bool(jnp.any(jnp.take_along_axis(mask, samples.T, axis=1) == False))  # noqa: E712
  assert networks.apply_action_mask(logits, None) is logits


def test_gru_resets_hidden_state_at_episode_start():
  net = networks.GRUActorCritic(num_actions=2, hidden_size=8)
  h0 = net.initial_state((3,))
  obs = jnp.ones((3, 4))
  params = net.init(jax.random.key(0), h0, obs, jnp.zeros(3, bool))
  h1, logits, value = net.apply(params, h0, obs, jnp.zeros(3, bool))
  assert h1.shape == (3, 8) and logits.shape == (3, 2) and value.shape == (3,)
  # With reset=True the previous hidden state is ignored entirely.
  h_reset, _, _ = net.apply(params, h1 * 100.0, obs, jnp.ones(3, bool))
  np.testing.assert_allclose(h_reset, h1, rtol=1e-6)
  h_keep, _, _ = net.apply(params, h1, obs, jnp.zeros(3, bool))
  assert not np.allclose(h_keep, h1)


def test_unknown_activation_is_rejected():
  with pytest.raises(ValueError, match="activation must be one of"):
    networks.activation_fn("sigmoid")
