"""Known answers for the CuRe study's library stages (lm/cure_study.py, cure_scorers.py,
cure_noise.py, cure_report.py): names, steps and cache tags, the fall-from-peak statistics, the
summaries and report on hand-made curves, and the verifier-noise arithmetic on a hand-made scene
where the change of verified precision is exact (eps and r in {0, 1})."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxrl_suite.envs.text import claims
from jaxrl_suite.envs.text import scene_cap as sc
from jaxrl_suite.envs.text import tokenizer
from jaxrl_suite.lm import cure_noise, cure_report, cure_scorers, cure_study

ENV = sc.SceneCap()
V = tokenizer.V2


def test_noisy_name_and_eval_steps():
  assert cure_study.noisy_name(0.9) == "claim_f1_noisy_eps0.9"
  assert cure_study.noisy_name(1) == "claim_f1_noisy_eps1"
  c = ml_collections.ConfigDict({"grpo_steps": 12, "eval_every": 4})
  np.testing.assert_array_equal(cure_study.eval_steps(c), [0, 4, 8, 12])


def test_majority():
  assert cure_scorers._majority(np.array([0, 2, 2, 1]), 4) == 0.5


def test_fall_and_peak_and_fall():
  f1 = np.array([[0.5, 0.7, 0.6, 0.4],
                 [0.5, 0.6, 0.8, 0.8]])
  steps = np.array([0, 10, 20, 30])
  np.testing.assert_allclose(cure_report.fall(f1), [0.3, 0.0])
  s = cure_report.peak_and_fall(f1, steps)
  assert s["peak_step_per_seed"] == [10, 20]
  assert s["peak_step_mean_curve"] == 20          # mean curve 0.5, 0.65, 0.7, 0.6
  np.testing.assert_allclose(s["fall_per_seed"], [0.3, 0.0])
  assert s["peak"][0] == pytest.approx(0.75) and s["final"][0] == pytest.approx(0.6)
  assert s["start"][0] == pytest.approx(0.5)
  assert cure_report.late_index(4) == 2 and s["late_from_step"] == 20
  assert s["late_change"][0] == pytest.approx(((0.4 - 0.6) + (0.8 - 0.8)) / 2)


def test_fmt_and_bullets():
  assert cure_report.fmt((0.12345, 0.1, 0.2)) == "0.123 [0.100, 0.200]"
  assert cure_report.fmt((1.0, 0.5, 1.5), 1) == "1.0 [0.5, 1.5]"
  assert cure_report.bullets("t", []) == []
  assert cure_report.bullets("t", ["a"]) == ["", "t", "", "- a"]


def _runs():
  """claim_f1 rises; token_recall peaks then falls (hacked); a noisy run adds false claims."""
  S, n = 4, 3
  jit = np.linspace(0, 0.01, S)[:, None]

  def curves(f1, false=(0.5, 0.5), precision=(0.7, 0.7)):
    c = {m: np.full((S, n), 0.5) + jit for m in ("recall", "claims", "length", "sqrt_kl")}
    c["f1"] = np.array(f1)[None] + jit
    c["false_claims"] = np.linspace(*false, n)[None] + jit
    c["precision"] = np.linspace(*precision, n)[None] + jit
    return c

  runs = {"claim_f1": curves([0.5, 0.6, 0.7]), "token_recall": curves([0.5, 0.8, 0.4]),
          "claim_f1_noisy_eps0.9": curves([0.5, 0.5, 0.5], false=(0.5, 2.0),
                                          precision=(0.7, 0.4))}
  for k, c in runs.items():
    c["proxy_" + k] = c["f1"]
  return {k: {"curves": c} for k, c in runs.items()}


def _noise():
  rows = [{"eps": e, "measured": e - 0.7, "measured_ci": [e - 0.71, e - 0.69],
           "analytic": e - 0.7, "captions": 10, "verified_precision": 0.7} for e in (0.5, 0.9)]
  return {"rows": rows, "reject": 0.3, "threshold": 0.7}


def test_summarise_known_answers():
  config = ml_collections.ConfigDict({"noise_eps_grpo": (0.9, 0.3)})
  steps = np.array([0, 5, 10])
  summ, per, ngrpo = cure_report.summarise(config, _runs(), _noise(), steps,
                                           ("token_recall", "holistic_rm"))
  assert set(summ) == set(_runs()) and set(per) == {"token_recall"}  # holistic_rm not run
  assert per["token_recall"]["final_diff"][0] == pytest.approx(0.3)
  assert per["token_recall"]["fall_diff"][0] == pytest.approx(0.4)
  assert per["token_recall"]["hacked"]
  assert set(ngrpo) == {0.9}                                      # no eps 0.3 run
  assert ngrpo[0.9]["false_claims_change"][0] == pytest.approx(1.5)
  assert ngrpo[0.9]["precision_change"][0] == pytest.approx(-0.3)
  assert ngrpo[0.9]["above_threshold"]


def test_markdown_and_plot(tmp_path):
  config = ml_collections.ConfigDict({
      "noise_eps_grpo": (0.9,), "grpo_steps": 10, "grpo_prompts": 2, "grpo_group": 2,
      "grpo_lr": 1e-4, "grpo_kl": 0.01, "num_seeds": 4, "eval_every": 5, "eval_scenes": 8,
      "scorer_steps": 3, "env": {"num_entities": 3, "num_frames": 4, "max_claims": 6},
      "scorer": {"d_model": 32, "num_layers": 3}})
  info = {k: 0.5 for k in ("verifier_accuracy", "verifier_majority", "verifier_visible_ceiling",
                           "rm_mae", "rm_corr", "reader_accuracy", "reader_majority")}
  info["label_budget"] = 100
  steps = np.array([0, 5, 10])
  runs = _runs()
  summ, per, ngrpo = cure_report.summarise(config, runs, _noise(), steps, ("token_recall",))
  md = cure_report.markdown(config, runs, summ, per, ngrpo, _noise(), info, steps)
  assert "| token_recall | 0.505 -> 0.405 |" in md
  assert "change from step 5 to the end" in md
  assert "| 0.9 | +0.2000 |" in md and "eps 0.9 (above threshold)" in md
  assert "token_recall: final true F1 0.300 [" in md
  cure_report.plot(runs, _noise(), steps, str(tmp_path / "c.png"))
  assert (tmp_path / "c.png").stat().st_size > 0


# ---- the verifier-noise arithmetic -----------------------------------------------------------
def _scene():
  """Entity A (colour 1, shape 2) acts 0 in frame 0 (shown); B and C absent."""
  action = -np.ones((3, 4), np.int32)
  action[0, 0] = 0
  visible = np.zeros((3, 4), bool)
  visible[0, 0] = True
  return sc.Scene(jnp.array([1, 0, 0]), jnp.array([2, 0, 0]), jnp.array([True, False, False]),
                  jnp.array(action), jnp.array(visible))


def _caption(text):
  ids = V.encode(text + "<eos>")
  return jnp.array((ids + [tokenizer.PAD] * ENV.response_len)[:ENV.response_len], jnp.int32)


def _claim(e, c, s, a, f):
  """The 6-character claim "entity colour shape action frame;"."""
  L = lambda i: chr(ord("A") + i)  # noqa: E731
  return L(e) + L(sc.COLOR_BASE + c) + L(sc.SHAPE_BASE + s) + L(sc.ACT_BASE + a) + str(f) + ";"


TRUE_CLAIM = _claim(0, 1, 2, 0, 0)


def test_append_false_claim_adds_one_false_claim():
  x = ENV.pack(_scene())
  cap = _caption(TRUE_CLAIM)
  cap2, true = cure_noise.append_false_claim(ENV, x, cap, jax.random.PRNGKey(0))
  p1, p2 = claims.parse(ENV, cap), claims.parse(ENV, cap2)
  assert int(p1["present"].sum()) == 1 and int(p2["present"].sum()) == 2
  assert int(p2["fact"][0]) == int(p1["fact"][0]) and bool(true[p1["fact"][0]])
  assert not bool(true[p2["fact"][1]])              # the appended claim is false


@pytest.mark.parametrize("eps,reject,change", [(0.0, 0.0, -0.5), (1.0, 0.0, 0.0),
                                               (1.0, 1.0, 0.5)])
def test_precision_change_exact_cases(eps, reject, change):
  """One true claim, then one false one: verified precision 1 -> 1/2 (eps 0, r 0), 1 -> 1
  (eps 1, r 0), 0 -> 1/2 (eps 1, r 1); measured (sampled) and analytic agree exactly."""
  x = ENV.pack(_scene())
  m, a, valid, pv = cure_noise.precision_change(ENV, x, _caption(TRUE_CLAIM),
                                                jax.random.PRNGKey(1), eps, reject, 8)
  assert bool(valid)
  assert float(m) == pytest.approx(change) and float(a) == pytest.approx(change)
  assert float(pv) == pytest.approx(1.0 - reject)
