"""Per-layout bank reports of experiments/bench_ballast.py (--hydro, --v2_bank), as text lines.

  hydro_layout_lines(name, n_bank, ships, steps)   BallastHydro-v0 on one layout (shipped name,
      JSON path, or gen:SEED for a generated layout): the episode bank (rejections per #blocked
      stratum, episodes per clog regime), the oracle / plain B-replan / heel-aware replanner on
      every bank episode (success, heel-limit violations, decision steps and hours, pump energy;
      mean [95% bootstrap CI]), and the heel-aware replanner's vmapped steps/s;
  v2_bank_lines(name, n)   checked BallastNet v2 banks (envs/ballast/net_bank.py): rejections
      per #blocked stratum and the regime mix without the check vs in the bank (seed 3, default
      env params).
One function a layout, so the script prints each layout as soon as its bank is built.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from jaxrl_suite.core import bench, stats
from jaxrl_suite.envs.ballast import hydro_baselines as HB
from jaxrl_suite.envs.ballast import make_ballast, make_hydro
from jaxrl_suite.envs.ballast import net_bank as NB
from jaxrl_suite.envs.ballast.bench_workloads import steps_per_second
from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.hydro_rollout import make_hydro_evaluate


def _mean_ci(x) -> str:
  """mean [95% bootstrap CI] of a 1-D array, as text."""
  m, lo, hi = stats.bootstrap_ci(x)
  return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def _bank_lines(rep: dict, params, n_bank: int, t_bank: float) -> list[str]:
  """The bank's heading, rejection rates and per-stratum table."""
  return [
      f"\n## {rep['layout']} ({int(params.tank_mask.sum())} tanks, "
      f"{int(params.route_mask.sum())} routes padded to {params.route_mask.shape[0]}, "
      f"{int(params.pump_mask.sum())} pumps); bank of {n_bank} in {t_bank:.0f} s",
      f"rejection rate {rep['rejection_rate']:.3f} (oracle failed "
      f"{rep['oracle_fail_rate']:.3f} of routable draws); episodes per regime {rep['regimes']}",
      *bench.md_table(("#blocked", "quota", "drawn", "no route", "oracle failed",
                       "rejection rate"),
                      [(s["n_blocked"], s["quota"], s["drawn"], s["no_route"],
                        s["oracle_failed"], f"{s['rejection_rate']:.3f}")
                       for s in rep["strata"]])]


def hydro_layout_lines(name: str, n_bank: int, ships: int, steps: int) -> list[str]:
  """The --hydro report of one layout (module doc)."""
  lay = generate_layout(int(name[4:])) if name.startswith("gen:") else name
  t0 = time.perf_counter()
  env, params, rep = make_hydro(lay, n_bank=n_bank, seed=0)
  lines = _bank_lines(rep, params, n_bank, time.perf_counter() - t0)
  ev = make_hydro_evaluate(env, HB.hydro_policy, int(params.max_steps_in_episode))
  keys = jax.random.split(jax.random.PRNGKey(1), n_bank)
  rows = []
  for pol in HB.HYDRO_BASELINES:
    p = params.replace(reveal_clog=pol == "oracle")
    out = jax.device_get(ev(p, HB.make_hydro_baseline(p, pol), jnp.arange(n_bank), keys))
    rows.append((pol, _mean_ci(out["success"]), _mean_ci(out["violated"]),
                 _mean_ci(out["steps"]), f"{out['steps'].mean() * float(p.dt_h):.2f}",
                 _mean_ci(out["energy_kwh"])))
  lines += bench.md_table(("policy", "success", "heel limit violated", "decision steps",
                           "hours", "kWh"), rows)
  hb = HB.make_hydro_baseline(params, "heel_replan")
  sps = steps_per_second(env, params, lambda o, s, k: HB.hydro_policy(hb, o, k), ships, steps)
  return lines + [f"heel-aware replanner, {ships} ships x {steps} steps: {sps[0]:,.0f} env "
                  f"steps/s ({sps[1]:,.0f} per CPU-s)"]


def v2_bank_lines(name: str, n: int) -> list[str]:
  """The --v2_bank report of one shipped layout (module doc)."""
  env, p = make_ballast(layout=name, task="v2")
  t = time.time()
  _, r = NB.make_v2_bank(env, p, n=n, seed=3, batch=512)
  per = ", ".join(f"{s['n_blocked']}: {s['rejected']}/{s['checked']} "
                  f"({100 * s['rejection_rate']:.1f}%)" for s in r["strata"])
  return [
      f"{name}: {n} episodes in {time.time() - t:.0f} s; rejected per #blocked {per}; all "
      f"{100 * r['rejection_rate']:.1f}%",
      "  regimes without the check -> bank: " + ", ".join(
          f"{k} {r['regimes_unchecked'][k]:.3f} -> {r['regimes_bank'][k]:.3f}"
          for k in r["regimes_bank"]),
      "  with a partial clog, checked -> accepted: " + ", ".join(
          f"{s['n_blocked']}: {s['with_partial_checked']:.3f} -> {s['with_partial_accepted']:.3f}"
          for s in r["strata"])]
