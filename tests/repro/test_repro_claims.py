"""Claims: validation names the field, JSON round trip, the effect scale d."""

import math

import pytest

from jaxrl_suite.repro.claims import Claim

BASE = dict(id="serving.rl_vs_sq", text="RL routing +48% vs shortest queue",
            paper="Fig. 5 (goodput at SLO, load 1.1)", statistic="RL / SQ goodput per window",
            unit="seed x window", why="the paper's headline number")


def test_json_round_trip():
  c = Claim(**BASE, kind="superiority", size=1.48, scale="log_ratio",
            selection="load and RL mode chosen on training windows", fair_chance=True,
            flat_delta=0.02)
  assert Claim.from_json(c.to_json()) == c
  assert Claim.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("kw,field", [
    (dict(kind="bogus"), "kind"),
    (dict(kind="superiority", unit="episode"), "unit"),
    (dict(kind="superiority", scale="ratio"), "scale"),
    (dict(kind="superiority", better="up"), "better"),
    (dict(kind="non_inferiority"), "margin"),
    (dict(kind="equivalence", margin=-0.1), "margin"),
    (dict(kind="target", size=3.5), "tolerance"),
    (dict(kind="target", tolerance=0.1), "size"),
    (dict(kind="superiority", margin=0.1), "margin"),           # not used by superiority
    (dict(kind="superiority", size=1.5, min_effect=0.1), "min_effect"),
    (dict(kind="superiority", size=-0.2), "size"),              # points the worse way
    (dict(kind="superiority", size=float("nan")), "size"),
    (dict(kind="superiority", fair_chance=True), "flat_delta"),
    (dict(kind="superiority", text=""), "text"),
])
def test_invalid_claims_raise_naming_the_field(kw, field):
  with pytest.raises(ValueError, match=field):
    Claim(**{**BASE, **kw})


def test_a_margin_needs_its_why():
  with pytest.raises(ValueError, match="why"):
    Claim(**{**BASE, "why": ""}, kind="non_inferiority", margin=0.01)
  Claim(**{**BASE, "why": ""}, kind="superiority")   # no numbers: nothing to justify


def test_from_dict_rejects_unknown_and_missing_fields():
  d = Claim(**BASE, kind="superiority").to_dict()
  with pytest.raises(ValueError, match="unknown fields"):
    Claim.from_dict({**d, "verdict": "reproduced"})
  del d["unit"]
  with pytest.raises(ValueError, match="unit"):
    Claim.from_dict(d)


def test_effect_scale_d():
  c = Claim(**BASE, kind="superiority", size=1.48, scale="log_ratio")
  assert c.to_d(1.48) == pytest.approx(math.log(1.48))
  low = Claim(**{**BASE, "text": "latency -20%"}, kind="superiority", size=0.8,
              scale="log_ratio", better="lower")
  assert low.to_d(0.8) == pytest.approx(-math.log(0.8)) and low.to_d(0.8) > 0
  assert low.from_d(low.to_d(0.8)) == pytest.approx(0.8)
  eq = Claim(**BASE, kind="equivalence", margin=0.01, scale="log_ratio")
  assert eq.band_d(0.01) == pytest.approx(math.log(1.01))
  t = Claim(**BASE, kind="target", size=3.5, tolerance=0.2, scale="log_ratio")
  lo, hi = t.target_band_d()
  assert (lo, hi) == pytest.approx((math.log(3.5 / 1.2), math.log(3.5 * 1.2)))


def test_claims_are_frozen():
  c = Claim(**BASE, kind="superiority")
  with pytest.raises(AttributeError):
    c.kind = "descriptive"
