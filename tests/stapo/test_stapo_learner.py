"""STAPO on the shared learner: the advantage encoding, the methods' masks, a jitted step."""

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.text import goal_house as gh
from jaxrl_suite.lm import advantages as lm_adv
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import rollout as lm_rollout
from jaxrl_suite.lm import stapo
from jaxrl_suite.lm import token_ppo

ENV, P = gh.make_goal_house(num_rooms=3, num_receptacles=4, num_objects=4, max_steps=6)
CFG = lm_model.FAMILY_V2["xs"]
RCFG = lm_rollout.RolloutConfig(num_turns=6, window=32, max_segments=6,
                                overflow=lm_rollout.TruncateOldest(keep_task=False))
PCFG = token_ppo.TokenPPOConfig(epochs=1, num_minibatches=1, advantage="gae", gamma=1.0,
                                lam=1.0, group_size=4, lr=1e-3)


@pytest.fixture(scope="module")
def ro():
  params = lm_model.init_params(CFG, jax.random.PRNGKey(0))
  r = jax.jit(lambda k: lm_rollout.multi_turn_rollout(CFG, params, ENV, P, k, 8, RCFG,
                                                      group_size=4))(jax.random.PRNGKey(1))
  # give some trajectories a return so that group advantages are non-trivial
  return r._replace(rewards=r.rewards.at[::3, 0].set(1.0))


def _gae_adv(r):
  adv, _ = token_ppo.token_advantages(PCFG, r, jnp.zeros(r.tokens.shape))
  return np.asarray(adv)


def test_encoding_reproduces_per_turn_advantages(ro):
  b, h = ro.rewards.shape
  adv_turn = jax.random.normal(jax.random.PRNGKey(2), (b, h))
  enc = stapo.encode_turn_advantages(ro, adv_turn, jnp.ones(ro.trainable.shape, bool))
  want = np.asarray(lm_adv.broadcast_turns(ro, adv_turn))
  np.testing.assert_allclose(_gae_adv(enc), want, rtol=1e-5, atol=1e-5)


def test_encoding_of_grpo_equals_the_learners_grpo(ro):
  base = stapo.episode_advantages(ro.returns, 4)[:, None] * jnp.ones(ro.rewards.shape)
  enc = stapo.encode_turn_advantages(ro, base, jnp.ones(ro.trainable.shape, bool))
  np.testing.assert_allclose(_gae_adv(enc), np.asarray(lm_adv.grpo_token_advantages(ro, 4)),
                             rtol=1e-5, atol=1e-5)


def test_encoding_with_a_token_mask(ro):
  b, h = ro.rewards.shape
  adv_turn = jax.random.normal(jax.random.PRNGKey(3), (b, h))
  keep = jax.random.bernoulli(jax.random.PRNGKey(4), 0.4, ro.trainable.shape)
  enc = stapo.encode_turn_advantages(ro, adv_turn, keep)
  assert bool((enc.trainable == (ro.trainable & keep)).all())
  want = np.where(np.asarray(enc.trainable), np.asarray(lm_adv.broadcast_turns(ro, adv_turn)), 0)
  np.testing.assert_allclose(_gae_adv(enc), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_every_method_runs_in_one_vmapped_program():
  mcfg = stapo.MethodConfig(group_size=4)
  init, step = stapo.make_train_step(CFG, ENV, P, RCFG, 8, mcfg, PCFG)
  params = lm_model.init_params(CFG, jax.random.PRNGKey(0))
  ids = jnp.arange(len(stapo.METHODS))
  carry = jax.vmap(init, in_axes=(None, 0))(params, ids)
  keys = jnp.broadcast_to(jax.random.PRNGKey(5), (len(ids), 2))  # same rollout for every method
  carry, m = jax.jit(jax.vmap(step))(carry, keys)
  m = {k: np.asarray(v) for k, v in m.items()}
  for k in ("success", "neglect_per100", "outlier_share", "share_recurring", "pg_loss"):
    assert np.isfinite(m[k]).all(), k
  i = {n: j for j, n in enumerate(stapo.METHODS)}
  # identical rollouts (same key, same start): the rollout metrics agree across methods
  np.testing.assert_allclose(m["neglect_per100"], m["neglect_per100"][0])
  for n in ("grpo", "gigpo", "empg", "mask8020"):
    assert m["outlier_share"][i[n]] == 0.0 and (n == "mask8020" or m["kept_tokens"][i[n]] == 1)
  assert 0.1 < m["kept_tokens"][i["mask8020"]] < 0.5
  assert m["kept_tokens"][i["stapo_only"]] <= 1.0 and m["kept_tokens"][i["stapo"]] == 1.0
  assert m["outlier_share"][i["stapo"]] == m["outlier_share"][i["stapo_only"]]
  assert (np.asarray(carry[0].step) == 1).all()
  # a random start has zero returns: GRPO's advantages vanish (no update), EMPG's
  # future-clarity bonus does not (its parameters move)
  flat = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(carry[0].params)
  flat0 = jax.flatten_util.ravel_pytree(params)[0]
  if float(m["success"][0]) == 0.0:
    assert float(jnp.abs(flat[i["grpo"]] - flat0).max()) == 0.0
  assert float(jnp.abs(flat[i["empg"]] - flat0).max()) > 0


def test_method_id_names_the_field():
  with pytest.raises(ValueError, match="unknown method"):
    stapo.method_id("ppo")
