"""BallastHydro baselines on hand-made states: the heel-aware replanner keeps inside the heel
limit where today's B-replan (plan order) crosses it; the oracle routes around a blocked pipe."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank, hydro_params
from jaxrl_suite.envs.ballast.layout import load_layout
from jaxrl_suite.envs.ballast.routes import build_routes

LAY = load_layout("ring14")
G = build_routes(LAY, "auto")
T, E, K = G["cap"].shape[0], G["edge_mask"].shape[0], G["route_mask"].shape[0]
NAMES = [t["node"] for t in LAY["tanks"]]
ENV = BallastHydro()
POLICY = jax.jit(HB.hydro_policy)
STEP = jax.jit(ENV.step_env)
RESET_TO = jax.jit(ENV.reset_to)


def _params(vol0, target, clog, **kw):
  bank = EpisodeBank(vol0=jnp.asarray(vol0, jnp.float32)[None],
                     target=jnp.asarray(target, jnp.float32)[None],
                     clog=jnp.asarray(clog, jnp.float32)[None],
                     m_heel0=jnp.asarray([-1.025 * np.sum(target * G["tcg"])], jnp.float32),
                     m_trim0=jnp.zeros(1), n_blocked=jnp.zeros(1, jnp.int32))
  return hydro_params(LAY, G, bank, sigma_level=0.0, **kw)


def _wing_plan():
  """Fill both heeling tanks by 350 m3: the plan ends upright, but HP (port wing, index 11)
  comes before HS (index 12) in plan order, and filling HP alone lists the ship ~2.3 deg."""
  vol0 = 0.5 * G["cap"]
  target = vol0.copy()
  hp, hs = NAMES.index("HP"), NAMES.index("HS")
  target[hp] += 350.0
  target[hs] += 350.0              # end state upright; HP alone lists ~2.3 deg to port
  return vol0, target, hp, hs


def _run(policy_name, params, n=40):
  obs, s = RESET_TO(jax.random.PRNGKey(0), 0, params)
  bp = HB.make_hydro_baseline(params, policy_name)
  for i in range(n):
    a = POLICY(bp, obs, None)
    obs, s, _, term, info = STEP(jax.random.PRNGKey(i), s, a, params)
    if bool(term):
      break
  return s, info


def test_heel_aware_replanner_alternates_sides_plain_one_crosses_the_limit():
  vol0, target, hp, hs = _wing_plan()
  p = _params(vol0, target, np.ones(E))
  s_plain, _ = _run("replan", p)
  assert bool(s_plain.violated) and not bool(s_plain.success)   # HP first: beyond 2 deg
  s_heel, info = _run("heel_replan", p)
  assert bool(s_heel.success) and not bool(s_heel.violated)
  assert float(s_heel.max_heel) <= 2.0


def test_oracle_avoids_a_blocked_pipe_the_replanner_must_discover():
  vol0 = 0.3 * G["cap"]
  target = vol0.copy()
  d = NAMES.index("DB2P")
  target[d] += 400.0
  p = _params(vol0, target, np.ones(E))
  bp = HB.make_hydro_baseline(p.replace(reveal_clog=True), "oracle")
  obs, _ = RESET_TO(jax.random.PRNGKey(0), 0, p.replace(reveal_clog=True))
  a = np.asarray(POLICY(bp, obs, None))
  k0 = int(a[a < 2 * K][0])                                      # its route with clear pipes
  e = int([x for x in np.flatnonzero(G["route_edges"][k0]) if G["can_block"][x]][0])
  clog = np.ones(E)
  clog[e] = 0.0
  pb = _params(vol0, target, clog).replace(reveal_clog=True)
  obs, _ = RESET_TO(jax.random.PRNGKey(0), 0, pb)
  a = np.asarray(POLICY(HB.make_hydro_baseline(pb, "oracle"), obs, None))
  k1 = int(a[a < 2 * K][0])
  assert k1 != k0 and not G["route_edges"][k1, e]
  s_orc, _ = _run("oracle", pb)
  s_rep, _ = _run("replan", _params(vol0, target, clog))
  assert bool(s_orc.success) and bool(s_rep.success)
  assert int(s_orc.time) < int(s_rep.time)                      # the replanner pays a probe


def test_two_commands_use_both_pumps_without_sharing_pipes():
  vol0, target, hp, hs = _wing_plan()
  p = _params(vol0, target, np.ones(E))
  obs, _ = RESET_TO(jax.random.PRNGKey(0), 0, p)
  a = np.asarray(POLICY(HB.make_hydro_baseline(p, "heel_replan", n_cmds=2), obs, None))
  assert (a < K).all()                                           # both pumps, pumped
  assert G["route_pump"][a[0]] == 0 and G["route_pump"][a[1]] == 1
  assert not (G["route_edges"][a[0]] & G["route_edges"][a[1]]).any()
