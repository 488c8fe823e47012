"""The project's error types and their one-line form (the conventions: ``ssan_plugin.cli``).

``InputError`` is bad input (exit status 2), ``PipelineError`` bad data or files (the same,
named for what the pipelines read); ``OptionError`` a plugin option its rule refuses,
also a ValueError for callers in Python; ``StepError`` a failed child process or library step
(exit status 1). Standard library only.
"""

import os
import sys

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
    line ``PROG: error: MESSAGE`` on stderr and exit status 2 (no traceback), also where fairseq
    re-raised it as a plain Exception (:func:`option_error_in`); the same for
    fairseq's own refusal of an input longer than the model's positions (fairseq-interactive,
    fairseq-generate: :func:`is_fairseq_size_error`), whose message already names the way out.
    Installed once, when the plugin is imported (``--user-dir``); other exceptions reach the
    previous hook."""
    previous = sys.excepthook
    if getattr(previous, "ssan_plugin_option_hook", False):
        return

    def hook(exc_type, exc, tb):
        exc = option_error_in(exc) or exc
        if isinstance(exc, OptionError) or is_fairseq_size_error(exc):
            prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
            sys.stdout.flush()
            sys.stderr.write(f"{prog}: error: {one_line(exc)}\n")
            sys.stderr.flush()
            os._exit(getattr(exc, "exit_status", 2))
        previous(exc_type, exc, tb)

    hook.ssan_plugin_option_hook = True
    sys.excepthook = hook


def option_error_in(exc: BaseException):
    """The OptionError that a plain Exception of fairseq's wraps, if any (its trainer re-raises a
    refused checkpoint as "Cannot load model parameters from checkpoint ...", the plugin's reason
    as its context); else None."""
    seen = 0
    while type(exc) is Exception and seen < 8:
        exc = exc.__cause__ or exc.__context__
        seen += 1
        if isinstance(exc, OptionError):
            return exc
    return None


def is_fairseq_size_error(exc: BaseException) -> bool:
    """Whether ``exc`` is fairseq's refusal of a sample longer than the model's positions
    (``fairseq.data.data_utils.filter_by_size``: a plain Exception, "Size of sample #N is
    invalid ... skip this example with --skip-invalid-size-inputs-valid-test")."""
    return type(exc) is Exception and str(exc).startswith("Size of sample #") and \
        "--skip-invalid-size-inputs-valid-test" in str(exc)


class PipelineError(InputError):
    """A problem with the user's data or files (a corpus, a plan, an archive, a checkpoint's
    inputs): one line naming the file and the problem, exit status 2."""


class StepError(InputError):
    """A child process or library step failed; the message names the step and its log."""

    exit_status = 1


def one_line(message) -> str:
    """The message on one line (line breaks and the indentation after them become one space)."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())
