"""The project's command-line tools: one module per command, each with ``main(argv=None)``
returning the exit status.

Installed as console scripts named ``ssan-`` + the module name with dashes (``evaluate_bleu``
-> ``ssan-evaluate-bleu``, listed in setup.py); ``python -m ssan_plugin.commands.evaluate_bleu``
runs the same code without the installed scripts (the runners use that form). A command imports
fairseq and torch only on the paths that need them, so scoring text files starts in about a
second; a command that loads a checkpoint calls ``ssan_plugin.register()`` first. A command
names itself, in its usage line and messages, as it was started (:func:`program_name`), through
its module-level ``prog = command_prog(__file__)``.
"""

import functools
import os
import sys
from typing import Callable

PACKAGE = __name__


def console_name(module: str) -> str:
    """``ssan_plugin.commands.evaluate_bleu`` (or ``evaluate_bleu``) -> ``ssan-evaluate-bleu``."""
    return "ssan-" + module.rpartition(".")[2].replace("_", "-")


def module_command(name: str) -> list:
    """The interpreter arguments that run command ``name``: ``["-m", "ssan_plugin.commands.NAME"]``."""
    return ["-m", f"{PACKAGE}.{name}"]


def program_name(command_file: str) -> str:
    """The name command ``command_file`` (its module's ``__file__``) goes by in its usage line
    and messages: how it was started, ``os.path.basename(sys.argv[0])``: ``ssan-evaluate-bleu``
    for the console script, ``evaluate_bleu.py`` for ``python -m
    ssan_plugin.commands.evaluate_bleu``. Its ``main(argv)`` called in-process by another
    program (a test, a notebook) finds that program's name in ``sys.argv[0]``; the command is
    then named by its module file, ``evaluate_bleu.py``."""
    stem = os.path.splitext(os.path.basename(command_file))[0]
    started = os.path.basename(sys.argv[0]) if sys.argv else ""
    return started if started in (console_name(stem), f"{stem}.py") else f"{stem}.py"


def command_prog(command_file: str) -> Callable[[], str]:
    """A command module's ``prog``: called, :func:`program_name` of ``command_file``, looked up
    at each call (the same module runs as a console script, with ``python -m`` or in-process)."""
    return functools.partial(program_name, command_file)
