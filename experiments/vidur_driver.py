"""Runs Vidur 0.0.26 (microsoft/vidur, MIT; the optional extra [peers]) on a given request list.

This file is executed as a subprocess under the interpreter that has vidur installed (never the
suite's own environment: vidur pins pandas/sklearn/wandb); experiments/validate_vidur.py calls
it and reads its JSON answer. It imports nothing from jaxrl_suite.

    <vidur python> experiments/vidur_driver.py SPEC.json OUT.json

SPEC.json: {"requests": [[arrival_s, prompt, output], ...] (sorted by arrival), "num_blocks",
"block_size", "chunk_size", "batch_cap", "profile_dir" (our data/ folder: the A100 Llama-2-7B
rows), "work_dir", "cache_dir" (Vidur's model cache, shared by runs), "rf_estimators",
"rf_max_depth", "cv_splits", optional "prefill_at_cached" (patch_vidur)}.
OUT.json: per request (in SPEC order) arrival, first-token and completion times (s), restarts;
the forests' prediction tables (forest_tables);
per batch [total q tokens, decode requests, their kv-token sum, [[q, kv] of each prefill chunk],
Vidur's predicted time (s)] (kv = tokens in KV after this iteration's q tokens, Vidur's lookup
key); the simulator's CPU seconds (setup = training its forests; run = the simulation).
the simulator's CPU seconds.

Offline: Vidur downloads profiles and cached predictions from the Hugging Face hub. Both calls
are replaced (monkeypatched, site-packages untouched): predictions are never downloaded (its
loader raises, so Vidur trains its own random forests) and the profile files are written from
our rows into work_dir in Vidur's column format:

- mlp.csv: one row per profiled token count. Our rows hold the SUM of the nine non-attention
  operators of a layer (profiled_cost.MLP_FILE); Vidur adds its nine operator predictions
  linearly, so the whole sum is put in `time_stats.mlp_up_proj.median` and the other eight
  operators are 0: the same per-layer total, one forest instead of nine.
- attention.csv: prefill rows (batch_size 1, prefill_chunk_size c, kv_cache_size p) with
  `time_stats.attn_prefill.median`, decode rows (prefill_chunk_size 0, batch_size b,
  kv_cache_size k) with `time_stats.attn_decode.median`. `time_stats.attn_kv_cache_save.median`
  is not among our rows: it is 0, because our engine's profiled cost has no KV-save term either
  (Vidur itself fills the column with 0 when a profile lacks it), so both simulators price the
  same operators.

Known Vidur 0.0.26 defect patched here: `Request.restart` (recompute preemption) resets the
request's token counters but not its per-stage ones (`_num_stage_processed_tokens`,
`_is_prefill_stage_complete`), so the first preemption trips an assertion; the patch resets them.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time


def _read_rows(path: str) -> list[dict]:
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


def write_profiles(profile_dir: str, out_dir: str, model) -> tuple[str, str]:
  """Vidur-format mlp.csv and attention.csv from our rows (module docstring); returns paths."""
  import pandas as pd  # pylint: disable=import-outside-toplevel
  os.makedirs(out_dir, exist_ok=True)
  ident = {"n_head": model.num_q_heads, "n_kv_head": model.num_kv_heads,
           "n_embd": model.embedding_dim, "n_expanded_embd": model.mlp_hidden_dim,
           "use_gated_mlp": model.use_gated_mlp, "vocab_size": model.vocab_size,
           "num_tensor_parallel_workers": 1}
  ops = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act",
         "input_layernorm", "post_attention_layernorm", "attn_rope", "add")
  mlp = []
  for r in _read_rows(os.path.join(profile_dir, "vidur_a100_llama2_7b_mlp.csv")):
    row = dict(ident, num_tokens=int(float(r["num_tokens"])))
    for op in ops:
      row[f"time_stats.{op}.median"] = 0.0
    row["time_stats.mlp_up_proj.median"] = float(r["non_attention_ms"])
    mlp.append(row)
  attn = []
  aid = {"n_embd": model.embedding_dim, "n_q_head": model.num_q_heads,
         "n_kv_head": model.num_kv_heads, "block_size": 16, "num_tensor_parallel_workers": 1}
  for r in _read_rows(os.path.join(profile_dir, "vidur_a100_llama2_7b_attention.csv")):
    size, kv, ms = int(float(r["size"])), int(float(r["kv_cache_size"])), float(r["median_ms"])
    pre = r["kind"] == "prefill"
    attn.append(dict(aid, batch_size=1 if pre else size, prefill_chunk_size=size if pre else 0,
                     kv_cache_size=kv, **{"time_stats.attn_prefill.median": ms if pre else 0.0,
                                          "time_stats.attn_decode.median": 0.0 if pre else ms,
                                          "time_stats.attn_kv_cache_save.median": 0.0}))
  paths = os.path.join(out_dir, "mlp.csv"), os.path.join(out_dir, "attention.csv")
  pd.DataFrame(mlp).to_csv(paths[0], index=False)
  pd.DataFrame(attn).to_csv(paths[1], index=False)
  return paths


def patch_vidur(mlp_path: str, attn_path: str, batches: list,
                prefill_at_cached: bool = False) -> None:
  """Offline profiles, no hub predictions, the restart fix, and a per-batch time recorder.
  prefill_at_cached: look prefill attention up at the chunk's cached tokens (rounded up to the
  KV granularity) instead of 0.0.26's cached + chunk, the key the profile rows were measured at
  (and Vidur's main branch's): a diagnostic, never the default."""
  from vidur.entities import Request  # pylint: disable=import-outside-toplevel
  from vidur.execution_time_predictor import sklearn_execution_time_predictor as skp  # pylint: disable=import-outside-toplevel

  def no_hub(self):
    raise RuntimeError("offline run: predictions are trained locally")

  skp.SklearnExecutionTimePredictor._load_predictions_from_hf = no_hub
  skp.SklearnExecutionTimePredictor._get_input_files = lambda self: (mlp_path, attn_path, "", "")

  restart = Request.restart

  def restart_fixed(self):
    restart(self)
    self._num_stage_processed_tokens = 0
    self._is_prefill_stage_complete = False

  Request.restart = restart_fixed

  if prefill_at_cached:
    def prefill_params(self, batch):
      g = self._config.kv_cache_prediction_granularity
      return [((kv - q + g - 1) // g * g, q)
              for q, kv in zip(batch.num_q_tokens, batch.num_kv_tokens) if q != 1]
    skp.SklearnExecutionTimePredictor._get_batch_prefill_attention_params = prefill_params

  get_time = skp.SklearnExecutionTimePredictor.get_execution_time

  def recording(self, batch, pipeline_stage):
    t = get_time(self, batch, pipeline_stage)
    dec = [kv for q, kv in zip(batch.num_q_tokens, batch.num_kv_tokens) if q == 1]
    pre = [[int(q), int(kv)] for q, kv in zip(batch.num_q_tokens, batch.num_kv_tokens) if q != 1]
    batches.append([int(sum(batch.num_q_tokens)), len(dec), int(sum(dec)), pre,
                    float(t.total_time)])
    return t

  skp.SklearnExecutionTimePredictor.get_execution_time = recording


def make_config(spec: dict, work_dir: str, trace_path: str):
  """Vidur's SimulationConfig: one A100 replica of Llama-2-7B, TP1/PP1, Sarathi chunked prefill."""
  from vidur import config as vc  # pylint: disable=import-outside-toplevel
  replica = vc.ReplicaConfig(model_name="meta-llama/Llama-2-7b-hf", device="a100",
                             network_device="a100_pairwise_nvlink", tensor_parallel_size=1,
                             num_pipeline_stages=1)
  cluster = vc.ClusterConfig(
      num_replicas=1, replica_config=replica,
      cache_config=vc.CacheConfig(block_size=spec["block_size"], num_blocks=spec["num_blocks"]),
      global_scheduler_config=vc.RoundRobinGlobalSchedulerConfig(),
      replica_scheduler_config=vc.SarathiSchedulerConfig(batch_size_cap=spec["batch_cap"],
                                                         chunk_size=spec["chunk_size"]))
  gen = vc.TraceRequestGeneratorConfig(trace_file=trace_path, date="1970-01-01",
                                       prefill_scale_factor=1, decode_scale_factor=1,
                                       time_scale_factor=1, max_tokens=spec["max_tokens"])
  pred = vc.RandomForrestExecutionTimePredictorConfig(
      num_estimators=[spec["rf_estimators"]], max_depth=[spec["rf_max_depth"]],
      min_samples_split=[2], k_fold_cv_splits=spec["cv_splits"],
      prediction_max_tokens_per_request=spec["max_tokens"],
      prediction_max_prefill_chunk_size=spec["chunk_size"],
      prediction_max_batch_size=spec["batch_cap"],
      cache_dir=spec.get("cache_dir") or os.path.join(work_dir, "cache"),
      num_training_job_threads=1)
  metrics = vc.MetricsConfig(write_metrics=False, enable_chrome_trace=False, store_plots=False,
                             output_dir=os.path.join(work_dir, "out"))
  os.makedirs(metrics.output_dir, exist_ok=True)
  return vc.SimulationConfig(seed=0, log_level="warning", cluster_config=cluster,
                             request_generator_config=gen, execution_time_predictor_config=pred,
                             metrics_config=metrics)


def forest_tables(sim) -> dict[str, list]:
  """The trained forests' prediction tables Vidur prices batches from: {"mlp_up_proj": [[n,
  ms]], "attn_decode": [[batch size, kv, ms]], "attn_prefill": [[kv, chunk, ms]]} (its own
  grids: n = 1..max tokens, kv in steps of its 256-token granularity, chunks in steps of 32)."""
  sched = next(iter(sim._scheduler._replica_schedulers.values()))  # pylint: disable=protected-access
  pred = sched._execution_time_predictor._predictions  # pylint: disable=protected-access
  return {name: [[*map(float, k), float(v)] for k, v in pred[name].items()]
          for name in ("mlp_up_proj", "attn_decode", "attn_prefill")}


def run(spec: dict) -> dict:
  from vidur.config.model_config import BaseModelConfig  # pylint: disable=import-outside-toplevel
  from vidur.simulator import Simulator  # pylint: disable=import-outside-toplevel
  work = spec["work_dir"]
  model = BaseModelConfig.create_from_name("meta-llama/Llama-2-7b-hf")
  mlp_path, attn_path = write_profiles(spec["profile_dir"], os.path.join(work, "profiles"), model)
  trace_path = os.path.join(work, "trace.csv")
  with open(trace_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["Date", "Time", "PromptTokenCount", "CompletionTokenCount"])
    for a, p, o in spec["requests"]:
      w.writerow(["1970-01-01", repr(float(a)), int(p), int(o)])
  batches: list = []
  patch_vidur(mlp_path, attn_path, batches, bool(spec.get("prefill_at_cached", False)))
  t0 = time.process_time()
  sim = Simulator(make_config(spec, work, trace_path))
  t_setup = time.process_time() - t0
  reqs = sorted((e._request for _, e in sim._event_queue), key=lambda r: r.id)
  del batches[:]
  t1 = time.process_time()
  sim.run()
  t_run = time.process_time() - t1
  return {"forests": forest_tables(sim), "arrival": [r.arrived_at for r in reqs],
          "first_token": [r.prefill_completed_at for r in reqs],
          "finish": [r.completed_at for r in reqs],
          "completed": [bool(r.completed) for r in reqs],
          "restarts": [int(r.num_restarts) for r in reqs],
          "batches": batches, "cpu_s_setup": t_setup, "cpu_s_run": t_run}


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit("usage: vidur_driver.py SPEC.json OUT.json")
  with open(sys.argv[1]) as fin:
    spec_in = json.load(fin)
  ans = run(spec_in)
  with open(sys.argv[2], "w") as fout:
    json.dump(ans, fout)
