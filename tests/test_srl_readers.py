"""CoNLL-2012 / CoNLL-2005 readers on hand-built snippets, and their errors (file and line)."""

import gzip

import pytest

from ssan_plugin.srl.brackets import bio_to_brackets, brackets_to_bio
from ssan_plugin.srl.conll2005 import read_conll2005, resolve_conll2005
from ssan_plugin.srl.conll2012 import read_conll2012
from ssan_plugin.srl.corpus import CoNLLFormatError

DOC = "bc/x/00/doc"


def row12(i, word, lemma="-", frameset="-", args=()):
    return "\t".join([DOC, "0", str(i), word, "XX", "*", lemma, frameset, "-", "-", "*", *args, "-"])


# line 1: #begin; sentence 1 = lines 2-8 (two predicates); line 9 blank;
# sentence 2 = lines 10-11 (no predicate); line 12 #end
CONLL2012 = "\n".join([
    "#begin document (bc/x/00/doc); part 000",
    row12(0, "The", args=["(ARG0*", "*"]),
    row12(1, "man", args=["*)", "*"]),
    row12(2, "who", args=["(R-ARG0*)", "*"]),
    row12(3, "left", "leave", "leave.01", ["(V*)", "*"]),
    row12(4, "gave", args=["*", "(V*"]),  # multi-word nominal/light predicate "gave up"
    row12(5, "up", "give_up", "give_up.01", ["*", "*)"]),
    row12(6, "early", args=["*", "(C-ARG1*)"]),
    "",
    row12(0, "Hello"),
    row12(1, "!"),
    "#end document",
    "",
])


def test_conll2012_instances(tmp_path):
    path = tmp_path / "a.gold_conll"
    path.write_text(CONLL2012)
    s1, s2 = read_conll2012(str(path))
    assert s1.words == ("The", "man", "who", "left", "gave", "up", "early")
    assert s1.line == 2 and s2.line == 10
    (p1, p2), () = s1.propositions, s2.propositions
    # predicate = the row with a frameset id; its lemma is shown in the props target column
    assert (p1.position, p1.lemma, p2.position, p2.lemma) == (3, "leave", 5, "give_up")
    assert p1.bio() == (["B-ARG0", "I-ARG0", "B-R-ARG0", "B-V", "O", "O", "O"], 0)
    # the predicate word "up" is inside the V span (I-V); C- is kept as a label
    assert p2.bio() == (["O", "O", "O", "O", "B-V", "I-V", "B-C-ARG1"], 0)
    assert s1.targets() == ["-", "-", "-", "leave", "-", "give_up", "-"]
    assert s2.targets() == ["-", "-"]


WORDS05 = "The\nman\nleft\n\nIt\nrained\nhard\n"
PROPS05 = "-      (A0*\n-      *)\nleave  (V*)\n\n-  *   *\nrain (V*) *\ngo * (V*)\n"
# sentence 2: "rained" has no argument besides V; "hard" is a second predicate


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


def test_brackets_round_trip_and_embedded():
    tags = ["(A0*", "*)", "(V*)", "(C-A0*)", "*"]
    bio, dropped = brackets_to_bio(tags)
    assert (bio, dropped) == (["B-A0", "I-A0", "B-V", "B-C-A0", "O"], 0)
    assert bio_to_brackets(bio) == tags
    # BIO cannot hold an embedded phrase: the outermost is kept and the drop is counted
    assert brackets_to_bio(["(A1*", "(R-A1*)", "*)"]) == (["B-A1", "I-A1", "I-A1"], 1)
    with pytest.raises(ValueError, match="invalid BIO"):
        bio_to_brackets(["I-A0", "O"])


def _err12(tmp_path, rows):
    path = tmp_path / "bad.gold_conll"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(CoNLLFormatError) as info:
        read_conll2012(str(path))
    return str(path), str(info.value)


GOOD = [row12(0, "I", args=["(ARG0*)"]), row12(1, "run", "run", "run.01", ["(V*)"])]


@pytest.mark.parametrize(
    "rows, line, needle",
    [
        # malformed brackets
        ([row12(0, "I", args=["(ARG0*"]), row12(1, "run", "run", "run.01", ["(V*)"])],
         1, "never closed"),
        ([row12(0, "I", args=["*)"]), row12(1, "run", "run", "run.01", ["(V*)"])],
         1, "never opened"),
        ([row12(0, "I", args=["(ARG0*ARG1)"]), row12(1, "run", "run", "run.01", ["(V*)"])],
         1, "closes 'ARG1'"),
        (["", row12(0, "I", args=["ARG0"]), row12(1, "run", "run", "run.01", ["(V*)"])],
         2, "malformed argument tag"),
        # column-count mismatch inside a sentence
        ([GOOD[0], GOOD[1], row12(2, "fast", args=["*", "*"])], 3, "has 13"),
        ([GOOD[0], "\t".join(GOOD[1].split("\t")[:5])], 2, "at least 12 columns"),
        # predicate columns without their predicate
        ([row12(0, "I", args=["(ARG0*)"]), row12(1, "run", args=["(V*)"])],
         1, "argument column 1 has no predicate"),
        ([row12(0, "I", "I", "i.01", ["(ARG0*)"]), row12(1, "run", "run", "run.01", ["(V*)"])],
         2, "has no argument column"),
        ([row12(0, "I", args=["(ARG0*)"]), row12(1, "run", "run", "run.01", ["*"])],
         2, "has no (V*) phrase"),
        ([row12(0, "I", args=["(V*)"]), row12(1, "run", "run", "run.01", ["*"])],
         2, "outside the (V*) phrase"),
    ],
)
def test_conll2012_errors_name_file_and_line(tmp_path, rows, line, needle):
    path, message = _err12(tmp_path, rows)
    assert message.startswith(f"{path}:{line}: "), message
    assert needle in message, message


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
