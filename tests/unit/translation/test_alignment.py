"""ssan_plugin/translation/alignment.py: the gold reader (sure and possible links, 1-based in the
file), precision / recall / AER against the formulas counted by hand, bad lines named, the
gold's words against a training text counted by hand, the diagonal reference against its
definition, eflomal's links file read only whole, and the shared WPT Romanian-English gold read
whole."""

import pytest

from conftest import require_shared
from ssan_plugin.translation.alignment import (GoldAlignment, alignment_scores, check_links,
                                               diagonal_links, gold_word_coverage, parse_links,
                                               read_bitext, read_gold, unmarked_romanian,
                                               without_marks)
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


def test_diacritics_are_removed_whatever_their_form():
    assert without_marks("în") == "in" and without_marks("Ştiinţă") == "Stiinta"
    assert without_marks("ţară") == without_marks("țară") == "tara"  # cedilla and comma below
    assert without_marks("über") == "uber" and without_marks("casa") == "casa"


def test_the_gold_words_are_counted_against_the_training_text_by_hand():
    training = ["și în casa", "și nu", "si da", "în oraș"]
    gold = [["si", "in", "casa"], ["oras", "si", "zebra"], ["ţară"]]
    coverage = gold_word_coverage(gold, iter(training))
    # unseen as written: in, oras, zebra, ţară (the training text has și, în, oraș and no ţară)
    # mostly other diacritics: si (1 of 3 written so) twice, in (0 of 2), oras (0 of 1);
    # not casa (1 of 1), not zebra (never there in any form), not ţară (never there)
    assert coverage == {"tokens": 7, "unseen": 4, "other_marks": 4,
                        "other_marks_examples": [["si", 2], ["in", 1], ["oras", 1]]}
    # the other way round: a gold written with diacritics the training text leaves out
    assert gold_word_coverage([["ţară", "și"]], ["tara tara țară", "si și"])["other_marks"] == 1
    assert gold_word_coverage([], training) == {"tokens": 0, "unseen": 0, "other_marks": 0,
                                                "other_marks_examples": []}


def test_the_shared_romanian_gold_has_no_diacritics_the_training_text_has():
    """The WPT Ro-En gold writes Romanian without diacritics; the shared En-Ro training text
    (tokenised as preparation does) writes them, so a model trained on it reads many of the
    gold's Romanian words in a form it rarely saw. English is untouched by this."""
    from ssan_plugin.translation.eflomal_peer import tokenised_corpus

    folder = require_shared("align/ro-en")
    train = require_shared("mt/en-ro") / "train"
    pairs = read_bitext(folder / "test.ro-en")
    corpus = tokenised_corpus(str(train), "ro", "en")
    romanian = gold_word_coverage([ro for ro, _ in pairs], (ro for ro, _ in corpus))
    english = gold_word_coverage([en for _, en in pairs], (en for _, en in corpus))
    assert not any(without_marks(w) != w for ro, _ in pairs for w in ro)
    assert romanian["other_marks"] > 0.1 * romanian["tokens"]
    assert english["other_marks"] < 0.005 * english["tokens"]
    assert [w for w, _ in romanian["other_marks_examples"][:2]] == ["si", "in"]


def test_romanian_without_any_diacritic_is_named_only_where_the_model_keeps_them():
    bare = [["si", "in", "casa", "e", "verde"]] * 4  # 20 words, not one mark
    assert "no diacritics in its 20 words" in unmarked_romanian("ro", True, bare)
    assert "--romanian-remove-diacritics" in unmarked_romanian("ro", True, bare)
    assert unmarked_romanian("ro", False, bare) == ""  # the model's text has none either
    assert unmarked_romanian("en", True, bare) == ""  # only Romanian is checked
    assert unmarked_romanian("ro", True, bare[:3]) == ""  # too few words to tell
    assert unmarked_romanian("ro", True, bare + [["și"]]) == ""  # one mark: written with them


def test_the_diagonal_links_each_word_to_the_word_at_its_relative_position():
    # equal lengths: the identity, in both directions
    assert diagonal_links(3, 3) == {name: {(0, 0), (1, 1), (2, 2)}
                                    for name in ("forward", "reverse", "intersection", "union")}
    # 2 A words, 5 B words: B word j (centre (j + 0.5) / 5) falls in A word 0 for j < 2.5
    links = diagonal_links(2, 5)
    assert links["forward"] == {(0, 0), (0, 1), (1, 2), (1, 3), (1, 4)}
    assert links["reverse"] == {(0, 1), (1, 3)}  # centres 0.25 and 0.75 of five words
    assert links["intersection"] == {(0, 1), (1, 3)}
    assert links["union"] == links["forward"]
    # against the formula in floating point, over many shapes: one link per word of each side
    for len_a in range(1, 12):
        for len_b in range(1, 12):
            links = diagonal_links(len_a, len_b)
            assert links["forward"] == {(int((j + 0.5) * len_a / len_b), j) for j in range(len_b)}
            assert sorted(i for i, _ in links["reverse"]) == list(range(len_a))
            assert links["union"] == links["forward"] | links["reverse"]
    with pytest.raises(PipelineError, match="empty side"):
        diagonal_links(0, 3)


def test_eflomals_links_are_read_only_when_every_sentence_has_its_line(tmp_path):
    """The peer's links are the file's last lines (after the training corpus's): a file with
    another number of lines than sentences is refused rather than read against the wrong pairs."""
    from ssan_plugin.translation.eflomal_peer import read_pharaoh

    path = tmp_path / "fwd"
    path.write_text("0-0\n0-0 1-1\n\n2-1 0-0\n", encoding="utf-8")  # 2 corpus lines, 2 to align
    assert read_pharaoh(path, 2, 4) == [set(), {(2, 1), (0, 0)}]
    with pytest.raises(PipelineError, match="eflomal wrote 4 lines of links for 5 sentence pairs"):
        read_pharaoh(path, 2, 5)
