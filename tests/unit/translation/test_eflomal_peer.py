"""ssan_plugin/translation/eflomal_peer.py: the corpus is tokenised as preparation tokenises it
and read whole; eflomal trained on a word-for-word corpus recovers its one-to-one links in both
directions; the four link sets are what their names say; bad corpora are one line."""

import random

import pytest

from ssan_plugin.errors import PipelineError
from ssan_plugin.translation.alignment import DIRECTIONS, GoldAlignment, alignment_scores
from ssan_plugin.translation.eflomal_peer import eflomal_links, tokenised_corpus
from ssan_plugin.translation.languages import LanguageConfig


def test_the_corpus_is_moses_tokenised_and_empty_sides_dropped(tmp_path):
    (tmp_path / "train.en").write_text("The house, it's green.\n\nA dog.\n", "utf-8")
    (tmp_path / "train.ro").write_text("Casa, e verde.\nCeva.\nUn câine.\n", "utf-8")
    pairs = tokenised_corpus(str(tmp_path / "train"), "en", "ro")
    assert pairs == [("The house , it 's green .", "Casa , e verde ."), ("A dog .", "Un câine .")]


def test_the_corpus_follows_the_languages_it_is_given(tmp_path):
    """A data manifest's options (here: Romanian without diacritics, aggressive dash splits)
    are applied; the defaults are preparation's (which keeps diacritics, comma-below forms)."""
    (tmp_path / "train.en").write_text("A well-known dog.\n", "utf-8")
    (tmp_path / "train.ro").write_text("Un câine ştiut.\n", "utf-8")
    configs = {"en": LanguageConfig.create("en", False, aggressive_dash_splits=True),
               "ro": LanguageConfig.create("ro", False, romanian_remove_diacritics=True)}
    assert tokenised_corpus(str(tmp_path / "train"), "en", "ro", configs) == [
        ("A well @-@ known dog .", "Un caine stiut .")]
    assert tokenised_corpus(str(tmp_path / "train"), "en", "ro") == [
        ("A well-known dog .", "Un câine știut .")]  # cedilla -> comma below, as preparation


def test_bad_corpora_are_one_line(tmp_path):
    (tmp_path / "train.en").write_text("a\nb\n", "utf-8")
    with pytest.raises(PipelineError, match=r"--eflomal-train .*train: no .*train\.ro"):
        tokenised_corpus(str(tmp_path / "train"), "en", "ro")
    (tmp_path / "train.ro").write_text("a\n", "utf-8")
    with pytest.raises(PipelineError, match="2 en lines, 1 ro lines"):
        tokenised_corpus(str(tmp_path / "train"), "en", "ro")


def test_a_word_for_word_corpus_is_aligned_one_to_one():
    """Sentences of a made-up language pair translated word by word (same order): every
    direction finds the diagonal."""
    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(40)]
    translate = {w: f"t{i}" for i, w in enumerate(vocabulary)}
    corpus = []
    for _ in range(400):
        words = rng.sample(vocabulary, rng.randint(3, 8))
        corpus.append((" ".join(words), " ".join(translate[w] for w in words)))
    tests = [(words, [translate[w] for w in words]) for words in
             (rng.sample(vocabulary, 6) for _ in range(20))]
    links = eflomal_links(corpus, tests)
    assert list(links) == list(DIRECTIONS)
    gold = [GoldAlignment(frozenset((i, i) for i in range(len(a))), frozenset((i, i) for i in range(len(a))))
            for a, _ in tests]
    for name in ("forward", "reverse", "intersection"):
        assert alignment_scores(links[name], gold).aer < 0.05, name
    for f, r, i, u in zip(*(links[name] for name in DIRECTIONS)):
        assert i == f & r and u == f | r


def test_each_direction_links_as_its_name_says():
    """Each A word translated as two B words: the forward links give each B word one A word
    (both of a word's B halves to it), the reverse links each A word one B word (one of its two
    halves); links are (A word, B word). Reading the links file the wrong way round or the two
    files swapped fails here, which the one-to-one corpus above cannot show."""
    rng = random.Random(1)
    vocabulary = [f"w{i}" for i in range(40)]
    halves = {w: [f"t{i}a", f"t{i}b"] for i, w in enumerate(vocabulary)}
    corpus = []
    for _ in range(400):
        words = rng.sample(vocabulary, rng.randint(3, 8))
        corpus.append((" ".join(words), " ".join(t for w in words for t in halves[w])))
    tests = [(words, [t for w in words for t in halves[w]]) for words in
             (rng.sample(vocabulary, rng.randint(4, 7)) for _ in range(20))]
    links = eflomal_links(corpus, tests)
    for name in DIRECTIONS:
        for (a, b), sentence in zip(tests, links[name]):
            assert all(0 <= i < len(a) and 0 <= j < len(b) for i, j in sentence), name
    forward_expected = [{(i, j) for j in range(len(b)) for i in (j // 2,)} for _, b in tests]
    found = sum(len(f & e) for f, e in zip(links["forward"], forward_expected))
    assert found >= 0.95 * sum(map(len, forward_expected))
    assert all(len({j for _, j in f}) == len(f) for f in links["forward"])  # one A word a B word
    assert all(len({i for i, _ in r}) == len(r) for r in links["reverse"])  # one B word an A word
    reverse = [link for r in links["reverse"] for link in r]
    assert len(reverse) >= 0.95 * sum(len(a) for a, _ in tests)
    assert sum(j // 2 == i for i, j in reverse) >= 0.95 * len(reverse)
