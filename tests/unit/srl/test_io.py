"""ssan_plugin/srl/io.py: CoNLL text read as UTF-8 with universal newlines and a byte-order mark
dropped, gzip read and written by name, invalid UTF-8 an error naming the file; sentence blocks
split at blank lines, with their line numbers, ragged rows an error naming the line."""

import gzip

import pytest

from ssan_plugin.errors import InputError
from ssan_plugin.srl.corpus import CoNLLFormatError
from ssan_plugin.srl.io import open_text, sentence_blocks


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



def test_sentence_blocks_rows_and_lines(tmp_path, caplog):
    path = tmp_path / "a.conll"
    path.write_text("\n\na 1\nb 2\n\n\n# c 3\nd 4\n#x\ne 5\n")
    # blank lines in a row are one break; '#' lines are words unless comments=True
    with pytest.raises(CoNLLFormatError,
                       match=r"a.conll:8: 2 columns, but the sentence starting at line 7 has 3"):
        list(sentence_blocks(str(path)))
    assert list(sentence_blocks(str(path), comments=True)) == [
        ([["a", "1"], ["b", "2"]], [3, 4]), ([["d", "4"]], [8]), ([["e", "5"]], [10])]
    # srl-eval.pl's reading: an empty sentence ends the file (here the blank first line); what
    # is left unread is said
    with caplog.at_level("WARNING", logger="ssan_plugin.srl.io"):
        assert list(sentence_blocks(str(path), end_at_empty=True)) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:1: an empty sentence ends the file, as srl-eval.pl reads it: 6 later non-blank "
        "lines are not read"]
    caplog.clear()
    path.write_text("a 1\n\nb 2\n\n\nc 3\n")
    assert list(sentence_blocks(str(path), end_at_empty=True)) == [([["a", "1"]], [1]),
                                                                    ([["b", "2"]], [3])]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:5: an empty sentence ends the file, as srl-eval.pl reads it: 1 later non-blank "
        "lines are not read"]
    caplog.clear()
    assert [lines for _, lines in sentence_blocks(str(path))] == [[1], [3], [6]]
    path.write_text("a 1\n\nb 2\n\n\n")  # nothing after the empty sentence: nothing said
    assert len(list(sentence_blocks(str(path), end_at_empty=True))) == 2 and not caplog.records


def test_sentence_blocks_min_columns(tmp_path):
    path = tmp_path / "b.conll"
    path.write_text("a 1 x\nb 2\n")
    with pytest.raises(CoNLLFormatError,
                       match=r"b.conll:2: expected at least 3 columns \(L layout\), found 2"):
        list(sentence_blocks(str(path), min_columns=3, layout="L"))
