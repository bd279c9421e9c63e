"""The recurrent BallastHydro agent (agents/ballast_hydro.py) on hand-made banks (no oracle
check, so cheap): valid multi-pump commands, exact recurrent re-evaluation, one parameter shape
for every layout, the residual switch, the config checks, and the quick end-to-end run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import ballast_hydro as cfg_mod
from jaxrl_suite.agents import ballast_hydro as A
from jaxrl_suite.algos.rollout import Transition
from jaxrl_suite.envs.ballast import episodes as EP
from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank, hydro_params
from jaxrl_suite.envs.ballast.layout import load_layout
from jaxrl_suite.envs.ballast.routes import build_routes, layout_sizes
from tests.conftest import assert_config_rejects

CFG = A.default_config()
CFG.hidden, CFG.gru, CFG.slots = 16, 8, 6
ENV = BallastHydro()


def _params(lay, n=6, seed=0, sizes="auto"):
  """HydroParams with n drawn (plan, clog) episodes, 0-1 blocked pipes, no finishability check."""
  g = build_routes(lay, sizes)
  rng = np.random.default_rng(seed)
  prior = EP.layout_prior(lay)
  eps = []
  for i in range(n):
    vol0, target, mh, mt = EP.draw_plan(rng, g, lay["hydrostatics"], 1.0)
    eps.append((vol0, target, EP.draw_clog(rng, g, prior, i % 2), mh, mt))
  bank = EP._stack(eps, np.arange(n) % 2, EpisodeBank)  # pylint: disable=protected-access
  return hydro_params(lay, g, bank)


@pytest.fixture(scope="module")
def direct10():
  return _params(load_layout("direct10"))


def _rollout(p, tb, n_env=4, n_steps=6, seed=0):
  agent = A.make_agent(CFG, tb)
  # A Python loop over jitted calls (eager, every op of the agent and the env is dispatched on
  # its own: ~25 s a rollout); the records stay per step for the tests to read.
  reset = jax.jit(jax.vmap(ENV.reset, in_axes=(0, None)))
  step = jax.jit(jax.vmap(ENV.step, in_axes=(0, 0, 0, None)))
  act = jax.jit(agent.act)
  key = jax.random.PRNGKey(seed)
  obs, st = reset(jax.random.split(key, n_env), p)
  params = jax.jit(agent.init)(key, obs)
  h = agent.initial_carry(n_env)
  h0 = h
  done = jnp.ones(n_env, bool)
  recs = []
  for t in range(n_steps):
    out = act(params, h, obs, done, jax.random.fold_in(key, t))
    recs.append((out, done))
    obs, st, _, done, _, _ = step(jax.random.split(jax.random.fold_in(key, 100 + t), n_env), st,
                                  out.action, p)
    h = out.carry
  return agent, params, h0, recs


def test_commands_are_valid_and_share_no_pipe(direct10):
  p = direct10
  tb = A.make_tables(p, resid=False, api=ENV.agent_api)
  _, _, _, recs = _rollout(p, tb)
  K = p.route_mask.shape[0]
  n_live = 0
  for out, _ in recs:
    a = np.asarray(out.action)
    assert a.shape == (4, p.pump_rate.shape[0])
    for row in a:
      live = [(s, k) for s, k in enumerate(row) if k != 2 * K]
      for s, k in live:
        assert 0 <= k < K and bool(p.route_mask[k]) and int(p.route_pump[k]) == s
      for (_, k1), (_, k2) in zip(live, live[1:]):
        assert bool(p.pair_ok[k1, k2])
      n_live += len(live)
  assert n_live > 0


def test_recurrent_reevaluation_equals_acting_log_probs(direct10):
  tb = A.make_tables(direct10, resid=True, api=ENV.agent_api)
  agent, params, h0, recs = _rollout(direct10, tb)
  stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)
  seq = Transition(record=stack([o.record for o, _ in recs]),
                   action=stack([o.action for o, _ in recs]), log_prob=None, value=None,
                   reward=None, final_obs=None, terminated=None, done=None,
                   done_prev=jnp.stack([d for _, d in recs]), mask=None, weight=None,
                   label=None, carry=(), logs={}, episode_sums={})
  ev = agent.evaluate(params, h0, seq)
  np.testing.assert_allclose(ev.log_prob, jnp.stack([o.log_prob for o, _ in recs]), atol=1e-5)
  np.testing.assert_allclose(ev.value, jnp.stack([o.value for o, _ in recs]), atol=1e-5)
  assert bool(jnp.all(ev.entropy >= 0))


def test_one_parameter_shape_for_every_layout():
  shapes = []
  for lay in (load_layout("direct10"), generate_layout(3)):
    p = _params(lay, n=2)
    tb = A.make_tables(p, resid=False, api=ENV.agent_api)
    obs, _ = jax.vmap(ENV.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), 2),
                                                     p)
    shapes.append(jax.tree.map(jnp.shape, A.make_agent(CFG, tb).init(jax.random.PRNGKey(0),
                                                                     obs)))
  assert shapes[0] == shapes[1]
  # and padded to a family's sizes, two layouts give identical array shapes (one program)
  lays = [load_layout("direct10"), load_layout("ring14")]
  sizes = layout_sizes(lays)
  ps = [_params(l, n=2, sizes=sizes) for l in lays]
  assert (jax.tree.map(jnp.shape, ps[0].route_edges) ==
          jax.tree.map(jnp.shape, ps[1].route_edges))


def test_residual_switch_off_gives_w_no_gradient(direct10):
  for resid, zero in ((False, True), (True, False)):
    tb = A.make_tables(direct10, resid=resid, api=ENV.agent_api)
    agent, params, h0, recs = _rollout(direct10, tb, n_steps=3)
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)
    seq = Transition(record=stack([o.record for o, _ in recs]),
                     action=None, log_prob=None, value=None, reward=None, final_obs=None,
                     terminated=None, done=None, done_prev=jnp.stack([d for _, d in recs]),
                     mask=None, weight=None, label=None, carry=(), logs={}, episode_sums={})
    g = jax.jit(jax.grad(lambda pr: agent.evaluate(pr, h0, seq).log_prob.sum()))(params)
    assert (float(g["params"]["w_resid"]) == 0.0) == zero


@pytest.mark.parametrize("field,value", [
    ("n_seeds", 1), ("budget_updates", (40, 20)), ("chunk_updates", 7), ("ppo.lr", 0.0),
    ("ppo.num_minibatches", 3), ("agent.slots", 0), ("variants", ("rl_mlp",)),
    ("reward_scale", 0.0), ("train_pumps", (1, 2)), ("train_pumps", (1, 2, 3, 4, 1, 2))])
def test_config_rejects_bad_fields(field, value):
  assert_config_rejects(cfg_mod, field, value)


@pytest.mark.slow  # ~120 CPU-s (bank oracle checks + three compiled programs) on the shared box
def test_quick_reproduction_end_to_end(tmp_path):
  from experiments import ballast_hydro as X
  c = cfg_mod.get_config("quick")
  res = X.run(c, True, str(tmp_path), results_dir=str(tmp_path / "results"))
  names = [cl["claim"] for cl in res["claims"]]
  assert any("32% fewer" in n and "heel-aware" in n for n in names)
  # the heel-blind replanner is a descriptive row (it crosses the heel limit in most episodes)
  assert any("heel-blind" in n for n in names)
  assert {cl["verdict"] for cl in res["claims"] if "heel-blind" in cl["claim"]} == {"descriptive"}
  t = res["table"]["held_out"]["all"]
  for pol in ("oracle", "replan", "heel_aware", "rl_gru", "rl_gru_resid"):
    m, lo, hi = t[pol]["success"]
    assert 0.0 <= lo <= m <= hi <= 1.0
  assert t["oracle"]["success"][0] >= 0.9   # banks are finishable noiseless; eval has sounding noise
  assert (tmp_path / "results" / "ballast_hydro.png").exists()


def test_flattening_pairs_checkpoints_on_their_common_episodes():
  """The last two checkpoints score more episodes (sweep_episodes_last): a doubling's change
  is taken on the first n episodes of every held-out layout that both checkpoints scored."""
  from jaxrl_suite.envs.ballast import hydro_stats as HS
  a = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)            # [S, L, 4]
  b = np.zeros((2, 3, 8))
  b[..., :4] = a + 1.0                                              # +1 on the shared episodes
  b[..., 4:] = 1e6                                                  # only b scored these
  d = HS.paired_delta(a, b)
  assert d.shape == (2, 12) and np.all(d == 1.0)
  c = cfg_mod.get_config("quick")
  f = HS.flattening([{"updates": 1, "steps_eff": a}, {"updates": 2, "steps_eff": b}], c.n_boot,
                   c.flat_tol)
  assert f["steps"][0]["episodes"] == 12 and f["steps"][0]["delta_steps"][0] == 1.0
  assert f["flattened"]                                             # +1 step: no gain
  # [S, N] is read as one layout
  assert HS.paired_delta(np.zeros((2, 5)), np.ones((2, 5))).shape == (2, 5)


def test_pick_layouts_fixes_the_pump_mix_when_asked():
  from jaxrl_suite.envs.ballast import hydro_layouts as X
  drawn = X.pick_layouts(1000, 3, 128)
  mixed = X.pick_layouts(1000, 3, 128, (1, 2, 3))
  assert sorted(X.n_pumps(l) for l in mixed) == [1, 2, 3]
  assert mixed[0]["name"] == drawn[0]["name"]          # same scan order from seed0
  with pytest.raises(ValueError, match="pumps"):
    X.pick_layouts(1000, 3, 128, (1, 2))


def test_residual_never_prefers_a_route_through_a_known_failure(direct10):
  """The ablation's replanner residual: when every candidate of pump 0 runs through a known
  failure set (score >= w_fail) while pump 1 has a working admissible route, slot 0 prefers
  NOOP (resid 0) and none of its routes; with no working route on any pump, slot 0 must move
  (NOOP at -R, as the replanner's first command)."""
  p = direct10.replace(stab=None)   # the residual logic, on the constant-GM heel model
  tb = A.make_tables(p, resid=True, api=ENV.agent_api)
  obs, _ = jax.jit(ENV.reset)(jax.random.PRNGKey(0), p)
  pre = jax.jit(lambda o: A.observe(tb, o))(obs)
  K = p.route_mask.shape[0]
  pump0 = np.asarray(p.route_pump) == 0
  taken = jnp.ones(K, bool)
  M = min(CFG.slots, K)
  h = pre.q
  # jitted per pump (eager, every op is dispatched on its own)
  head_feats = jax.jit(lambda pre_, pump: A.head_feats(tb, pre_, pump, taken, h, h, h, M),
                       static_argnums=1)
  hd = head_feats(pre, 0)
  assert bool(hd.slot_mask[:-1].any())                            # pump 0 has candidates
  assert float(hd.resid[-1]) == -A.R_CLIP and float(hd.resid[:-1].max()) == 0.0
  fail = pre._replace(score=jnp.where(pump0, pre.score + 2 * tb.bp.w_fail, pre.score))
  hd1 = head_feats(fail, 1)
  assert float(hd1.resid[:-1].max()) == 0.0                       # pump 1 still works
  hd0 = head_feats(fail, 0)
  assert float(hd0.resid[-1]) == 0.0
  assert bool((hd0.resid[:-1] == -A.R_CLIP).all())
  dead = pre._replace(score=pre.score + 2 * tb.bp.w_fail)          # nothing works anywhere
  assert float(head_feats(dead, 0).resid[-1]) == -A.R_CLIP


def test_family_layouts_are_disjoint_deterministic_and_fix_the_pump_mix():
  """Training, validation and held-out family members come from disjoint key streams (no two
  sets share a layout), the same seed gives the same layouts byte for byte, and a pump mix is
  honoured; an unknown group and an impossible mix are refused."""
  import json
  from jaxrl_suite.envs.ballast import family as F
  from jaxrl_suite.envs.ballast import hydro_layouts as X
  fp = F.FamilyParams(n_tanks=(8, 12), max_routes=128)
  tr = X.family_layouts(0, "train", 3, fp, (1, 2, 3))
  va = X.family_layouts(0, "val", 2, fp)
  assert sorted(X.n_pumps(l) for l in tr) == [1, 2, 3]
  dump = lambda ls: [json.dumps({k: v for k, v in l.items() if k != "name"}, sort_keys=True)
                     for l in ls]
  assert not set(dump(tr)) & set(dump(va))
  assert dump(X.family_layouts(0, "train", 3, fp, (1, 2, 3))) == dump(tr)
  assert all(X.usable(l, 128) and not F.layout_problems(l, 128) for l in tr + va)
  with pytest.raises(ValueError, match="group"):
    X.family_layouts(0, "test", 1, fp)
  with pytest.raises(ValueError, match="pumps"):
    X.family_layouts(0, "train", 2, fp, (1,))


def test_config_family_errors_name_the_field():
  from configs import ballast_hydro as cfg_mod
  c = cfg_mod.get_config("quick")
  c.family.n_tanks = (5, 12)
  with pytest.raises(ValueError, match="config.family.n_tanks"):
    cfg_mod.validate(c)
  c = cfg_mod.get_config("quick")
  c.layout_source = "shipped"
  with pytest.raises(ValueError, match="layout_source"):
    cfg_mod.validate(c)
