"""The profiled cost on every GPU spec (profiled_cost module docstring): the A100-7B tables scaled
by each GPU's analytic ratios, extended linearly beyond the profiled grid, in a heterogeneous
engine, and with exact decode spans past 4,096 tokens of context.

References are float64 numpy written here (np.interp over the shipped table nodes, the analytic
constants of cost_model), not the functions under test."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_suite.envs.serving import cost_model, engine, profiled_cost as pc, reference_sim

A = cost_model.A100_7B
L = 32
TAB = pc.a100_llama2_7b()
SPECS = list(cost_model.GPU_TYPES.values())
HETERO = [cost_model.A100_7B, cost_model.L4_7B, cost_model.H100_7B]


# --- float64 references ----------------------------------------------------------------------
def _bilinear(nx, ny, grid, x, y):
  """Bilinear interpolation at scalar (x, y), clamped to the nodes: along y per row, then x."""
  return float(np.interp(x, nx, [np.interp(y, ny, row) for row in grid]))


def _pairs(p, c):
  return c * p + c * (c + 1) / 2


def _ratio_g(spec, n):
  """The A100 fit (+ alpha_A per token beyond 4096) x max(t_w, alpha N) / max(t_w_A, alpha_A N)."""
  g = np.interp(n, TAB.gemm_n, TAB.gemm_ms) + 1e3 * A.alpha / L * max(n - TAB.gemm_n[-1], 0.0)
  return g * max(spec.t_w, spec.alpha * n) / max(A.t_w, A.alpha * n)


def ref_g(spec, n):
  """G_spec(N) per layer, ms: `_ratio_g`, past A100's knee t_w_A / alpha_A at least its value
  there (the monotone envelope: the ratio alone falls as 1 / N past the knee)."""
  knee = A.t_w / A.alpha
  return max(_ratio_g(spec, n), _ratio_g(spec, knee)) if n > knee else _ratio_g(spec, n)


def ref_p(spec, c, p):
  """P_spec(c, p) per layer, ms: + gamma_A per extra (query, key) pair beyond the grid."""
  c1, p1 = min(c, TAB.pf_c[-1]), min(p, TAB.pf_k[-1])
  v = _bilinear(TAB.pf_c, TAB.pf_k, TAB.pf_ms, c1, p1)
  return (v + 1e3 * A.gamma / L * (_pairs(p, c) - _pairs(p1, c1))) * spec.gamma / A.gamma


def ref_d(spec, b, k):
  """D_spec(b, k) per layer, ms: + beta_A per context token per sequence beyond 4096."""
  v = _bilinear(TAB.dec_b, TAB.dec_k, TAB.dec_ms, b, min(k, TAB.dec_k[-1]))
  return (v + 1e3 * A.beta / L * b * max(k - TAB.dec_k[-1], 0.0)) * spec.beta / A.beta


def ref_iteration(spec, prefills, decode_ctx):
  """Seconds of one iteration: prefills [(chunk, cached)], decode contexts [n_dec]."""
  nd = len(decode_ctx)
  n_tok = sum(c for c, _ in prefills) + nd
  ms = ref_g(spec, n_tok) + sum(ref_p(spec, c, p) for c, p in prefills)
  if nd:
    ms += ref_d(spec, nd, float(np.mean(decode_ctx)))
  return spec.t_ovh + 1e-3 * L * ms


# --- tables ----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_derived_tables_are_a100_times_the_analytic_ratio(spec):
  """G, P, D of every GPU spec at points inside and beyond the grid = the float64 reference:
  the A100 value x max(t_w, alpha N) / max(t_w_A, alpha_A N) (held past the knee), gamma /
  gamma_A, beta / beta_A. G never decreases in N."""
  r = pc.ratios(spec)
  for n in (1.0, 64.0, 150.0, 200.0, 256.0, 400.0, 1000.0, 2048.0, 4096.0, 6000.0, 30_000.0):
    assert float(pc.gemm_ms(np, TAB, n, r)) == pytest.approx(ref_g(spec, n), rel=1e-12), n
  for n in (1.0, 64.0, 150.0, 2048.0, 4096.0, 30_000.0):     # outside the held range: the ratio
    assert float(pc.gemm_ms(np, TAB, n, r)) == pytest.approx(_ratio_g(spec, n), rel=1e-12), n
  g = pc.gemm_ms(np, TAB, np.arange(0.0, 10_000.0), r)
  assert np.all(np.diff(g) >= -1e-14 * g[1:])
  for c, p in ((1.0, 0.0), (100.0, 300.0), (700.0, 2500.0), (2048.0, 4096.0), (512.0, 9000.0),
               (2048.0, 120_000.0), (5000.0, 0.0), (8192.0, 20_000.0)):
    assert float(pc.prefill_ms(np, TAB, c, p, r)) == pytest.approx(ref_p(spec, c, p),
                                                                  rel=1e-12), (c, p)
  for b, k in ((1.0, 10.0), (3.0, 700.0), (40.0, 3500.0), (256.0, 4096.0), (8.0, 5000.0),
               (100.0, 60_000.0), (300.0, 128_000.0)):
    assert float(pc.decode_ms(np, TAB, b, k, r)) == pytest.approx(ref_d(spec, b, k),
                                                                 rel=1e-12), (b, k)
  # the derived totals follow the spec's analytic scale: compute-bound GEMM at 4096 tokens is the
  # A100's times alpha / alpha_A (all specs are compute-bound there), the floor t_w / t_w_A
  assert float(pc.gemm_ms(np, TAB, 4096.0, r)) == pytest.approx(
      TAB.gemm_ms[-1] * spec.alpha / A.alpha, rel=1e-12)
  assert float(pc.gemm_ms(np, TAB, 1.0, r)) == pytest.approx(
      TAB.gemm_ms[0] * spec.t_w / A.t_w, rel=1e-12)


def _committed_parts(xp, tab, chunk, cached, ctx, dec):
  """Per-slot P [K], G and D of the committed A100-7B iteration, op for op."""
  chunk = xp.where(dec, 0, chunk)
  nd = xp.sum(dec)
  k = xp.sum(xp.where(dec, ctx, 0)) / xp.maximum(nd, 1)
  n = xp.sum(chunk) + nd
  return (xp.where(chunk > 0, pc.bilinear(xp, tab.pf_c, tab.pf_k, tab.pf_ms, chunk, cached), 0.0),
          xp.where(n > 0, pc.interp1(xp, tab.gemm_n, tab.gemm_ms, n), 0.0),
          xp.where(nd > 0, pc.bilinear(xp, tab.dec_b, tab.dec_k, tab.dec_ms, nd, k), 0.0))


def _committed_batch_time(xp, tab, chunk, cached, ctx, dec, t_ovh):
  """The committed A100-7B profiled iteration (before the derived GPUs), op for op."""
  p, g, d = _committed_parts(xp, tab, chunk, cached, ctx, dec)
  return t_ovh + 1e-3 * L * (g + xp.sum(p) + d)


def _committed_decode_linear(xp, tab, n, s, t_ovh):
  """The committed decode_linear inside the grid (mean context < 4096), op for op."""
  b = xp.maximum(n, 1)
  k = s / b
  j, _ = pc._segment(xp, tab.dec_k, k)  # pylint: disable=protected-access
  k_lo, k_hi = xp.take(tab.dec_k, j), xp.take(tab.dec_k, j + 1)
  d = lambda kk: xp.where(n > 0, pc.bilinear(xp, tab.dec_b, tab.dec_k, tab.dec_ms, n, kk), 0.0)
  beta = 1e-3 * L * ((d(k_hi) - d(k_lo)) / (k_hi - k_lo)) / b
  g = xp.where(n > 0, pc.interp1(xp, tab.gemm_n, tab.gemm_ms, n), 0.0)
  return t_ovh + 1e-3 * L * (g + d(k_lo)) - beta * b * k_lo, beta


def _in_grid_batches(n, seed=0):
  """n random batches of 6 slots inside the profiled grid: chunk, cached, context [n, 6], decode
  flags."""
  rng = np.random.default_rng(seed)
  return (rng.integers(0, 513, (n, 6)).astype(np.float64),      # chunk (sum <= 3072)
          rng.integers(0, 4097, (n, 6)).astype(np.float64),     # cached
          rng.integers(1, 4096, (n, 6)).astype(np.float64),     # decode context
          rng.random((n, 6)) < 0.5)


def _parts(xp, tab, chunk, cached, ctx, dec, r):
  """The same parts from the functions under test, with the GPU ratios r."""
  chunk = xp.where(dec, 0, chunk)
  nd = xp.sum(dec)
  k = xp.sum(xp.where(dec, ctx, 0)) / xp.maximum(nd, 1)
  return (pc.prefill_ms(xp, tab, chunk, cached, r), pc.gemm_ms(xp, tab, xp.sum(chunk) + nd, r),
          pc.decode_ms(xp, tab, nd, k, r))


def test_a100_unchanged_in_the_grid_float64_and_float32():
  """A100-7B inside the profiled grid prices every iteration as the committed tables did: bit for
  bit in float64 numpy and in jitted float32 (its ratios are exactly 1 in float32 too, which is
  why they are float64 quotients, not an in-graph x / constant: with them or without, the same
  bits).

  Against the committed program, float32 is bitwise at XLA's default backend level; at the
  suite's LLVM -O0 (conftest) the two programs' codegen differs (measured: 20 of 384 prefill
  values and 1 of 64 totals 1 ulp apart, with or without the ratios), so there 2 ulp are allowed.
  XLA_FLAGS=--xla_backend_optimization_level=2 runs the bitwise check."""
  r64 = pc.ratios(A)
  assert tuple(r64) == (1.0, 1.0, 1.0, 1.0)
  hw = engine.make_hardware([A, cost_model.L4_7B], iteration_cost="profiled")
  assert hw.prof_ratio.gamma.dtype == jnp.float32
  r32 = pc.Ratios(*(x[0] for x in hw.prof_ratio))
  assert all(float(x) == 1.0 for x in r32)
  c, p, k, d = _in_grid_batches(64)
  want = [_committed_batch_time(np, TAB, *x, 5e-4) for x in zip(c, p, k, d)]
  got = [pc.batch_time(np, TAB, *x, 5e-4, r=r64) for x in zip(c, p, k, d)]
  np.testing.assert_array_equal(got, want)
  jt = hw.prof
  rtol = 2.4e-7 if "optimization_level=0" in os.environ.get("XLA_FLAGS", "") else 0.0
  args = [jnp.asarray(x, jnp.float32) for x in (c, p, k)] + [jnp.asarray(d)]
  new = jax.jit(jax.vmap(lambda *x: _parts(jnp, jt, *x, r32)))(*args)
  none = jax.jit(jax.vmap(lambda *x: _parts(jnp, jt, *x, None)))(*args)
  old = jax.jit(jax.vmap(lambda *x: _committed_parts(jnp, jt, *x)))(*args)
  for a, b, z in zip(new, old, none):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(z))       # the ratios: exact
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=0)
  t_new = jax.jit(jax.vmap(lambda *x: pc.batch_time(jnp, jt, *x, 5e-4, r=r32)))(*args)
  t_none = jax.jit(jax.vmap(lambda *x: pc.batch_time(jnp, jt, *x, 5e-4)))(*args)
  t_old = jax.jit(jax.vmap(lambda *x: _committed_batch_time(jnp, jt, *x, 5e-4)))(*args)
  np.testing.assert_array_equal(np.asarray(t_new), np.asarray(t_none))
  np.testing.assert_allclose(np.asarray(t_new), np.asarray(t_old), rtol=rtol, atol=0)
  # the GEMM ratio is exactly 1 at every token count, float32 jitted
  n_tok = jnp.arange(0.0, 20_000.0, 7.0, dtype=jnp.float32)
  assert bool(jnp.all(jax.jit(lambda n: pc.gemm_ratio(jnp, r32, n))(n_tok) == 1.0))
  # decode spans' coefficients inside the grid
  nd = jnp.asarray(np.arange(1, 257, dtype=np.float32))
  s = nd * jnp.asarray(np.linspace(1, 4095, 256), jnp.float32)
  c0, beta, _ = jax.jit(lambda n, s: pc.decode_linear(jnp, jt, n, s, 5e-4, r=r32))(nd, s)
  c0_old, beta_old = jax.jit(lambda n, s: _committed_decode_linear(jnp, jt, n, s, 5e-4))(nd, s)
  np.testing.assert_allclose(np.asarray(c0), np.asarray(c0_old), rtol=rtol, atol=0)
  np.testing.assert_allclose(np.asarray(beta), np.asarray(beta_old), rtol=rtol, atol=0)


# --- beyond the grid -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["A100-7B", "A100-8B", "L4-8B", "A100x4-70B"])
def test_decode_extension_is_linear_with_slope_beta(name):
  """Past 4,096 tokens of mean context, a decode iteration grows by the spec's own beta per
  context token (slope = beta of the analytic model), continuously at the last node and never
  decreasing in the context."""
  spec = cost_model.GPU_TYPES[name]
  r = pc.ratios(spec)
  k_l = TAB.dec_k[-1]
  for b in (1.0, 8.0, 64.0, 300.0):
    t = lambda k: pc.iteration_time(np, TAB, b, 0.0, b, k, spec.t_ovh, r=r)
    ks = np.array([4096.0, 5000.0, 17_000.0, 64_000.0, 131_072.0])
    ext = pc.decode_ms(np, TAB, b, ks, r) - pc.decode_ms(np, TAB, b, k_l, r)
    np.testing.assert_allclose(ext, 1e3 * spec.beta / L * b * (ks - k_l), rtol=1e-12)
    # seconds per context token of the batch = beta (context sum grows by b per unit of k)
    assert (t(100_000.0) - t(20_000.0)) / (b * 80_000.0) == pytest.approx(spec.beta, rel=1e-9)
    assert t(k_l + 1e-9) - t(k_l - 1e-9) == pytest.approx(0.0, abs=1e-12)    # continuous
    tk = t(np.linspace(0.0, 131_072.0, 4001))
    assert np.all(np.diff(tk) >= -1e-14 * tk[1:])


def test_gemm_hold_removes_the_derived_dip():
  """Why G is held past the knee: the plain ratio prices 256 tokens on an H100 37% below 150
  tokens (A100's G sits on the plateau after its 128-token tile step while the ratio falls as
  1 / N); held, G_H100 is flat there, and A100-7B (never held) is its fit."""
  h = cost_model.H100_7B
  assert _ratio_g(h, 256.0) < 0.7 * _ratio_g(h, 150.0)
  r = pc.ratios(h)
  assert float(pc.gemm_ms(np, TAB, 256.0, r)) == pytest.approx(_ratio_g(h, 150.0), rel=1e-12)
  n = np.arange(1.0, 5000.0)
  np.testing.assert_array_equal(pc.gemm_ms(np, TAB, n, pc.ratios(A)), pc.gemm_ms(np, TAB, n))


@pytest.mark.parametrize("name", ["A100-7B", "H100-8B", "L40S-7B"])
def test_prefill_and_gemm_extensions_have_the_analytic_slopes(name):
  """Past the grid, a cached token costs gamma per chunk token, a batched token alpha (every
  spec is compute-bound at 4,096 tokens), and a chunk longer than 4,096 tokens costs gamma per
  extra causal pair: continuous at the last nodes, increasing."""
  spec = cost_model.GPU_TYPES[name]
  r = pc.ratios(spec)
  sec = lambda ms: 1e-3 * L * ms
  for c in (1.0, 512.0, 2048.0):
    dp = pc.prefill_ms(np, TAB, c, 90_000.0, r) - pc.prefill_ms(np, TAB, c, 10_000.0, r)
    assert sec(dp) / 80_000.0 == pytest.approx(spec.gamma * c, rel=1e-9)
  dg = pc.gemm_ms(np, TAB, 30_000.0, r) - pc.gemm_ms(np, TAB, 10_000.0, r)
  assert sec(dg) / 20_000.0 == pytest.approx(spec.alpha, rel=1e-9)
  dc = pc.prefill_ms(np, TAB, 9000.0, 0.0, r) - pc.prefill_ms(np, TAB, 4096.0, 0.0, r)
  assert sec(dc) == pytest.approx(spec.gamma * (_pairs(0, 9000) - _pairs(0, 4096)), rel=1e-9)
  for f, edge in ((lambda x: pc.prefill_ms(np, TAB, 700.0, x, r), TAB.pf_k[-1]),
                  (lambda x: pc.prefill_ms(np, TAB, x, 1000.0, r), TAB.pf_c[-1]),
                  (lambda x: pc.gemm_ms(np, TAB, x, r), TAB.gemm_n[-1])):
    assert f(edge + 1e-9) - f(edge - 1e-9) == pytest.approx(0.0, abs=1e-9)
    v = f(np.linspace(1.0, 40_000.0, 2001))
    assert np.all(np.diff(v) >= -1e-14 * v[1:])


@pytest.mark.parametrize("name", ["A100-8B", "L4-8B", "H100-7B"])
def test_decode_span_beyond_the_grid_equals_stepping(name):
  """A decode span (closed form: profiled_cost.decode_linear + engine.decode_span_time) of b
  sequences starting below or past 4,096 tokens of mean context equals the sum of its
  iterations priced one at a time; n_seg is unbounded past the last node."""
  spec = cost_model.GPU_TYPES[name]
  r = pc.ratios(spec)
  for b, k0, n in ((1, 4096, 300), (7, 5000.5, 500), (32, 60_000, 2000), (5, 3900, 150)):
    s = float(b * k0)
    c0, beta, n_seg = pc.decode_linear(np, TAB, float(b), s, spec.t_ovh, r=r)
    n = int(min(n, n_seg))
    assert np.isinf(n_seg) == (k0 >= 4096)
    steps = [ref_iteration(spec, [], [k0 + j] * b) for j in range(n)]
    with jax.enable_x64(True):
      span = engine.decode_span_time(jnp.float64(c0), jnp.float64(beta), s, b, n)
    assert float(span) == pytest.approx(float(np.sum(steps)), rel=1e-10)


# --- the engine ------------------------------------------------------------------------------
def _engine(specs, prompts, outputs, arrivals, gpus, ff, mbt=2048):
  """(hardware, engine) in float64 (call under enable_x64): every request in the table on its GPU,
  each GPU's first iteration scheduled at t = 0 (fast_forward ff)."""
  req = engine.Requests(arrival=jnp.asarray(arrivals, jnp.float64),
                        prompt=jnp.asarray(prompts, jnp.int32),
                        output=jnp.asarray(outputs, jnp.int32),
                        pred=jnp.zeros(len(prompts), jnp.int32))
  hw = engine.make_hardware(specs, mbt, dtype=jnp.float64, iteration_cost="profiled")

  @jax.jit
  def start(gpu):
    eng = jax.lax.fori_loop(0, len(prompts), lambda i, e: engine.insert(e, req, i, gpu[i]),
                            engine.init_engine(req, len(specs), 64))
    return jax.lax.fori_loop(0, len(specs), lambda g, e: engine.schedule(e, hw, g, 0.0,
                                                                         fast_forward=ff), eng)

  return hw, start(jnp.asarray(gpus, jnp.int32))


def _batch_of(eng, g):
  """GPU g's scheduled iteration from the engine state: prefills [(chunk, cached)], decode
  contexts."""
  gpu, st, ch = np.asarray(eng.gpu), np.asarray(eng.status), np.asarray(eng.chunk)
  pf, pt = np.asarray(eng.pf), np.asarray(eng.pt)
  ctx = np.asarray(eng.sreq.prompt) + np.asarray(eng.gen)
  run = (gpu == g) & (st == engine.RUNNING) & (ch > 0)
  pre = [(float(ch[i]), float(pf[i])) for i in np.flatnonzero(run & (pf < pt))]
  return pre, [float(ctx[i]) for i in np.flatnonzero(run & (pf >= pt))]


def test_heterogeneous_engine_steps_match_each_gpus_reference():
  """A100-7B, L4-7B and H100-7B in one Hardware, profiled: every iteration the engine schedules
  (event by event, no spans) lasts the float64 reference of its own GPU, including chunks after
  more than 4,096 cached tokens and decodes past 4,096 tokens of context."""
  prompts, outputs = [9000, 9000, 9000, 700, 700, 700], [12, 12, 12, 30, 30, 30]
  with jax.enable_x64(True):
    hw, eng = _engine(HETERO, prompts, outputs, [0.0] * 3 + [0.01] * 3, [0, 1, 2] * 2, False)
    step = jax.jit(lambda e, g, te: engine.process_event(e, hw, g, te, 1e9, 1e9,
                                                         fast_forward=False)[0])
    seen, per_gpu = set(), {g: [] for g in range(3)}
    for g in range(3):
      per_gpu[g].append((_batch_of(eng, g), float(eng.iter_end[g])))
    for _ in range(400):
      g, te = engine.next_event(eng)
      if not np.isfinite(float(te)):
        break
      eng = step(eng, g, te)
      g = int(g)
      if bool(eng.busy[g]):
        per_gpu[g].append((_batch_of(eng, g), float(eng.iter_end[g]) - float(te)))
    assert bool(np.all(np.asarray(eng.status) == engine.DONE))
  for g, spec in enumerate(HETERO):
    for (pre, dec), dur in per_gpu[g]:
      assert dur == pytest.approx(ref_iteration(spec, pre, dec), rel=1e-12), (spec.name, pre)
      seen |= {"cached>4096" for _, p in pre if p > 4096} | {"ctx>4096" for k in dec if k > 4096}
  assert seen == {"cached>4096", "ctx>4096"}
  # the same batch costs differently on each GPU type: their first (2,048-token) chunks
  first = [per_gpu[g][0][1] for g in range(3)]
  assert first[2] < first[0] < first[1]


@pytest.mark.slow
def test_long_context_spans_match_the_reference():
  """Llama-3.1-8B on an L4 and an A100 (profiled, contexts 5k-30k): decode spans (fast forward)
  give the same per-request times as event-by-event simulation and as the numpy reference
  (profiled_cost.batch_time of every iteration), with far fewer events."""
  specs = [cost_model.LONG_CONTEXT["L4-7B"], cost_model.LONG_CONTEXT["A100-7B"]]
  rng = np.random.default_rng(3)
  k = 10
  prompts = rng.integers(5000, 30_000, k)
  outputs = rng.integers(50, 400, k)
  arrivals = np.sort(rng.uniform(0.0, 5.0, k))
  gpus = np.arange(k) % 2
  out = {}
  with jax.enable_x64(True):
    for ff in (False, True):
      hw, eng = _engine(specs, prompts, outputs, arrivals, gpus, ff)
      # a finite horizon: events at t = inf (idle GPUs) would run to max_events
      out[ff] = jax.jit(lambda e, hw=hw, ff=ff: engine.run_until(
          e, hw, 1e6, 100_000, 1e9, 1e9, fast_forward=ff)[0])(eng)
    res = {ff: engine.results(e) for ff, e in out.items()}      # float64: inside enable_x64
  ref = reference_sim.RefCluster(specs, arrivals, prompts, outputs, cap=64,
                                 iteration_cost="profiled").run_routing(lambda sim, i: i % 2)
  e0, e1 = out[False], out[True]
  assert int(e0.cap_hits) == int(e1.cap_hits) == 0
  assert int(e1.n_events) * 5 < int(e0.n_events)
  np.testing.assert_array_equal(np.asarray(e1.n_iter), np.asarray(e0.n_iter))
  for r in res.values():
    assert r.finish.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(r.status), engine.DONE)
    np.testing.assert_allclose(np.asarray(r.finish), ref["finish"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(r.ttft), ref["ttft"], rtol=1e-9, atol=1e-9)
