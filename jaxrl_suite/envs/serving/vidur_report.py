"""The markdown and figure of the engine's validation against Vidur (experiments/validate_vidur.py).

  markdown(c, batch, serving) -> str      tables 1 (batch times) and 2 (serving metrics)
  side_markdown(c, side, rows) -> str     table 3 (side by side with Vidur) and the targets
  plot(arrays, path) -> None              per-request E2E engine vs Vidur per load (log-log) and
                                          the per-batch time ratios

Inputs are vidur_compare's: batch {row kind: ratio_stats}, serving {iteration cost:
serving_metrics}, side {capacity, loads {load: one_load}, own_loads {load: one_load},
cached_prefill_loads {load: one_load}, vidur_skipped}, rows = targets(c,
side), arrays {load: {"e2e": (engine [n], Vidur [n]), "batch_ratios": [B]}}.
"""

from __future__ import annotations

import numpy as np


def markdown(c, batch: dict, serving: dict) -> str:
  """Tables 1 and 2 (module docstring)."""
  lines = ["## Batch times: fitted / profiled (Vidur A100 Llama-2-7B)", "",
           "Target (issue #35): p10 and p90 within 5% of 1.", "",
           "| rows | n | p10 | p50 | p90 | max abs err |", "|---|---:|---:|---:|---:|---:|"]
  for name, s in batch.items():
    lines.append(f"| {name} | {s['n']} | {s['p10']:.3f} | {s['p50']:.3f} | {s['p90']:.3f} | "
                 f"{s['max_abs_err']:.3f} |")
  lines += ["", f"## Serving metrics: {c.requests} requests of {c.trace} (rate x{c.rate_scale}), "
            f"one {c.gpu}, max_num_seqs {c.cap}, budget {c.max_batched_tokens}", "",
            "| metric | " + " | ".join(serving) + " |", "|---|" + "---:|" * len(serving)]
  for key in next(iter(serving.values())):
    vals = [serving[m][key] for m in serving]
    fmt = (lambda v: f"{v:d}") if isinstance(vals[0], int) else (lambda v: f"{v:.4g}")
    lines.append(f"| {key} | " + " | ".join(fmt(v) for v in vals) + " |")
  return "\n".join(lines) + "\n"


def _request_rows(loads: dict, of: str = "of engine capacity") -> list[str]:
  """Per load and metric: correlations and percentile ratios engine / Vidur."""
  lines = [f"| load ({of}) | offered req/s | thr. engine / Vidur | metric | r "
           "(Pearson) | r (Spearman) | p50 engine / Vidur (s) | ratio p50 | ratio p90 | "
           "ratio p99 |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
  for f, ld in loads.items():
    thr = f"{ld['engine']['throughput_req_s']:.3f} / {ld['vidur']['throughput_req_s']:.3f}"
    offered = f"{ld['offered_req_s']:.3f}"
    if "vidur_offered_req_s" in ld:
      offered += f" / {ld['vidur_offered_req_s']:.3f}"
    for m, row in ld["requests"].items():
      lines.append(f"| {f} | {offered} | {thr} | {m.upper()} | "
                   f"{row['pearson']:.3f} | {row['spearman']:.3f} | {row['engine_p50']:.4g} / "
                   f"{row['vidur_p50']:.4g} | {row['ratio_p50']:.3f} | {row['ratio_p90']:.3f} | "
                   f"{row['ratio_p99']:.3f} |")
  return lines


def _batch_rows(side: dict) -> list[str]:
  """Per run (capacity, then each load): the per-batch ratio statistics."""
  lines = ["| load | batches | rows | p10 | p50 | p90 | max abs err |",
           "|---|---:|---|---:|---:|---:|---:|"]
  per = [("capacity", side["capacity"]["batch_ratio"])] + [
      (f, ld["batch_ratio"]) for f, ld in side["loads"].items()]
  for f, br in per:
    for name, s in br.items():
      lines.append(f"| {f} | {s['n']} | {name} | {s['p10']:.3f} | {s['p50']:.3f} | "
                   f"{s['p90']:.3f} | {s['max_abs_err']:.3f} |")
  return lines


def side_markdown(c, side: dict, rows: list[dict]) -> str:
  """Table 3 (module docstring) and the targets."""
  cap = side["capacity"]
  lines = [f"## Side by side with Vidur 0.0.26: {c.requests} requests of {c.trace}", "",
           f"One A100 80GB, Llama-2-7B TP1, chunked prefill {c.max_batched_tokens} tokens, at most "
           f"{c.cap} running requests, {c.block_size}-token KV blocks ({c.kv_blocks} on both), "
           "no per-iteration CPU overhead on either side.", ""]
  if side.get("vidur_skipped"):
    lines += [f"Vidur side skipped: {side['vidur_skipped']}.", "",
              f"Engine capacity {cap['engine_req_s']:.3f} req/s."]
    return "\n".join(lines) + "\n"
  lines += [f"Capacity (all requests at once; finished / makespan): engine "
            f"{cap['engine_req_s']:.3f} req/s, Vidur {cap['vidur_req_s']:.3f} req/s, ratio "
            f"{cap['ratio']:.3f}.", "", *_request_rows(side["loads"])]
  if side.get("own_loads"):
    lines += ["", "Each simulator at the same fraction of its own capacity (a diagnostic beside "
              "the targets: the same requests, arrivals scaled to each side's rate; offered "
              "engine / Vidur):", "", *_request_rows(side["own_loads"], "of own capacity")]
  if side.get("cached_prefill_loads"):
    lines += ["", "Vidur with prefill attention looked up at the chunk's cached tokens (the key "
              "its profile rows were measured at, and its main branch's; 0.0.26 uses cached + "
              "chunk): a diagnostic beside the targets, same requests as the load above.", "",
              *_request_rows(side["cached_prefill_loads"])]
    lines += [f"Per batch as formed (load {f}): p10 / p50 / p90 = "
              f"{ld['batch_ratio']['as formed']['p10']:.3f} / "
              f"{ld['batch_ratio']['as formed']['p50']:.3f} / "
              f"{ld['batch_ratio']['as formed']['p90']:.3f}."
              for f, ld in side["cached_prefill_loads"].items()]
  lines += ["", "Per batch: the engine's profiled cost of each batch Vidur formed / Vidur's "
            "predicted time: as formed; at Vidur's lookup keys (its rounding removed, which leaves "
            "its forests against our tables); and at its keys split by whether the decode key is "
            "a profiled row (there both price the same measured point; between rows a tree "
            "answers with a neighbouring row's time, our table interpolates).", "",
            *_batch_rows(side)]
  lines += ["", "Targets of issue #35 (met: computed from the numbers above):", "",
            "| target | value | met |", "|---|---|---|"]
  lines += [f"| {t['target']} | {t['value']} | {'yes' if t['met'] else 'no'} |" for t in rows]
  return "\n".join(lines) + "\n"


def plot(arrays: dict, path: str) -> None:
  """Per-request E2E, engine vs Vidur, at each load (log-log) and the per-batch ratios."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(1, 2, figsize=(10, 4))
  for f, a in arrays.items():
    ax[0].scatter(a["e2e"][1], a["e2e"][0], s=3, alpha=0.5, label=f"load {f}")
    ax[1].hist(np.clip(a["batch_ratios"], 0.5, 1.5), bins=80, histtype="step", label=f"load {f}")
  lim = [1e-2, 1e3]
  ax[0].plot(lim, lim, "k--", lw=0.8)
  ax[0].set(xscale="log", yscale="log", xlabel="Vidur E2E (s)", ylabel="engine E2E (s)",
            title="per-request E2E latency")
  ax[1].axvspan(0.95, 1.05, color="0.9")
  ax[1].set(xlabel="engine cost / Vidur time", ylabel="batches", title="per-batch time ratio")
  for a in ax:
    a.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
