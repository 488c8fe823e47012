"""Input checks shared by every script under ``scripts/``: one clear line for bad input.

The conventions (README, "Errors"):

- bad input (an option out of range, a missing / unreadable / undecodable file, a directory
  where a file belongs, an output that cannot be written, a checkpoint of another task) stops
  the script with exit status 2 and ONE line on stderr, ``script.py: error: MESSAGE``, naming
  the option or the file; never a Python traceback. Option values are checked by argparse at
  parse time (the ``*_arg`` types below), so the message is argparse's own:
  ``script.py: error: argument --beam: must be an integer >= 1, got '0'``;
- out-of-range values are refused, never replaced by a default;
- a child process or library step that fails gives one line naming the step and the path of
  a log file holding its whole output (exit status 1: the failure may not be the input's);
- a UTF-8 byte-order mark at the start of a text file is dropped, everywhere the same way
  (``decode_utf8``); invalid UTF-8 names the file, the line and the byte offset.

``InputError`` is the project's base class for such errors (``PipelineError`` of the
translation tools and the SRL readers' errors derive from it); ``script_main`` turns it into
the line above. Nothing here imports torch or fairseq at module level.
"""

import argparse
import functools
import gzip
import logging
import math
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
import zlib
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Callable, Optional, Sequence

BOM = "\ufeff"
LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


class InputError(Exception):
    """Bad input: the script prints ``script.py: error: MESSAGE`` and exits ``exit_status``."""

    exit_status = 2


class OptionError(InputError, ValueError):
    """A plugin option with a value its rule refuses (``--ssan-tau 0``): one line naming the
    option, the value and the rule, exit status 2, like fairseq's own argparse errors. In the
    project's scripts ``script_main`` prints it; inside fairseq's commands (``fairseq-train``,
    ``-generate``, ``-interactive``, ``-validate``), where the plugin raises it while the model
    is built, :func:`install_option_error_hook` does. A ValueError too, for callers in Python."""


def install_option_error_hook() -> None:
    """Make an uncaught :class:`OptionError` end the process as an argparse error does: one
    line ``PROG: error: MESSAGE`` on stderr and exit status 2 (no traceback). Installed once,
    when the plugin is imported (``--user-dir``); other exceptions reach the previous hook."""
    previous = sys.excepthook
    if getattr(previous, "ssan_plugin_option_hook", False):
        return

    def hook(exc_type, exc, tb):
        if isinstance(exc, OptionError):
            prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
            sys.stdout.flush()
            sys.stderr.write(f"{prog}: error: {exc}\n")
            sys.stderr.flush()
            os._exit(exc.exit_status)
        previous(exc_type, exc, tb)

    hook.ssan_plugin_option_hook = True
    sys.excepthook = hook


class StepError(InputError):
    """A child process or library step failed; the message names the step and its log."""

    exit_status = 1


def one_line(message) -> str:
    """The message on one line (line breaks and the indentation after them become one space)."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


# ---------------------------------------------------------------- script entry points

class StderrHandler(logging.StreamHandler):
    """A stream handler that writes to whatever ``sys.stderr`` is when a record is emitted, not
    to the object it was when logging was set up: a script's ``main`` called in-process (tests,
    notebooks) under a redirected stderr does not leave a handler on a stream closed later."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def setup_logging(level=logging.INFO, fmt: str = LOG_FORMAT) -> None:
    """The scripts' logging: INFO and above on (the current) stderr, one format."""
    logging.basicConfig(format=fmt, level=level, handlers=[StderrHandler()], force=True)


def script_main(func: Callable = None, *, prog: Optional[str] = None):
    """Decorator for a script's ``main(argv=None)``: an ``InputError`` (and an argparse error,
    which exits 2 by itself) becomes one line ``prog: error: MESSAGE`` on stderr and the return
    value ``err.exit_status``; anything else is a bug and keeps its traceback."""

    def wrap(main):
        @functools.wraps(main)
        def wrapper(*args, **kwargs):
            try:
                return main(*args, **kwargs)
            except InputError as err:
                name = prog or os.path.basename(sys.argv[0]) or "script"
                print(f"{name}: error: {one_line(err)}", file=sys.stderr)
                sys.stderr.flush()
                return err.exit_status

        return wrapper

    return wrap(func) if func is not None else wrap


# ---------------------------------------------------------------- argparse

class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``prog: error: MESSAGE (see --help)``, exit
    status 2 (argparse prints the whole usage block first; ``--help`` still shows it)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")



def _number_arg(kind: type, lo=None, hi=None, lo_open=False, hi_open=False,
                allow_none=False):
    noun = "an integer" if kind is int else "a number"
    bounds = []
    if lo is not None:
        bounds.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        bounds.append(f"{'<' if hi_open else '<='} {hi:g}")
    if lo is not None and hi is not None:
        rule = (f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}")
    else:
        rule = " ".join(bounds)
    expected = f"must be {noun} {rule}".rstrip() if bounds else f"must be a finite {noun[2:]}"

    def parse(text):
        if allow_none and text.lower() == "none":
            return None
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        if lo is not None and (value < lo or (lo_open and value == lo)):
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        if hi is not None and (value > hi or (hi_open and value == hi)):
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return value

    parse.__name__ = "integer" if kind is int else "number"  # argparse's fallback wording
    return parse


def int_arg(lo: Optional[int] = None, hi: Optional[int] = None):
    """argparse type: an integer in [lo, hi] (either bound optional)."""
    return _number_arg(int, lo, hi)


def float_arg(lo: Optional[float] = None, hi: Optional[float] = None, lo_open: bool = False,
              hi_open: bool = False):
    """argparse type: a finite number in the range (open or closed at each end)."""
    return _number_arg(float, lo, hi, lo_open, hi_open)


positive_int = int_arg(1)
nonnegative_int = int_arg(0)
finite_float = float_arg()
nonnegative_float = float_arg(0.0)
positive_float = float_arg(0.0, lo_open=True)


def _argparse_check(check):
    """An argparse type from a check that raises InputError (the message stays the same)."""

    def parse(text):
        try:
            return check(text)
        except InputError as err:
            raise argparse.ArgumentTypeError(one_line(err)) from None

    return parse


# ---------------------------------------------------------------- input files

def check_input_file(path, what: str = "", nonempty: bool = False) -> Path:
    """``path`` exists, is a regular file (not a directory), is readable and, with
    ``nonempty``, has at least one byte; InputError naming ``what`` and the path otherwise."""
    path = Path(path)
    label = f"{what} {path}".strip()
    if not path.exists():
        raise InputError(f"{label}: no such file")
    if path.is_dir():
        raise InputError(f"{label} is a directory; a file is expected here")
    if not path.is_file():
        raise InputError(f"{label} is not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{label} is not readable (permission denied)")
    try:
        with open(path, "rb"):
            pass
    except OSError as err:
        raise InputError(f"{label} cannot be opened: {err.strerror}") from None
    if nonempty and path.stat().st_size == 0:
        raise InputError(f"{label} is empty")
    return path


def check_input_dir(path, what: str = "") -> Path:
    path = Path(path)
    label = f"{what} {path}".strip()
    if not path.exists():
        raise InputError(f"{label}: no such directory")
    if not path.is_dir():
        raise InputError(f"{label} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{label} is not readable (permission denied)")
    return path


input_file_arg = _argparse_check(check_input_file)
input_dir_arg = _argparse_check(check_input_dir)


def decode_utf8(data: bytes, name: str) -> str:
    """UTF-8 bytes -> text, a leading byte-order mark dropped. Invalid UTF-8 raises InputError
    naming ``name``, the 1-based line, the bytes and their byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        bad = data[err.start:err.end]
        raise InputError(f"{name}: line {line} is not valid UTF-8 (bytes {bad!r} at byte offset "
                         f"{err.start}); convert the file to UTF-8 first") from None
    return text[1:] if text.startswith(BOM) else text


def read_bytes(path, what: str = "", nonempty: bool = False) -> bytes:
    """The bytes of a checked input file, gunzipped when its name ends in ``.gz``."""
    path = check_input_file(path, what, nonempty)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"{f'{what} {path}'.strip()} cannot be read: {err}") from None


def read_text(path, what: str = "", nonempty: bool = False) -> str:
    """A checked UTF-8 text file (``.gz`` gunzipped), its byte-order mark dropped."""
    return decode_utf8(read_bytes(path, what, nonempty), str(path))


# ---------------------------------------------------------------- outputs

def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_creatable(path: Path, label: str) -> None:
    """The missing directories up to ``path`` can be created: the nearest existing ancestor
    is a writable directory."""
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        raise InputError(f"{label}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{label}: directory {ancestor} is not writable")


def check_output_file(path, what: str = "") -> Path:
    """``path`` can be written as a file (checked before any work starts): not a directory;
    if it exists, writable; otherwise its parent exists or can be created."""
    path = Path(path)
    label = f"{what} {path}".strip()
    if path.is_dir():
        raise InputError(f"{label} is a directory; a file name is expected here")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise InputError(f"{label} is not writable (permission denied)")
    else:
        _check_creatable(path, label)
    return path


def check_output_dir(path, what: str = "") -> Path:
    """``path`` can be used as an output directory: not an existing file; if it exists,
    writable; otherwise its parent exists or can be created."""
    path = Path(path)
    label = f"{what} {path}".strip()
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{label} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{label} is not writable (permission denied)")
    else:
        _check_creatable(path, label)
    return path


# ---------------------------------------------------------------- steps: child processes, library calls

def step_log_path(step: str, log_dir=None) -> Path:
    """A new log file for ``step``: in ``log_dir`` (created) or the system's temp directory."""
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in step).strip("_") or "step"
    if log_dir is not None:
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        return log_dir / f"{slug}.log"
    fd, name = tempfile.mkstemp(prefix=f"ssan_plugin-{slug}-", suffix=".log")
    os.close(fd)
    return Path(name)


def _last_line(text: str) -> str:
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return lines[-1] if lines else "no output"


def run_step(step: str, command: Sequence, log_path=None, on_line: Callable = None,
             **popen_kwargs) -> str:
    """Run a child process, stdout and stderr together into ``log_path`` (default: a new temp
    file) and, line by line, to ``on_line``; returns the output. A non-zero exit raises
    StepError: ``STEP failed (exit N): LAST LINE OF OUTPUT; full log: PATH``."""
    log_path = Path(log_path) if log_path is not None else step_log_path(step)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    output = []
    try:
        proc = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1,
                                **popen_kwargs)
    except OSError as err:
        raise StepError(f"{step} could not start {command[0]}: {err.strerror}") from None
    with open(log_path, "w", encoding="utf-8") as log:
        for line in proc.stdout:
            output.append(line)
            log.write(line)
            if on_line is not None:
                on_line(line)
    returncode = proc.wait()
    text = "".join(output)
    if returncode != 0:
        raise StepError(f"{step} failed (exit {returncode}): {_last_line(text)}; "
                        f"full log: {log_path}")
    return text


@contextmanager
def library_step(step: str, log_path=None, catch=(Exception,)):
    """Around a library call: an exception of the ``catch`` types (an InputError passes
    unchanged) becomes StepError ``STEP failed: Type: message; full log: PATH``, with the
    traceback written to the log file."""
    try:
        yield
    except InputError:
        raise
    except catch as err:
        path = Path(log_path) if log_path is not None else step_log_path(step)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc(), encoding="utf-8")
        first = one_line(str(err).strip().splitlines()[0]) if str(err).strip() else ""
        raise StepError(f"{step} failed: {type(err).__name__}: {first[:300]}; full log: "
                        f"{path}") from None


# ---------------------------------------------------------------- checkpoints

def checkpoint_identity(state: dict) -> dict:
    """{"task": name or None, "arch": name or None} recorded in a fairseq checkpoint state."""

    def get(container, key):
        if container is None:
            return None
        if hasattr(container, "get"):
            return container.get(key)
        return getattr(container, key, None)

    cfg, args = state.get("cfg"), state.get("args")
    task = get(get(cfg, "task"), "_name") or get(args, "task")
    model = get(cfg, "model")
    arch = get(model, "arch") or get(model, "_name") or get(args, "arch")
    return {"task": task, "arch": arch}


def load_checkpoint(path, expect_task: Optional[str] = None, expect_arch: Optional[str] = None,
                    what: str = "checkpoint") -> dict:
    """The state of a fairseq checkpoint, loaded with torch's weights_only check and the
    plugin's allow-list (``checkpoint_safety``). InputError, first the file, for a missing file,
    a directory, an empty or truncated file, a pickle the safe loader refuses (and the reason),
    a file without model state, and, with ``expect_task`` / ``expect_arch`` (fnmatch patterns,
    e.g. ``srl_tagger*``), a checkpoint of another task or architecture: what was expected and
    what was found."""
    import pickle

    import torch

    from .checkpoint_safety import allow_fairseq_checkpoint_globals

    allow_fairseq_checkpoint_globals()  # the globals fairseq checkpoints pickle (idempotent)

    path = Path(path)
    label = f"{what} {path}".strip()
    if path.is_dir():
        raise InputError(f"{label} is a directory; give a checkpoint file, e.g. "
                         f"{path / 'checkpoint_best.pt'}")
    check_input_file(path, what)
    if path.stat().st_size == 0:
        raise InputError(f"{label} is empty (0 bytes): not a checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about the pickle protocol of odd files
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if "Weights only load failed" in text:
            reason = text.split("Check the documentation")[0]
            for marker in ("trusted source.", "WeightsUnpickler error:"):
                reason = reason.split(marker, 1)[-1]
            raise InputError(f"{label}: refused by torch's safe loader (Weights only load "
                             f"failed): {one_line(reason)[:300]}") from None
        raise InputError(f"{label} is truncated or not a torch checkpoint: "
                         f"{one_line(text)[:300]}") from None
    except Exception as err:  # truncated zip, a text file, ...: torch raises many types
        raise InputError(f"{label} is truncated or not a torch checkpoint: "
                         f"{type(err).__name__}: {one_line(err)[:200]}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise InputError(f"{label} is not a fairseq checkpoint (no model state)")
    if expect_task is not None or expect_arch is not None:
        found = checkpoint_identity(state)
        ok_task = expect_task is None or found["task"] == expect_task
        ok_arch = expect_arch is None or (found["arch"] is not None
                                          and fnmatch(found["arch"], expect_arch))
        if not (ok_task and ok_arch):
            expected = ", ".join(f"{k} {v!r}" for k, v in (("task", expect_task),
                                                            ("arch", expect_arch)) if v)
            raise InputError(f"{label}: expected a checkpoint of {expected}, found task "
                             f"{found['task']!r}, arch {found['arch']!r}")
    return state
