"""The engine against Vidur's A100 Llama-2-7B profiles and against Vidur's own simulator: the
measurements and statistics of experiments/validate_vidur.py (docs/serving_engine.md).

Batch times (table 1):
  ratio_stats(r [n]) -> {n, p10, p50, p90, max_abs_err}
  composed_batches(prof, n, seed) -> [n, 5] (chunk, cached prefix, n decode, decode kv, s)
  batch_time_table(c) -> {row kind: ratio_stats of fitted / profiled}
Engine replays (table 2 and the engine side of table 3):
  rollout_fn(c, iteration_cost, no_overhead) -> (jitted run(params, key) -> state, params)
  engine_replay(c, iteration_cost, rate_scales, no_overhead) -> [per-request arrays [n]]
  serving_metrics(r) -> {finished, requests, preemptions, ttft/tpot/e2e_p50/p90/p99,
                         throughput_req_s, throughput_tok_s}
  engine_capacity(c) -> (capacity replay, {engine_req_s, engine_finished, recorded_req_s},
                         [replay per load]); replay_at(c, capacity, req_s) -> one replay
Side by side with Vidur (table 3; Vidur's arrays come from experiments/vidur_driver.py):
  latencies / engine_latencies / vidur_latencies -> {ttft, tpot, e2e: [n], nan if unfinished}
  throughput(arrival, finish, done) -> finished req/s over the makespan
  compare_requests(ours, vid) -> {metric: {n, pearson, spearman, engine/vidur/ratio_p50/90/99}}
  batch_arrays(batches) -> arrays; vidur_keys(batches) -> Vidur's lookup points (rounded)
  decode_key_profiled(batches) -> [B] bool; offered_req_s(arrival) -> float
  vidur_rebuild(batches, forests) -> [B] Vidur's time from its forests' tables
  price_batches(batches, at_vidur_keys) -> [B] seconds; batch_ratio_stats(batches, forests)
  vidur_capacity(capacity, vc) -> capacity dict with Vidur's side and the ratios
  one_load(r, v, arrays) -> one load's summary (engine; with v, Vidur and the comparisons)
  targets(c, side) -> [{target, value, met}] (issue #35's targets against the numbers)

`c` is the script's config (experiments/validate_vidur.get_config): trace, requests,
rate_scale, seed, n_composed, gpu, cap, max_batched_tokens, max_tokens, loads,
capacity_rate_scale, target_*. Engine replays run in float64.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.serving import (cost_model, engine, evaluate, heuristics, profiled_cost,
                                      routing, traces)

PCTS = (10, 50, 90)


def ratio_stats(r: np.ndarray) -> dict[str, float]:
  """p10 / p50 / p90 of ratios r [n] and the largest |r - 1|."""
  r = np.asarray(r, np.float64)
  p = np.percentile(r, PCTS)
  return {"n": int(r.size), "p10": float(p[0]), "p50": float(p[1]), "p90": float(p[2]),
          "max_abs_err": float(np.max(np.abs(r - 1)))}


def composed_batches(prof, n: int, seed: int) -> np.ndarray:
  """[n, 5] (c, p, b, k, profiled s): one prefill row plus one decode row with c + b a profiled
  GEMM token count; profiled time 1e-3 * 32 (G_row + P_row + D_row) (Vidur's decomposition)."""
  g = dict(zip(prof["gemm"][:, 0], prof["gemm"][:, 1]))
  rng = np.random.default_rng(seed)
  out = []
  while len(out) < n:
    c, p, ms_p = prof["prefill"][rng.integers(len(prof["prefill"]))]
    b, k, ms_d = prof["decode"][rng.integers(len(prof["decode"]))]
    if c + b in g:
      out.append((c, p, b, k, 1e-3 * profiled_cost.N_LAYERS * (g[c + b] + ms_p + ms_d)))
  return np.array(out)


def _composed_ratios(c, tab, prof) -> dict[str, np.ndarray]:
  """Composed batches priced by the profiled tables and by the analytic c.gpu model, over
  their profiled time: {row kind: ratios [n_composed]}."""
  cb = composed_batches(prof, c.n_composed, c.seed)
  fitted, analytic = [], []
  a = cost_model.spec_for(c.gpu)
  for ch, p, b, k, _ in cb:
    nb = int(b)
    fitted.append(profiled_cost.batch_time(np, tab, np.r_[ch, np.zeros(nb)],
                                           np.r_[p, np.zeros(nb)], np.full(nb + 1, k),
                                           np.r_[False, np.ones(nb, bool)]))
    # analytic model without its 0.5 ms scheduler overhead (the profiles have none)
    analytic.append(cost_model.iteration_time(np, 0.0, a.t_w, a.alpha, a.beta, a.gamma, ch + b,
                                              b * k, cost_model.prefill_pairs(p, ch)))
  return {"composed batch (profiled)": np.array(fitted) / cb[:, 4],
          "composed batch (analytic A100-7B)": np.array(analytic) / cb[:, 4]}


def batch_time_table(c) -> dict[str, dict[str, float]]:
  """Table 1: ratio statistics fitted / profiled per row kind and model (G non-attention,
  prefill and decode attention as tables and closed forms, composed batches)."""
  tab, prof = profiled_cost.a100_llama2_7b(), profiled_cost.load_profiles()
  rows = {"G non-attention (profiled)": profiled_cost.gemm_ms(np, tab, prof["gemm"][:, 0])
          / prof["gemm"][:, 1]}
  for kind, f in (("prefill", profiled_cost.prefill_ms), ("decode", profiled_cost.decode_ms)):
    r = prof[kind]
    rows[f"{kind} attention (profiled)"] = f(np, tab, r[:, 0], r[:, 1]) / r[:, 2]
    rows[f"{kind} attention (closed form)"] = profiled_cost.closed_form_fit(r, kind)[1]
  rows.update(_composed_ratios(c, tab, prof))
  return {name: ratio_stats(r) for name, r in rows.items()}


def rollout_fn(c, iteration_cost: str, no_overhead: bool):
  """(jitted run(params, key) -> final state, env params): the engine on the first c.requests
  requests of c.trace, one c.gpu, round robin, cap c.cap; no_overhead sets t_ovh = 0."""
  tr = traces.load_shipped(c.trace)
  env, p = routing.make_routing(table_size=c.requests, trace=tr, train_frac=None,
                                cluster=(c.gpu,), max_events=1_000_000,
                                max_batched_tokens=c.max_batched_tokens,
                                max_model_len=c.max_tokens, iteration_cost=iteration_cost)
  p = p.replace(window_start=0, pred_acc=1.0, cap=c.cap)
  if no_overhead:
    p = p.replace(hw=p.hw.replace(t_ovh=jnp.zeros_like(p.hw.t_ovh)))
  pol = heuristics.make_router("round_robin", 1)

  @jax.jit
  def run(pp, key):
    return evaluate.rollout(env, pp, pol, {}, key, 10 * c.requests)[0]

  return run, p


def engine_replay(c, iteration_cost: str, rate_scales=None,
                  no_overhead: bool = False) -> list[dict]:
  """Per-request arrays [n] (arrival, prompt, output, ttft = absolute first-token time, finish,
  status, npre) of one engine replay (float64) per rate scale (default [c.rate_scale]); one
  compilation serves all scales."""
  out = []
  with jax.enable_x64(True):
    run, p = rollout_fn(c, iteration_cost, no_overhead)
    for s in (c.rate_scale,) if rate_scales is None else rate_scales:
      st = run(p.replace(rate_scale=float(s)), jax.random.PRNGKey(c.seed))
      res = engine.results(st.eng)
      out.append({k: np.asarray(v) for k, v in (
          ("arrival", st.req.arrival), ("output", st.req.output), ("prompt", st.req.prompt),
          ("ttft", res.ttft), ("finish", res.finish), ("status", res.status),
          ("npre", res.npre))})
  return out


def serving_metrics(r: dict[str, np.ndarray]) -> dict[str, float]:
  """TTFT = first token - arrival, TPOT = (finish - first token) / (o - 1) over o > 1,
  E2E = finish - arrival (seconds; p50/p90/p99); throughput over the makespan."""
  done = r["status"] == engine.DONE
  ttft = (r["ttft"] - r["arrival"])[done]
  e2e = (r["finish"] - r["arrival"])[done]
  multi = done & (r["output"] > 1)
  tpot = ((r["finish"] - r["ttft"]) / np.maximum(r["output"] - 1, 1))[multi]
  span = float(np.max(r["finish"][done]) - np.min(r["arrival"]))
  out = {"finished": int(done.sum()), "requests": int(done.size),
         "preemptions": int(r["npre"].sum())}
  for name, x in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
    for q in (50, 90, 99):
      out[f"{name}_p{q}"] = float(np.percentile(x, q))
  out["throughput_req_s"] = float(done.sum()) / span
  out["throughput_tok_s"] = float(r["output"][done].sum()) / span
  return out


def latencies(arrival, first, finish, output, done) -> dict[str, np.ndarray]:
  """[n] TTFT = first - arrival, TPOT = (finish - first) / (o - 1) (o > 1), E2E = finish -
  arrival, seconds; nan where the request did not finish (or o = 1 for TPOT)."""
  nan = np.full(len(arrival), np.nan)
  multi = done & (output > 1)
  return {"ttft": np.where(done, first - arrival, nan),
          "tpot": np.where(multi, (finish - first) / np.maximum(output - 1, 1), nan),
          "e2e": np.where(done, finish - arrival, nan)}


def engine_latencies(r) -> dict[str, np.ndarray]:
  """`latencies` of an engine replay (engine_replay's arrays)."""
  return latencies(r["arrival"], r["ttft"], r["finish"], r["output"], r["status"] == engine.DONE)


def vidur_latencies(v) -> dict[str, np.ndarray]:
  """`latencies` of a Vidur run (arrival, first_token, finish, output, completed)."""
  return latencies(v["arrival"], v["first_token"], v["finish"], v["output"], v["completed"])


def throughput(arrival, finish, done) -> float:
  """Finished requests per second of makespan (first arrival to last finish)."""
  return float(done.sum()) / float(np.max(finish[done]) - np.min(arrival))


def compare_requests(ours: dict, vid: dict) -> dict[str, dict[str, float]]:
  """Per metric over the requests both finished: Pearson and Spearman r across requests, the
  p50 / p90 / p99 of each simulator and their ratio engine / Vidur."""
  from scipy import stats  # pylint: disable=import-outside-toplevel
  out = {}
  for m in ("ttft", "tpot", "e2e"):
    ok = np.isfinite(ours[m]) & np.isfinite(vid[m])
    a, b = ours[m][ok], vid[m][ok]
    row = {"n": int(ok.sum()), "pearson": float(stats.pearsonr(a, b)[0]),
           "spearman": float(stats.spearmanr(a, b)[0])}
    for q in (50, 90, 99):
      pa, pb = float(np.percentile(a, q)), float(np.percentile(b, q))
      row.update({f"engine_p{q}": pa, f"vidur_p{q}": pb, f"ratio_p{q}": pa / pb})
    out[m] = row
  return out


def round_up(x, g):
  """x rounded up to a multiple of g (float64)."""
  return np.ceil(np.asarray(x, np.float64) / g) * g


def batch_arrays(batches: list) -> dict[str, np.ndarray]:
  """The batches Vidur formed ([q total, n decode, decode kv sum, [[q, kv] per prefill], t],
  vidur_driver's format) as arrays: {"n_tok" [B], "n_dec" [B], "mean_kv" [B] (decode kv sum /
  n decode), "idx" [R] (batch of each prefill chunk), "q" [R] (its tokens), "kv" [R] (tokens in
  KV after it: cached + chunk)}, float64 but idx."""
  n_dec = np.array([b[1] for b in batches], np.float64)
  pre = np.array([qk for b in batches for qk in b[3]], np.float64).reshape(-1, 2)
  return {"n_tok": np.array([b[0] for b in batches], np.float64), "n_dec": n_dec,
          "mean_kv": np.array([b[2] for b in batches], np.float64) / np.maximum(n_dec, 1),
          "idx": np.array([i for i, b in enumerate(batches) for _ in b[3]], np.int64),
          "q": pre[:, 0], "kv": pre[:, 1]}


def vidur_keys(batches: list) -> dict[str, np.ndarray]:
  """Vidur 0.0.26's lookup points of each batch it formed (batch_arrays' keys, rounded as it
  rounds them): n_tok up to 8, mean_kv floored then up to 256, q up to 32, kv (cached + chunk:
  Vidur looks prefill attention up at that many cached tokens) up to 256."""
  a = batch_arrays(batches)
  return {**a, "n_tok": round_up(a["n_tok"], 8), "mean_kv": round_up(np.floor(a["mean_kv"]), 256),
          "q": round_up(a["q"], 32), "kv": round_up(a["kv"], 256)}


def price_batches(batches: list, at_vidur_keys: bool = False) -> np.ndarray:
  """[B] seconds the engine's profiled cost (t_ovh = 0) gives each batch Vidur formed
  (batch_arrays): 1e-3 L [G(n_tok) + sum_i P(q_i, kv_i - q_i) + D(n_dec, mean_kv)].
  at_vidur_keys: at Vidur's lookup points instead (vidur_keys, prefill at P(q_i, kv_i)): what
  is left of the ratio then is Vidur's forests against our tables."""
  tab = profiled_cost.a100_llama2_7b()
  k = vidur_keys(batches) if at_vidur_keys else batch_arrays(batches)
  cached = k["kv"] if at_vidur_keys else k["kv"] - k["q"]
  p_ms = np.bincount(k["idx"], profiled_cost.prefill_ms(np, tab, k["q"], cached), len(batches))
  return profiled_cost.iteration_time(np, tab, k["n_tok"], p_ms, k["n_dec"], k["mean_kv"])


def offered_req_s(arrival) -> float:
  """Requests per second offered by the arrival times [n] (n - 1 gaps over their span)."""
  return float((len(arrival) - 1) / np.ptp(arrival))


def decode_key_profiled(batches: list, prof=None) -> np.ndarray:
  """[B] bool: the batch's decode-attention lookup key (n decode, Vidur's rounded mean context)
  is a profiled decode row (True too for a batch without decoders). Off those keys Vidur's
  random forest answers with a neighbouring row's time (a tree splits midway between profiled
  contexts: at 1,280 tokens it reads the 1,024 row, ~20% below linear), our table interpolates."""
  prof = profiled_cost.load_profiles() if prof is None else prof
  rows = {(int(b), int(k)) for b, k, _ in prof["decode"]}
  k = vidur_keys(batches)
  return np.array([b == 0 or (int(b), int(m)) in rows for b, m in zip(k["n_dec"], k["mean_kv"])])


def vidur_rebuild(batches: list, forests: dict) -> np.ndarray:
  """[B] seconds: Vidur's time for each batch rebuilt from its forests' prediction tables
  (vidur_driver.forest_tables) at its lookup keys (vidur_keys), 1e-3 L [mlp(n_tok) + sum_i
  prefill(kv_i, q_i) + decode(n_dec, mean_kv)], the decomposition its 0.0.26 predictor uses
  (no decode batching overhead on this path: the record checks it, ratio to its time = 1)."""
  k = vidur_keys(batches)
  mlp = {int(n): v for n, v in forests["mlp_up_proj"]}
  dec = {(int(b), int(kv)): v for b, kv, v in forests["attn_decode"]}
  pre = {(int(kv), int(q)): v for kv, q, v in forests["attn_prefill"]}
  g = np.array([mlp[int(n)] for n in k["n_tok"]], np.float64)
  d = np.array([dec[(int(b), int(m))] if b > 0 else 0.0
                for b, m in zip(k["n_dec"], k["mean_kv"])], np.float64)
  p = np.bincount(k["idx"], np.array([pre[(int(kv), int(q))] for kv, q in zip(k["kv"], k["q"])],
                                     np.float64), len(batches))
  return 1e-3 * profiled_cost.N_LAYERS * (g + p + d)


def batch_ratios(batches: list) -> np.ndarray:
  """[B] the engine's cost of each of Vidur's batches over Vidur's predicted time."""
  return price_batches(batches) / np.array([b[4] for b in batches], np.float64)


def batch_ratio_stats(batches: list, forests: dict | None = None) -> dict[str, dict[str, float]]:
  """Ratio engine cost / Vidur's time over Vidur's batches: as formed, at Vidur's lookup keys,
  and at its keys split by whether the decode key is a profiled row (decode_key_profiled: there
  both price the same measured point, so the ratio is table against forest on the data). With
  the forests' tables, also Vidur's time rebuilt from them (vidur_rebuild) over its time."""
  t_v = np.array([b[4] for b in batches], np.float64)
  at_keys = price_batches(batches, True) / t_v
  on = decode_key_profiled(batches)
  out = {"as formed": ratio_stats(price_batches(batches) / t_v),
         "at Vidur's lookup keys": ratio_stats(at_keys)}
  for name, sel in (("at its keys, decode key a profiled row", on),
                    ("at its keys, decode key between rows", ~on)):
    if sel.any():
      out[name] = ratio_stats(at_keys[sel])
  if forests is not None:
    out["Vidur rebuilt from its forests at its keys / its time"] = ratio_stats(
        vidur_rebuild(batches, forests) / t_v)
  return out


def engine_capacity(c) -> tuple[dict, dict[str, Any], list[dict]]:
  """The engine's capacity with every request at once (x c.capacity_rate_scale the recorded
  rate; profiled cost, no overhead): (that replay, {engine_req_s, engine_finished}, one replay
  per load f of c.loads, offered at f x capacity)."""
  cap_run = engine_replay(c, "profiled", [c.capacity_rate_scale], no_overhead=True)[0]
  done = cap_run["status"] == engine.DONE
  cap = throughput(cap_run["arrival"], cap_run["finish"], done)
  # the recorded rate (req/s at rate scale 1) of these requests
  rate1 = offered_req_s(cap_run["arrival"]) / c.capacity_rate_scale
  runs = engine_replay(c, "profiled", [f * cap / rate1 for f in c.loads], no_overhead=True)
  return cap_run, {"engine_req_s": cap, "engine_finished": int(done.sum()),
                   "recorded_req_s": float(rate1)}, runs


def replay_at(c, capacity: dict[str, Any], req_s: float) -> dict:
  """The engine's replay of the same requests offered at req_s (capacity from engine_capacity:
  its recorded_req_s is the rate at rate scale 1); profiled cost, no overhead."""
  return engine_replay(c, "profiled", [req_s / capacity["recorded_req_s"]], no_overhead=True)[0]


def vidur_capacity(capacity: dict[str, Any], vc: dict) -> dict[str, Any]:
  """engine_capacity's summary updated in place (and returned) with Vidur's run vc of the
  same all-at-once requests: its capacity, the ratio engine / Vidur, and its batch ratios."""
  capacity.update(vidur_req_s=throughput(vc["arrival"], vc["finish"], vc["completed"]),
                  vidur_finished=int(vc["completed"].sum()))
  capacity["ratio"] = capacity["engine_req_s"] / capacity["vidur_req_s"]
  capacity["batch_ratio"] = batch_ratio_stats(vc["batches"], vc.get("forests"))
  return capacity


def one_load(r: dict, v: dict | None, arrays: dict) -> dict[str, Any]:
  """Engine summary of one load; with Vidur's run v, the comparisons too (and the per-request
  E2E pairs and per-batch ratios for the figure, into `arrays`)."""
  ours = engine_latencies(r)
  done = r["status"] == engine.DONE
  out = {"offered_req_s": offered_req_s(r["arrival"]),
         "engine": {"finished": int(done.sum()), "preemptions": int(r["npre"].sum()),
                    "throughput_req_s": throughput(r["arrival"], r["finish"], done)}}
  if v is not None:
    out["vidur"] = {"finished": int(v["completed"].sum()), "restarts": int(v["restarts"].sum()),
                    "throughput_req_s": throughput(v["arrival"], v["finish"], v["completed"]),
                    "batches": len(v["batches"]), "cpu_s_run": v["cpu_s_run"],
                    "cpu_s_setup": v["cpu_s_setup"]}
    vl = vidur_latencies(v)
    out["requests"] = compare_requests(ours, vl)
    out["batch_ratio"] = batch_ratio_stats(v["batches"], v.get("forests"))
    arrays.update(e2e=(ours["e2e"], vl["e2e"]), batch_ratios=batch_ratios(v["batches"]))
  return out


def targets(c, side: dict) -> list[dict[str, Any]]:
  """The issue's targets against the measured numbers: [{target, value, met}] (met: a bool
  computed here from the numbers; empty when the Vidur side was skipped)."""
  if side.get("vidur_skipped"):
    return []
  rows, band = [], (1 - c.target_batch, 1 + c.target_batch)
  for f, ld in side["loads"].items():
    s = ld["batch_ratio"]["as formed"]
    rows.append({"target": f"per-batch ratio p10, p90 in [{band[0]:.2f}, {band[1]:.2f}] "
                           f"(load {f})", "value": f"{s['p10']:.3f}, {s['p90']:.3f}",
                 "met": bool(band[0] <= s["p10"] and s["p90"] <= band[1])})
  r = side["capacity"]["ratio"]
  rows.append({"target": f"capacity within {c.target_capacity:.0%}", "value": f"{r:.3f}",
               "met": bool(abs(r - 1) <= c.target_capacity)})
  for f in c.target_loads:
    for m, row in side["loads"][str(f)]["requests"].items():
      vals = (row["ratio_p50"], row["ratio_p90"])
      rows.append({"target": f"{m.upper()} p50, p90 within {c.target_latency:.0%} (load {f})",
                   "value": f"{vals[0]:.3f}, {vals[1]:.3f}",
                   "met": bool(all(abs(x - 1) <= c.target_latency for x in vals))})
  return rows
