"""Fields and checks shared by configs/serving_batching.py and configs/serving_routing.py.

Not an experiment config itself: `experiment(quick)` returns the common part (trace split, SLO,
loads, window sizes, seeds, RL algorithms), each config adds its own fields.
"""

import ml_collections

from jaxrl_suite.algos import ppo, reinforce


def experiment(quick: bool) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.trace = "azure_conv"
  c.train_frac = 0.6                  # train on the early 60% of the trace, evaluate on the rest
  c.max_batched_tokens = 2048
  c.slo_ttft = 2.0                    # s
  c.slo_tpot = 0.2                    # s per output token after the first
  c.pred_acc = 0.8                    # accuracy of the output-length bucket predictor
  # Fractions of the calibrated capacity. Quick (a smoke check of the pipeline, not a result):
  # the two ends only, which halves every tuning and evaluation table; each config's full mode
  # sets its own loads.
  c.loads = (0.5, 1.3) if quick else (0.5, 0.8, 0.95, 1.3)
  # Train and evaluate on windows of the same size: trained on 48-request windows and evaluated
  # on longer ones, every routing PPO/REINFORCE seed learned "send everything to the H100" (fine
  # for a 48-request burst, a collapse on longer windows).
  # (Quick stays at 48: with 32-request windows Mooncake's capacity bisection never saturates
  # the cluster and ends at its highest probe, a degenerate smoke check.)
  c.train_table = 48 if quick else 96
  c.eval_table = 48 if quick else 96
  c.max_events = 64                   # GPU events per decision step before the loop is cut
  # Steady-state protocol (off by default: the reported results were measured without it).
  # window: most requests in flight in the engine (0 = the whole episode); each event then
  # costs O(window), so episodes of thousands of requests are cheap; arrivals beyond it are
  # rejected and count as SLO misses. warmup_frac: leading share of each evaluation episode
  # excluded from its metrics (the cluster is still filling up).
  c.window = 0
  c.warmup_frac = 0.0
  # Engine limits: "uniform" = config.cap / config.max_batched_tokens on every GPU (the measured
  # protocol); "per_gpu" = each GPU type's vLLM defaults with the token budget cut to fit the
  # TPOT SLO (cost_model.engine_settings; routing only).
  c.engine_settings = "uniform"
  # Per-iteration GPU time: "profiled" (profiled_cost: tables fitted to Vidur's A100 Llama-2-7B
  # operator profiles, scaled to each GPU spec; docs/serving_engine.md: within 1-3% of the
  # profiled batches, where the analytic form is 16% fast at the median) or "analytic"
  # (cost_model.iteration_time: roofline constants; the records made before this default, whose
  # configs lack the field, used it). Loads are fractions of the capacity measured under the
  # chosen model, so either is self-consistent. engine_settings "per_gpu" cuts token budgets
  # with the same model's worst iteration.
  c.iteration_cost = "profiled"
  c.n_tune_windows = 2 if quick else 12
  c.n_select_windows = 2 if quick else 3   # training windows that pick the best RL algorithm
  c.n_eval_windows = 2 if quick else 4
  c.num_seeds = 2 if quick else 8
  # RL is evaluated with sampled actions (the trained policy) and greedily (argmax); the
  # algorithm and the mode are chosen per load on training windows.
  c.rl_modes = ("sampled", "greedy")
  c.eval_lanes = 32                   # episodes per call of the one compiled evaluator
  c.vmap_seeds = True                 # all seeds in one jit (the old hang was flax QR init: fixed)
  # Quick: PPO only (each algorithm is one more ~20-40 s XLA compile on 2 cores).
  c.algos = ("ppo",) if quick else ("ppo", "reinforce")
  c.ppo = ppo.default_config()
  c.reinforce = reinforce.default_config()
  for a in (c.ppo, c.reinforce):
    a.num_envs = 8 if quick else 16
    a.num_steps = 64
    a.total_timesteps = 512
    a.hidden_sizes = (64, 64)
  c.ppo.lr = 3e-4
  c.reinforce.lr = 1e-3
  c.seed = 0
  return c


def validate(config, positive=()) -> None:
  """Checks the common fields (and the extra `positive` integer fields); ValueError names the
  bad field."""
  for f in ("train_table", "eval_table", "max_events", "n_tune_windows", "n_eval_windows",
            "n_select_windows", "num_seeds", "max_batched_tokens", "max_eval_steps",
            "eval_lanes") + tuple(positive):
    if int(config[f]) <= 0:
      raise ValueError(f"config.{f} must be > 0, got {config[f]}")
  if config.n_select_windows > config.n_tune_windows:
    raise ValueError("config.n_select_windows must be <= config.n_tune_windows")
  if int(config.window) < 0:
    raise ValueError(f"config.window must be >= 0 (0 = whole episode), got {config.window}")
  if not 0 <= config.warmup_frac < 1:
    raise ValueError(f"config.warmup_frac must be in [0, 1), got {config.warmup_frac}")
  if config.engine_settings not in ("uniform", "per_gpu"):
    raise ValueError(f"config.engine_settings must be 'uniform' or 'per_gpu', got "
                     f"{config.engine_settings!r}")
  if config.iteration_cost not in ("analytic", "profiled"):
    raise ValueError(f"config.iteration_cost must be 'analytic' or 'profiled', got "
                     f"{config.iteration_cost!r}")
  if not 0 < config.train_frac < 1:
    raise ValueError(f"config.train_frac must be in (0, 1), got {config.train_frac}")
  if not 0 <= config.pred_acc <= 1:
    raise ValueError(f"config.pred_acc must be in [0, 1], got {config.pred_acc}")
  if any(l <= 0 for l in config.loads):
    raise ValueError(f"config.loads must be positive, got {config.loads}")
  if config.slo_ttft <= 0 or config.slo_tpot <= 0:
    raise ValueError("config.slo_ttft and config.slo_tpot must be > 0")
  if not config.algos:
    raise ValueError("config.algos must name at least one of ('ppo', 'reinforce')")
  if not config.rl_modes or any(m not in ("sampled", "greedy") for m in config.rl_modes):
    raise ValueError(f"config.rl_modes must be a non-empty subset of ('sampled', 'greedy'), got "
                     f"{config.rl_modes}")
  for a in config.algos:
    if a not in ("ppo", "reinforce"):
      raise ValueError(f"config.algos has unknown algorithm {a!r}")
    if int(config[a].total_timesteps) < int(config[a].num_envs) * int(config[a].num_steps):
      raise ValueError(f"config.{a}.total_timesteps is smaller than one rollout")
