"""ssan_plugin/translation/alignment.py: the gold reader (sure and possible links, 1-based in the
file), precision / recall / AER against the formulas counted by hand, pieces mapped to words,
bad lines named, and the shared WPT Romanian-English gold read whole."""

import pytest

from conftest import require_shared
from ssan_plugin.translation.alignment import (GoldAlignment, alignment_scores, check_links,
                                               parse_links, piece_words, read_bitext, read_gold,
                                               word_links)
from ssan_plugin.translation.textio import PipelineError


def gold(sure, possible=()):
    return GoldAlignment(frozenset(sure), frozenset(set(sure) | set(possible)))


def test_links_are_read_one_based_possible_including_sure():
    sure, possible = parse_links("1-1 2?3 3p2 4-4", "x")
    assert sure == {(0, 0), (3, 3)}
    assert possible == {(0, 0), (1, 2), (2, 1), (3, 3)}
    assert parse_links("", "x") == (set(), set())


@pytest.mark.parametrize("bad", ["1-", "0-1", "1:2", "a-b", "1--2", "2-0"])
def test_a_bad_link_is_named_with_its_line(bad):
    with pytest.raises(PipelineError, match=rf"gold: line 3: {bad!r} is not a link"):
        parse_links(f"1-1 {bad}", "gold: line 3")


def test_scores_against_the_formulas():
    """Two sentences: S = {(0,0), (1,1)} and {(0,1)}; P adds (2,2) to the first. A hits one sure
    and the possible link in sentence 1, misses in sentence 2, and adds one wrong link."""
    reference = [gold({(0, 0), (1, 1)}, {(2, 2)}), gold({(0, 1)})]
    predicted = [{(0, 0), (2, 2), (1, 0)}, {(1, 1)}]
    scores = alignment_scores(predicted, reference)
    a, s, a_s, a_p = 4, 3, 1, 2
    assert (scores.predicted, scores.sure, scores.possible, scores.sentences) == (4, 3, 4, 2)
    assert scores.precision == pytest.approx(a_p / a)
    assert scores.recall == pytest.approx(a_s / s)
    assert scores.aer == pytest.approx(1 - (a_s + a_p) / (a + s))


def test_perfect_and_empty_alignments():
    reference = [gold({(0, 0), (1, 1)}), gold({(0, 0)})]
    perfect = alignment_scores([{(0, 0), (1, 1)}, {(0, 0)}], reference)
    assert (perfect.precision, perfect.recall, perfect.aer) == (1.0, 1.0, 0.0)
    nothing = alignment_scores([set(), set()], reference)
    assert (nothing.precision, nothing.recall, nothing.aer) == (0.0, 0.0, 1.0)
    with pytest.raises(PipelineError, match="1 predicted alignments for 2 gold sentences"):
        alignment_scores([set()], reference)


def test_pieces_map_to_the_words_they_spell():
    source = ["\u2581Cor", "nel", "\u2581Nist", "ores", "cu"]
    target = ["\u2581by", "\u2581Cornel", "\u2581Nistorescu"]
    assert piece_words(source) == [0, 0, 1, 1, 1]
    assert piece_words(["nel", "\u2581x"]) == [0, 1]  # a first piece without the mark: word 0
    assert word_links({(0, 1), (1, 1), (3, 2), (4, 2)}, source, target) == {(0, 1), (1, 2)}


def test_links_outside_the_sentence_are_one_line():
    check_links({(0, 0), (2, 1)}, 3, 2, "s")
    with pytest.raises(PipelineError, match="s: link 3-3 outside a sentence of 3 source and 2 "
                                            "target tokens"):
        check_links({(2, 2)}, 3, 2, "s")


def test_bitext_lines(tmp_path):
    path = tmp_path / "b"
    path.write_text("a b ||| x y z\nc ||| w\n")
    assert read_bitext(path) == [(["a", "b"], ["x", "y", "z"]), (["c"], ["w"])]
    path.write_text("a b x y z\n")
    with pytest.raises(PipelineError, match="line 1 is not 'source ||| target'"):
        read_bitext(path)


def test_the_shared_romanian_english_gold():
    """248 WPT sentences, 6,198 sure links (no possible ones), every link inside its sentence."""
    folder = require_shared("align/ro-en")
    reference = read_gold(folder / "test.gold")
    pairs = read_bitext(folder / "test.ro-en")
    assert len(reference) == len(pairs) == 248
    assert sum(len(g.sure) for g in reference) == 6198
    assert all(g.sure == g.possible for g in reference)
    for number, (g, (source, target)) in enumerate(zip(reference, pairs), 1):
        check_links(g.sure, len(source), len(target), f"line {number}")
    assert alignment_scores([g.sure for g in reference], reference).aer == 0.0
