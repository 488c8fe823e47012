"""ssan_plugin/srl/io.py: CoNLL text read as UTF-8 with universal newlines and a byte-order mark
dropped, gzip read and written by name, invalid UTF-8 an error naming the file."""

import gzip

import pytest

from ssan_plugin.cli.errors import InputError
from ssan_plugin.srl.io import open_text


def test_read_plain_and_gzip_alike(tmp_path):
    text = "I\tPRP\r\nsaw\tVBD\rleft\tVBD\n\nÜber\tIN\n"
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    expected = ["I\tPRP\n", "saw\tVBD\n", "left\tVBD\n", "\n", "Über\tIN\n"]
    for name in ("a.txt", "a.txt.gz"):
        with open_text(str(tmp_path / name)) as f:
            assert list(f) == expected, name


def test_write_plain_and_gzip(tmp_path):
    for name in ("out.props", "out.props.gz"):
        with open_text(str(tmp_path / name), "w") as f:
            f.write("ţară\n")
        with open_text(str(tmp_path / name)) as f:
            assert f.read() == "ţară\n"
    assert gzip.decompress((tmp_path / "out.props.gz").read_bytes()) == "ţară\n".encode("utf-8")
    assert (tmp_path / "out.props").read_bytes() == "ţară\n".encode("utf-8")


def test_bad_files_name_themselves(tmp_path):
    (tmp_path / "bad.words").write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(InputError, match="bad.words"):
        open_text(str(tmp_path / "bad.words"))
    with pytest.raises(InputError, match="missing.words"):
        open_text(str(tmp_path / "missing.words"))
