"""Network shapes, masking and the GRU core's episode resets."""

import chex
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


@pytest.mark.parametrize("shape", [(4, 64), (64, 64), (64, 2), (400, 64), (3, 3, 8, 16)])
def test_orthogonal_init_equals_flax_qr_init(shape):
  import flax.linen as nn
  from jaxrl_suite.core.initializers import orthogonal
  key = jax.random.key(3)
  ours = np.asarray(orthogonal(1.5)(key, shape))
  chex.assert_trees_all_close(ours, np.asarray(nn.initializers.orthogonal(1.5)(key, shape)),
                              atol=2e-5)
  m = ours.reshape(-1, shape[-1]) / 1.5
  gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
  np.testing.assert_allclose(gram, np.eye(gram.shape[0]), atol=1e-5)


def test_vmapped_init_uses_no_lapack():
  """Batched LAPACK QR deadlocks XLA:CPU's 2-thread pool (core/initializers.py): none allowed."""
  from jaxrl_suite.core.networks import ActorCritic, GRUActorCritic
  keys = jax.random.split(jax.random.key(0), 8)
  ac = ActorCritic(3)
  hlo = jax.jit(jax.vmap(lambda k: ac.init(k, jnp.zeros((1, 5))))).lower(keys).as_text()
  gru = GRUActorCritic(3, hidden_size=16)
  hlo += jax.jit(jax.vmap(lambda k: gru.init(k, jnp.zeros((1, 16)), jnp.zeros((1, 5)),
                                             jnp.zeros((1,), bool)))).lower(keys).as_text()
  assert "lapack" not in hlo and "geqrf" not in hlo.lower() and "custom_call" not in hlo
