"""Config: heterogeneous-GPU routing, RL (PPO, REINFORCE) vs tuned routers (ServingRoute-v0).

COMMAND (from the repo root):
  .venv/bin/python -m experiments.serving_routing                 # full: ~30-60 min, shared 2 cores
  .venv/bin/python -m experiments.serving_routing --quick         # quick: ~60-70 s
  .venv/bin/python -m experiments.serving_routing --eval_trace PATH   # saved policy on any trace
Writes results/serving_routing.{json,md,png}. Shared fields: configs/serving_common.py.
"""

from configs import serving_common


def get_config(arg=None):
  quick = arg == "quick"
  c = serving_common.experiment(quick)
  c.cluster = ("H100-7B", "A100-7B", "L4-7B", "L4-7B")
  c.cap = 16                          # max_num_seqs of every engine, same for every policy
  c.drain_dt = 0.5                    # s per step once every request is routed
  c.max_eval_steps = 3000
  for a in (c.ppo, c.reinforce):
    a.total_timesteps = 512 if quick else 524_288   # 16x the first session (the env is ~10x faster)
    a.gamma = 0.99
  c.ppo.ent_coef = 0.01
  if not quick:
    # Steady-state protocol (full mode): episodes of 1,024 consecutive requests (train and
    # evaluate on the same length) through an engine window of 128 requests in flight (more are
    # rejected: SLO misses), the first 10% of each episode excluded from its metrics, each GPU
    # type's own engine settings (cost_model.engine_settings), and loads up to 1.1 of the
    # capacity measured on these long replays (the 96-request bursts overstated it ~2x).
    c.train_table = c.eval_table = 1024
    c.window = 128
    c.warmup_frac = 0.1
    c.engine_settings = "per_gpu"
    c.loads = (0.5, 0.7, 0.9, 1.1)
    c.max_eval_steps = 4096
  return c


def validate(config):
  serving_common.validate(config, positive=("cap",))
  if config.cap > config.max_batched_tokens:
    raise ValueError("config.cap must be <= config.max_batched_tokens")
