"""Strict layout loader: every kind of bad input is an error naming the file and the field; the
route library scales with the layout; every generated layout validates."""

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from jaxrl_suite.envs.ballast.generator import generate_layout
from jaxrl_suite.envs.ballast.layout import LayoutError, load_layout, validate_layout
from jaxrl_suite.envs.ballast.routes import K_MAX, build_routes, layout_sizes


def _ring():
  return copy.deepcopy(load_layout("ring14"))


def _load(tmp_path, lay):
  p = tmp_path / "ship.json"
  p.write_text(json.dumps(lay))
  return p, lambda: load_layout(str(p))


def test_misspelt_key_names_file_field_and_fix(tmp_path):
  lay = _ring()
  lay["edges"][9]["can_blok"] = False
  p, load = _load(tmp_path, lay)
  with pytest.raises(LayoutError, match=rf"{p}: ring14: edges\[9\]\.can_blok: unknown key "
                                        r"\(did you mean 'can_block'\?\); remove or rename"):
    load()


@pytest.mark.parametrize("where", ["top", "tank", "hydro", "node"])
def test_unknown_keys_everywhere(tmp_path, where):
  lay = _ring()
  target = {"top": lay, "tank": lay["tanks"][2], "hydro": lay["hydrostatics"],
            "node": lay["nodes"][3]}[where]
  target["colour"] = "red"
  p, load = _load(tmp_path, lay)
  with pytest.raises(LayoutError, match=rf"{p}: .*colour: unknown key"):
    load()


def test_wrong_types_are_errors(tmp_path):
  lay = _ring()
  lay["edges"][9]["can_block"] = "false"     # a string is truthy: would leave it blockable
  with pytest.raises(LayoutError, match=r"edges\[9\]\.can_block must be true or false"):
    _load(tmp_path, lay)[1]()
  lay = _ring()
  lay["tanks"][0]["capacity"] = "1500"
  with pytest.raises(LayoutError, match=r"tanks\[0\]\.capacity must be a number"):
    _load(tmp_path, lay)[1]()


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_non_finite_values_are_errors(tmp_path, value):
  lay = _ring()
  lay["tanks"][4]["capacity"] = value        # json.dumps writes Infinity / NaN, json reads them
  p, load = _load(tmp_path, lay)
  with pytest.raises(LayoutError, match=rf"{p}: .*tanks\[4\]\.capacity is (inf|nan) \(not "
                                        r"finite\)"):
    load()


@pytest.mark.parametrize("field,path,value", [
    ("length", ("edges", 10, "length"), 25000.0),           # mm typed as m
    ("capacity", ("tanks", 1, "capacity"), 1.8e6),          # litres typed as m3
    ("tcg", ("tanks", 1, "tcg"), 180.0),                    # wider than any ship
    ("gm_m", ("hydrostatics", None, "gm_m"), 150.0),
    ("rho_t_per_m3", ("hydrostatics", None, "rho_t_per_m3"), 1025.0),   # kg/m3 for t/m3
])
def test_implausible_values_are_errors(tmp_path, field, path, value):
  lay = _ring()
  obj = lay[path[0]] if path[1] is None else lay[path[0]][path[1]]
  obj[path[2]] = value
  with pytest.raises(LayoutError, match=rf"{field}.*outside the plausible range.*check the unit"):
    _load(tmp_path, lay)[1]()


def test_implausible_pump_rate_and_prior(tmp_path):
  lay = _ring()
  lay["pump_rate_m3h"][1] = 1e6
  with pytest.raises(LayoutError, match=r"pump_rate_m3h\[1\] = 1000000.0 is outside"):
    _load(tmp_path, lay)[1]()
  lay = _ring()
  lay["clog_prior"] = {"p_blocked": [0.5, 0.4]}
  with pytest.raises(LayoutError, match=r"clog_prior\.p_blocked .* summing to 1"):
    _load(tmp_path, lay)[1]()


def test_duplicate_pipe_is_an_error(tmp_path):
  lay = _ring()
  dup = dict(lay["edges"][10])
  dup["u"], dup["v"] = dup["v"], dup["u"]     # the same pipe written the other way round
  lay["edges"].append(dup)
  p, load = _load(tmp_path, lay)
  with pytest.raises(LayoutError, match=rf"{p}: .*edges\[31\] .* duplicates edges\[10\].*delete"):
    load()


def test_sea_chest_and_overboard_of_one_pump_are_not_duplicates():
  validate_layout(_ring())   # SEA-BP1 appears twice in ring14: seachest and overboard


def test_pump_head_count_must_match_pumps():
  lay = _ring()
  lay["hydraulics"] = {"pump_head_m": [25.0]}
  with pytest.raises(LayoutError, match="pump_head_m has 1 entries for 2 pumps"):
    validate_layout(lay)


def test_ring_with_many_crossovers_loads_beyond_the_v0_cap(tmp_path):
  # 14 tanks on a ring with every crossover: more routes than BallastNet-v0's 256
  lay = generate_layout(3, n_tanks=14, n_pumps=2, main="ring", n_cross=4)
  p, load = _load(tmp_path, lay)
  lay = load()                                   # the strict loader accepts generated files
  g = build_routes(lay, "auto")
  assert g["n_routes"] > K_MAX
  assert g["route_edges"].shape[0] >= g["n_routes"] and g["route_edges"].shape[0] % 32 == 0
  assert g["route_mask"].sum() == g["n_routes"]
  with pytest.raises(LayoutError, match="exceed the padded maximum 256 of BallastNet-v0"):
    build_routes(lay)                            # v0 sizes stay as they were, with a pointer


def test_family_sizes_stack():
  lays = [load_layout("ring14"), load_layout("direct10"), generate_layout(1, n_tanks=20)]
  sizes = layout_sizes(lays)
  shapes = {build_routes(x, sizes)["route_edges"].shape for x in lays}
  assert shapes == {(sizes["K"], sizes["E"])} and sizes["T"] == 20


def test_v0_library_unchanged():
  g = build_routes(load_layout("ring14"))
  assert g["route_edges"].shape == (256, 48) and g["n_routes"] == 228


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_every_generated_layout_validates(seed):
  lay = generate_layout(seed)
  validate_layout(json.loads(json.dumps(lay)))
  g = build_routes(lay, "auto")
  n_t = len(lay["tanks"])
  assert 8 <= n_t <= 20 and 1 <= g["pump_rate"].shape[0] <= 3
  # every tank can be filled and drained; every listed transfer has a route
  src, dst = g["route_src"][g["route_mask"]], g["route_dst"][g["route_mask"]]
  sea = g["cap"].shape[0]
  for t in range(n_t):
    assert ((dst == t) & (src == sea)).any() and ((src == t) & (dst == sea)).any()
  assert np.isfinite(g["edge_len"]).all() and (g["cap"][:n_t] > 0).all()
