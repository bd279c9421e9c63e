"""algos/budget_sweep.py: the runs that cover a budget sweep, the loop over them (with a fake
learner whose metrics are known), and the entropy-collapse check."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.algos import budget_sweep


class _Counter:
  """A learner whose state counts updates; metrics per update: returns = the update's index
  (plus the seed offset), entropy = 1 / index. lr decay shows up as `decay` in the state."""

  def __init__(self, decay_over):
    self.decay = 0 if decay_over is None else decay_over

  def init(self, key):
    return {"n": jnp.zeros((), jnp.int32), "seed": (key[1] % 3).astype(jnp.float32),
            "decay": jnp.asarray(self.decay)}

  def run(self, state, n):
    idx = state["n"] + 1 + jnp.arange(n)
    met = {"returned_episode_returns": idx.astype(jnp.float32) + state["seed"],
           "entropy": 1.0 / idx.astype(jnp.float32)}
    return dict(state, n=state["n"] + n), met


def test_plan_constant_lr_is_one_run_in_gcd_chunks():
  assert budget_sweep.plan((12, 24, 48), lr_decay=False) == [
      budget_sweep.Run(12, 4, (12, 24, 48), None)]
  assert budget_sweep.plan([4, 6], False) == [budget_sweep.Run(2, 3, (4, 6), None)]


def test_plan_lr_decay_is_one_run_per_budget():
  assert budget_sweep.plan((2, 4), lr_decay=True) == [
      budget_sweep.Run(2, 1, (2,), 2), budget_sweep.Run(4, 1, (4,), 4)]


def test_train_scores_at_every_budget_and_keeps_the_last_curve():
  seeds = jax.random.split(jax.random.PRNGKey(0), 3)
  seen = []
  curve = budget_sweep.train(budget_sweep.plan((2, 4, 8), False), _Counter, seeds,
                             lambda done, rs, met: seen.append(
                                 (done, np.asarray(rs["n"]), np.asarray(met["entropy"]))))
  chex.assert_shape(curve, (3, 8))
  offset = np.asarray(jax.vmap(_Counter(None).init)(seeds)["seed"])
  np.testing.assert_allclose(curve, np.arange(1, 9)[None] + offset[:, None])
  assert [d for d, _, _ in seen] == [2, 4, 8]
  for done, n, ent in seen:             # the state after `done` updates, that chunk's metrics
    np.testing.assert_array_equal(n, [done] * 3)
    chex.assert_shape(ent, (3, 2))
    np.testing.assert_allclose(ent[:, -1], 1.0 / done)


def test_train_with_lr_decay_builds_one_learner_per_budget():
  seeds = jax.random.split(jax.random.PRNGKey(1), 2)
  seen = []
  curve = budget_sweep.train(budget_sweep.plan((2, 4), True), _Counter, seeds,
                             lambda done, rs, met: seen.append((done, int(rs["decay"][0]))))
  assert seen == [(2, 2), (4, 4)]       # each run decays over its own budget
  chex.assert_shape(curve, (2, 4))      # the last (longest) run's curve


def test_entropy_collapse_counts_seeds_under_the_threshold():
  n_actions = 8
  ent = np.array([[2.0, 0.1], [2.0, 2.0], [1.0, 0.2]])       # [S=3, B=2] nats
  out = budget_sweep.entropy_collapse(ent, n_actions, 0.1)     # 0.1 log 8 = 0.208 nats
  assert out["collapsed_seeds"] == 2 and out["n_seeds"] == 3 and out["threshold"] == 0.1
  np.testing.assert_allclose(out["fraction_of_uniform"], ent / np.log(8))
  assert out["entropy"] == ent.tolist()
