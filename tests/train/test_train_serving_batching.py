"""train/serving/batching_study.py and batching_report.py: known answers on hand-made inputs
(the whole study runs in tests/experiments/test_serving_experiments.py)."""

import collections

import ml_collections
import numpy as np

from jaxrl_suite.envs.serving import cost_model, heuristics
from jaxrl_suite.train.serving import batching_report, batching_study

Sel = collections.namedtuple("Sel", "choice")


def test_model_of_follows_trace_models_capped_by_the_gpu():
  c = ml_collections.ConfigDict({"gpu": "A100-7B"})
  model, mml = batching_study.model_of(c, "mooncake_conv")
  assert model == cost_model.LLAMA31_8B.name
  assert mml == cost_model.max_model_len_of(cost_model.spec_for("A100-7B", model))
  assert batching_study.model_of(c, "my_trace")[0] == cost_model.LLAMA2_7B.name


def test_baselines_per_mode():
  template = {"w": np.ones(3)}
  grids, _, n = batching_study.baselines("static", template)
  assert tuple(grids) == heuristics.STATIC_FAMILIES and n == len(heuristics.STATIC_FAMILIES)
  assert all(np.all(np.asarray(g["net"]["w"]) == 0) for gs in grids.values() for g in gs)
  grids, policy, n = batching_study.baselines("continuous", template)
  assert list(grids) == ["fixed_cap"] and n == 1 and policy is heuristics.fixed_cap
  assert [g["a"] for g in grids["fixed_cap"]] == [
      d["a"] for d in heuristics.cap_grid()["fixed_cap"]]


def _out():
  cells = [{"goodput": 1.0}, {"goodput": 3.0}]
  o = {"families": ["static_b"], "learned": ["ppo"], "table": {(p, 0.5): cells for p in
                                                               ("static_b", "ppo")},
       "capacity": 2.5, "capacity_how": "how", "scales": {0.5: 1.25},
       "tuned": {("static_b", 0.5): {"b": 4.0, "b_idx": 2, "net": None}},
       "best_rl": {0.5: Sel("ppo")}, "best_h": {0.5: Sel("static_b")},
       "curves": {"ppo": [[1.0]]}, "train_time": {"ppo": 3.0}, "n_evals": 7}
  return {("azure_conv", "static"): o}


def test_summaries_and_payload():
  c = ml_collections.ConfigDict({"loads": (0.5,), "train_frac": 0.6})
  out = _out()
  summary = batching_study.summaries(c, out)
  assert set(summary) == {"azure_conv:static:static_b@0.5", "azure_conv:static:ppo@0.5"}
  assert summary["azure_conv:static:ppo@0.5"]["goodput"][0] == 2.0     # mean over seeds
  part = {"clipped_share": 0.1, "requests": 10, "prompt_tokens_removed_share": 0.01}
  clip = {"azure_conv": {"model": "m", "train part": part, "evaluation part": part}}
  p = batching_study.payload(c, out, summary, {"k": (1.0, 0.9, 1.1)}, clip, ["azure_conv"],
                             None, "x.png")
  assert p["ratios"] == {"k": [1.0, 0.9, 1.1]} and p["models"] == {"azure_conv": "m"}
  assert p["capacity_rps"] == {"azure_conv:static": 2.5}
  assert p["rate_scales"] == {"azure_conv:static": {"0.5": 1.25}}
  assert p["tuned"] == {"azure_conv:static:static_b@0.5": {"b": 4.0, "b_idx": 2.0}}
  assert p["best_rl_by_training"] == {"azure_conv:static": {"0.5": "ppo"}}
  assert p["best_heuristic_by_training"] == {"azure_conv:static": {"0.5": "static_b"}}
  assert p["baseline_tuning_evals"] == {"azure_conv:static": 7}
  assert p["clipping"] == {"train part": part, "evaluation part": part}
  assert p["eval_trace"] == "azure_conv[late 40%]" and p["plot"] == "x.png"


def test_clip_line_known_answer():
  part = {"clipped_share": 0.125, "requests": 8, "prompt_tokens_removed_share": 0.5}
  line = batching_report.clip_line({"t": {"model": "M", "max_model_len": 4096,
                                          "train part": part, "evaluation part": part}})
  assert line == (
      "Context clipping (output <= 2048, prompt left-truncated to the model's context - output): "
      "t (M, 4,096 tokens): train part 12.5% of 8 requests clipped (50.0% of prompt tokens "
      "removed), evaluation part 12.5% of 8 requests clipped (50.0% of prompt tokens removed).")


def test_episodes_line_per_protocol():
  c = ml_collections.ConfigDict({"window": 0, "warmup_frac": 0.0, "eval_table": 64,
                                 "rate_per_window": False})
  assert batching_report._episodes(c) == "windows of 64 requests arriving at an empty GPU"
  c.window, c.warmup_frac, c.rate_per_window = 32, 0.25, True
  line = batching_report._episodes(c)
  assert line.startswith("steady-state replays of 64 consecutive requests")
  assert "window of 32 requests" in line and "first 25%" in line and "same mean rate" in line
