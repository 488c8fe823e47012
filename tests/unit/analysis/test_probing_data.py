"""ssan_plugin/analysis/probing_data.py: SentEval-format probing sets; labels checked against a
direct computation on hand-made sentences and trees; the shared WRD set's label convention."""

from collections import Counter

import pytest

from conftest import require_shared
from ssan_plugin.analysis.probing_data import (assign_splits, bigram_shift, make_examples,
                                               move_word, read_probing_file, read_wrd_dir,
                                               top_constituent_examples, undo_bpe, with_splits,
                                               wrd, write_probing_file)
from ssan_plugin.analysis.trees import read_parsed_conll
from ssan_plugin.translation.textio import PipelineError

RAW = [f"w{k}a w{k}b w{k}c w{k}d w{k}e" for k in range(200)]


def test_splits_are_80_10_10_seeded():
    import random

    s = assign_splits(1000, random.Random(3))
    assert Counter(s) == {"tr": 800, "va": 100, "te": 100}
    assert s == assign_splits(1000, random.Random(3))
    assert s != assign_splits(1000, random.Random(4))
    ex = with_splits([(str(i), f"s{i}") for i in range(20)], seed=1)
    assert [e[0] for e in ex] == ["tr"] * 16 + ["va"] * 2 + ["te"] * 2
    # each split keeps input order
    tr = [int(e[1]) for e in ex if e[0] == "tr"]
    assert tr == sorted(tr)


def test_bigram_shift_labels_against_the_original():
    out = bigram_shift(RAW, seed=5)
    assert len(out) == len(RAW)
    assert Counter(label for label, _ in out) == {"I": 100, "O": 100}
    for (label, sentence), original in zip(out, RAW):
        new, old = sentence.split(), original.split()
        diff = [i for i in range(len(old)) if new[i] != old[i]]
        if label == "O":
            assert diff == []
        else:  # exactly two adjacent positions swapped
            assert len(diff) == 2 and diff[1] == diff[0] + 1
            i = diff[0]
            assert (new[i], new[i + 1]) == (old[i + 1], old[i])
    assert bigram_shift(RAW, seed=5) == out and bigram_shift(RAW, seed=6) != out
    # a sentence without two different adjacent words cannot be inverted: skipped
    assert bigram_shift(["a a a", "solo"], seed=1) == []


def test_move_word_labels_follow_the_shared_wrd_convention():
    # the first lines of ../shared/data/probing/wrd/word_order.txt.va.{x,y}
    original = "a Republi@@ can strategy to counter the re @-@ election of Obama".split()
    cases = [(4, 0, "to a Republi@@ can strategy counter the re @-@ election of Obama", "0 5"),
             (1, 4, "a can strategy to Republi@@ counter the re @-@ election of Obama", "4 1"),
             (5, 1, "a counter Republi@@ can strategy to the re @-@ election of Obama", "1 6"),
             (9, 1, "a election Republi@@ can strategy to counter the re @-@ of Obama", "1 10")]
    for source, target, sentence, label in cases:
        new, got = move_word(original, source, target)
        assert " ".join(new) == sentence and got == label
    new, label = move_word(["a", "b", "c"], 2, 0)
    assert new == ["c", "a", "b"] and label == "0 3"  # the last word had no follower


def test_wrd_labels_recover_the_original():
    out = wrd(RAW, seed=2)
    assert len(out) == len(RAW)
    for (label, sentence), original in zip(out, RAW):
        new, old = sentence.split(), original.split()
        assert new != old and sorted(new) == sorted(old)
        i, j = map(int, label.split())
        moved = new[i]
        rest = new[:i] + new[i + 1:]
        # reinsert before the word that followed it (j counts in the new sentence)
        follower = j - (1 if j > i else 0)
        assert rest[:follower] + [moved] + rest[follower:] == old
    assert wrd(["a b"], seed=1) == []


def tree_conll(tmp_path, trees):
    """Sentences given as lists of (word, POS, parse bit) -> a gold_conll file."""
    lines = []
    for t in trees:
        for i, (w, p, b) in enumerate(t):
            lines.append("\t".join(["d", "0", str(i), w, p, b, "-", "-", "-", "-", "*", "-"]))
        lines.append("")
    path = tmp_path / "t.gold_conll"
    path.write_text("\n".join(lines) + "\n")
    return read_parsed_conll(path)


def test_tree_depth_and_top_constituent_examples(tmp_path):
    trees = [
        [("I", "PRP", "(TOP(S(NP*)"), ("run", "VBP", "(VP*)"), (".", ".", "*))")],
        [("Yes", "UH", "(TOP(INTJ*))")],
        [("Dogs", "NNS", "(TOP(S(NP*)"), ("bark", "VBP", "(VP*"), ("at", "IN", "(PP*"),
         ("cats", "NNS", "(NP*)))))")],
    ]
    parsed = tree_conll(tmp_path, trees)
    ex = make_examples("tree_depth", parsed=parsed, seed=1)
    by_sentence = {s: label for _, label, s in ex}
    assert by_sentence == {"I run .": "2", "Yes": "1", "Dogs bark at cats": "4"}
    top = dict((s, l) for l, s in top_constituent_examples(parsed))
    assert top == {"I run .": "NP_VP_.", "Yes": "UH", "Dogs bark at cats": "NP_VP"}
    # only the most frequent classes keep their label
    few = dict((s, l) for l, s in top_constituent_examples(parsed, classes=1))
    assert sorted(few.values()) == ["NP_VP", "OTHER", "OTHER"]  # ties: alphabetical


def test_nineteen_classes_and_other(monkeypatch):
    import ssan_plugin.analysis.probing_data as pd

    class S:  # a stand-in sentence whose top-constituent sequence is given
        def __init__(self, label):
            self.label, self.words = label, (label,)

    monkeypatch.setattr(pd, "top_constituents", lambda s: s.label)
    labels = [f"L{k}" for k in range(25) for _ in range(30 - k)]  # L0 most frequent
    out = top_constituent_examples([S(l) for l in labels])
    kept = {l for l, _ in out if l != "OTHER"}
    assert kept == {f"L{k}" for k in range(19)}
    assert sum(l == "OTHER" for l, _ in out) == sum(30 - k for k in range(19, 25))


def test_probing_file_round_trip_and_errors(tmp_path):
    ex = make_examples("bigram_shift", raw_sentences=RAW, seed=1)
    path = tmp_path / "p.txt"
    write_probing_file(ex, path)
    assert read_probing_file(path) == ex
    first = path.read_text().splitlines()[0].split("\t")
    assert first[0] == "tr" and first[1] in ("I", "O") and len(first) == 3
    bad = tmp_path / "bad.txt"
    bad.write_text("tr\tI\n")
    with pytest.raises(PipelineError, match="bad.txt:1: expected 'tr|va|te"):
        read_probing_file(bad)
    bad.write_text("tr\tI\ta b\n")
    with pytest.raises(PipelineError, match="no example in split 'va'"):
        read_probing_file(bad)
    bad.write_text("\n")
    with pytest.raises(PipelineError, match="empty probing file"):
        read_probing_file(bad)
    with pytest.raises(PipelineError, match="unknown probing task 'depth'"):
        make_examples("depth", raw_sentences=RAW)
    with pytest.raises(PipelineError, match="no usable sentence"):
        make_examples("wrd", raw_sentences=["a b"])


def test_undo_bpe():
    assert undo_bpe("Republi@@ can re @-@ election 1 @,@ 000") == "Republican re-election 1,000"


def test_read_wrd_dir_hand_made(tmp_path):
    (tmp_path / "w.txt.va.x").write_text("b@@ c a d\n\na d e\n")
    (tmp_path / "w.txt.va.y").write_text("1 0\n\n0 2\n")
    assert read_wrd_dir(tmp_path) == [("va", "1 0", "bc a d"), ("va", "0 2", "a d e")]
    (tmp_path / "w.txt.va.y").write_text("1 0\n")
    with pytest.raises(PipelineError, match="has 3 lines but"):
        read_wrd_dir(tmp_path)


def test_read_the_shared_wrd_set():
    ex = read_wrd_dir(require_shared("probing/wrd"))
    assert len(ex) == 10000 and {e[0] for e in ex} == {"va"}
    assert ex[1] == ("va", "4 1", "a can strategy to Republicounter the re-election of Obama")
    for _, label, sentence in ex[:500]:
        i, j = map(int, label.split())
        assert i != j
