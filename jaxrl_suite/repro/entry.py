"""One entry point for the reproduction scripts: flags, config, output folder, user errors.

Every script reads the same command line

  python -m experiments.<name> [--quick] [--workdir=DIR] [--config=configs/<name>.py[:variant]]
                               [--config.<field>=<value> ...] [--results_dir=DIR] [--debug]

and goes through the same steps before anything compiles:

1. `--config.<field>` names a field of the config file (`core.cli.check_config_overrides`: an
   unknown one is refused with the nearest name); `2e5` is accepted for an integer field; a value
   of the wrong type is one line (absl's flag error), never a traceback.
2. `--quick` runs the file's `quick` variant with every field given on the command line copied
   over it (`quick_config`): `--quick --config.seeds=3` is the quick preset with 3 seeds.
3. the script's `validate(config)` runs; its ValueError names the field (exit status 2).
4. where the run writes is decided by the library (`core.results.output_dir`: `results/` for a
   full run, `workdirs/results_quick/` for a quick one; `--results_dir` or JAXRL_RESULTS_DIR
   override it), and printed with the workdir before the run starts.

Usage in a script:

  FLAGS = entry.define_flags("ppo_gymnax", "configs/ppo_gymnax.py")
  def run(e: entry.Entry) -> dict: ...        # e.config, e.quick, e.workdir, e.results_dir
  if __name__ == "__main__":
    entry.main(FLAGS, run, validate=cfg_module.validate)
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable, Sequence

from absl import flags

from jaxrl_suite.core import cli as core_cli
from jaxrl_suite.core import results
from jaxrl_suite.repro import workers

FLAG_NAMES = ("config", "quick", "workdir", "results_dir", "workers")


@dataclasses.dataclass(frozen=True)
class Entry:
  """What a run needs from its command line, resolved and validated."""
  name: str
  config: Any            # ml_collections.ConfigDict
  quick: bool
  workdir: str
  results_dir: str
  config_spec: str       # the config file (and variant) it was read from

  @property
  def mode(self) -> str:
    return "quick" if self.quick else "full"

  def figure_path(self, suffix: str = "") -> str:
    """`<results_dir>/<name><suffix>.png` (the directory is created)."""
    os.makedirs(self.results_dir, exist_ok=True)
    return os.path.join(self.results_dir, f"{self.name}{suffix}.png")

  def banner(self) -> str:
    return (f"{self.name}: {self.mode} run of {self.config_spec}; results -> "
            f"{self.results_dir}; workdir (stage cache) -> {self.workdir}")


@dataclasses.dataclass(frozen=True)
class Flags:
  """The flag holders `define_flags` made; read after absl has parsed argv."""
  name: str
  config_path: str
  config: Any
  quick: Any
  workdir: Any
  results_dir: Any
  workers: Any = None
  splits_stages: bool = False


def define_flags(name: str, config_path: str, workdir: str | None = None,
                 splits_stages: bool = False) -> Flags:
  """Defines --config (the file `config_path`), --quick, --workdir (default workdirs/<name>),
  --results_dir, --workers (> 1 only where `splits_stages`: the script's stages come in lists
  of independent ones, `repro.workers`) and --debug. A process that imports several scripts
  (tests, notebooks) keeps the last definitions, which are the ones its command line would run."""
  from ml_collections import config_flags
  # ml_collections applies --config.<field> overrides of the default file while the flag is
  # defined (here, at import): an unknown field would be an AttributeError traceback.
  check_overrides(sys.argv, config_path)
  core_cli.install_override_error_hook()
  for flag in FLAG_NAMES:
    if flag in flags.FLAGS:
      delattr(flags.FLAGS, flag)
  core_cli.define_debug_flag()
  return Flags(
      name, config_path,
      config_flags.DEFINE_config_file("config", config_path, f"{name} config file[:variant]"),
      flags.DEFINE_bool("quick", False, "small smoke run (writes workdirs/results_quick/)"),
      flags.DEFINE_string("workdir", workdir or os.path.join("workdirs", name),
                          "working directory: stage cache and checkpoints"),
      flags.DEFINE_string("results_dir", None, "write the record here instead"),
      flags.DEFINE_integer("workers", 1, "processes sharing the workdir's stage cache (> 1 "
                           "starts helpers that compute independent stages beside this run)"),
      splits_stages)


def check_overrides(argv: Sequence[str], default_path: str) -> None:
  """Exits (status 2, one or two lines naming the field) when a --config.<field> in argv names no
  field of the config file (given by --config, else `default_path`) or the variant is unknown.

  core_cli.run checks only a file given on the command line; the default file is checked here
  (not by adding --config to the argv absl parses: ml_collections would then define every
  override flag twice). `--debug` skips the check and keeps ml_collections' own traceback."""
  argv = list(argv)
  if "--debug" in argv or not argv:
    return
  if core_cli.config_arg(argv, "config") is None:
    if not override_paths(argv):
      return
    argv = [argv[0], f"--config={default_path}"] + argv[1:]
  try:
    core_cli.check_config_overrides(core_cli.normalize_number_overrides(argv), "config")
  except core_cli.UserError as e:
    core_cli.fail(core_cli.short_message(e))


def override_paths(argv: Sequence[str]) -> list[str]:
  """Dotted field paths given as `--config.<path>=v` or `--config.<path> v`."""
  return [a[len("--config."):].split("=", 1)[0] for a in argv if a.startswith("--config.")]


def merge_overrides(preset, parsed, default):
  """Copies onto `preset` every field where `parsed` differs from `default` (nested too):
  `--quick --config.x=v` runs the quick preset with x = v."""
  for key in parsed.keys():
    val = parsed[key]
    if hasattr(val, "keys") and key in preset and hasattr(preset[key], "keys"):
      merge_overrides(preset[key], val, default[key])
    elif key not in default or val != default[key]:
      preset[key] = val
  return preset


def quick_config(spec: str, parsed, argv: Sequence[str]):
  """The quick preset of config file `spec` (`path[:variant]`) with the command line's fields
  copied over: every field of `parsed` (the --config flag's value) that differs from the file's
  own defaults, and every field named on the command line (an override equal to the full
  default still wins over the quick preset's value)."""
  path = spec.partition(":")[0]
  preset = core_cli.load_config_file(f"{path}:quick")   # UserError if it has no quick variant
  preset = merge_overrides(preset, parsed, core_cli.load_config_file(spec))
  return copy_named_fields(preset, parsed, argv)


def copy_named_fields(preset, parsed, argv: Sequence[str]):
  """Copies onto `preset` every field of `parsed` named as `--config.<path>` in `argv`."""
  for field in override_paths(argv):
    *parents, leaf = field.split(".")
    src, dst = parsed, preset
    for k in parents:
      src, dst = src[k], dst[k]
    dst[leaf] = src[leaf]
  return preset


def resolve(fl: Flags, argv: Sequence[str] | None = None,
            validate: Callable[[Any], None] | None = None) -> Entry:
  """The Entry of the parsed command line (steps 2-4 of the module doc). Raises ValueError /
  UserError naming the field when the config is not valid; creates the workdir."""
  argv = list(sys.argv if argv is None else argv)
  spec = core_cli.config_arg(argv, "config") or fl.config_path
  quick = bool(fl.quick.value)
  config = quick_config(spec, fl.config.value, argv) if quick else fl.config.value
  if validate is not None:
    validate(config)
  mode = "quick" if quick else "full"
  out = fl.results_dir.value or results.output_dir(mode, argv[1:])
  workdir = os.path.abspath(fl.workdir.value)
  os.makedirs(workdir, exist_ok=True)
  return Entry(fl.name, config, quick, workdir, os.path.abspath(out), spec)


def main(fl: Flags, body: Callable[[Entry], Any], validate: Callable[[Any], None] | None = None,
         argv: Sequence[str] | None = None) -> None:
  """Runs `body(entry)` as the script's absl main: unknown fields, bad values and unreadable
  files stop before `body` with one or two lines naming them (exit status 2; `--debug` keeps
  the traceback), Ctrl-C is one line (exit 130)."""
  full = list(sys.argv if argv is None else argv)
  check_overrides(full, fl.config_path)

  def run(_):
    e = resolve(fl, full, validate)
    print(e.banner(), flush=True)
    helpers = workers.start(1 if fl.workers is None else int(fl.workers.value), full, e.workdir,
                            splits_stages=fl.splits_stages)
    try:
      body(e)   # its return value is for callers in code: absl would print it as an exit status
    finally:
      workers.stop(helpers, e.workdir)

  core_cli.run(run, full, config_flag="config")
