"""ssan_plugin.srl.binarize: a hand-made CoNLL-2012 corpus -> data directory, read back."""

import json

import pytest
from fairseq.data import Dictionary, data_utils

from ssan_plugin.srl import datadir
from ssan_plugin.srl.binarize import (
    PrepareError, build_dictionaries, instances, prepare, read_split,
)
from ssan_plugin.srl.corpus import CoNLLFormatError


def conll_row(i, word, lemma="-", frameset="-", args=()):
    return " ".join(["doc", "0", str(i), word, "XX", "*", lemma, frameset, "-", "-", "*",
                     *args, "-"])


# sentence 0: two predicates (saw, leave); sentence 1: one (rained); sentence 2: none
TRAIN = "\n".join([
    "#begin document (doc); part 000",
    conll_row(0, "John", args=("(A0*)", "*")),
    conll_row(1, "saw", "see", "01", ("(V*)", "*")),
    conll_row(2, "Mary", args=("(A1*", "(A0*)")),
    conll_row(3, "leave", "leave", "01", ("*)", "(V*)")),
    conll_row(4, ".", args=("*", "*")),
    "",
    conll_row(0, "It", args=("(A0*)",)),
    conll_row(1, "rained", "rain", "01", ("(V*)",)),
    conll_row(2, ".", args=("*",)),
    "",
    conll_row(0, "Hi"),
    conll_row(1, "."),
    "",
    "#end document",
    "",
])
# an argument type (A2) and a word (Bill) that the training split does not have
VALID = "\n".join([
    conll_row(0, "Bill", args=("(A2*)",)),
    conll_row(1, "rained", "rain", "01", ("(V*)",)),
    "",
])
TRAIN_WORDS = [
    ["John", "saw", "Mary", "leave", "."],
    ["John", "saw", "Mary", "leave", "."],
    ["It", "rained", "."],
]
TRAIN_TAGS = [
    ["B-A0", "B-V", "B-A1", "I-A1", "O"],
    ["O", "O", "B-A0", "B-V", "O"],
    ["B-A0", "B-V", "O"],
]


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "train_conll").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "valid_conll").write_text(VALID, encoding="utf-8")
    return tmp_path


def load(dest, split, name, dictionary):
    ds = data_utils.load_indexed_dataset(datadir.dataset_prefix(dest, split, name), dictionary)
    assert ds is not None
    return [ds[i].tolist() for i in range(len(ds))]


def test_instances_one_per_predicate(corpus):
    sentences, sources = read_split("conll2012", str(corpus / "train_conll"))
    assert sources == [str(corpus / "train_conll")]
    rows = list(instances(sentences))
    assert [(r.sentence, r.predicate) for r in rows] == [(0, 1), (0, 3), (1, 1)]
    assert [list(r.words) for r in rows] == TRAIN_WORDS
    assert [r.tags for r in rows] == TRAIN_TAGS
    assert [r.dropped for r in rows] == [0, 0, 0]


def test_build_dictionaries(corpus):
    sentences, _ = read_split("conll2012", str(corpus / "train_conll"))
    words, labels = build_dictionaries(sentences)
    assert set(words.symbols[words.nspecial:]) >= {"John", "saw", "Mary", "leave", ".", "It",
                                                   "rained", "Hi"}
    assert len(words) % 8 == 0  # padded like fairseq-preprocess
    assert sorted(labels.symbols[labels.nspecial:]) == ["B-A0", "B-A1", "B-V", "I-A1", "O"]
    counts = {s: labels.count[i] for i, s in enumerate(labels.symbols) if i >= labels.nspecial}
    assert counts == {"B-A0": 3, "B-V": 3, "B-A1": 1, "I-A1": 1, "O": 5}  # over instances
    only_frequent, _ = build_dictionaries(sentences, word_threshold=3)
    assert only_frequent.index(".") != only_frequent.unk()
    assert only_frequent.index("John") == only_frequent.unk()  # seen twice


def test_prepare_writes_and_reads_back(corpus):
    dest = corpus / "bin"
    manifest = prepare("conll2012", {"train": str(corpus / "train_conll"),
                                     "valid": str(corpus / "valid_conll")}, str(dest))
    words = Dictionary.load(datadir.word_dict_path(dest))
    labels = Dictionary.load(datadir.label_dict_path(dest))

    ids = load(dest, "train", datadir.WORDS, words)
    assert [[words[i] for i in item] for item in ids] == TRAIN_WORDS
    assert ids[0] == [words.index(w) for w in TRAIN_WORDS[0]]
    assert load(dest, "train", datadir.PREDICATE, None) == [[0, 1, 0, 0, 0], [0, 0, 0, 1, 0],
                                                           [0, 1, 0]]
    label_ids = load(dest, "train", datadir.LABELS, labels)
    assert [[labels[i] for i in item] for item in label_ids] == TRAIN_TAGS
    assert (dest / "train.instances.tsv").read_text() == (
        "instance\tsentence\tpredicate\n0\t0\t1\n1\t0\t3\n2\t1\t1\n")
    assert datadir.read_instances(datadir.instances_path(dest, "train")) == [(0, 0, 1), (1, 0, 3),
                                                                            (2, 1, 1)]
    # the props file keeps every sentence, the one without predicates too
    props = (dest / "train.props").read_text().split("\n\n")
    assert [len(block.splitlines()) for block in props[:3]] == [5, 3, 2]
    assert props[0].splitlines()[1].split() == ["see", "(V*)", "*"]

    # valid: the unseen word and label map to <unk> and are counted
    assert load(dest, "valid", datadir.WORDS, words) == [[words.unk(), words.index("rained")]]
    assert load(dest, "valid", datadir.LABELS, labels) == [[labels.unk(), labels.index("B-V")]]

    on_disk = json.loads((dest / "manifest.json").read_text())
    assert on_disk == manifest
    assert manifest["format"] == "conll2012" and manifest["task"] == "srl"
    assert manifest["words"] == len(words)
    assert manifest["labels"] == labels.symbols[labels.nspecial:]
    assert manifest["splits"]["train"] == {
        "sources": [str((corpus / "train_conll").resolve())],
        "sentences": 3, "instances": 3, "instance_tokens": 13, "unknown_word_tokens": 0,
        "unknown_label_tokens": 0, "unknown_characters": 0, "embedded_phrases_dropped": 0,
    }
    valid = manifest["splits"]["valid"]
    assert (valid["sentences"], valid["instances"], valid["instance_tokens"]) == (1, 1, 2)
    assert (valid["unknown_word_tokens"], valid["unknown_label_tokens"]) == (1, 1)
    assert valid["unknown_characters"] == 1  # the B of "Bill"


def test_prepare_writes_the_characters_of_every_word(corpus):
    dest = corpus / "bin"
    manifest = prepare("conll2012", {"train": str(corpus / "train_conll"),
                                     "valid": str(corpus / "valid_conll")}, str(dest))
    chars = Dictionary.load(datadir.char_dict_path(dest))
    assert manifest["chars"] == len(chars)
    assert set(chars.symbols[chars.nspecial:]) == set("JohnsawMaryleave.ItrainedHi")

    def spell(item):  # ids -> words, EOS closes each word
        return "".join(" " if i == chars.eos() else chars[i] for i in item).split(" ")[:-1]

    items = load(dest, "train", datadir.CHARS, chars)
    assert [spell(item) for item in items] == TRAIN_WORDS
    assert [item.count(chars.eos()) for item in items] == [5, 5, 3]
    # valid "Bill": B unseen in train -> <unk>, the rest kept
    (bill,) = load(dest, "valid", datadir.CHARS, chars)
    assert bill[:5] == [chars.unk(), chars.index("i"), chars.index("l"), chars.index("l"),
                        chars.eos()]
    assert list(manifest["splits"]) == ["train", "valid"]


def test_word_threshold_counts_unknown_words(corpus):
    manifest = prepare("conll2012", {"train": str(corpus / "train_conll")}, str(corpus / "bin"),
                       word_threshold=3)
    # only "." (3 sentences) is kept: 13 instance tokens, 3 of them "."
    assert manifest["splits"]["train"]["unknown_word_tokens"] == 10


def test_nothing_written_on_bad_input(corpus):
    (corpus / "bad_conll").write_text(VALID.replace("(V*)", "(V*"), encoding="utf-8")
    dest = corpus / "bin"
    with pytest.raises(CoNLLFormatError, match=r"bad_conll:2:"):
        prepare("conll2012", {"train": str(corpus / "train_conll"),
                              "test": str(corpus / "bad_conll")}, str(dest))
    assert not dest.exists()
    (corpus / "none_conll").write_text(conll_row(0, "Hi") + "\n", encoding="utf-8")
    with pytest.raises(PrepareError, match="has no predicates"):
        prepare("conll2012", {"train": str(corpus / "none_conll")}, str(dest))
    with pytest.raises(PrepareError, match="missing: no such file"):
        prepare("conll2012", {"train": str(corpus / "missing")}, str(dest))
    with pytest.raises(PrepareError, match="is a directory"):
        prepare("conll2012", {"train": str(corpus)}, str(dest))
    with pytest.raises(PrepareError, match="unknown split"):
        prepare("conll2012", {"train": str(corpus / "train_conll"), "dev": "x"}, str(dest))
    assert not dest.exists()
