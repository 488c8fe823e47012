"""ssan_plugin/translation/textio.py: strict UTF-8 reading that names the file and line."""

import pytest

from ssan_plugin.translation.textio import PipelineError, read_lines


def test_read_lines_strict_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.de"
    path.write_bytes("eins\nzwei\n".encode() + b"dr\xe4i\n")
    with pytest.raises(PipelineError, match=r"bad\.de: line 3 is not valid UTF-8"):
        read_lines(path)
    ok = tmp_path / "ok.en"
    ok.write_bytes("\ufeffa\r\nb\n\nc".encode())
    assert read_lines(ok) == ["a", "b", "", "c"]
