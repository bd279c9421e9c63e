"""envs/serving/protocol.py: tuning picks, SLO capacity on the load grid, curve sweeps, cells."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.envs.serving import harness, protocol


def test_capacity_on_loads_known_answers():
  loads = [0.5, 0.7, 0.9, 1.1]
  # crossing between 0.7 (0.95) and 0.9 (0.85): 0.7 + 0.2 * 0.05 / 0.10 = 0.8
  assert protocol.capacity_on_loads(loads, [0.99, 0.95, 0.85, 0.5]) == pytest.approx(
      (0.8, "interpolated"))
  assert protocol.capacity_on_loads(loads, [0.99, 0.98, 0.97, 0.91]) == (1.1, "at least")
  assert protocol.capacity_on_loads(loads, [0.5, 0.4, 0.3, 0.2]) == (0.5, "below")
  # a noisy pass above a failure does not set capacity: the first failure bounds it
  ld, how = protocol.capacity_on_loads(loads, [0.95, 0.80, 0.95, 0.95])
  assert how == "interpolated" and ld == pytest.approx(0.5 + 0.2 * 0.05 / 0.15)
  with pytest.raises(ValueError, match="increase"):
    protocol.capacity_on_loads([0.9, 0.5], [1.0, 1.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=6))
def test_capacity_on_loads_stays_in_the_bracket(att):
  loads = np.arange(1, len(att) + 1, dtype=np.float64)
  ld, how = protocol.capacity_on_loads(loads, att, 0.9)
  assert loads[0] <= ld <= loads[-1]
  passed = np.asarray(att) >= 0.9
  if how == "interpolated":
    k = int(np.argmin(passed)) - 1
    assert loads[k] <= ld <= loads[k + 1]


def test_curve_sweep_is_a_doubling_of_late_means():
  # seed s: return = u + s at update u (16 updates): b = 8, n = 1 -> scores u = 7 and u = 15
  cv = np.arange(16.0)[None] + np.arange(3.0)[:, None]
  sw = protocol.curve_sweep(cv, per_episode=2.0)
  assert sw["budgets"] == [8.0, 16.0] and sw["scale"] == "difference"
  np.testing.assert_allclose(sw["scores"], np.array([[7, 8, 9], [15, 16, 17]]) / 2.0)
  assert protocol.curve_sweep(np.zeros((2, 1)), 1.0) is None


class _Grid:
  """An evaluator stub whose goodput is a known function of (candidate, load)."""

  def __init__(self, table):
    self.table = np.asarray(table, np.float64)

  def grid(self, cands, params, starts, scales, key, slo, type_id=None):
    return np.array([[{"goodput": self.table[i, j]} for j in range(len(scales))]
                     for i in range(len(cands))], dtype=object)


def test_tune_picks_the_best_grid_point_per_family_and_load():
  grids = {"a": ["a0", "a1"], "b": ["b0"]}
  # rows: a0, a1, b0; columns: loads 0.5, 1.0
  ev = _Grid([[1.0, 3.0], [2.0, np.nan], [5.0, 0.5]])
  tuned, score, n = protocol.tune(ev, grids, None, [0, 1, 2], {0.5: 1.0, 1.0: 2.0}, None, None)
  assert tuned == {("a", 0.5): "a1", ("a", 1.0): "a0", ("b", 0.5): "b0", ("b", 1.0): "b0"}
  assert score[("a", 1.0)] == 3.0 and score[("b", 0.5)] == 5.0
  assert n == 3 * 2 * 3


def _cells(g):
  return harness.Cells([[{"goodput": v, "slo_attainment": v / 10} for v in row] for row in g])


def test_cells_and_policy_capacities():
  table = {("p", 0.5): _cells([[9.5, 9.9], [9.8, 9.8]]),
           ("p", 1.0): _cells([[7.0, 7.0], [7.0, 7.0]])}
  np.testing.assert_array_equal(protocol.cells(table, "p", 0.5), [[9.5, 9.9], [9.8, 9.8]])
  assert protocol.mean_of(table, "p", 1.0) == pytest.approx(7.0)
  cap = protocol.policy_capacities(table, ["p"], [0.5, 1.0], capacity_rps=4.0)["p"]
  # attainment 0.975 at 0.5, 0.7 at 1.0: 0.5 + 0.5 * 0.075 / 0.275
  assert cap["how"] == "interpolated"
  assert cap["load"] == pytest.approx(0.5 + 0.5 * 0.075 / 0.275)
  assert cap["rps"] == pytest.approx(4.0 * cap["load"])
  rows = protocol.capacity_rows({"p": cap})
  assert len(rows) == 3 and "| p |" in rows[2]
