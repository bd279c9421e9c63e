"""The entity-set routing observation (routing.py, entity_obs=True) and the cluster family."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.agents import entities
from jaxrl_suite.envs.serving import evaluate, heuristics, routing

KW = dict(table_size=48, max_events=32, rate_scale=3.0, window_start=7, window=16)


def _state_after(env, p, n_steps=12, seed=0):
  _, st = env.reset_env(jax.random.PRNGKey(seed), p)

  def step(st, k):
    a = jax.random.randint(k, (), 0, 4)
    return env.step_env(k, st, a, p)[1], None

  return jax.lax.scan(step, st, jax.random.split(jax.random.PRNGKey(seed + 1), n_steps))[0]


def _permute(st, p, perm):
  """The same state with the GPUs relabelled: new GPU j is old GPU perm[j]."""
  n = perm.shape[0]
  inv = jnp.argsort(perm)
  gpu_map = lambda g: jnp.where(g >= 0, inv[jnp.maximum(g, 0)], g)
  eng = st.eng
  per_gpu = {k: getattr(eng, k)[perm] for k in ("busy", "iter_end", "cap", "kv_used", "kv_peak",
                                               "kv_base", "n_iter", "reps", "t_start")}
  eng = eng.replace(gpu=gpu_map(eng.gpu), res=eng.res.replace(gpu=gpu_map(eng.res.gpu)),
                    **per_gpu)
  hw = jax.tree.map(lambda x: x[perm], p.hw)
  return st.replace(eng=eng), p.replace(hw=hw, present=p.present[perm] if p.present is not None
                                       else None)


def test_permuting_gpus_permutes_the_entity_observation():
  env, p = routing.make_routing(entity_obs=True, **KW)
  st = jax.jit(lambda: _state_after(env, p))()
  obs = np.asarray(jax.jit(env.get_obs)(st, p))
  assert obs.shape == (4, routing.ENT_FEATS) == env.observation_space(p).shape
  assert obs[:, 1:1 + 3].sum() > 0          # some GPU has outstanding work: a real test
  perm = jnp.array([2, 0, 3, 1])
  st2, p2 = _permute(st, p, perm)
  obs2 = np.asarray(jax.jit(env.get_obs)(st2, p2))
  rr = 1 + routing.PER_GPU                  # the round-robin turn is an index, by definition
  keep = [i for i in range(obs.shape[1]) if i != rr]
  np.testing.assert_allclose(obs2[:, keep], obs[np.asarray(perm)][:, keep], rtol=1e-6, atol=1e-6)


def test_padding_slots_never_change_the_policy_or_the_episode():
  """A 4-GPU cluster in 4 or 6 slots: the entity agent's logits on the present GPUs and its
  value are the same (any content in absent slots), absent slots are never chosen; and every
  deterministic router gives per-request results identical to the flat observation's (the env
  the reference-simulator tests check)."""
  env4, p4 = routing.make_routing(entity_obs=True, **KW)
  env6, p6 = routing.make_routing(entity_obs=True, max_gpus=6, **KW)
  np.testing.assert_array_equal(np.asarray(p6.present), [1, 1, 1, 1, 0, 0])
  o4 = jax.jit(env4.reset_env)(jax.random.PRNGKey(0), p4)[0]
  o6 = jax.jit(env6.reset_env)(jax.random.PRNGKey(0), p6)[0]
  np.testing.assert_array_equal(o6[:4], o4)
  assert float(jnp.abs(o6[4:]).sum()) == 0.0
  agent = entities.make(6, (6, routing.ENT_FEATS), embed_dim=16, mask_feature=0)
  agent4 = entities.make(4, (4, routing.ENT_FEATS), embed_dim=16, mask_feature=0)
  params = agent.init(jax.random.PRNGKey(1), o6.reshape(1, -1))
  logits6, v6 = agent.module.apply(params, *(lambda t: (t, t[..., 0] > 0.5, None,
                                                        jnp.zeros((1, 0))))(o6[None]))
  garbage = o6.at[4:, 1:].set(jax.random.normal(jax.random.PRNGKey(2), (2, o6.shape[1] - 1)))
  logits_g, v_g = agent.module.apply(params, garbage[None], garbage[None, :, 0] > 0.5, None,
                                     jnp.zeros((1, 0)))
  logits4, v4 = agent4.module.apply(params, o4[None], o4[None, :, 0] > 0.5, None,
                                    jnp.zeros((1, 0)))
  np.testing.assert_allclose(logits6[0, :4], logits4[0], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(logits_g, logits6, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose([v6[0], v_g[0]], [v4[0], v4[0]], rtol=1e-5, atol=1e-6)
  acts = jax.vmap(lambda k: agent.policy(params, o6, k))(jax.random.split(jax.random.PRNGKey(3),
                                                                           200))
  assert int(acts.max()) < 4


def test_padded_entity_env_equals_the_flat_env_for_routers():
  """Every deterministic router gives per-request results identical to the flat
  observation's (the env the reference-simulator tests check) on a 4-GPU cluster in 6 slots."""
  env6, p6 = routing.make_routing(entity_obs=True, max_gpus=6, **KW)
  env_f, p_f = routing.make_routing(**KW)
  for env, p, ent in ((env_f, p_f, False), (env6, p6, True)):
    pol = heuristics.router_switch(env.n_gpus, ent)
    run = jax.jit(lambda pp: evaluate.episode_arrays(evaluate.rollout(
        env, p, pol, pp, jax.random.PRNGKey(4), 400)[0], as_numpy=False))
    out = [run(heuristics.router_params(n, k)) for n, k in
           (("jsq", {}), ("sita", {"threshold": 512.0}), ("least_work", {"c": 0.5}))]
    if not ent:
      ref = out
  for a, b in zip(ref, out):
    for k in ("gpu", "ttft", "finish", "status"):
      np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]))


def test_family_draws_every_cluster_inside_jit():
  clusters = (("H100-7B", "A100-7B", "L4-7B", "L4-7B"), ("H100-7B", "L4-7B", "L4-7B"),
              ("A100-7B", "A100-7B", "L4-7B", "L4-7B", "L4-7B"))
  kw = dict(KW, entity_obs=True, max_gpus=5)
  envs = [routing.make_routing(cluster=c, **kw) for c in clusters]
  fp = routing.stack_family([p for _, p in envs], [3.0, 2.0, 4.0])
  fam = routing.FamilyRoute(envs[0][0])
  obs, st = jax.jit(jax.vmap(fam.reset, in_axes=(0, None)))(
      jax.random.split(jax.random.PRNGKey(0), 64), fp)
  c = np.asarray(st.cluster)
  assert set(c.tolist()) == {0, 1, 2}
  n_present = np.asarray(obs[..., 0].sum(-1))
  np.testing.assert_array_equal(n_present, np.array([4, 3, 5])[c])
  mask = jax.vmap(fam.action_mask, in_axes=(0, None))(st, fp)
  np.testing.assert_array_equal(np.asarray(mask.sum(-1)), n_present)
  # per-cluster hardware: the L4 slots of cluster 1 are GPUs 1, 2
  p1 = routing.cluster_params(fp, 1)
  np.testing.assert_array_equal(np.asarray(p1.hw.type_id[:3]),
                                np.asarray(envs[1][1].hw.type_id[:3]))
  assert float(p1.rate_scale) == pytest.approx(2.0)
  a = jnp.zeros((64,), jnp.int32)
  obs2, st2, r, te, tr, _ = jax.jit(jax.vmap(fam.step, in_axes=(0, 0, 0, None)))(
      jax.random.split(jax.random.PRNGKey(1), 64), st, a, fp)
  np.testing.assert_array_equal(np.asarray(st2.cluster), c)
  assert obs2.shape == obs.shape and bool(jnp.all(jnp.isfinite(obs2)))
