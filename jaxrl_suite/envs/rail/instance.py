"""Rail network instances: a line of stations, O-D markets, trains of 1-3 operators.

An instance is a dict of numpy arrays padded to the fixed sizes of RailRM-v0
(S_MAX stations, M_MAX = S_MAX (S_MAX - 1) / 2 markets, NL_MAX = S_MAX - 1 legs, A_MAX trains,
G segments). `calibrate` turns the demand targets (no-purchase share and market-level fare
elasticity per segment, UK evidence) into the MNL coefficients alpha[m, g] and beta[m, g].

Calibration [design]: utility is linear in the fare relative to the market's reference fare,
beta[m, g] = b_g / base_fare[m]. With every train at its base fare the market-level elasticity of
MNL demand is -beta p s0 = -b_g s0_g, so b_g = -e_g / s0_g hits the elasticity target exactly in
every market; alpha[m, g] then sets the no-purchase share at base fares to s0_g:

    sum_a serves[a, m] exp(alpha - b_g - gamma_g dist[a, g]) = (1 - s0_g) / s0_g.

Elasticity targets (UK, full/walk-up -0.2..-0.7, reduced/leisure -0.65..-1.0, season -0.2..-0.5:
TRRL SR614, TRL LR993, Wardman 2014): business -0.45, leisure -0.85, commuter -0.35. The
price-perturbation rollouts in tests/envs/rail/test_rail_calibration.py measure them on the env.
"""

from __future__ import annotations

import numpy as np

S_MAX = 8
NL_MAX = S_MAX - 1
M_MAX = S_MAX * (S_MAX - 1) // 2
A_MAX = 12
O_MAX = 3
G = 3                     # segments: business, leisure, commuter
SEGMENTS = ("business", "leisure", "commuter")
H = 12                    # booking periods (weekly; UK Advance fares on sale 12 weeks out)
LEVELS = np.round(np.linspace(0.8, 1.5, 8), 3)   # fare-bucket multipliers on the base fare

# Calibration targets per segment [business, leisure, commuter]
ELASTICITY = np.array([-0.45, -0.85, -0.35])
NO_PURCHASE = np.array([0.25, 0.45, 0.30])        # s0 at base fares [design]
GAMMA = np.array([0.5, 0.15, 0.8])                # utils per hour off the preferred time [design]
PREF_TIME = np.array([[7.5, 17.5], [11.0, 14.0], [7.5, 17.5]])   # two preferred times [design]
SEG_MIX = np.array([0.3, 0.5, 0.2])               # share of a market's arrivals [design]


def booking_curves(h: int = H) -> np.ndarray:
  """w[g, h] (sums to 1 over h; h = 0 is the period furthest from departure).

  Leisure books early, business and commuters late [design shape, UK Advance practice].
  """
  t = np.arange(h) / max(h - 1, 1)           # 0 = 12 weeks out, 1 = departure week
  w = np.stack([np.exp(3.0 * t),             # business: late
                np.exp(-1.5 * t) + 0.3,      # leisure: early
                np.exp(2.0 * t)])            # commuter: late
  return w / w.sum(1, keepdims=True)


def market_index(s_max: int = S_MAX):
  """(orig [M_MAX], dest [M_MAX]) of the O-D pairs o < d in a fixed order."""
  od = [(o, d) for o in range(s_max) for d in range(o + 1, s_max)]
  return np.array([o for o, _ in od]), np.array([d for _, d in od])


def build_instance(stations, leg_km, trains, weights, demand_scale: float,
                   capacity: float = 400.0, fare_fixed: float = 20.0,
                   fare_per_km: float = 0.12, cap_mult=None, pad: int = A_MAX) -> dict:
  """Padded arrays of one line.

  Args:
    stations: names (S <= S_MAX). leg_km: [S - 1] km. weights: [S] station demand weights.
    trains: list of (operator, departure hour, stops (station indices, increasing)).
      A train runs every leg between its first and last stop and serves the O-D pairs of its stops.
    demand_scale: expected arrivals per episode of a market = scale * w_o * w_d (gravity).
    cap_mult: {(o, d): max multiplier} regulated caps (default none).
    pad: train slots (len(trains) <= pad <= A_MAX); attention cost grows with pad^3 per env,
      so experiments pad to the instance's own count.
  """
  s = len(stations)
  assert 2 <= s <= S_MAX and len(leg_km) == s - 1 and len(trains) <= pad <= A_MAX
  orig, dest = market_index()
  legs = np.zeros((M_MAX, NL_MAX), np.float32)
  for m in range(M_MAX):
    if dest[m] < s:
      legs[m, orig[m]:dest[m]] = 1.0
  market_mask = (dest < s).astype(np.float32)
  km = np.zeros(NL_MAX, np.float32)
  km[:s - 1] = leg_km
  dist_km = legs @ km
  base_fare = np.where(market_mask > 0, fare_fixed + fare_per_km * dist_km, 1.0)
  w = np.asarray(weights, np.float64)
  lam_m = np.where(market_mask > 0, demand_scale * w[np.minimum(orig, s - 1)]
                   * w[np.minimum(dest, s - 1)], 0.0)
  a_n = len(trains)
  operator = np.zeros(pad, np.int32)
  dep = np.zeros(pad, np.float32)
  cap = np.zeros((pad, NL_MAX), np.float32)
  serves = np.zeros((pad, M_MAX), np.float32)
  agent_mask = np.zeros(pad, np.float32)
  for a, (op, t, stops) in enumerate(trains):
    assert 0 <= op < O_MAX and list(stops) == sorted(stops) and stops[-1] < s
    operator[a], dep[a], agent_mask[a] = op, t, 1.0
    cap[a, stops[0]:stops[-1]] = capacity
    for m in range(M_MAX):
      if market_mask[m] and orig[m] in stops and dest[m] in stops:
        serves[a, m] = 1.0
  served = serves.max(0) > 0
  market_mask = market_mask * served
  lam = (lam_m * market_mask)[:, None] * SEG_MIX[None]
  cap_m = np.full(M_MAX, LEVELS[-1], np.float32)
  for (o, d), c in (cap_mult or {}).items():
    cap_m[(orig == o) & (dest == d)] = c
  inst = dict(stations=list(stations), legs=legs, leg_km=km, leg_mask=(km > 0).astype(np.float32),
              market_mask=market_mask.astype(np.float32), orig=orig.astype(np.int32),
              dest=dest.astype(np.int32), base_fare=base_fare.astype(np.float32),
              lam=lam.astype(np.float32), operator=operator, dep_time=dep, capacity=cap,
              serves=serves, agent_mask=agent_mask, cap_mult=cap_m, n_agents=a_n)
  inst.update(calibrate(inst))
  return inst


def calibrate(inst: dict, elasticity=ELASTICITY, s0=NO_PURCHASE, gamma=GAMMA,
              pref_time=PREF_TIME) -> dict:
  """alpha [M, G], beta [M, G], gamma [G], pref_time [G, 2] hitting s0 and elasticity at base."""
  b = -np.asarray(elasticity, np.float64) / np.asarray(s0, np.float64)         # [G]
  beta = b[None, :] / inst["base_fare"][:, None].astype(np.float64)           # [M, G]
  dist = np.min(np.abs(inst["dep_time"][:, None, None] - pref_time[None]), -1)  # [A, G]
  # sum_a serves exp(-b - gamma dist) per (m, g)
  e = np.exp(-b[None, None] - gamma[None, None] * dist[:, None, :])            # [A, 1, G]
  tot = np.einsum("am,amg->mg", inst["serves"].astype(np.float64), np.broadcast_to(
      e, (inst["serves"].shape[0], M_MAX, G)))
  tot = np.where(tot > 0, tot, 1.0)
  alpha = np.log((1 - s0) / s0)[None] - np.log(tot)
  alpha = np.where(inst["market_mask"][:, None] > 0, alpha, -30.0)
  return dict(alpha=alpha.astype(np.float32), beta=beta.astype(np.float32),
              gamma=np.asarray(gamma, np.float32), pref_time=np.asarray(pref_time, np.float32))


def ecml(demand_scale: float = 36.0, pad: int = A_MAX) -> dict:
  """The default instance: a 5-station east-coast-like line, 9 trains of 3 operators.

  Stations King's Cross, Peterborough, York, Newcastle, Edinburgh (leg km from the ECML route
  mileage, rounded). Operator 0 (incumbent) runs 6 all-stations trains, operator 1 (open access)
  2 trains London-Newcastle-Edinburgh that skip Peterborough and York, operator 2 one
  London-York train. Capacity 400 seats per leg [design]. `demand_scale` is set so that
  at base fares the peak trains sell out and off-peak ones are 30-60% full (fluid rollout in
  tests/envs/rail/test_rail_calibration.py) [design].
  """
  stations = ("KGX", "PBO", "YRK", "NCL", "EDB")
  leg_km = (123.0, 180.0, 130.0, 200.0)
  weights = (10.0, 1.5, 3.0, 3.0, 4.0)
  trains = [(0, 6.0, (0, 1, 2, 3, 4)), (0, 8.0, (0, 1, 2, 3, 4)), (0, 10.0, (0, 1, 2, 3, 4)),
            (0, 13.0, (0, 1, 2, 3, 4)), (0, 16.0, (0, 1, 2, 3, 4)), (0, 18.0, (0, 1, 2, 3, 4)),
            (1, 7.5, (0, 3, 4)), (1, 15.0, (0, 3, 4)),
            (2, 17.0, (0, 2))]
  return build_instance(stations, leg_km, trains, weights, demand_scale, pad=pad)


def tiny(demand_scale: float = 4.0, capacity: float = 10.0, pad: int = 2) -> dict:
  """3 stations, 2 trains of 2 operators, small capacity: for tests and brute-force checks."""
  return build_instance(("A", "B", "C"), (100.0, 100.0),
                        [(0, 8.0, (0, 1, 2)), (1, 12.0, (0, 1, 2))], (3.0, 1.0, 2.0),
                        demand_scale, capacity=capacity, pad=pad)


def textbook(capacity: float = 100.0, lam_business: float = 60.0, lam_leisure: float = 250.0,
             pad: int = 1) -> dict:
  """The RM-literature regime for nested booking limits: one train, one leg, tight capacity,
  price-sensitive leisure demand booking early and price-insensitive business demand booking
  late (Littlewood 1972; Belobaba 1989; Talluri & van Ryzin 2004, ch. 2).

  Leisure: elasticity -1.6 at no-purchase share 0.5 (b = 3.2 utils per base fare); business:
  -0.3 at 0.2 (b = 1.5); no commuters. At base fares leisure alone would ask ~125 seats of
  100 and business ~48 more, so selling to leisure early displaces late business at up to 1.5x
  the fare [design]. A static fare cannot both fill early seats and keep seats for late business;
  EMSR-b can (tests/envs/rail/test_rail_emsr_regime.py). Not a market model: a probe with a
  known answer for the baselines.
  """
  inst = build_instance(("A", "B"), (200.0,), [(0, 9.0, (0, 1))], (1.0, 1.0), 1.0,
                        capacity=capacity, pad=pad)
  lam = np.zeros_like(inst["lam"])
  lam[0] = (lam_business, lam_leisure, 0.0)
  inst["lam"] = lam.astype(np.float32)
  inst.update(calibrate(inst, elasticity=np.array([-0.3, -1.6, -0.35]),
                        s0=np.array([0.2, 0.5, 0.3])))
  return inst


INSTANCES = {"ecml": ecml, "tiny": tiny, "textbook": textbook}
