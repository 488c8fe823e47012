"""decode.run_with_progress: fairseq-generate's output read as it comes (for the progress bar)
loses nothing: every stdout line, stderr apart, the exit status."""

import sys

from ssan_plugin.translation.decode import parse_generate_output, run_with_progress


def test_output_stderr_and_status_survive_streaming():
    script = ("import sys\n"
              "for i in (2, 0, 1):\n"
              "    print(f'S-{i}\\tsrc {i}'); print(f'H-{i}\\t-0.5\\thyp {i}')\n"
              "print('warning', file=sys.stderr); sys.exit(3)\n")
    code, out, err = run_with_progress([sys.executable, "-c", script], 3, "test")
    assert code == 3 and err.strip() == "warning"
    assert parse_generate_output(out, 3) == ["hyp 0", "hyp 1", "hyp 2"]
