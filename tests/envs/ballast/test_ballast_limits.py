"""Trim and draught limits of BallastHydro-v0 (stability.ship_limits / breaks): draughts against
a float64 reference written from the sinkage and trim formulas, mass and sinkage consistent
(hypothesis), the limit bits, the env ending an operation that crosses the load line as a
failure, the limit-aware replanner's linear predictions against the condition itself, and a
probe with a known answer: under a tight load line it drains before it fills."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast import stability as S
from jaxrl_suite.envs.ballast.episodes import plan_within_limits
from jaxrl_suite.envs.ballast.hydro_env import BallastHydro, EpisodeBank, hydro_params
from jaxrl_suite.envs.ballast.hydro_rollout import make_hydro_evaluate
from jaxrl_suite.envs.ballast.layout import load_layout
from jaxrl_suite.envs.ballast.params import split_hydro_obs
from jaxrl_suite.envs.ballast.routes import build_routes

LAY = load_layout("ring14")
G = build_routes(LAY, "auto")
T, E = G["cap"].shape[0], G["edge_mask"].shape[0]
NT = int(G["n_tanks"])
LIM = S.ship_limits(LAY)
HYD = LAY["hydrostatics"]


def _pad(x):
  return np.pad(np.asarray(x, np.float64), (0, T - NT)).astype(np.float32)


def _bank(vol0, target, mt=0.0):
  return EpisodeBank(vol0=jnp.asarray(vol0, jnp.float32)[None],
                     target=jnp.asarray(target, jnp.float32)[None], clog=jnp.ones((1, E)),
                     m_heel0=jnp.zeros(1), m_trim0=jnp.full(1, mt, jnp.float32),
                     n_blocked=jnp.zeros(1, jnp.int32))


PARAMS = hydro_params(LAY, G, _bank(np.zeros(T), np.zeros(T)), sigma_level=0.0)
COND = jax.jit(lambda v, mt: S.condition(v, 0.0, mt, PARAMS))


def test_ship_limits_defaults_and_overrides():
  """ring14 gives its load line; L from the tank span, TPC from the displacement, the trim and
  minimum-draught limits from MARPOL Annex I reg. 18.2 (0.015 L; 2 + 0.02 L)."""
  lcg = [t["lcg"] for t in LAY["tanks"]]
  L = (max(lcg) - min(lcg)) / S.LENGTH_SPAN
  assert LIM["length"] == pytest.approx(L)
  assert LIM["tpc"] == pytest.approx(1.2 * HYD["displacement_t"] / (100 * HYD["draught_m"]))
  assert LIM["trim_max"] == pytest.approx(0.015 * L)
  assert LIM["draught_min"] == pytest.approx(2.0 + 0.02 * L)
  assert LIM["draught_max"] == HYD["max_draught_m"]
  over = {**LAY, "hydrostatics": {**HYD, "length_m": 200.0, "trim_limit_m": 1.0}}
  lim = S.ship_limits(over)
  assert lim["length"] == 200.0 and lim["trim_max"] == 1.0 and lim["draught_min"] == 6.0
  bare = {**LAY, "hydrostatics": {k: v for k, v in HYD.items() if k != "max_draught_m"}}
  assert S.ship_limits(bare)["draught_max"] == np.inf      # no load line given: no limit


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=NT, max_size=NT), st.floats(-2e5, 2e5))
def test_draughts_match_float64_reference(fills, mt):
  vol = np.asarray(fills) * G["cap"][:NT]
  c = COND(jnp.asarray(_pad(vol)), mt)
  rho, lcf, L = HYD["rho_t_per_m3"], HYD["lcf_m"], LIM["length"]
  w = rho * vol.sum()
  trim = (rho * np.sum(vol * (np.asarray(G["lcg"][:NT]) - lcf)) + mt) / (
      100 * HYD["mctc_tm_per_cm"])
  mean = HYD["draught_m"] + w / (100 * LIM["tpc"])
  np.testing.assert_allclose(float(c.displacement), HYD["displacement_t"] + w, rtol=1e-5)
  np.testing.assert_allclose(float(c.trim), trim, atol=2e-4)
  np.testing.assert_allclose(float(c.draught), mean, atol=2e-4)
  np.testing.assert_allclose(float(c.draught_fwd), mean + trim * (L / 2 - lcf) / L, atol=3e-4)
  np.testing.assert_allclose(float(c.draught_aft), mean - trim * (L / 2 + lcf) / L, atol=3e-4)
  # the trim is the difference of the end draughts (by the head positive)
  np.testing.assert_allclose(float(c.draught_fwd - c.draught_aft), trim, atol=3e-4)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.05, 0.95), min_size=NT, max_size=NT), st.integers(0, NT * NT),
       st.floats(1.0, 300.0))
def test_internal_transfer_keeps_mass_and_mean_draught(fills, pick, amount):
  """Water moved between tanks changes neither the displacement nor the mean draught; only
  water from or to the sea does (sinkage = weight / TPC)."""
  i, j = pick % NT, (pick // NT) % NT
  vol = np.asarray(fills) * G["cap"][:NT]
  a = min(amount, vol[i], G["cap"][j] - vol[j]) if i != j else 0.0
  moved = vol.copy()
  moved[i] -= a
  moved[j] += a
  c0, c1 = COND(jnp.asarray(_pad(vol)), 0.0), COND(jnp.asarray(_pad(moved)), 0.0)
  np.testing.assert_allclose(float(c1.displacement), float(c0.displacement), rtol=1e-6)
  np.testing.assert_allclose(float(c1.draught), float(c0.draught), atol=1e-4)
  filled = vol.copy()
  filled[i] = min(vol[i] + amount, G["cap"][i])
  c2 = COND(jnp.asarray(_pad(filled)), 0.0)
  sink = HYD["rho_t_per_m3"] * (filled[i] - vol[i]) / (100 * LIM["tpc"])
  np.testing.assert_allclose(float(c2.draught - c0.draught), sink, atol=1e-4)


def test_breaks_names_each_limit():
  vol = jnp.asarray(_pad(0.5 * G["cap"][:NT]))
  c = COND(vol, 0.0)
  assert int(S.breaks(c, PARAMS)) == 0
  big_trim = (LIM["trim_max"] + 0.5) * 100 * HYD["mctc_tm_per_cm"]
  # 5.5 m by the head also sinks the bow past ring14's load line: both bits
  assert int(S.breaks(COND(vol, big_trim), PARAMS)) == S.TRIM | S.DRAUGHT
  no_line = PARAMS.replace(stab=PARAMS.stab.replace(draught_max=np.inf))
  assert int(S.breaks(S.condition(vol, 0.0, big_trim, no_line), no_line)) == S.TRIM
  low_line = PARAMS.replace(stab=PARAMS.stab.replace(draught_max=float(c.draught) - 0.1))
  assert int(S.breaks(S.condition(vol, 0.0, 0.0, low_line), low_line)) == S.DRAUGHT
  high_min = PARAMS.replace(stab=PARAMS.stab.replace(draught_min=float(c.draught) + 0.1))
  assert int(S.breaks(S.condition(vol, 0.0, 0.0, high_min), high_min)) == S.DRAUGHT
  both = low_line.replace(heel_limit=0.0)
  assert int(S.breaks(S.condition(vol, 1e5, 0.0, both), both)) == S.DRAUGHT | S.HEEL


def _fill_drain_case(room: float):
  """A plan with one fill (DB1P, from the sea) and one drain (DB1S, to the sea) of 300 m3 each:
  the same LCG, so the start and the end float at the same draughts; the cargo heel moment puts
  the heel half-way either side of upright (0.8 deg) at the start and the end, the cargo trim
  moment makes both float on an even keel. The load line
  lies `room` m above the start's deepest end draught."""
  names = [t["node"] for t in LAY["tanks"]]
  fill, drain = names.index("DB1P"), names.index("DB1S")
  vol0 = 0.5 * G["cap"][:NT]
  target = vol0.copy()
  target[fill] += 300.0
  target[drain] -= 300.0
  rho, tcg = HYD["rho_t_per_m3"], np.asarray(G["tcg"][:NT])
  swing = rho * float(np.sum((vol0 - target) * tcg))
  mh = -0.5 * swing - rho * float(np.sum(target * tcg))
  mt = -rho * float(np.sum(target * (np.asarray(G["lcg"][:NT]) - HYD["lcf_m"])))  # even keel
  c0 = S.condition(jnp.asarray(_pad(vol0)), mh, mt, PARAMS)
  deepest = max(float(c0.draught_fwd), float(c0.draught_aft))
  bank = _bank(_pad(vol0), _pad(target), mt).replace(m_heel0=jnp.full(1, mh, jnp.float32))
  return PARAMS.replace(bank=bank, stab=PARAMS.stab.replace(draught_max=deepest + room)), vol0


def test_env_ends_an_operation_over_the_load_line_as_a_failure():
  p, vol0 = _fill_drain_case(room=0.03)
  env = BallastHydro()
  obs, st0 = env.reset_to(jax.random.PRNGKey(0), 0, p)
  f = split_hydro_obs(obs, p)
  c = S.condition(jnp.asarray(_pad(vol0)), st0.m_heel0, st0.m_trim0, p)
  np.testing.assert_allclose(np.asarray(f["draught"]),
                             [float(c.draught_fwd), float(c.draught_aft), float(c.draught)],
                             atol=1e-5)
  assert int(st0.broke) == 0 and not bool(st0.violated)
  K, P = p.route_mask.shape[-1], p.pump_rate.shape[-1]
  names = [t["node"] for t in LAY["tanks"]]
  sea_fill = np.flatnonzero((np.asarray(p.route_src) == T) &
                            (np.asarray(p.route_dst) == names.index("DB1P")) &
                            np.asarray(p.route_mask))[0]
  act = np.full(P, 2 * K, np.int32)
  act[int(p.route_pump[sea_fill])] = sea_fill
  st1, done = st0, False
  for i in range(12):   # fill DB1P from the sea until the load line is crossed (or it is full)
    _, st1, _, done, info = env.step_env(jax.random.PRNGKey(i), st1, jnp.asarray(act), p)
    if bool(done):
      break
  assert bool(done) and not bool(info["success"]) and bool(st1.violated)
  assert int(st1.broke) == S.DRAUGHT and float(info["draught"][1]) > float(p.stab.draught_max)


@pytest.mark.parametrize("room", [0.03, 1.0])
def test_limit_aware_replanner_drains_before_it_fills_under_a_tight_load_line(room):
  """Known answer: with 3 cm to the load line, filling first sinks the ship past it (300 m3
  is ~5 cm at the aft end on ring14's TPC and trim lever), so the limit-aware replanner and
  the oracle must drain first, and finish; the heel-blind replan (plan order: the fill comes
  first) crosses it. With 1 m of room the order is free and every policy finishes."""
  p, _ = _fill_drain_case(room)
  ev = make_hydro_evaluate(BallastHydro(), HB.hydro_policy, int(p.max_steps_in_episode))
  out = {}
  for name in ("heel_replan", "oracle", "replan"):
    pp = p.replace(reveal_clog=name == "oracle")
    bp = HB.make_hydro_baseline(pp, name, n_cmds=2, margin_draught=0.005)
    out[name] = ev(pp, bp, jnp.zeros(1, jnp.int32), jax.random.split(jax.random.PRNGKey(0), 1))
  for name in ("heel_replan", "oracle"):
    assert bool(out[name]["success"][0]) and int(out[name]["broke"][0]) == 0, name
  if room < 0.05:
    assert not bool(out["replan"]["success"][0])
    assert int(out["replan"]["broke"][0]) == S.DRAUGHT
  else:
    assert bool(out["replan"]["success"][0])


def test_limit_predictions_match_the_condition():
  """The replanner's per-route rates: trim and draughts are exact (linear in the volumes),
  the heel a linearisation at the sounded fills, close for a small move."""
  vol = _pad(0.5 * G["cap"][:NT])
  p = PARAMS.replace(bank=_bank(vol, vol))
  env = BallastHydro()
  obs, _ = env.reset_to(jax.random.PRNGKey(0), 0, p)
  bp = HB.make_hydro_baseline(p, "heel_replan")
  f = split_hydro_obs(obs, p)
  q, rates, lo, hi = HB.limit_tables(bp, f)
  assert bool(jnp.all(lo < q)) and bool(jnp.all(q < hi))
  src, dst, mask = (np.asarray(x) for x in (p.route_src, p.route_dst, p.route_mask))
  for k in np.flatnonzero(mask)[:12]:
    moved = np.asarray(vol, np.float64)
    if src[k] < T:
      moved[src[k]] -= 20.0
    if dst[k] < T:
      moved[dst[k]] += 20.0
    c = S.condition(jnp.asarray(moved, jnp.float32), 0.0, 0.0, p)
    q1 = np.array([float(c.heel), float(c.trim), float(c.draught_fwd), float(c.draught_aft),
                   float(c.draught)])
    pred = np.asarray(q) + 20.0 * np.asarray(rates[k])
    np.testing.assert_allclose(pred[1:], q1[1:], atol=2e-4)
    np.testing.assert_allclose(pred[0], q1[0], atol=0.02)


def test_plan_filter_keeps_starts_and_targets_inside_the_limits():
  vol0 = 0.5 * G["cap"][:NT]
  g = {**G, "lcg": np.asarray(G["lcg"])}
  assert plan_within_limits(_pad(vol0), _pad(vol0), g, HYD, LIM)
  tight = {**LIM, "draught_max": S.ship_limits(LAY)["draught0"] + 0.01}
  assert not plan_within_limits(_pad(vol0), _pad(vol0), g, HYD, tight)
  names = [t["node"] for t in LAY["tanks"]]
  fwd = vol0.copy()
  fwd[names.index("FPT")] += 500.0
  fwd[names.index("APT")] -= 500.0
  short = {**LIM, "trim_max": 0.5}      # the start trims ~0.54 m by the head against the target
  assert plan_within_limits(_pad(fwd), _pad(vol0), g, HYD, LIM)
  assert not plan_within_limits(_pad(fwd), _pad(vol0), g, HYD, short)
