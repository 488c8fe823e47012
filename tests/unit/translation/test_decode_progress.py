"""decode.run_with_progress: fairseq-generate's output read as it comes (for the progress bar)
through cli.steps.run_step loses nothing: every stdout line, stderr apart and logged after it,
a failure as one line naming the log."""

import sys

import pytest

from ssan_plugin.errors import StepError
from ssan_plugin.translation.decode import parse_generate_output, run_with_progress

LINES = ("import sys\n"
         "print('warning', file=sys.stderr, flush=True)\n"
         "for i in (2, 0, 1):\n"
         "    print(f'S-{i}\\tsrc {i}'); print(f'H-{i}\\t-0.5\\thyp {i}')\n")


def test_output_and_stderr_survive_streaming(tmp_path):
    log_path = tmp_path / "gen.log"
    out, log = run_with_progress([sys.executable, "-c", LINES], 3, "test", log_path=log_path)
    assert "warning" not in out
    assert parse_generate_output(out, 3) == ["hyp 0", "hyp 1", "hyp 2"]
    assert log == out + "\nwarning\n" == log_path.read_text()


def test_failure_is_one_line_naming_the_log(tmp_path):
    log_path = tmp_path / "gen.log"
    with pytest.raises(StepError) as info:
        run_with_progress([sys.executable, "-c", LINES + "sys.exit(3)\n"], 3, "test",
                          "fairseq-generate with ckpt.pt", log_path)
    assert str(info.value) == (f"fairseq-generate with ckpt.pt failed (exit 3): warning; "
                               f"full log: {log_path}")
    assert "H-2\t-0.5\thyp 2" in log_path.read_text()
