"""Command-line plumbing shared by `jaxrl_suite.train` and the experiment scripts.

Three things a user of a config-driven CLI expects, in one place:

* `--config.x=2e5` is accepted for an integer field when the value is integral
  (`normalize_number_overrides`); ml_collections would reject it.
* an unknown field (`--config.learning_rate`) is refused before anything runs, with the nearest
  valid name and the list of fields (`check_config_overrides`).
* a config file's variant (`--config=configs/ppo_cartpole.py:quick`) must be one its
  `get_config` knows: `:quik` is refused naming the valid ones (`config_variants`), where
  ml_collections would silently run the default config.
* user errors (a bad value, an unreadable file, a checkpoint that does not match) are printed as
  one or two lines naming the field or file and what to do, with exit status 2, instead of a
  traceback (`run`); `--debug` keeps the traceback.
* Ctrl-C is one line (the `Interrupted` message, e.g. where to resume from) and exit status 130
  (128 + SIGINT, what a shell reports for a process killed by Ctrl-C), not a traceback.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import os
import re
import sys
from typing import Any, Callable, Iterable, Sequence

from absl import app, flags

USAGE_EXIT = 2   # the conventional status of a command-line usage error (argparse, getopt)
INTERRUPT_EXIT = 130   # 128 + SIGINT: what shells report for a process stopped by Ctrl-C

_FLOAT_INT = re.compile(r"^[+-]?\d+(\.\d*)?[eE][+]?\d+$|^[+-]?\d+\.0*$")


class UserError(Exception):
  """An error in what the user supplied (config, files, workdir); the message says what to do."""


class Interrupted(KeyboardInterrupt):
  """Ctrl-C, caught where the program knows what was kept; the message says how to go on
  (`run` prints it as one line and exits with status 130)."""


def user_error_types() -> tuple[type[BaseException], ...]:
  """Exceptions printed as a short message (exit 2) rather than a traceback.

  Validation in this code base raises ValueError (and its subclasses LayoutError, TraceError)
  naming the field or file; checkpoints raise CheckpointError; unreadable files raise OSError.
  """
  from jaxrl_suite.core.checkpoint import CheckpointError
  return (UserError, ValueError, CheckpointError, OSError)


def define_debug_flag() -> None:
  """Defines `--debug` once per process (every script imports this)."""
  if "debug" not in flags.FLAGS:
    flags.DEFINE_bool("debug", False, "show the full traceback of an error instead of a short "
                      "message")


def _debug_requested(argv: Sequence[str]) -> bool:
  try:
    return bool(flags.FLAGS["debug"].value) if flags.FLAGS.is_parsed() else False
  except KeyError:
    pass
  return "--debug" in argv or "--debug=true" in argv


def short_message(err: BaseException) -> str:
  """The first lines of an error, at most two, each at most 1000 characters."""
  text = str(err).strip() or type(err).__name__
  if isinstance(err, OSError) and getattr(err, "filename", None):
    text = f"{err.filename}: {err.strerror or text}"
  lines = [l[:1000] for l in text.splitlines() if l.strip()][:2]
  return "\n".join(lines)


def fail(message: str, code: int = USAGE_EXIT) -> None:
  print(f"error: {message}", file=sys.stderr)
  sys.exit(code)


# ------------------------------------------------------------------------------ argv checks

def normalize_number_overrides(argv: Sequence[str], prefix: str = "--config.") -> list[str]:
  """`--config.x=2e5` -> `--config.x=200000` when the value is an integral float literal.

  An integral value is exact as an int, and an int is valid for a float field too, so the
  rewrite is safe whatever the field's type. Non-integral values (`1e-3`) are left as they are.
  """
  out = []
  for a in argv:
    if a.startswith(prefix) and "=" in a:
      key, val = a.split("=", 1)
      if _FLOAT_INT.match(val.strip()):
        f = float(val)
        if f.is_integer() and abs(f) < 2 ** 63:
          a = f"{key}={int(f)}"
    out.append(a)
  return out


def config_arg(argv: Sequence[str], name: str = "config") -> str | None:
  """The value of `--<name>=v` or `--<name> v` in argv (None if absent)."""
  for i, a in enumerate(argv):
    if a.startswith(f"--{name}="):
      return a.split("=", 1)[1]
    if a == f"--{name}" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def config_variants(path: str) -> list[str] | None:
  """The variants (`path:<variant>`) a config file's `get_config(arg)` tells apart, read from
  its source: the strings `arg` is compared with (`arg == "quick"`, `arg in ("a", "b")`).

  None when that cannot be known (no `get_config`, or `arg` is used otherwise, e.g. passed on
  or parsed): then any variant is accepted, as ml_collections does.
  """
  try:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), filename=path)
  except (OSError, SyntaxError, ValueError):
    return None
  fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_config"),
            None)
  if fn is None:
    return None
  params = fn.args.posonlyargs + fn.args.args
  if not params:
    return []
  name = params[0].arg
  found: set[str] = set()
  compared: set[int] = set()   # ids of the Name nodes read inside a comparison we understand
  for node in ast.walk(fn):
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
      continue
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if isinstance(right, ast.Name) and right.id == name and isinstance(op, (ast.Eq, ast.NotEq)):
      left, right = right, left
    if not (isinstance(left, ast.Name) and left.id == name):
      continue
    if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant):
      values = [right.value]
    elif isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
      values = [e.value for e in right.elts if isinstance(e, ast.Constant)]
      if len(values) != len(right.elts):
        return None
    elif isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant):
      values = []   # `arg is None`: the default, not a variant
    else:
      return None
    found.update(v for v in values if isinstance(v, str))
    compared.add(id(left))
  for node in ast.walk(fn):
    if isinstance(node, ast.Name) and node.id == name and id(node) not in compared:
      return None   # read some other way (passed on, parsed, truth-tested): unknown variants
  return sorted(found)


def check_config_variant(spec: str, flag: str = "config") -> None:
  """Raises UserError if `spec` = `path:variant` names a variant its file does not know."""
  path, sep, arg = spec.partition(":")
  if not sep or not os.path.isfile(path):
    return
  known = config_variants(path)
  if known is None or arg in known:
    return
  valid = (f"valid variants: {', '.join(known)} (or none: --{flag}={path})" if known else
           f"it has no variants: use --{flag}={path}")
  raise UserError(f"--{flag}={spec}: unknown config variant {arg!r}; {valid}")


def load_config_file(spec: str):
  """Loads `path[:arg]` the way ml_collections' config_flags does: `get_config(arg)`."""
  path, _, arg = spec.partition(":")
  if not os.path.isfile(path):
    raise UserError(f"--config={spec}: no config file {path!r}")
  check_config_variant(spec)
  modspec = importlib.util.spec_from_file_location("_jaxrl_user_config", path)
  module = importlib.util.module_from_spec(modspec)
  try:
    modspec.loader.exec_module(module)
  except Exception as e:  # a broken config file: name it, whatever it raised
    raise UserError(f"--config={spec}: the config file failed to load "
                    f"({type(e).__name__}: {short_message(e)})") from e
  if not hasattr(module, "get_config"):
    raise UserError(f"--config={spec}: {path} has no get_config() function")
  return module.get_config(arg) if arg else module.get_config()


def field_names(config, prefix: str = "") -> list[str]:
  """Dotted names of every field of a ConfigDict (nested ones included)."""
  out = []
  for k in config.keys():
    v = config[k]
    out.append(prefix + k)
    if hasattr(v, "keys") and not isinstance(v, dict):
      out += field_names(v, prefix + k + ".")
  return out


def unknown_field_message(field: str, known: Iterable[str], flag: str = "config") -> str:
  known = sorted(known)
  near = difflib.get_close_matches(field, known, n=1, cutoff=0.0)
  # difflib prefers long common runs; "learning_rate" vs "lr" shares little, so also try the
  # initials of snake_case names ("learning_rate" -> "lr").
  initials = "".join(p[0] for p in field.split(".")[-1].split("_") if p)
  by_initials = [k for k in known if k.split(".")[-1] == initials]
  # a field in the same sub-config first (ppo.learning_rate -> ppo.lr, not bc.lr)
  parent = field.rpartition(".")[0]
  by_initials.sort(key=lambda k: k.rpartition(".")[0] != parent)
  guess = by_initials[0] if by_initials else (near[0] if near else None)
  hint = f"; did you mean {guess}?" if guess else ""
  top = [k for k in known if "." not in k]
  groups = sorted({k.split(".")[0] for k in known if "." in k})
  nested = f" (nested: {', '.join(g + '.*' for g in groups)})" if groups else ""
  return (f"--{flag}.{field}: unknown field{hint}\n"
          f"fields: {', '.join(top)}{nested}; see --help")


def check_config_overrides(argv: Sequence[str], flag: str = "config", config=None) -> None:
  """Raises UserError if an `--<flag>.a.b=...` names no field of the config file's config (or
  of `config`, a flag defined by a ConfigDict rather than a file), or if the file's variant
  (`path:variant`) is unknown.

  Runs before absl parses the flags (whose error for an unknown field is a traceback).
  """
  spec = config_arg(argv, flag)
  overrides = [a[len(flag) + 3:].split("=", 1)[0] for a in argv
               if a.startswith(f"--{flag}.")]
  if spec is None and config is None:
    return
  if spec is not None:
    path = spec.partition(":")[0]
    if not os.path.isfile(path):
      raise UserError(f"--{flag}={spec}: no config file {path!r} (relative to {os.getcwd()})")
    check_config_variant(spec, flag)
  if not overrides:
    return
  known = set(field_names(config if spec is None else load_config_file(spec)))
  for field in overrides:
    if field not in known:
      raise UserError(unknown_field_message(field, known, flag))


def _config_default(flag: str) -> str | None:
  try:
    default = flags.FLAGS[flag].default
  except KeyError:
    return None
  return default if isinstance(default, str) else None


def install_override_error_hook(flag: str = "config") -> None:
  """Scripts that call `absl.app.run` directly: an unknown `--config.x` makes ml_collections
  raise inside absl's flag parsing, which prints a traceback. This `sys.excepthook` turns such an
  uncaught error into the `check_config_overrides` message with exit status 2 (`--debug` keeps
  the traceback). Uncaught exceptions only: tests and notebooks never reach it."""
  previous = sys.excepthook

  def hook(etype, value, tb):
    frames = []
    t = tb
    while t is not None:
      frames.append(t.tb_frame)
      t = t.tb_next
    from_overrides = any("config_flags" in f.f_code.co_filename for f in frames)
    if from_overrides and "--debug" not in sys.argv:
      argv = list(sys.argv)
      # The config file: --config=..., else the flag's default (the error can come from
      # DEFINE_config_file itself, which applies the overrides to its default at definition).
      default = _config_default(flag) or next(
          (f.f_locals.get("default") for f in frames if f.f_code.co_name == "DEFINE_config_file"
           and isinstance(f.f_locals.get("default"), str)), None)
      if config_arg(argv, flag) is None and default:
        argv.append(f"--{flag}={default}")
      try:
        check_config_overrides(argv, flag)
      except UserError as e:
        print(f"error: {short_message(e)}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
      except Exception:  # the check itself failed: fall back to the original traceback
        pass
    previous(etype, value, tb)

  sys.excepthook = hook


# ------------------------------------------------------------------------------ entry point

def run(main: Callable[[list[str]], Any], argv: Sequence[str] | None = None,
        config_flag: str | None = "config", config=None) -> None:
  """`absl.app.run(main)` with user errors as short messages (exit 2) and `--debug`.

  Before absl parses the command line: integral `--config.x=2e5` values become ints and
  unknown `--config.*` fields (of the config file, or of `config` for a flag defined by a
  ConfigDict) and unknown variants are refused. A flag parsing error (a value of the wrong
  type) is one line with exit status 2 too. Ctrl-C while `main` runs is one line on stderr
  (an `Interrupted`'s message, else "interrupted") and exit status 130.
  """
  define_debug_flag()
  argv = list(sys.argv if argv is None else argv)
  debug = "--debug" in argv or "--debug=true" in argv
  if config_flag:
    argv = normalize_number_overrides(argv, f"--{config_flag}.")
    try:
      check_config_overrides(argv, config_flag, config)
    except UserError as e:
      if debug:
        raise
      fail(short_message(e))

  def parser(args):
    try:
      return flags.FLAGS(args)
    except flags.Error as e:
      fail(f"{short_message(e)}\nsee --help for the flags and config fields")
    except SystemExit as e:
      # absl's --help exits with status 1; asking for help is not an error.
      if e.code == 1 and any(a.split("=")[0] in ("--help", "-h", "-?", "--helpshort",
                                                 "--helpfull", "--helpxml") for a in args[1:]):
        sys.exit(0)
      raise

  def wrapped(args):
    try:
      return main(args)
    except user_error_types() as e:
      if _debug_requested(args):
        raise
      fail(short_message(e))
    except KeyboardInterrupt as e:
      if _debug_requested(args):
        raise
      sys.stdout.flush()
      print(short_message(e) if isinstance(e, Interrupted) else "interrupted", file=sys.stderr)
      sys.exit(INTERRUPT_EXIT)

  app.run(wrapped, argv=argv, flags_parser=parser)
