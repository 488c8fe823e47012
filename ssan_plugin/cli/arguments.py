"""Command entry points and argparse: one-line errors, the logging set-up, number and
file argument types whose refusals are argparse's own one line. Standard library only."""

import argparse
import functools
import logging
import math
import os
import sys
from typing import Callable, Optional, Tuple, Union

from ..errors import InputError, one_line
from .files import check_input_dir, check_input_file

LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


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


def script_main(func: Callable = None, *,
                prog: Union[str, Callable[[], str], None] = None):
    """Decorator for a script's ``main(argv=None)``: an ``InputError`` (and an argparse error,
    which exits 2 by itself) becomes one line ``prog: error: MESSAGE`` on stderr and the return
    value ``err.exit_status``; anything else is a bug and keeps its traceback. ``prog``: the
    name, or a function that gives it when the error is printed (a command's name depends on
    how it was started, ``ssan_plugin.commands.program_name``); by default
    ``os.path.basename(sys.argv[0])``."""

    def wrap(main):
        @functools.wraps(main)
        def wrapper(*args, **kwargs):
            try:
                return main(*args, **kwargs)
            except InputError as err:
                name = ((prog() if callable(prog) else prog)
                        or os.path.basename(sys.argv[0]) or "script")
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


input_file_arg = _argparse_check(check_input_file)
input_dir_arg = _argparse_check(check_input_dir)


def named_path(what: str = "FILE", default_name: Optional[Callable[[str], str]] = None):
    """An argparse type: ``NAME=PATH`` -> ``(name, path)``, split at the first ``=``; with
    ``default_name``, a bare ``PATH`` is named ``default_name(PATH)``. Anything else (an empty
    name or path, no ``=`` without a default) is "expected NAME=WHAT, got ..."."""
    form = f"NAME={what} or {what}" if default_name else f"NAME={what}"

    def parse(text: str) -> Tuple[str, str]:
        name, sep, path = text.partition("=")
        if not sep and default_name is not None:
            name, path = default_name(text), text
        if not sep and default_name is None or not name or not path:
            raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
        return name, path

    return parse


# ---------------------------------------------------------------- outputs, decoding limits

def add_overwrite(parser, what: str = "an existing output file") -> None:
    """``--overwrite``: without it :func:`~ssan_plugin.cli.files.guard_outputs` refuses an
    existing output file or a non-empty output folder (README, "Errors")."""
    parser.add_argument("--overwrite", action="store_true",
                        help=f"replace {what} (refused without it); an input is never replaced")


def check_decoding_limits(parser, max_len_a: float, max_len_b: int) -> None:
    """fairseq's beam search asserts ``min_len (1) <= int(max_len_a * src_len + max_len_b)``,
    where ``src_len`` (the padded source width, end of sentence included) can be 1: refuse
    limits that leave no room for one target token, at parse time, as argparse does."""
    if int(max_len_a * 1 + max_len_b) < 1:
        parser.error(f"argument --max-len-b: must be >= 1 when --max-len-a is below 1 (the "
                     f"longest output, --max-len-a x source length + --max-len-b, must allow "
                     f"one token even for a one-token source), got --max-len-a {max_len_a:g} "
                     f"and --max-len-b {max_len_b}")
