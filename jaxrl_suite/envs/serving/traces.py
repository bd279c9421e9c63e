"""Workloads: real trace replay (Azure 2023, Mooncake CSV) and synthetic generators.

A `Trace` is three aligned numpy arrays sorted by arrival: `arrival` (s, from the first request),
`prompt` and `output` (tokens). Real files are validated row by row; a malformed file raises
`TraceError` naming the file and the 1-based line.

Supported CSV formats (detected from the header):
  * Azure LLM inference 2023: `TIMESTAMP,ContextTokens,GeneratedTokens`, timestamps
    `YYYY-MM-DD HH:MM:SS.fffffff` (Patel et al., Splitwise, ISCA'24; CC-BY-4.0).
  * Mooncake FAST'25 (converted to CSV): `timestamp,input_length,output_length[,hash_ids]`,
    timestamp in ms (Qin et al., FAST'25; Apache-2.0). `hash_ids` (a JSON array string, e.g.
    `"[0,1,2]"`) names the prompt's 512-token blocks: equal ids = the same prefix block (the
    last block may be partial), so there are exactly ceil(input_length / 512) of them. They are
    kept as `Trace.hash_ids` [n, B] (-1 padded) for the prefix cache (engine.py).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import importlib.resources
import io
import json
import os

import numpy as np

# Shipped samples are package data (see setup.cfg), read through importlib.resources so that
# they are found in a wheel or zip install as well as in a checkout.
DATA = importlib.resources.files("jaxrl_suite.envs.serving") / "data"
SHIPPED = {
    "azure_conv": "azure2023_conv_sample.csv",
    "azure_code": "azure2023_code_sample.csv",
    "mooncake_conv": "mooncake_conv_sample.csv",
}
HASH_BLOCK = 512   # tokens per Mooncake hash_ids block

_FORMATS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),
}


class TraceError(ValueError):
  """A malformed trace file; the message names the file and the line."""


@dataclasses.dataclass(frozen=True)
class Trace:
  """Requests sorted by arrival. arrival: float64 [n] seconds from the first; prompt, output: int64."""
  arrival: np.ndarray
  prompt: np.ndarray
  output: np.ndarray
  name: str = "trace"
  hash_ids: np.ndarray | None = None   # int64 [n, B] prompt block ids (-1 = none), or None

  def __len__(self) -> int:
    return int(self.arrival.shape[0])

  @property
  def duration(self) -> float:
    return float(self.arrival[-1] - self.arrival[0]) if len(self) else 0.0

  @property
  def rate(self) -> float:
    return (len(self) - 1) / self.duration if self.duration > 0 else float("inf")

  def slice(self, lo: int, hi: int, name: str | None = None) -> "Trace":
    a = self.arrival[lo:hi]
    h = None if self.hash_ids is None else self.hash_ids[lo:hi].copy()
    return Trace(a - a[0], self.prompt[lo:hi].copy(), self.output[lo:hi].copy(),
                 name or f"{self.name}[{lo}:{hi}]", h)

  def split(self, frac: float) -> tuple["Trace", "Trace"]:
    """(early, late) split at a fraction of the *time* span: train on early, evaluate on late."""
    cut = int(np.searchsorted(self.arrival, self.arrival[0] + frac * self.duration))
    cut = min(max(cut, 1), len(self) - 1)
    return (self.slice(0, cut, f"{self.name}[early]"), self.slice(cut, len(self),
                                                                  f"{self.name}[late]"))

  def scaled(self, rate_scale: float) -> "Trace":
    """Rate-scale knob: arrivals compressed by `rate_scale` (2.0 = twice the request rate)."""
    if not rate_scale > 0:
      raise ValueError(f"rate_scale must be > 0, got {rate_scale}")
    return dataclasses.replace(self, arrival=self.arrival / rate_scale)

  def clipped(self, max_model_len: int, max_output: int) -> "Trace":
    """Fits requests to the model context (Llama-2: 4096): output <= max_output, prompt truncated
    (left-truncation, as a serving front end would) so that prompt + output <= max_model_len."""
    o = np.clip(self.output, 1, max_output)
    p = np.clip(self.prompt, 1, max_model_len - o)
    return dataclasses.replace(self, prompt=p, output=o, hash_ids=clip_hashes(self.hash_ids, p))


def clip_stats(tr: Trace, max_model_len: int, max_output: int = 2048) -> dict[str, float]:
  """How much `Trace.clipped` changes a trace: share of requests changed, of prompt and of output
  tokens removed, for a model whose context is `max_model_len` tokens."""
  cl = tr.clipped(max_model_len, max_output)
  changed = (cl.prompt != tr.prompt) | (cl.output != tr.output)
  return {"requests": len(tr), "max_model_len": int(max_model_len),
          "clipped_share": float(changed.mean()) if len(tr) else 0.0,
          "prompt_tokens_removed_share": float(1 - cl.prompt.sum() / max(tr.prompt.sum(), 1)),
          "output_tokens_removed_share": float(1 - cl.output.sum() / max(tr.output.sum(), 1))}


def clip_hashes(hash_ids: np.ndarray | None, prompt: np.ndarray) -> np.ndarray | None:
  """Block ids of prompts clipped to `prompt` tokens: the first ceil(prompt / 512) ids are kept
  (for the cache a clipped prompt is the prefix of the original; its length is what the
  clipping statistics report), the columns beyond the longest clipped prompt are dropped."""
  if hash_ids is None:
    return None
  nb = -(-np.asarray(prompt) // HASH_BLOCK)
  b = max(int(nb.max(initial=0)), 1)
  h = hash_ids[:, :b].copy()
  if h.shape[1] < b:
    h = np.pad(h, ((0, 0), (0, b - h.shape[1])), constant_values=-1)
  h[np.arange(b)[None, :] >= nb[:, None]] = -1
  return h


def with_prefixes(tr: Trace, n_prefixes: int, prefix_blocks: int = 2, seed: int = 0) -> Trace:
  """Synthetic hash_ids: each request draws one of `n_prefixes` shared prefixes (Zipf-like
  popularity) of `prefix_blocks` blocks (fewer if the prompt is shorter); its other blocks are
  unique. For tests and for a cache study on traces without ids."""
  rng = np.random.default_rng(seed)
  nb = -(-tr.prompt // HASH_BLOCK)
  w = 1.0 / np.arange(1, n_prefixes + 1)
  pick = rng.choice(n_prefixes, size=len(tr), p=w / w.sum())
  b = int(nb.max(initial=1))
  h = np.full((len(tr), b), -1, np.int64)
  nxt = n_prefixes * prefix_blocks
  for i in range(len(tr)):
    for j in range(int(nb[i])):
      if j < prefix_blocks:
        h[i, j] = pick[i] * prefix_blocks + j
      else:
        h[i, j] = nxt
        nxt += 1
  return dataclasses.replace(tr, hash_ids=h, name=f"{tr.name}+prefixes{n_prefixes}")


def _parse_hash_ids(raw: str, n_prompt: int, path: str, line: int) -> list[int]:
  """One row's hash_ids: a JSON array of ceil(input_length / 512) non-negative integers."""
  try:
    ids = json.loads(raw)
  except ValueError:
    raise TraceError(f"{path}:{line}: hash_ids is not a JSON array: {raw[:40]!r}") from None
  if not isinstance(ids, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                          and x >= 0 for x in ids):
    raise TraceError(f"{path}:{line}: hash_ids must be a list of non-negative integers, got "
                     f"{raw[:40]!r}")
  want = -(-n_prompt // HASH_BLOCK)
  if len(ids) != want:
    raise TraceError(f"{path}:{line}: hash_ids has {len(ids)} blocks, input_length {n_prompt} "
                     f"needs ceil({n_prompt}/{HASH_BLOCK}) = {want}")
  return ids


def _parse_azure_time(s: str) -> float:
  date, clock = s.strip().split(" ")
  hh, mm, ss = clock.split(":")
  day = _dt.date.fromisoformat(date).toordinal()
  return day * 86400.0 + int(hh) * 3600.0 + int(mm) * 60.0 + float(ss)


def load_trace(path: str, name: str | None = None) -> Trace:
  """Reads and validates a trace CSV (format from its header). Raises TraceError(file:line)."""
  if not os.path.exists(path):
    raise TraceError(f"{path}: file not found")
  if os.path.isdir(path):
    raise TraceError(f"{path}: is a directory, not a trace CSV file")
  with open(path, "rb") as f:
    raw = f.read()
  return parse_trace(raw, path, name or os.path.splitext(os.path.basename(path))[0])


def parse_trace(raw: bytes, path: str, name: str) -> Trace:
  """Parses the bytes of a trace CSV; `path` only names the source in errors."""
  if b"\0" in raw[:4096]:
    raise TraceError(f"{path}: binary file, not a trace CSV (expected a text header such as "
                     f"{','.join(_FORMATS['azure'])})")
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as err:
    raise TraceError(f"{path}: not a UTF-8 text CSV (byte {err.start} cannot be decoded)") from None
  with io.StringIO(text, newline="") as f:
    reader = csv.reader(f)
    try:
      header = next(reader)
    except StopIteration:
      raise TraceError(f"{path}:1: empty file (no header)") from None
    header = [h.strip() for h in header]
    fmt = None
    for k, cols in _FORMATS.items():
      if cols[0] in header:
        fmt = k
        missing = [c for c in cols if c not in header]
        if missing:
          raise TraceError(f"{path}:1: missing column(s) {missing} for {k} format; header {header}")
    if fmt is None:
      raise TraceError(f"{path}:1: unknown header {header}; expected {list(_FORMATS.values())}")
    idx = [header.index(c) for c in _FORMATS[fmt]]
    i_hash = header.index("hash_ids") if fmt == "mooncake" and "hash_ids" in header else None
    ts, ps, os_, hs = [], [], [], []
    prev = -np.inf
    for row in reader:
      line = reader.line_num
      if not row or all(not c.strip() for c in row):
        continue
      if len(row) < len(header):
        raise TraceError(f"{path}:{line}: expected {len(header)} fields, got {len(row)}")
      raw_t, raw_p, raw_o = (row[i] for i in idx)
      try:
        t = _parse_azure_time(raw_t) if fmt == "azure" else float(raw_t) / 1000.0
      except ValueError:
        raise TraceError(f"{path}:{line}: bad timestamp {raw_t!r}") from None
      if not np.isfinite(t):
        raise TraceError(f"{path}:{line}: non-finite timestamp {raw_t!r}")
      for col, raw in ((_FORMATS[fmt][1], raw_p), (_FORMATS[fmt][2], raw_o)):
        try:
          v = int(raw.strip())
        except ValueError:
          raise TraceError(f"{path}:{line}: {col} is not an integer: {raw!r}") from None
        if v < 0:
          raise TraceError(f"{path}:{line}: {col} is negative: {v}")
      if t < prev:
        raise TraceError(f"{path}:{line}: timestamps not sorted ({raw_t!r} is earlier than the "
                         "previous row)")
      prev = t
      if i_hash is not None:
        hs.append(_parse_hash_ids(row[i_hash], int(raw_p), path, line))
      ts.append(t)
      ps.append(int(raw_p))
      os_.append(int(raw_o))
  if not ts:
    raise TraceError(f"{path}:2: no data rows")
  arr = np.asarray(ts, np.float64)
  h = None
  if i_hash is not None:
    h = np.full((len(hs), max(max(map(len, hs)), 1)), -1, np.int64)
    for i, ids in enumerate(hs):
      h[i, :len(ids)] = ids
  return Trace(arr - arr[0], np.asarray(ps, np.int64), np.asarray(os_, np.int64), name, h)


def load_shipped(name: str = "azure_conv") -> Trace:
  """One of the trace samples shipped in `data/` (see data/ATTRIBUTION.md)."""
  if name not in SHIPPED:
    raise TraceError(f"no shipped trace {name!r}; shipped: {sorted(SHIPPED)}")
  src = DATA / SHIPPED[name]
  return parse_trace(src.read_bytes(), f"{SHIPPED[name]} (shipped trace)", name)


# --------------------------------------------------------------------------- synthetic workloads

def _lengths(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
  if kind == "bimodal":
    # Two output modes (short ~30 tok, long ~400 tok), like the Azure conv / Mooncake conv traces
    # (design doc §3.1); prompts lognormal around 1k tokens, independent of output length.
    long = rng.random(n) < 0.3
    o = np.where(long, rng.lognormal(np.log(400), 0.3, n), rng.lognormal(np.log(30), 0.5, n))
  elif kind == "lognormal":
    o = rng.lognormal(np.log(130), 0.9, n)
  else:
    raise ValueError(f"unknown length kind {kind!r}")
  p = rng.lognormal(np.log(1000), 0.8, n)
  return np.maximum(p, 1).astype(np.int64), np.maximum(o, 1).astype(np.int64)


def synthetic(kind: str, n: int, rate: float, seed: int = 0, cv: float = 4.0,
              lengths: str = "bimodal") -> Trace:
  """Synthetic workload of `n` requests at mean `rate` req/s.

  kind: "poisson" (exponential gaps), "gamma" (Gamma gaps with coefficient of variation `cv`,
  bursty for cv > 1; the BurstGPT paper models arrivals as a Gamma process).
  lengths: "bimodal" or "lognormal".
  """
  if n < 1 or not rate > 0:
    raise ValueError(f"need n >= 1 and rate > 0, got n={n}, rate={rate}")
  rng = np.random.default_rng(seed)
  if kind == "poisson":
    gaps = rng.exponential(1.0 / rate, n)
  elif kind == "gamma":
    shape = 1.0 / cv**2
    gaps = rng.gamma(shape, 1.0 / (rate * shape), n)
  else:
    raise ValueError(f"unknown arrival kind {kind!r}")
  arr = np.cumsum(gaps)
  p, o = _lengths(rng, n, lengths)
  return Trace(arr - arr[0], p, o, f"{kind}-{lengths}")


def summary(tr: Trace) -> dict[str, float]:
  """Rate, inter-arrival CV, and length quantiles (to compare with design doc §3.1)."""
  gaps = np.diff(tr.arrival)
  q = lambda x: {f"p{k}": float(np.percentile(x, k)) for k in (10, 50, 90, 99)}
  return {"n": len(tr), "duration_s": tr.duration, "rate": tr.rate,
          "gap_cv": float(gaps.std() / gaps.mean()) if gaps.size and gaps.mean() > 0 else 0.0,
          "prompt": q(tr.prompt), "output": q(tr.output),
          "prompt_mean": float(tr.prompt.mean()), "output_mean": float(tr.output.mean())}
