"""Claim parser, claim_reward / precision_reward and the exact evaluator against a pure-Python
reference on hand-made captions (duplicates, malformed claims, empty captions, truncation)."""

import fractions
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.envs.text import claims
from jaxrl_suite.envs.text import tokenizer

V = tokenizer.V2
ENV = sc.SceneCap()


def _scene():
  """Entities A (colour 1, shape 2), B (0, 3); C absent. Events: A acts 0 in frame 0 (shown),
  A acts 2 in frame 2 (occluded), B acts 3 in frame 1 (shown)."""
  action = -np.ones((3, 4), np.int32)
  action[0, 0], action[0, 2], action[1, 1] = 0, 2, 3
  visible = np.zeros((3, 4), bool)
  visible[0, 0] = visible[1, 1] = True
  return sc.Scene(jnp.array([1, 0, 2]), jnp.array([2, 3, 0]), jnp.array([True, True, False]),
                  jnp.array(action), jnp.array(visible))


def claim_str(e, c, s, a, f):
  L = lambda i: chr(ord("A") + i)
  return L(e) + L(sc.COLOR_BASE + c) + L(sc.SHAPE_BASE + s) + L(sc.ACT_BASE + a) + str(f) + ";"


TRUE_SHOWN = [claim_str(0, 1, 2, 0, 0), claim_str(1, 0, 3, 3, 1)]
TRUE_OCCLUDED = claim_str(0, 1, 2, 2, 2)
FALSE = [claim_str(0, 1, 2, 1, 0), claim_str(1, 1, 3, 3, 1), claim_str(2, 2, 0, 0, 0)]


def encode_caption(text: str) -> jnp.ndarray:
  ids = V.encode(text)
  ids = ids + [tokenizer.PAD] * (ENV.response_len - len(ids))
  return jnp.array(ids[:ENV.response_len], jnp.int32)


# ---- pure-Python reference ------------------------------------------------------------------
def ref_scores(text, true_facts, salient_facts, verified=None, beta=1.0):
  """Parse the string: cut at <eos>, 6-character claims, K slots; returns (P, R, F, n)."""
  body = text.split("<eos>")[0]
  toks = V.decode(V.encode(body))  # round trip
  ids = V.encode(body)
  n_slots = min(-(-len(ids) // 6), ENV.K)
  facts = []
  for k in range(n_slots):
    c = ids[6 * k:6 * k + 6]
    fact = None
    if len(c) == 6 and c[5] == tokenizer.SEMI:
      lo = [0, sc.COLOR_BASE, sc.SHAPE_BASE, sc.ACT_BASE]
      sz = [ENV.E, ENV.C, ENV.S, ENV.A]
      vals = [c[i] - V.letter_id(0) - lo[i] for i in range(4)] + [c[4] - tokenizer.DIGIT0]
      if all(0 <= v < s for v, s in zip(vals, sz + [ENV.F])):
        fact = tuple(vals)
    facts.append(fact)
  n = len(facts)
  good = {f for f in facts if f is not None and (verified or true_facts).__contains__(f)}
  p = len(good) / max(1, n)
  r = len(good & salient_facts) / max(1, len(salient_facts))
  b2 = beta ** 2
  f = (1 + b2) * p * r / (b2 * p + r) if (b2 * p + r) > 0 else 0.0
  del toks
  return p, r, f, n


def _facts_of(*strs):
  out = set()
  for s_ in strs:
    ids = V.encode(s_)
    lo = [0, sc.COLOR_BASE, sc.SHAPE_BASE, sc.ACT_BASE]
    out.add(tuple([ids[i] - V.letter_id(0) - lo[i] for i in range(4)]
                  + [ids[4] - tokenizer.DIGIT0]))
  return out


TRUE_SET = _facts_of(*TRUE_SHOWN, TRUE_OCCLUDED)
SALIENT_SET = _facts_of(*TRUE_SHOWN)

CASES = {
    "empty": "<eos>",
    "reference": "".join(TRUE_SHOWN) + "<eos>",
    "one_true": TRUE_SHOWN[0] + "<eos>",
    "duplicate": TRUE_SHOWN[0] * 3 + "<eos>",
    "hallucination": TRUE_SHOWN[0] + FALSE[0] + FALSE[1] + "<eos>",
    "occluded_guess": "".join(TRUE_SHOWN) + TRUE_OCCLUDED + "<eos>",
    "malformed_semicolon": TRUE_SHOWN[0] + TRUE_SHOWN[1][:5] + "A<eos>",
    "malformed_range": TRUE_SHOWN[0] + "AAAA0;" + "<eos>",
    "bad_frame": TRUE_SHOWN[0] + claim_str(0, 1, 2, 0, 0)[:4] + "9;<eos>",
    "cut_by_eos": TRUE_SHOWN[0] + TRUE_SHOWN[1][:3] + "<eos>",
    "no_eos_full": (TRUE_SHOWN[0] * 7) + "<pad>",
    "absent_entity": FALSE[2] + TRUE_SHOWN[1] + "<eos>",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exact_scores_match_reference(name):
  text = CASES[name]
  cap = encode_caption(text)
  true, sal = ENV.fact_masks(_scene())
  got = claims.exact_scores(ENV, cap, true, sal)
  p, r, f, n = ref_scores(text, TRUE_SET, SALIENT_SET)
  np.testing.assert_allclose([got["precision"], got["recall"], got["f1"], got["claims"]],
                             [p, r, f, n], rtol=1e-6, atol=1e-7)


def test_hand_values():
  true, sal = ENV.fact_masks(_scene())
  s = lambda k: {m: float(v) for m, v in
                 claims.exact_scores(ENV, encode_caption(CASES[k]), true, sal).items()}
  assert s("empty") == pytest.approx({"precision": 0, "recall": 0, "f1": 0, "claims": 0,
                                      "duplicates": 0, "malformed": 0, "length": 0})
  assert s("reference")["f1"] == 1.0
  d = s("duplicate")   # 1 distinct true of 3 claims; recall 1/2
  assert (d["precision"], d["recall"], d["duplicates"]) == pytest.approx((1 / 3, 0.5, 2))
  assert s("occluded_guess")["precision"] == 1.0   # occluded events are true in the world
  m = s("malformed_semicolon")
  assert (m["precision"], m["malformed"]) == pytest.approx((0.5, 1))
  assert s("cut_by_eos")["claims"] == 2 and s("cut_by_eos")["malformed"] == 1
  assert s("no_eos_full")["claims"] == 7


def test_claim_reward_with_given_verifier_decisions():
  """claim_reward / precision_reward with an arbitrary verifier = the reference with that set."""
  cap = encode_caption(CASES["hallucination"])
  p = claims.parse(ENV, cap)
  true, sal = ENV.fact_masks(_scene())
  verified = jnp.array([True, True, False, False, False, False, False])  # accepts FALSE[0]
  ver_set = _facts_of(TRUE_SHOWN[0], FALSE[0])
  rp, rr, rf, _ = ref_scores(CASES["hallucination"], TRUE_SET, SALIENT_SET, ver_set, beta=2.0)
  assert float(claims.claim_reward(p, verified, sal, beta=2.0)) == pytest.approx(rf)
  assert float(claims.precision_reward(p, verified, sal)) == pytest.approx(rp)
  assert rp == pytest.approx(2 / 3)


def test_parse_is_jittable_and_vmaps():
  caps = jnp.stack([encode_caption(CASES[k]) for k in sorted(CASES)])
  true, sal = ENV.fact_masks(_scene())
  f = jax.jit(jax.vmap(lambda c: claims.exact_scores(ENV, c, true, sal)["f1"]))
  ref = [ref_scores(CASES[k], TRUE_SET, SALIENT_SET)[2] for k in sorted(CASES)]
  np.testing.assert_allclose(f(caps), ref, rtol=1e-6)


@given(st.lists(st.sampled_from(TRUE_SHOWN + FALSE + [TRUE_OCCLUDED, "AAAA0;"]), max_size=7))
def test_random_captions_match_reference(parts):
  text = "".join(parts) + "<eos>"
  true, sal = ENV.fact_masks(_scene())
  got = claims.exact_scores(ENV, encode_caption(text), true, sal)
  p, r, f, n = ref_scores(text, TRUE_SET, SALIENT_SET)
  np.testing.assert_allclose([got["precision"], got["recall"], got["f1"], got["claims"]],
                             [p, r, f, n], rtol=1e-6, atol=1e-7)


def test_noisy_verifier_rates_and_consistency():
  """False claims pass at rate eps, true ones fail at rate r; the same fact gets the same
  decision under one key (duplicates agree)."""
  cap = encode_caption(FALSE[0] + FALSE[0] + TRUE_SHOWN[0] + "<eos>")
  p = claims.parse(ENV, cap)
  true, _ = ENV.fact_masks(_scene())
  keys = jax.random.split(jax.random.PRNGKey(0), 4000)
  v = jax.vmap(lambda k: claims.noisy_verified(p, true, 0.3, 0.2, k))(keys)
  assert bool(jnp.all(v[:, 0] == v[:, 1]))
  assert float(v[:, 0].mean()) == pytest.approx(0.3, abs=0.03)
  assert float(v[:, 2].mean()) == pytest.approx(0.8, abs=0.03)
  assert not bool(v[:, 3:].any())


@pytest.mark.parametrize("k,n", list(itertools.product(range(0, 5), range(1, 6))))
def test_unverifiable_claim_gain_sign(k, n):
  if k > n:
    return
  for eps in np.linspace(0, 1, 11):
    g = claims.unverifiable_claim_gain(k, n, eps)
    # Independent reference: enumerate the verifier's two decisions on the added claim, in
    # exact rationals (accepted w.p. eps -> (k+1)/(n+1), rejected -> k/(n+1)), minus k/n.
    e = fractions.Fraction(float(eps))
    ref = e * fractions.Fraction(k + 1, n + 1) + (1 - e) * fractions.Fraction(k, n + 1) \
        - fractions.Fraction(k, n)
    assert g == pytest.approx(float(ref), abs=1e-12)
    if abs(ref) > 1e-9:   # away from eps = k/n, where float rounding decides the sign
      assert (g > 0) == (ref > 0)


def test_unverifiable_claim_gain_hand_worked():
  """2 of 4 claims accepted, eps = 0.8: E[P'] = (0.8 * 3 + 0.2 * 2) / 5 = 0.56, so the gain
  is 0.56 - 0.5 = +0.06; at eps = 0.3 it is (0.3 * 3 + 0.7 * 2) / 5 - 0.5 = 0.46 - 0.5 = -0.04."""
  assert claims.unverifiable_claim_gain(2, 4, 0.8) == pytest.approx(0.06, abs=1e-12)
  assert claims.unverifiable_claim_gain(2, 4, 0.3) == pytest.approx(-0.04, abs=1e-12)
