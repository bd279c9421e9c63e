"""The BallastHydro diagnosis head (agents/ballast_hydro.py), the reference diagnoser on a hydro
observation and the F1 statistics of envs/ballast/hydro_stats.py (the agents' layering is
tests/core/test_core_layering.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.algos.rollout import Transition
from jaxrl_suite.envs.ballast.diagnosis import diagnose_fields
from jaxrl_suite.envs.ballast.layout import load_layout
from tests.agents.test_ballast_hydro_agent import CFG, ENV, _params, _rollout


def test_reference_diagnoser_hitting_set_by_hand():
  E, F = 6, 4
  sets = np.zeros((F, E), np.float32)
  sets[0, 2] = 1                     # blocked singleton: edge 2 is proved clogged
  sets[1, [3, 4]] = 1                # partial set {3, 4}: the prior prefers 4
  sets[2, [1, 5]] = 1                # blocked {1, 5}, but 1 is confirmed good -> 5
  kind = np.array([1, 2, 1, 0], np.float32)
  good = np.zeros(E, np.float32)
  good[1] = 1
  f = {"good": jnp.asarray(good), "fail_sets": jnp.asarray(sets), "fail_kind": jnp.asarray(kind)}
  block_w = jnp.ones(E)
  partial_w = jnp.asarray([1, 1, 1, 1, 2, 1], jnp.float32)
  pred = np.asarray(diagnose_fields(f, block_w, partial_w))
  np.testing.assert_array_equal(pred, [False, False, True, False, True, True])


def _bce64(x, z):
  x, z = np.asarray(x, np.float64), np.asarray(z, np.float64)
  return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


@pytest.mark.slow  # ~35 CPU-s: eager rollout + four compiled programs (loss, grad, head, reference)
def test_diagnosis_loss_is_the_masked_bce_and_trains_the_gru_not_the_policy():
  p = _params(load_layout("direct10"), n=4)
  tb = A.make_tables(p, resid=False, api=ENV.agent_api)
  agent, params, h0, recs = _rollout(p, tb, n_env=2, n_steps=3)
  stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)
  rng = np.random.default_rng(0)
  E = p.edge_mask.shape[0]
  label = jnp.asarray(rng.random((3, h0.shape[0], E)) < 0.3, jnp.float32)
  seq = Transition(record=stack([o.record for o, _ in recs]), action=None, log_prob=None,
                   value=None, reward=None, final_obs=None, terminated=None, done=None,
                   done_prev=jnp.stack([d for _, d in recs]), mask=None, weight=None,
                   label=label, carry=(), logs={}, episode_sums={})
  aux_fn = jax.jit(lambda pr, sq: agent.evaluate(pr, h0, sq).aux_loss)
  aux = float(aux_fn(params, seq))
  # reference: the head's logits from a step-by-step GRU pass, float64 BCE over real edges
  net = A.HydroNet(CFG.hidden, CFG.gru, CFG.w_init)
  _, _, step, hd0, edge = seq.record

  @jax.jit
  def head_logits(pr):
    h, ds = h0, []
    for t in range(3):
      h, y, _ = net.apply(pr, h, step[t], jax.tree.map(lambda x, t=t: x[t], hd0),
                          seq.done_prev[t], method=A.HydroNet.core)
      ds.append(net.apply(pr, y, edge[t], method=A.HydroNet.diagnose))
    return jnp.stack(ds), h

  d, h = head_logits(params)
  em = np.asarray(p.edge_mask, np.float64)
  ref = (_bce64(d, label) * em).sum() / (em.sum() * 3 * h0.shape[0])
  np.testing.assert_allclose(aux, ref, rtol=1e-5)
  # labels on padding edges do not count
  pad = ~np.asarray(p.edge_mask)
  if pad.any():
    flipped = label.at[..., np.flatnonzero(pad)].set(1.0 - label[..., pad])
    np.testing.assert_allclose(float(aux_fn(params, seq.replace(label=flipped))), aux,
                               rtol=1e-6)
  g = jax.jit(jax.grad(aux_fn))(params, seq)["params"]
  norm = lambda t: float(sum(jnp.abs(x).sum() for x in jax.tree.leaves(t)))
  assert norm(g["d_out"]) > 0 and norm(g["cell"]) > 0       # the belief is shaped by it
  assert norm(g["s_out"]) == 0 and norm(g["v_out"]) == 0    # policy / value heads untouched
  # the evaluation-time head: bool[E], never a padding edge
  obs, _ = jax.vmap(ENV.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(3), 2), p)
  pred = np.asarray(jax.jit(A.make_diagnose(CFG))((params, tb), h[0], obs[0]))
  assert pred.shape == (E,) and pred.dtype == bool and not pred[pad].any()


def test_f1_ci_is_the_micro_f1_and_a_paired_difference():
  from jaxrl_suite.envs.ballast import hydro_stats as X
  tp = np.array([[2, 0, 1], [1, 1, 0]])
  fp = np.array([[0, 1, 0], [1, 0, 0]])
  fn = np.array([[1, 0, 0], [0, 0, 1]])
  m, lo, hi = X.f1_ci(tp, fp, fn, 200)
  assert m == 2 * 5 / (2 * 5 + 2 + 2) and 0 <= lo <= m <= hi <= 1
  d = X.f1_ci(tp, fp, fn, 200, base=(tp, fp, fn))
  assert d == (0.0, 0.0, 0.0)


def test_per_seed_f1_pools_episodes_and_is_nan_without_positives():
  from jaxrl_suite.envs.ballast import hydro_stats as X
  tp = np.array([[2, 0, 1], [0, 0, 0]])
  fp = np.array([[0, 1, 0], [0, 0, 0]])
  fn = np.array([[1, 0, 0], [0, 0, 0]])
  f = X.per_seed_f1(tp, fp, fn)
  assert f[0] == 2 * 3 / (2 * 3 + 1 + 1) and np.isnan(f[1])


@pytest.mark.parametrize("head, ref, want", [
    ([0.70, 0.72, 0.71], [0.69, 0.70, 0.70], "reproduced"),    # on par: non-inferior
    ([0.50, 0.52, 0.51], [0.70, 0.71, 0.70], "contradicted"),  # worse by far more than 0.05
    ([0.30, 0.90, 0.60], [0.60, 0.61, 0.60], "inconclusive"),  # too wide to tell
])
def test_diagnosis_claim_is_a_non_inferiority_test_on_the_layer(head, ref, want):
  """The registered diagnosis claim (configs/ballast_hydro.py) judged by jaxrl_suite.repro from
  per-seed F1: non-inferior at 0.05 F1; a loss stands only with a flat budget sweep."""
  from configs import ballast_hydro as cfg
  from jaxrl_suite.repro import Claim, claim_record
  claim = Claim.from_dict({d["id"]: d for d in cfg.claims()}[
      "ballast_hydro.diagnosis_noninferior_held_out.v1"])
  flat = {"scores": [[20.0, 20.5, 21.0], [20.1, 20.4, 21.0]], "budgets": [10, 20],
          "scale": "log_ratio", "better": "lower"}
  row = claim_record(claim, head, ref, sweep=flat)
  assert row["verdict"] == want, row["detail"]
  if want == "contradicted":   # the same loss with RL still improving is not a verdict
    rising = dict(flat, scores=[[30.0, 31.0, 32.0], [20.0, 21.0, 22.0]])
    assert claim_record(claim, head, ref, sweep=rising)["verdict"] == "inconclusive"
