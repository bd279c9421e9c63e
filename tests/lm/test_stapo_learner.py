"""STAPO on the shared learner: the per-turn advantage hook, the methods' masks, a jitted step."""

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
from tests.lm import jitted

ENV, P = gh.make_goal_house(num_rooms=3, num_receptacles=4, num_objects=4, max_steps=6)
CFG = lm_model.FAMILY_V2["xs"]
RCFG = lm_rollout.RolloutConfig(num_turns=6, window=32, max_segments=6,
                                overflow=lm_rollout.TruncateOldest(keep_task=False))
PCFG = token_ppo.TokenPPOConfig(epochs=1, num_minibatches=1, group_size=4, lr=1e-3)


@pytest.fixture(scope="module")
def ro():
  params = jitted.init_params(CFG, jax.random.PRNGKey(0))
  r = jax.jit(lambda k: lm_rollout.multi_turn_rollout(CFG, params, ENV, P, k, 8, RCFG,
                                                      group_size=4))(jax.random.PRNGKey(1))
  # give some trajectories a return so that group advantages are non-trivial
  return r._replace(rewards=r.rewards.at[::3, 0].set(1.0))


def _hook_adv(r):
  adv, tgt = stapo.turn_advantage_fn(r, jnp.zeros(r.tokens.shape))
  assert float(jnp.abs(tgt).max()) == 0.0
  return np.asarray(adv)


def test_turn_advantages_reach_every_token_of_their_turn(ro):
  b, h = ro.rewards.shape
  adv_turn = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (b, h)))
  got = _hook_adv(stapo.with_turn_advantages(ro, jnp.asarray(adv_turn),
                                             jnp.ones(ro.trainable.shape, bool)))
  # numpy reference: token n of trajectory i gets adv_turn[i, turn(n)] where trainable, else 0
  tr, turn = np.asarray(ro.trainable), np.asarray(ro.turn)
  want = np.where(tr, np.take_along_axis(adv_turn, np.clip(turn, 0, h - 1).reshape(b, -1),
                                         1).reshape(tr.shape), 0.0)
  np.testing.assert_array_equal(got, want.astype(np.float32))


def test_grpo_through_the_hook_equals_the_learners_grpo(ro):
  """method grpo (episode advantages per turn, through the hook) = token_ppo's own "grpo"."""
  base = stapo.episode_advantages(ro.returns, 4)[:, None] * jnp.ones(ro.rewards.shape)
  got = _hook_adv(stapo.with_turn_advantages(ro, base, jnp.ones(ro.trainable.shape, bool)))
  np.testing.assert_allclose(got, np.asarray(lm_adv.grpo_token_advantages(ro, 4)),
                             rtol=1e-6, atol=1e-7)


def test_token_mask_narrows_the_trainable_tokens(ro):
  b, h = ro.rewards.shape
  adv_turn = jax.random.normal(jax.random.PRNGKey(3), (b, h))
  keep = jax.random.bernoulli(jax.random.PRNGKey(4), 0.4, ro.trainable.shape)
  r = stapo.with_turn_advantages(ro, adv_turn, keep)
  assert bool((r.trainable == (ro.trainable & keep)).all())
  got = _hook_adv(r)
  assert (got[~np.asarray(r.trainable)] == 0).all()
  full = _hook_adv(stapo.with_turn_advantages(ro, adv_turn, jnp.ones(ro.trainable.shape, bool)))
  np.testing.assert_array_equal(got, np.where(np.asarray(r.trainable), full, 0.0))


@pytest.mark.slow
def test_every_method_runs_in_one_vmapped_program():
  mcfg = stapo.MethodConfig(group_size=4)
  init, step = stapo.make_train_step(CFG, ENV, P, RCFG, 8, mcfg, PCFG)
  params = jitted.init_params(CFG, jax.random.PRNGKey(0))
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
  for n in ("grpo", "gigpo", "empg", "mask8020", "epo"):
    assert m["outlier_share"][i[n]] == 0.0 and (n == "mask8020" or m["kept_tokens"][i[n]] == 1)
  assert 0.1 < m["kept_tokens"][i["mask8020"]] < 0.5
  assert m["kept_tokens"][i["stapo"]] == 1.0
  # stapo_only trains the outlier turns only: some but not all tokens when some turns are
  # outliers (the leave-one-out detector fires on a random policy's noisy entropies)
  assert 0.0 < m["outlier_share"][i["stapo_only"]] < 0.5
  assert 0.0 < m["kept_tokens"][i["stapo_only"]] < 1.0
  assert (np.asarray(carry[0].step) == 1).all()
  # a random start never succeeds (known answer of this env), so every return is 0: GRPO's
  # advantages vanish (no update), EMPG's future-clarity bonus does not (its parameters move)
  assert float(m["success"][0]) == 0.0 and float(m["return"][0]) == 0.0
  flat = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(carry[0].params)
  flat0 = jax.flatten_util.ravel_pytree(params)[0]
  assert float(jnp.abs(flat[i["grpo"]] - flat0).max()) == 0.0
  assert float(jnp.abs(flat[i["empg"]] - flat0).max()) > 0
  # EPO's entropy term (surprisal advantage, c = lambda at the first iteration) moves them too
  np.testing.assert_allclose(m["epo_coef"][i["epo"]], stapo.MethodConfig().epo_coef, rtol=1e-6)
  assert float(jnp.abs(flat[i["epo"]] - flat0).max()) > 0
  assert (np.asarray(carry[3].iteration) == 1).all()


def test_method_id_names_the_field():
  with pytest.raises(ValueError, match="unknown method"):
    stapo.method_id("ppo")
