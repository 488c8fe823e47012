"""ssan_plugin/cli/steps.py: run_step's options for the project's other child processes (the
experiment runners append to a log after a header, decoding parses stdout with stderr apart,
the archive runner raises its own error type), its temp log, and no child left running.
(The one-line failure itself: tests/unit/cli/test_cli.py.)"""

import os
import sys
import tempfile

import pytest

from ssan_plugin import errors
from ssan_plugin.cli import steps


def python(code):
    return [sys.executable, "-c", code]


def test_append_after_a_header_and_flush_line_by_line(tmp_path):
    log = tmp_path / "train.log"
    seen = []

    def on_line(line):  # the line is in the log (flushed) before the callback sees it
        seen.append((line, log.read_text().endswith(line)))

    assert steps.run_step("a", python("print('one')"), log, on_line, append=True,
                          header="$ first\n") == "one\n"
    assert steps.run_step("b", python("print('two')"), log, append=True,
                          header="$ second\n") == "two\n"
    assert log.read_text() == "$ first\none\n$ second\ntwo\n"
    assert seen == [("one\n", True)]
    steps.run_step("c", python("print('three')"), log)  # default: replaced
    assert log.read_text() == "three\n"


def test_stderr_apart_is_logged_after_stdout(tmp_path):
    log = tmp_path / "generate.log"
    code = ("import sys; print('warn', file=sys.stderr, flush=True); print('H-0\\t-1\\thyp'); "
            "print('done')")
    seen = []
    text = steps.run_step("g", python(code), log, seen.append, stderr_apart=True)
    assert seen == ["H-0\t-1\thyp\n", "done\n"]  # stdout only, whole lines
    assert text == log.read_text() == "H-0\t-1\thyp\ndone\n\nwarn\n"
    # sys.exit(TEXT) prints TEXT on stderr and exits 1: the last line is stderr's
    with pytest.raises(errors.StepError, match=r"^g failed \(exit 1\): the reason; full log: "):
        steps.run_step("g", python("import sys; print('out'); sys.exit('the reason')"), log,
                       stderr_apart=True)
    assert log.read_text() == "out\n\nthe reason\n"


def test_error_type_and_own_temp_log(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    class Failed(RuntimeError):
        pass

    assert steps.run_step("ok step", python("print('x')")) == "x\n"
    assert list(tmp_path.iterdir()) == []  # a temp log is removed when the step succeeds
    with pytest.raises(Failed) as info:
        steps.run_step("bad step", python("import sys; print('why'); sys.exit(4)"), error=Failed)
    message = str(info.value)
    assert message.startswith("bad step failed (exit 4): why; full log: ")
    (kept,) = tmp_path.iterdir()  # kept on failure, named in the message
    assert message.endswith(str(kept)) and kept.read_text() == "why\n"
    with pytest.raises(Failed, match="could not start"):
        steps.run_step("missing", [str(tmp_path / "no-such-program")], error=Failed)
    assert list(tmp_path.iterdir()) == [kept]


def test_a_child_never_outlives_its_step(tmp_path):
    """on_line raising (as Ctrl-C would) ends the step: the child is killed and reaped, not
    left running without its reader (a resumed experiment must not race it)."""
    pids = []

    def on_line(line):
        pids.append(int(line))
        raise RuntimeError("stop")

    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    with pytest.raises(RuntimeError, match="stop"):
        steps.run_step("sleeper", python(code), tmp_path / "s.log", on_line)
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


def test_temp_log_names_are_short():
    path = steps.step_log_path("fairseq-generate with /" + "x/" * 200 + "checkpoint_best.pt")
    try:
        assert path.name.startswith("ssan_plugin-fairseq-generate_with__x_x_")
        assert len(path.name) < 100
    finally:
        path.unlink()
