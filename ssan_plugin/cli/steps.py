"""Steps a command runs: child processes and library calls whose failure is one line naming
the step and the log file that holds its whole output. Standard library only."""

import os
import subprocess
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence

from .errors import InputError, StepError, one_line

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
