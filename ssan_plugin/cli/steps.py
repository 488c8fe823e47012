"""Steps a command runs: child processes and library calls whose failure is one line naming
the step and the log file that holds its whole output. Standard library only."""

import os
import subprocess
import tempfile
import traceback
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Sequence, Type

from ..errors import InputError, StepError, one_line

def step_log_path(step: str, log_dir=None) -> Path:
    """A new log file for ``step`` (named by its first 40 characters): in ``log_dir``
    (created) or the system's temp directory."""
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in step).strip("_")[:40] \
        or "step"
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


def run_step(step: str, command: Sequence, log_path=None, on_line: Callable = None, *,
             append: bool = False, header: str = "", stderr_apart: bool = False,
             error: Type[Exception] = StepError, **popen_kwargs) -> str:
    """Run a child process, stdout and stderr together into ``log_path`` (default: a new temp
    file, removed when the step succeeds) and, line by line, to ``on_line``; returns the output.
    A non-zero exit raises ``error`` (StepError): ``STEP failed (exit N): LAST LINE OF OUTPUT;
    full log: PATH``.

    The log is flushed line by line (it is what one tails while a long step runs); ``append``
    adds to it instead of replacing it, ``header`` is written first (not part of the output).
    ``stderr_apart``, for a child whose stdout is parsed: stderr is not streamed (a write to it
    cannot land inside a stdout line) but added to the log and the output, after a line break,
    once the child has exited; ``on_line`` then sees stdout only. A child still running when the
    step ends otherwise (``on_line`` raised, Ctrl-C) is killed, never left without its reader.
    ``popen_kwargs`` (``cwd``, ``env``, ...) go to :class:`subprocess.Popen`."""
    own_log = log_path is None
    log_path = Path(log_path) if log_path is not None else step_log_path(step)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    output = []
    with open(log_path, "a" if append else "w", encoding="utf-8") as log, \
            (tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
             if stderr_apart else nullcontext()) as err:
        log.write(header)
        log.flush()
        try:
            proc = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE,
                                    stderr=err if stderr_apart else subprocess.STDOUT,
                                    text=True, errors="replace", bufsize=1, **popen_kwargs)
        except OSError as exc:
            if own_log:
                log_path.unlink(missing_ok=True)
            raise error(f"{step} could not start {command[0]}: {exc.strerror}") from None
        try:
            for line in proc.stdout:
                output.append(line)
                log.write(line)
                log.flush()
                if on_line is not None:
                    on_line(line)
            returncode = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if stderr_apart:
            err.seek(0)
            rest = err.read()
            if rest:
                output.append("\n" + rest)
                log.write("\n" + rest)
    text = "".join(output)
    if returncode != 0:
        raise error(f"{step} failed (exit {returncode}): {_last_line(text)}; "
                    f"full log: {log_path}")
    if own_log:
        log_path.unlink(missing_ok=True)
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
