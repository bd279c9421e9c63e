"""The heavy-tail interval (ope/interval.py) and its coverage harness (ope/coverage.py):
known answers, refusal reasons, vmap, and float64 references (scipy)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from jaxrl_suite.ope import coverage as C
from jaxrl_suite.ope import interval as I
from jaxrl_suite.ope import mdps as M


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _hub(n, seed=0):
  p = M.hub_mdp()
  ex = M.problem_exact(p)
  phi, phn, r, nu0 = (jnp.asarray(a) for a in M.cell_arrays(p))
  counts = np.random.default_rng(seed).multinomial(n, M.cell_probs(p)).astype(np.float64)
  cells = jnp.asarray(np.arange(len(counts)) // p.num_states)
  return p, ex, phi, phn, r, nu0, jnp.asarray(counts), cells


@pytest.mark.parametrize("df", [4, 5, 10, 30, 100, 1000, 1e6])
def test_t_quantile_matches_scipy(df):
  tol = 2e-3 if df < 30 else 1e-5
  assert abs(float(I.t_quantile_975(jnp.asarray(float(df)))) - stats.t.ppf(0.975, df)) < tol


# n from a few sizes, not a range: each new length is a new compile (~0.4 s each, 60 of them).
@given(st.sampled_from([2, 3, 8, 41, 200]), st.floats(0.1, 10.0))
@settings(max_examples=30, deadline=None)
def test_influence_df_known_answers(n, scale):
  """Equal |psi - mean| on every sample: df = n. One spike among N: the float64 closed form
  (s2^2 / s4 of the centred values), which tends to 1 as N grows."""
  psi = jnp.asarray(np.tile([scale, -scale], n)[:2 * n])
  assert float(I.influence_df(psi, jnp.ones(2 * n))) == pytest.approx(2 * n, rel=1e-9)
  big = n * 10
  spike = np.zeros(big)
  spike[0] = scale * 1e3
  c = spike - spike.mean()
  ref = (c ** 2).sum() ** 2 / (c ** 4).sum()
  got = float(I.influence_df(jnp.asarray(spike), jnp.ones(big)))
  assert got == pytest.approx(ref, rel=1e-9) and 1.0 <= got < 1.0 + 3.0 / big


def test_plentiful_hub_data_gets_the_t_interval_and_covers():
  p, ex, phi, phn, r, nu0, w, cells = _hub(1_000_000)
  c = I.fore_interval(phi, phn, r, w, nu0, p.gamma, I.RefusalRules(), cells,
                      p.num_states * p.num_actions)
  assert int(c.reason) == 0 and I.METHODS[int(c.method)] == "studentized_t"
  assert float(c.lo) < ex["J"] < float(c.hi)
  # the critical value is t_{0.975, sqrt(nu)} (RefusalRules.crit_df_power = 0.5), from scipy
  from scipy import stats as st
  want = st.t.ppf(0.975, float(c.df) ** 0.5)
  assert float(c.crit) == pytest.approx(want, rel=1e-4) and float(c.crit) > st.norm.ppf(0.975)
  assert "studentized_t" in I.explain(c)


def test_unvisited_cell_and_dominant_cell_are_refused_with_their_reasons():
  p, ex, phi, phn, r, nu0, w, cells = _hub(1_000_000)
  nsa = p.num_states * p.num_actions
  w0 = jnp.where(cells == 1, 0.0, w)                  # (s, a) cell 1 never visited
  c = I.fore_interval(phi, phn, r, w0, nu0, p.gamma, I.RefusalRules(), cells, nsa)
  assert int(c.method) == I.REFUSED and np.isnan(float(c.lo)) and np.isnan(float(c.hi))
  assert "unvisited_cells" in I.explain(c)
  strict = I.RefusalRules(max_cell_excess=1.0)        # some cell carries more than 1/6
  c = I.fore_interval(phi, phn, r, w, nu0, p.gamma, strict, cells, nsa)
  assert I.explain(c) == "refused: dominant_cell"
  assert int(c.reason) == 1 << I.REASONS.index("dominant_cell")


def test_influence_concentrated_is_refused_and_named():
  """The influence-nu rule (off by default): a threshold above the sample's nu refuses plentiful
  hub data with that reason alone."""
  p, ex, phi, phn, r, nu0, w, cells = _hub(1_000_000)
  nsa = p.num_states * p.num_actions
  c = I.fore_interval(phi, phn, r, w, nu0, p.gamma, I.RefusalRules(), cells, nsa)
  assert I.RefusalRules().min_df == 0.0 and int(c.reason) == 0
  strict = I.RefusalRules(min_df=float(c.df) * 2)
  c2 = I.fore_interval(phi, phn, r, w, nu0, p.gamma, strict, cells, nsa)
  assert I.explain(c2) == "refused: influence_concentrated"
  assert int(c2.reason) == 1 << I.REASONS.index("influence_concentrated")


@pytest.mark.parametrize("power", [0.5, 1.0])
def test_critical_value_uses_nu_to_the_power(power):
  """crit = t_{0.975, nu^p} (scipy reference); p = 0.5 is wider than p = 1 whenever nu > 1, and
  the interval is value -+ crit * se."""
  p, ex, phi, phn, r, nu0, w, cells = _hub(2_000, seed=3)
  nsa = p.num_states * p.num_actions
  c = I.fore_interval(phi, phn, r, w, nu0, p.gamma, I.RefusalRules(crit_df_power=power,
                                                                      min_cell_count=0.0,
                                                                      max_cell_excess=1e9,
                                                                      min_ident_t=0.0),
                      cells, nsa)
  df = float(c.df) ** power
  assert df >= 4 and float(c.crit) == pytest.approx(stats.t.ppf(0.975, df), abs=2e-3)
  assert float(c.hi) - float(c.value) == pytest.approx(float(c.crit) * float(c.se), rel=1e-12)
  if power == 0.5:
    assert float(c.crit) > stats.t.ppf(0.975, float(c.df)) + 1e-3


def test_rare_heavy_cell_has_small_nu():
  """Probe: one sample carrying a huge influence value among many small ones gives nu near 1
  (the heavy-tail case: t_{0.975, 1} = 12.7 wide); equal influence values give nu = n."""
  psi = np.concatenate([np.full(999, 0.01) * np.tile([1, -1], 500)[:999], [1e3]])
  assert float(I.influence_df(jnp.asarray(psi), jnp.ones(1000))) < 1.01
  assert float(I.influence_df(jnp.asarray(np.tile([1.0, -1.0], 50)), jnp.ones(100))) == \
      pytest.approx(100.0, rel=1e-12)


def test_vmap_equals_loop():
  p, ex, phi, phn, r, nu0, _, cells = _hub(10)
  nsa = p.num_states * p.num_actions
  ws = jnp.asarray(np.random.default_rng(1).multinomial(
      20_000, M.cell_probs(p), size=4).astype(np.float64))
  f = lambda ww: I.fore_interval(phi, phn, r, ww, nu0, p.gamma, I.RefusalRules(), cells, nsa)
  batched = jax.vmap(f)(ws)
  for i in range(4):
    one = f(ws[i])
    for name in ("value", "se", "crit", "df", "reason", "max_share"):
      np.testing.assert_allclose(getattr(batched, name)[i], getattr(one, name), rtol=1e-12)


@given(st.integers(0, 60), st.integers(1, 60))
@settings(max_examples=40, deadline=None)
def test_wilson_matches_scipy(k, extra):
  n = k + extra
  lo, hi = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
  ours = C.wilson(k, n)
  assert ours[0] == pytest.approx(lo, abs=1e-9) and ours[1] == pytest.approx(hi, abs=1e-9)


def test_interval_coverage_tables_refusals_and_per_mdp_minimum():
  rng = np.random.default_rng(5)
  pool = C.shifted_pool(rng, "moderate", 2, diverging=False)
  out = C.interval_coverage(pool, rng, [100, 100_000], 30, I.RefusalRules(), min_pass=5)
  small, big = out["rows"]
  assert small["total"] == big["total"] == 60
  # at n = 100 some (s, a) cell is unvisited in most draws; every refusal has a reason
  assert small["refused_frac"] >= small["refused_by"]["unvisited_cells"] > 0
  assert big["passed"] > 0 and 0.0 <= big["coverage_pass"] <= 1.0
  for j, m in enumerate(out["min_coverage_per_mdp"]):
    vals = [r["coverage_pass_per_mdp"][j] for r in out["rows"]
            if r["coverage_pass_per_mdp"][j] is not None]
    assert m == (min(vals) if vals else None)
