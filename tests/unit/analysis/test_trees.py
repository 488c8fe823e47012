"""ssan_plugin/analysis/trees.py: CoNLL-2012 trees, the split-point method and span scoring on
hand-made trees and matrices."""

import itertools

import numpy as np
import pytest

from conftest import require_shared
from ssan_plugin.analysis.trees import (SpanScore, gold_spans, read_parsed_conll,
                                        right_branching_spans, score_spans, scored,
                                        split_point_spans, top_constituents, tree_depth)
from ssan_plugin.translation.textio import PipelineError

# (word, POS, parse bit): "(TOP (S (NP The cat) (VP sat (PP on (NP the mat))) .))"
SENT1 = [("The", "DT", "(TOP(S(NP*"), ("cat", "NN", "*)"), ("sat", "VBD", "(VP*"),
         ("on", "IN", "(PP*"), ("the", "DT", "(NP*"), ("mat", "NN", "*)))"), (".", ".", "*))")]
# "(TOP (FRAG (NP (NP Bush) , (NP friend)) !))" : a unary-free tree with nested NPs
SENT2 = [("Bush", "NNP", "(TOP(FRAG(NP(NP*)"), (",", ",", "*"), ("friend", "NN", "(NP*))"),
         ("!", ".", "*))")]


def conll(sentences, parse=True):
    lines = ["#begin document (x); part 000"]
    for s in sentences:
        for i, (word, pos, bit) in enumerate(s):
            lines.append("\t".join(["doc", "0", str(i), word, pos, bit if parse else "-",
                                    "-", "-", "-", "-", "*", "-"]))
        lines.append("")
    lines.append("#end document")
    return "\n".join(lines) + "\n"


@pytest.fixture
def parsed(tmp_path):
    path = tmp_path / "x.gold_conll"
    path.write_text(conll([SENT1, SENT2]))
    return read_parsed_conll(path)


def test_read_tree(parsed):
    s1, s2 = parsed
    assert s1.words == ("The", "cat", "sat", "on", "the", "mat", ".")
    assert s1.tags[2] == "VBD" and s1.line == 2
    spans = sorted((p.start, p.end, p.type) for p in s1.phrases())
    assert spans == [(0, 1, "NP"), (0, 6, "S"), (0, 6, "TOP"), (2, 5, "VP"), (3, 5, "PP"),
                     (4, 5, "NP")]


def naive_depth(bits):
    """Depth by counting brackets along the sentence: opens minus closes before each word."""
    depth, best = 0, 0
    for bit in bits:
        opens = bit.count("(") - bit.count("(TOP")
        depth += opens
        best = max(best, depth)
        depth -= bit.count(")")
    return best


def test_tree_depth_against_a_direct_count(parsed):
    s1, s2 = parsed
    assert tree_depth(s1) == 4  # S > VP > PP > NP over "the mat"
    assert tree_depth(s2) == 3  # FRAG > NP > NP
    # the direct count: TOP's closing bracket is the last ')' of the sentence
    for s, raw in ((s1, SENT1), (s2, SENT2)):
        assert tree_depth(s) == naive_depth([b for _, _, b in raw])


def test_top_constituents(parsed):
    s1, s2 = parsed
    assert top_constituents(s1) == "NP_VP_."  # the bare word '.' gives its POS
    assert top_constituents(s2) == "NP_."


def test_top_constituents_without_a_single_root(tmp_path):
    # TOP with two children: read at TOP's level
    sent = [("Hi", "UH", "(TOP(INTJ*)"), ("there", "RB", "(ADVP*))")]
    path = tmp_path / "y.gold_conll"
    path.write_text(conll([sent]))
    (s,) = read_parsed_conll(path)
    assert top_constituents(s) == "INTJ_ADVP"
    assert tree_depth(s) == 1


def test_gold_spans_punctuation_removed(parsed):
    s1, s2 = parsed
    keep = [t not in (".", ",") for t in s1.tags]
    # over 6 words: NP(0,1) VP(2,5) PP(3,5) NP(4,5); S=(0,5) is the whole sentence now
    assert gold_spans(s1, keep) == {(0, 1), (2, 5), (3, 5), (4, 5)}
    keep2 = [t not in (".", ",") for t in s2.tags]
    # Bush friend: NP(0,1) is the whole sentence; NP(Bush), NP(friend) single words
    assert gold_spans(s2, keep2) == set()


def brute_force_split_point(a):
    """Recursive definition, written directly: all spans of the induced tree."""
    a = np.asarray(a)

    def rec(i, j):
        if j <= i:
            return set()
        best, best_k = None, None
        for k in range(i, j):
            cross = sum(a[x, y] + a[y, x] for x in range(i, k + 1) for y in range(k + 1, j + 1))
            if best is None or cross < best - 1e-12:
                best, best_k = cross, k
        return {(i, j)} | rec(i, best_k) | rec(best_k + 1, j)

    return rec(0, len(a) - 1)


def test_split_point_hand_made():
    # two blocks {0,1} and {2,3} that attend within; block {2,3} splits further
    a = np.array([[0.0, 0.9, 0.05, 0.05],
                  [0.9, 0.0, 0.05, 0.05],
                  [0.0, 0.1, 0.0, 0.9],
                  [0.1, 0.0, 0.5, 0.4]])
    assert split_point_spans(a) == {(0, 3), (0, 1), (2, 3)}
    # a chain attending to the right neighbour only: cheapest split is always the first gap
    # that cuts no link... here each word attends strongly to the next except 1 -> 2
    b = np.zeros((5, 5))
    b[0, 1], b[2, 3], b[3, 4] = 1.0, 1.0, 0.5
    assert split_point_spans(b) == {(0, 4), (0, 1), (2, 4), (2, 3)}
    # ties: the leftmost split
    assert split_point_spans(np.zeros((3, 3))) == {(0, 2), (1, 2)}
    assert split_point_spans(np.zeros((1, 1))) == set()


def test_split_point_equals_the_direct_recursion_on_random_matrices():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 8, 11):
        for _ in range(5):
            a = rng.random((n, n))
            assert split_point_spans(a) == brute_force_split_point(a)


def test_right_branching_and_scored():
    assert right_branching_spans(4) == {(1, 3), (2, 3)}
    assert right_branching_spans(2) == set()
    assert scored({(0, 4), (1, 1), (1, 3)}, 5) == {(1, 3)}


def test_span_score_micro_hand_made(parsed):
    s1, _ = parsed
    # words after punctuation removal: The cat sat on the mat (6); gold {(0,1),(2,5),(3,5),(4,5)}
    # an attention that makes the split-point tree ((The cat) (sat (on (the mat)))): perfect
    a = np.zeros((7, 7))
    for x, y in [(0, 1), (2, 3), (3, 4), (4, 5), (6, 0)]:
        a[x, y] = 1.0
    # (0,5): cross(1) = 0 -> (0,1) (2,5); (2,5): cross 1, 1, 1 -> leftmost -> (3,5) -> (4,5);
    # the row of '.' (index 6) is dropped with the word
    score, base = SpanScore(), SpanScore()
    score_spans(s1, a, score, base)
    predicted = scored(split_point_spans(a[:6, :6]), 6)
    assert predicted == {(0, 1), (2, 5), (3, 5), (4, 5)}
    assert (score.matched, score.predicted, score.gold) == (4, 4, 4)
    assert score.f1 == pytest.approx(100.0)
    # right branching over 6 words: (1,5) (2,5) (3,5) (4,5): matches (2,5) (3,5) (4,5)
    assert (base.matched, base.predicted, base.gold) == (3, 4, 4)
    assert base.precision == pytest.approx(75.0) and base.recall == pytest.approx(75.0)
    # micro: a second sentence with no match adds to the denominators only
    score.add({(0, 2)}, {(1, 2), (0, 1)})
    assert score.precision == pytest.approx(100 * 4 / 5)
    assert score.recall == pytest.approx(100 * 4 / 6)
    p, r = 4 / 5, 4 / 6
    assert score.f1 == pytest.approx(100 * 2 * p * r / (p + r))
    with pytest.raises(ValueError, match="attention of shape"):
        score_spans(s1, np.zeros((3, 3)), score)


def test_conll_without_parse_bits_is_named(tmp_path):
    path = tmp_path / "skel.gold_conll"
    path.write_text(conll([SENT1], parse=False))
    with pytest.raises(PipelineError, match=r"skel.gold_conll:2: no parse bit"):
        read_parsed_conll(path)
    empty = tmp_path / "empty.gold_conll"
    empty.write_text("#begin document (x)\n#end document\n")
    with pytest.raises(PipelineError, match="empty CoNLL file"):
        read_parsed_conll(empty)
    with pytest.raises(PipelineError, match="missing CoNLL file"):
        read_parsed_conll(tmp_path / "nope")


def test_real_ewt_trees_against_the_raw_parse_bits():
    from ssan_plugin.srl.conll2012 import read_conll2012_rows

    path = require_shared("srl/ewt/dev.gold_conll")
    sentences = read_parsed_conll(path)
    rows = read_conll2012_rows(str(path))
    assert len(sentences) == len(rows) > 1000
    for s, (block, _) in itertools.islice(zip(sentences, rows), 500):
        assert s.roots[0].type == "TOP" and (s.roots[0].start, s.roots[0].end) == (0, len(s.words) - 1)
        assert tree_depth(s) == naive_depth([r[5] for r in block])
        assert top_constituents(s)
