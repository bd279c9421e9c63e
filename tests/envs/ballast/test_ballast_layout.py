"""Layouts, the validator and the route library."""

import copy

import numpy as np
import pytest

from jaxrl_suite.envs.ballast.layout import LayoutError, available_layouts, load_layout
from jaxrl_suite.envs.ballast.routes import E_MAX, K_MAX, T_MAX, build_routes, enumerate_routes


def test_shipped_layouts_validate_and_differ():
  names = available_layouts()
  assert {"ring14", "direct10"} <= set(names)
  g1, g2 = build_routes(load_layout("ring14")), build_routes(load_layout("direct10"))
  assert (g1["n_tanks"], g1["n_edges"], g1["n_routes"]) == (14, 31, 228)
  assert g2["n_tanks"] == 10 and g2["n_routes"] < g1["n_routes"]


def test_ring14_counts_match_the_design():
  lay = load_layout("ring14")
  assert len(lay["nodes"]) == 26 and len(lay["edges"]) == 31
  g = build_routes(lay)
  # 14 tank branches are bridges: they may only clog partially
  branch = np.isin(g["edge_kind"], [4, 5]) & g["edge_mask"]
  assert branch.sum() == 14 and not (g["can_block"] & branch).any()
  assert g["can_block"].sum() == 17
  routes = enumerate_routes(lay)
  fills = [r for r in routes if r["kind"] == "fill"]
  # 8 fill routes per tank on the ring (2 pumps x 2 entries x 2 directions), 6 for APT
  counts = np.bincount([r["dst"] for r in fills], minlength=14)
  assert counts[0] == 6 and (counts[1:] == 8).all()


def test_routes_are_connected_simple_paths():
  lay = load_layout("ring14")
  g = build_routes(lay)
  tanks = [t["node"] for t in lay["tanks"]]
  for k in range(g["n_routes"]):
    deg = {}
    for ei in np.flatnonzero(g["route_edges"][k]):
      e = lay["edges"][ei]
      for n in (e["u"], e["v"]):
        deg[n] = deg.get(n, 0) + 1
    src, dst = g["route_src"][k], g["route_dst"][k]
    ends = [n for n, d in deg.items() if d == 1]
    names = {"SEA" if i == T_MAX else tanks[i] for i in (src, dst)}
    if src == T_MAX or dst == T_MAX:  # SEA->pump->...->tank: SEA has degree 1
      assert set(ends) == names, (k, ends, names)
    else:
      assert set(ends) == names
    assert all(d <= 2 for d in deg.values())


def test_padding_and_pair_table():
  g = build_routes(load_layout("ring14"))
  assert g["route_edges"].shape == (K_MAX, E_MAX)
  assert not g["route_edges"][g["n_routes"]:].any()
  assert (g["pair_ok"] == g["pair_ok"].T).all()
  i, j = np.argwhere(g["pair_ok"][:K_MAX, :K_MAX])[0]
  assert not (g["route_edges"][i] & g["route_edges"][j]).any()
  assert g["route_pump"][i] != g["route_pump"][j]


def _ring():
  return copy.deepcopy(load_layout("ring14"))


def test_dangling_edge_is_rejected():
  lay = _ring()
  lay["edges"].append({"u": "J1P", "v": "NOWHERE", "kind": "main", "length": 5})
  with pytest.raises(LayoutError, match="dangling edge .*NOWHERE"):
    build_routes(lay)


def test_negative_capacity_is_rejected():
  lay = _ring()
  lay["tanks"][3]["capacity"] = -10
  with pytest.raises(LayoutError, match="non-positive capacity"):
    build_routes(lay)


def test_tank_without_route_is_rejected():
  lay = _ring()
  # an extra tank hanging off a junction that is cut off from every pump
  lay["nodes"] += [{"name": "JX", "type": "junction"}, {"name": "TX", "type": "tank"}]
  lay["edges"].append({"u": "JX", "v": "TX", "kind": "branch", "length": 8})
  lay["tanks"].append({"node": "TX", "capacity": 500, "lcg": 0, "tcg": 0})
  with pytest.raises(LayoutError, match="'TX' has no fill route"):
    build_routes(lay)


def test_tank_node_without_entry_and_bad_kind_are_rejected():
  lay = _ring()
  lay["tanks"] = lay["tanks"][1:]
  with pytest.raises(LayoutError, match="no entry in 'tanks'"):
    build_routes(lay)
  lay = _ring()
  lay["edges"][10]["kind"] = "pipe"
  with pytest.raises(LayoutError, match="unknown kind"):
    build_routes(lay)
