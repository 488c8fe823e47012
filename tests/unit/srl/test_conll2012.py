"""ssan_plugin/srl/conll2012.py: the CoNLL-2012 reader on hand-built snippets, and its errors
(file and line)."""

import pytest

from ssan_plugin.srl.conll2012 import read_conll2012
from ssan_plugin.srl.corpus import CoNLLFormatError


DOC = "bc/x/00/doc"


def row12(i, word, lemma="-", frameset="-", args=()):
    return "\t".join([DOC, "0", str(i), word, "XX", "*", lemma, frameset, "-", "-", "*", *args, "-"])


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
