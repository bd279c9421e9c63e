r"""Train on any registered environment by name, with checkpoints and resume.

  python -m jaxrl_suite.train --env=CartPole-v1                      # PPO, its default config
  python -m jaxrl_suite.train --env=Breakout-MinAtar --algo=reinforce \
      --config.total_timesteps=2e5 --config.num_envs=16 --workdir=workdirs/rf_breakout
  python -m jaxrl_suite.train --config=configs/ppo_cartpole.py:quick  # a config file (checkout)
  python -m jaxrl_suite.train --help     # the flags and every config field with its default

Each environment goes to its trainer (train/routes.py): the on-policy learners (PPO, REINFORCE;
a Gaussian agent for Box actions) for gymnax envs, the probes and most of ours; the hydro trainer
(algos/ballast.py, train/hydro.py) for BallastHydro-v0; token-level PPO of a small LM
(lm/token_ppo.py, train/text.py) for the text environments. MNISTBandit-bsuite downloads MNIST
when made: offline it is refused with a message saying so.

Without `--config` the config is the default config of the env's trainer (`<algo>.default_config()`
for the on-policy learners; no checkout needed: an installed package trains from any directory)
with `env_name` set by `--env` (a name of `jaxrl_suite.envs.registry`) and any
`--config.<field>=value` overrides. Every value is checked before anything is compiled: a bad one
stops with one or two lines naming the field (exit 2).

The run is jitted in chunks of `config.updates_per_chunk` updates (a host loop with a progress bar
between them; the last chunk is shorter if the chunk size does not divide the number of updates,
so exactly `num_updates = total_timesteps // (num_envs * num_steps)` updates run), vmapped over
`config.num_seeds` seeds. Every `config.checkpoint_every` updates (and at the end) the whole runner
state is saved with orbax, together with the config. "step N" in messages counts updates (the
checkpoint's name); the progress bar and the learning curve count env steps (per seed).

Resume: restarting with the same workdir says "resuming from step N" and compares the config
with the one stored in the latest checkpoint. Identical: the run resumes and ends with exactly the
parameters an uninterrupted run would have. Different: it stops, listing the differing fields;
`--resume=force` continues anyway when only fields in `RESUMABLE_FIELDS` differ (the total steps,
chunking, logging), any other change needs a new `--workdir`. Nothing in the workdir is rewritten
by a run that did not run. Ctrl-C lets the running chunk of updates finish (a second Ctrl-C does
not wait), saves it as a checkpoint and prints "interrupted at step N ...; rerun the same
command to resume" (exit status 130).

Metrics go to <workdir>/metrics.{jsonl,csv} and TensorBoard event files in <workdir> (every
`config.log_every` updates, with the update `step` and `env_steps`; on resume the rows after the
restored step are dropped first; with several seeds, the mean over seeds and each seed's
`returned_episode_returns_seed<i>`), and a learning curve (episode return against env steps) to
<workdir>/learning_curve.png.
"""

# The host loop lives in host.py; the names callers reach as `jaxrl_suite.train.X` are forwarded
# to it on first use (PEP 562), so that importing a subpackage or sibling module (sweep, rail,
# serving, ballast_hydro, routes, ...) does not import it, nor jax, orbax and every trainer.
_FORWARDED = ("HOST_FIELDS", "RESUMABLE_FIELDS", "ConfigMismatchError", "config_help",
              "default_config", "validate_run_config", "check_env_fits_agent", "config_diff",
              "check_resume", "make_plan", "run_training", "main")


def __getattr__(name: str):
  if name in _FORWARDED:
    from jaxrl_suite.train import host
    return getattr(host, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_FORWARDED))
