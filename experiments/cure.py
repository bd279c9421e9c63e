r"""Claim-level verified rewards (CuRe-style) vs holistic rewards for captions: reward hacking.

Pipeline (SceneCap, `jaxrl_suite.envs.text.scene_cap`):
  1. pretrain a tiny captioner on a noisy-caption corpus (drops, hallucinations, duplicates);
  2. one label pool -> a learned claim verifier (label_budget claim labels) and a learned
     holistic reward model (label_budget caption-F1 labels): same budget, same architecture;
  3. identical GRPO runs (`lm.grpo.make_step`: same steps, prompts, group, lr, KL coefficient,
     seeds) under each reward: claim-F1 (learned verifier), precision-only, token recall,
     holistic RM, QA utility; plus claim-F1 with a noisy exact verifier (false-accept eps,
     false-reject r) for the noise prediction;
  4. every `eval_every` steps, on fixed held-out scenes: every proxy, the exact scene-graph
     precision / recall / F1 (never a training reward), caption length, claim count and
     sqrt(KL) to the start; 95% CIs over seeds; peak step of true F1 and the fall after it;
  5. the verifier-noise prediction: adding an unverifiable claim raises expected verified
     precision iff eps > current verified precision (= 1 - r for true claims): analytic vs
     measured on the base captioner's captions, and GRPO runs on both sides of the threshold.
Verdicts: the claims registered in configs/cure.py (`claims(config)`), each judged by
jaxrl_suite.repro (`claim_record`) from per-seed samples in `judge_claims`.

The stages are library code: jaxrl_suite/lm/cure_study.py (captioner, rewards, evaluator, GRPO
per reward), cure_scorers.py (the learned scorers), cure_noise.py (the noise prediction) and
cure_report.py (statistics, tables, figure); this file holds the flags, the claims (judged by
jaxrl_suite.repro) and the record.

Run from the repo root:  python -m experiments.cure [--quick] [--workdir=DIR] [--config.x=...]
(start-up through jaxrl_suite.repro.entry).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import time  # noqa: E402

from configs import cure as cure_config  # noqa: E402
from jaxrl_suite.core import results as results_lib  # noqa: E402
from jaxrl_suite.core import stats  # noqa: E402
from jaxrl_suite.lm import cure_noise  # noqa: E402
from jaxrl_suite.lm import cure_report  # noqa: E402
from jaxrl_suite.lm import cure_scorers  # noqa: E402
from jaxrl_suite.lm import cure_study  # noqa: E402
from jaxrl_suite.lm.cure_report import fall, fmt  # noqa: E402
from jaxrl_suite.lm.cure_study import noisy_name  # noqa: E402
from jaxrl_suite.repro import Claim, claim_record, entry  # noqa: E402

NAME = "cure"
FLAGS = entry.define_flags(NAME, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "configs", f"{NAME}.py"))

HOLISTIC = cure_config.HOLISTIC


# ---- 1-5. the stages (jaxrl_suite/lm/cure_*.py) -------------------------------------------------
def stages(config, workdir: str, progress: bool = True) -> tuple[dict, dict, dict]:
  """(runs {reward: {"curves": {metric: [S, n_eval]}, "train", "wall_s"}}, the noise check's
  record, the scorers' held-out quality): pretrained captioner, frozen scorers, GRPO under every
  registered reward and every noisy verifier, the verifier-noise prediction."""
  env, params, cap_cfg, scorer_cfg = cure_study.build(config)
  start = cure_study.pretrain_captioner(config, env, params, cap_cfg, workdir, progress)
  scorers, scorer_info = cure_scorers.train_scorers(config, env, params, scorer_cfg, workdir,
                                                    progress)
  fns = cure_study.reward_fns(config, env, scorers, cure_config.REWARDS)
  evaluator = cure_study.make_evaluator(config, env, params, cap_cfg, fns)
  names = list(config.rewards) + [noisy_name(e) for e in config.noise_eps_grpo]
  runs = cure_study.run_rewards(config, env, params, cap_cfg, start, fns, evaluator, names,
                                progress)
  noise = cure_noise.noise_check(config, env, params, cap_cfg, start)
  return runs, noise, scorer_info


# ---- analysis: the registered claims (verdicts from jaxrl_suite.repro) --------------------------
def _registered(config) -> dict[str, Claim]:
  return {d["id"]: Claim.from_dict(d) for d in cure_config.claims(config)}


def judge_claims(config, runs, noise) -> list[dict]:
  """Every registered claim (configs/cure.py) judged by jaxrl_suite.repro from per-seed samples.

  runs: {reward name: {"curves": {metric: [S, n_eval]}}} (seed i of every run shares its seed);
  noise: noise_check's record. A claim whose run was not made gets its row all the same, as
  "testbed cannot express the claim" with the reason."""
  reg = _registered(config)
  rows = []

  def add(cid, a, b, note, missing=None):
    row = claim_record(reg[cid], [] if missing else a, None if missing else b,
                       cannot_express=missing)
    row["note"] = "" if missing else note
    rows.append(row)

  cl = runs["claim_f1"]["curves"]
  for h in HOLISTIC:
    hc = runs.get(h, {}).get("curves")
    missing = None if hc else f"the {h} run was not made (config.rewards)"
    fin = [cl["f1"][:, -1], hc["f1"][:, -1]] if hc else [None, None]
    falls = [fall(cl["f1"]), fall(hc["f1"])] if hc else [None, None]
    add(f"cure.final_f1_vs_{h}.v1", *fin, missing=missing,
        note=missing or f"final true F1 claim_f1 {fin[0].mean():.3f}, {h} {fin[1].mean():.3f}")
    add(f"cure.fall_vs_{h}.v1", *falls, missing=missing,
        note=missing or f"fall from peak claim_f1 {falls[0].mean():.3f}, {h} "
                        f"{falls[1].mean():.3f}")
  pc = runs.get("precision_only", {}).get("curves")
  missing = None if pc else "the precision_only run was not made (config.rewards)"
  vs = "" if missing else fmt(stats.mean_ci(pc["recall"][:, -1] - cl["recall"][:, -1]))
  for cid, m in (("cure.precision_only_recall_falls.v1", "recall"),
                 ("cure.precision_only_claims_fall.v1", "claims")):
    start_end = [pc[m][:, 0], pc[m][:, -1]] if pc else [None, None]
    add(cid, *start_end, missing=missing,
        note=missing or f"{m} start {start_end[0].mean():.3f} -> end "
                        f"{start_end[1].mean():.3f}; final recall precision_only minus "
                        f"claim_f1 {vs}")
  for above, eps_list in zip((True, False), cure_config.noise_sides(config)):
    for e in eps_list or [None]:
      c = runs.get(noisy_name(e), {}).get("curves") if e is not None else None
      missing = None if c else (
          f"no GRPO run with the noisy verifier {'above' if above else 'at or below'} the "
          f"threshold 1 - r = {noise['threshold']:.2f} (config.noise_eps_grpo = "
          f"{tuple(config.noise_eps_grpo)})")
      fc = [c["false_claims"][:, -1], c["false_claims"][:, 0]] if c else [None, None]
      dp = "" if missing else fmt(stats.mean_ci(c["precision"][:, -1] - c["precision"][:, 0]))
      add(cure_config.noise_claim_id(e, above), *fc, missing=missing,
          note=missing or f"eps {e:g}; true precision change {dp}")
  rows.append(_agreement_row(reg["cure.noise_analytic_agreement.v1"], noise))
  return rows


def _agreement_row(claim: Claim, noise) -> dict:
  """The descriptive row: measured vs analytic precision change over the eps grid."""
  r = noise["rows"]
  pos = [x["eps"] for x in r if x["measured"] > 0]
  err = max(abs(x["measured"] - x["analytic"]) for x in r)
  inside = sum(x["measured_ci"][0] <= x["analytic"] <= x["measured_ci"][1] for x in r)
  row = claim_record(claim, [x["measured"] for x in r], [x["analytic"] for x in r])
  row["note"] = (f"measured change first positive at eps = {min(pos) if pos else None} "
                 f"(threshold 1 - r = {noise['threshold']:.2f}); max |measured - analytic| = "
                 f"{err:.4f}; analytic inside the measured CI at {inside}/{len(r)} eps")
  return row



# ---- entry point --------------------------------------------------------------------------------
def run(config, workdir: str, results_dir=None, mode: str = "full", progress: bool = True):
  """Runs the study and writes the record, report and figure; (record path, runs, noise)."""
  cure_config.validate(config)
  t0 = time.time()
  os.makedirs(workdir, exist_ok=True)
  runs, noise, scorer_info = stages(config, workdir, progress)
  steps = cure_study.eval_steps(config)
  summ, per, ngrpo = cure_report.summarise(config, runs, noise, steps, HOLISTIC)
  cl = judge_claims(config, runs, noise)
  md = cure_report.markdown(config, runs, summ, per, ngrpo, noise, scorer_info, steps)
  results_dir = results_dir or results_lib.output_dir(mode)
  os.makedirs(results_dir, exist_ok=True)
  cure_report.plot(runs, noise, steps, os.path.join(results_dir, f"{NAME}.png"))
  payload = {"steps": steps, "scorers": scorer_info, "noise": noise, "summary": summ,
             "paired": per, "noise_grpo": ngrpo,
             "runs": {k: {"curves": v["curves"], "wall_s": v["wall_s"],
                          "train_reward": v["train"]["reward"].mean(0)} for k, v in runs.items()}}
  path = results_lib.write_results(NAME, mode=mode, config=config,
                                   seeds=list(range(config.num_seeds)), claims=cl,
                                   wall_time_s=time.time() - t0, payload=payload, markdown=md,
                                   results_dir=results_dir)
  return path, runs, noise


def main(e: entry.Entry) -> str:
  """The run on the resolved command line (config validated, folders chosen by the library)."""
  path, _, _ = run(e.config, e.workdir, e.results_dir, e.mode)
  print(f"wrote {path}")
  return path


if __name__ == "__main__":
  entry.main(FLAGS, main, validate=cure_config.validate)
