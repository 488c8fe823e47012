"""ssan_plugin/srl/conll2005.py: the CoNLL-2005 reader (prefix, pair, gzip) on hand-built
snippets, and its errors (file and line)."""

import gzip

import pytest

from ssan_plugin.srl.conll2005 import read_conll2005, resolve_conll2005
from ssan_plugin.srl.corpus import CoNLLFormatError


WORDS05 = "The\nman\nleft\n\nIt\nrained\nhard\n"


PROPS05 = "-      (A0*\n-      *)\nleave  (V*)\n\n-  *   *\nrain (V*) *\ngo * (V*)\n"


def test_conll2005_prefix_pair_and_gzip(tmp_path):
    (tmp_path / "d.words").write_text(WORDS05)
    with gzip.open(tmp_path / "d.props.gz", "wt") as f:
        f.write(PROPS05)
    words, props = resolve_conll2005(str(tmp_path / "d"))
    assert words.endswith("d.words") and props.endswith("d.props.gz")
    assert resolve_conll2005(f"{words},{props}") == (words, props)
    s1, s2 = read_conll2005(words, props)
    assert s1.words == ("The", "man", "left") and s2.words == ("It", "rained", "hard")
    (p,) = s1.propositions
    assert (p.position, p.lemma, p.bio()[0]) == (2, "leave", ["B-A0", "I-A0", "B-V"])
    assert [(q.position, q.lemma, q.bio()[0]) for q in s2.propositions] == [
        (1, "rain", ["O", "B-V", "O"]), (2, "go", ["O", "O", "B-V"])]
    with pytest.raises(FileNotFoundError, match="neither"):
        resolve_conll2005(str(tmp_path / "missing"))


def _err05(tmp_path, words, props):
    (tmp_path / "w.words").write_text(words)
    (tmp_path / "w.props").write_text(props)
    with pytest.raises(CoNLLFormatError) as info:
        read_conll2005(str(tmp_path / "w.words"), str(tmp_path / "w.props"))
    return str(tmp_path / "w.words"), str(tmp_path / "w.props"), str(info.value)


@pytest.mark.parametrize(
    "words, props, which, line, needle",
    [
        ("a\nb\n", "-  (A0*\nrun (V*)\n", "props", 1, "never closed"),
        ("a\nb\n", "-  (A0*)\nrun (V*))\n", "props", 2, "never opened"),
        ("a\nb\n", "-  (A0*)\nrun (V*) *\n", "props", 2, "has 2"),
        ("a\nb\n\nc\n", "-  (A0*)\nrun (V*)\n\nx y\n", "props", 4, "argument column 1"),
        ("a\nb\n", "-  (A0*) *\nrun (V*) *\n", "props", 1, "column 2 has no predicate"),
        ("a\nb\n", "- (A0*)\nrun *\n", "props", 2, "has no (V*) phrase"),
        ("a\nb\n", "run (A0*)\ngo (V*)\n", "props", 2, "has no argument column"),
        ("a\nb\nc\n", "-  (A0*)\nrun (V*)\n", "props", 1, "3 words"),
        ("a\nb\n\nc\n", "-  (A0*)\nrun (V*)\n", "words", 4, "no counterpart"),
        ("a x\nb\n", "-  (A0*)\nrun (V*)\n", "words", 2, "has 2"),
    ],
)
def test_conll2005_errors_name_file_and_line(tmp_path, words, props, which, line, needle):
    wpath, ppath, message = _err05(tmp_path, words, props)
    path = wpath if which == "words" else ppath
    assert message.startswith(f"{path}:{line}: "), message
    assert needle in message, message
