"""ssan_plugin/pairs/prepare.py: raw SICK pairs -> a sentence_pair data directory, on a few
hand-written pairs: the text is the translation pipeline's normalisation and Moses tokens
(words) or its sentencepiece pieces (spm), the dictionary is the training pieces of both
sentences, the gold table and manifest counts match a direct count; every bad option or input
stops with a message naming it before anything is written. One preparation runs
fairseq-preprocess; the others replace it by a stand-in (the text is written before it)."""

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.pairs_cli import write_sick

from ssan_plugin.pairs import datadir
from ssan_plugin.pairs.corpus import LABELS, PairFormatError
from ssan_plugin.pairs.prepare import (PairPrepareConfig, prepare, read_splits, run_preprocess,
                                       translation_side)
from ssan_plugin.translation.languages import LanguageConfig
from ssan_plugin.translation.textio import PipelineError

TRAIN = [
    ("1", "A man, smiling, plays a guitar.", "A man plays a guitar.", "ENTAILMENT", 4.8),
    ("2", "A woman is slicing an onion.", "A woman isn't slicing an onion.", "CONTRADICTION", 3.6),
    ("3", "The dog runs on the beach.", "The dog sleeps.", "NEUTRAL", 2.1),
    ("4", "Two kids are playing.", "Two children are playing.", "ENTAILMENT", 4.9),
    ("5", "A boy rides a horse.", "A girl rides a horse.", "NEUTRAL", 3.0),
    ("6", "A girl is eating (a banana).", "Nobody is eating.", "CONTRADICTION", 2.5),
]
VALID = [
    ("10", "A man plays a guitar.", "A man, not smiling, plays.", "NEUTRAL", 3.5),
    ("11", "The dog sleeps.", "The dog is awake.", "CONTRADICTION", 1.2),
]
TEST = [("20", "Two kids play.", "Kids are playing.", "ENTAILMENT", 4.2)]
ROWS = {"train": TRAIN, "valid": VALID, "test": TEST}
EN = LanguageConfig.create("en", segmented=False)


def write_raw(directory: Path, rows=ROWS) -> dict:
    paths = {}
    for split, split_rows in rows.items():
        paths[split] = str(directory / f"{split}.tsv")
        write_sick(paths[split], split_rows)
    return paths


def config(raw: dict, dest, **kwargs) -> PairPrepareConfig:
    return PairPrepareConfig(**{"format": "sick", "dest": str(dest), **raw, **kwargs})


@pytest.fixture(scope="module")
def spm_bin(tmp_path_factory):
    """The one real preparation of the file (sentencepiece, fairseq-preprocess)."""
    raw = write_raw(tmp_path_factory.mktemp("raw"))
    dest = tmp_path_factory.mktemp("spm") / "bin"
    manifest = prepare(config(raw, dest, vocab_size=60))
    return raw, dest, manifest


def lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


def without_preprocess(monkeypatch, wrote=None):
    """fairseq-preprocess replaced by nothing, the binarised sizes by ``wrote`` (default: the
    number of pairs of each split, as a correct run gives)."""
    sizes = wrote or {split: {"s1": len(rows), "s2": len(rows)} for split, rows in ROWS.items()}
    monkeypatch.setattr("ssan_plugin.pairs.prepare.run_preprocess",
                        lambda cfg, dest, srcdict: ["fairseq-preprocess", "--joined-dictionary"])
    monkeypatch.setattr("ssan_plugin.translation.prepare.binarised_sizes", lambda tcfg, dest: sizes)


def test_words_are_the_pipeline_tokens_of_every_sentence(tmp_path, monkeypatch):
    without_preprocess(monkeypatch)
    dest = tmp_path / "bin"
    manifest = prepare(config(write_raw(tmp_path), dest, tokens="words"))
    assert lines(dest / "text" / "train.s1")[0] == "A man , smiling , plays a guitar ."
    assert lines(dest / "text" / "train.s2")[1] == "A woman isn 't slicing an onion ."
    for split, rows in ROWS.items():
        assert lines(dest / "text" / f"{split}.s1") == [EN.pretokenise(a) for _, a, _, _, _ in rows]
        assert lines(dest / "text" / f"{split}.s2") == [EN.pretokenise(b) for _, _, b, _, _ in rows]
    # raw English is detected as not segmented: Moses-tokenised, and recorded so
    assert manifest["language"] == EN.as_dict() and manifest["tokens"] == "words"
    assert manifest["sentencepiece"] is None and not (dest / "spm.model").exists()


def test_segmented_yes_keeps_the_words_as_given(tmp_path, monkeypatch):
    without_preprocess(monkeypatch)
    dest = tmp_path / "bin"
    manifest = prepare(config(write_raw(tmp_path), dest, tokens="words", segmented="yes"))
    assert lines(dest / "text" / "train.s1")[0] == "A man, smiling, plays a guitar."
    assert manifest["language"] == LanguageConfig.create("en", segmented=True).as_dict()


def test_fewer_binarised_sentences_than_pairs_are_refused(tmp_path, monkeypatch):
    wrote = {split: {"s1": len(rows), "s2": len(rows)} for split, rows in ROWS.items()}
    wrote["valid"]["s2"] = 1
    without_preprocess(monkeypatch, wrote)
    with pytest.raises(PipelineError, match="fairseq-preprocess wrote 1 sentences for valid.s2, "
                                            "expected 2"):
        prepare(config(write_raw(tmp_path), tmp_path / "bin", tokens="words"))


def test_sentencepiece_pieces_decode_to_the_tokens(spm_bin):
    import sentencepiece as spm

    _, dest, manifest = spm_bin
    model = dest / "spm.model"
    info = manifest["sentencepiece"]
    assert info["model"] == str(model.resolve()) and info["trained_on"] == "train, both sentences"
    assert info["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert info["pieces"] == sp.get_piece_size() and manifest["tokens"] == "spm"
    for split, rows in ROWS.items():
        for side, column in (("s1", 1), ("s2", 2)):
            pieces = lines(dest / "text" / f"{split}.{side}")
            assert [sp.decode_pieces(p.split()) for p in pieces] == [EN.pretokenise(row[column])
                                                                     for row in rows]


def test_one_dictionary_of_the_training_pieces(spm_bin):
    _, dest, manifest = spm_bin
    assert (dest / "dict.s1.txt").read_text() == (dest / "dict.s2.txt").read_text()
    counts = Counter(w for side in ("s1", "s2") for line in lines(dest / "text" / f"train.{side}")
                     for w in line.split())
    entries = dict(line.rsplit(" ", 1) for line in lines(dest / "dict.s1.txt"))
    assert {w: int(n) for w, n in entries.items() if not w.startswith("madeupword")} == counts
    assert manifest["dictionary"] == {"path": datadir.dict_path(dest), "from": "train (both sentences)"}


def test_binarised_sentences_are_the_text(spm_bin):
    from fairseq.data import Dictionary, data_utils

    _, dest, _ = spm_bin
    d = Dictionary.load(str(dest / "dict.s1.txt"))
    for side in datadir.SIDES:
        dataset = data_utils.load_indexed_dataset(datadir.side_prefix(dest, "valid", side), d)
        expected = [" ".join(w if w in d.indices else d.unk_word for w in line.split())
                    for line in lines(dest / "text" / f"valid.{side}")]  # unseen in training: unk
        assert [d.string(dataset[i]) for i in range(len(dataset))] == expected
        assert all(int(dataset[i][-1]) == d.eos() for i in range(len(dataset)))


def test_gold_and_counts_match_the_input(spm_bin):
    raw, dest, manifest = spm_bin
    for split, rows in ROWS.items():
        gold = datadir.read_gold(datadir.gold_path(dest, split))
        assert [(p.pair_id, p.label, p.score) for p in gold] == [
            (i, label.lower(), score) for i, _, _, label, score in rows]
        found = Counter(label.lower() for *_, label, _ in rows)
        assert manifest["counts"][split] == {"pairs": len(rows), "with_score": len(rows),
                                             "labels": {label: found[label] for label in LABELS}}
        recorded = manifest["inputs"][split]
        assert recorded == [{"path": str(Path(raw[split]).resolve()),
                             "sha256": hashlib.sha256(Path(raw[split]).read_bytes()).hexdigest()}]
    assert manifest["format"] == "sick" and manifest["labels"] == list(LABELS)
    assert "--joined-dictionary" in manifest["commands"]["fairseq_preprocess"]
    assert manifest["config"]["vocab_size"] == 60
    assert json.loads((dest / "manifest.json").read_text()) == manifest


@pytest.mark.parametrize("change, message", [
    (dict(format="csv"), "--format must be one of sick, snli, got 'csv'"),
    (dict(tokens="bpe"), "--tokens must be spm or words, got 'bpe'"),
    (dict(segmented="maybe"), "--segmented must be auto, yes or no, got 'maybe'"),
    (dict(tokens="words", translation_data="mt"), "--translation-data takes the translation's "
                                                  "sentencepiece model: it needs --tokens spm"),
    (dict(vocab_size=7), "--vocab-size must be at least 8, got 7"),
])
def test_bad_options_stop_before_anything_is_written(tmp_path, change, message):
    dest = tmp_path / "bin"
    cfg = config(write_raw(tmp_path), dest, **change)
    with pytest.raises(PipelineError) as err:
        prepare(cfg)
    assert str(err.value) == message and not dest.exists()


def test_vocab_size_is_not_checked_with_translation_data(tmp_path):
    config(write_raw(tmp_path), tmp_path / "bin", vocab_size=1, translation_data="mt").validate()


def test_the_two_sentences_play_source_and_target(tmp_path):
    raw = write_raw(tmp_path)
    tcfg = config(raw, tmp_path / "bin", vocab_size=123, threads=2, workers=3).translation_config()
    assert (tcfg.src, tcfg.tgt, tcfg.train, tcfg.valid, tcfg.test) == ("s1", "s2", raw["train"],
                                                                       raw["valid"], raw["test"])
    assert (tcfg.vocab_size, tcfg.threads, tcfg.workers) == (123, 2, 3)


def test_a_bad_line_in_any_split_stops_before_writing(tmp_path):
    raw = write_raw(tmp_path)
    Path(raw["test"]).write_text(Path(raw["test"]).read_text().replace("\t4.2\t", "\tfive\t"))
    assert read_splits(config(write_raw(tmp_path / "ok"), tmp_path / "x"))["valid"][1].pair_id == "11"
    dest = tmp_path / "bin"
    with pytest.raises(PairFormatError, match=rf"{Path(raw['test'])}:2: relatedness_score 'five'"):
        prepare(config(raw, dest, tokens="words"))
    assert not dest.exists()


def test_a_sentence_empty_after_normalisation_is_named(tmp_path):
    rows = dict(ROWS, valid=VALID + [("12", "A dog barks.", "\x07", "NEUTRAL", 2.0)])
    raw = write_raw(tmp_path, rows)
    assert EN.pretokenise("\x07") == ""  # a control character: Moses' normaliser removes it
    dest = tmp_path / "bin"
    with pytest.raises(PipelineError) as err:
        prepare(config(raw, dest, tokens="words"))
    assert str(err.value) == (f"{raw['valid']}: pair 12 (valid): sentence s2 is empty after "
                              "normalisation")
    assert not dest.exists()


def test_a_non_empty_destination_is_refused(tmp_path):
    dest = tmp_path / "bin"
    dest.mkdir()
    (dest / "keep.txt").write_text("x")
    with pytest.raises(PipelineError, match="--dest .*bin is not empty"):
        prepare(config(write_raw(tmp_path), dest, tokens="words"))
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


# ---------------------------------------------------------------- translation data, preprocess

@pytest.fixture
def translation_bin(tmp_path):
    """A stand-in translation data-bin: manifest, sentencepiece model, English dictionary."""
    import sentencepiece as spm

    data = tmp_path / "mt"
    data.mkdir()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([a for _, a, _, _, _ in TRAIN] * 3), model_prefix=str(data / "spm"),
        vocab_size=40, hard_vocab_limit=False, minloglevel=2)
    de = LanguageConfig.create("de", segmented=False)
    manifest = {"src": "en", "tgt": "de", "languages": {"en": EN.as_dict(), "de": de.as_dict()},
                "sentencepiece": {"model": str(tmp_path / "moved" / "spm.model")}}
    (data / "manifest.json").write_text(json.dumps(manifest))
    (data / "dict.en.txt").write_text("▁A 3\n")
    return data


def test_translation_side_reads_the_data_bin(tmp_path, translation_bin):
    cfg = config(write_raw(tmp_path), tmp_path / "bin", translation_data=str(translation_bin))
    lang_config, sp, dictionary, model = translation_side(cfg)
    assert lang_config == EN and dictionary == translation_bin / "dict.en.txt"
    assert model == translation_bin / "spm.model"  # the recorded path is gone: the moved bin's
    assert sp.get_piece_size() == 40
    with pytest.raises(PipelineError, match=f"--lang fr: {translation_bin} translates en -> de"):
        translation_side(config(write_raw(tmp_path), tmp_path / "bin", lang="fr",
                                translation_data=str(translation_bin)))
    with pytest.raises(PipelineError, match=r"dict.de.txt not found \(a translation data-bin has "
                                            r"one per language\)"):
        translation_side(config(write_raw(tmp_path), tmp_path / "bin", lang="de",
                                translation_data=str(translation_bin)))
    with pytest.raises(PipelineError, match="manifest.json not found"):
        translation_side(config(write_raw(tmp_path), tmp_path / "bin", translation_data=str(tmp_path)))


def test_run_preprocess_command_and_failure(tmp_path, monkeypatch):
    """The pairs' fairseq-preprocess is the translation pipeline's (one runner): its command,
    and a real failure (no text to binarise) as one line naming the log."""
    from ssan_plugin.errors import StepError

    calls = []
    monkeypatch.setattr("ssan_plugin.cli.steps.run_step",
                        lambda step, command, **kw: calls.append((step, command)))
    cfg = config(write_raw(tmp_path), tmp_path / "bin", workers=2)
    command = run_preprocess(cfg, tmp_path / "bin", tmp_path / "dict.en.txt")
    assert calls == [("fairseq-preprocess", command)]
    text = tmp_path / "bin" / "text"
    for option, value in (("--source-lang", "s1"), ("--target-lang", "s2"),
                          ("--trainpref", str(text / "train")), ("--testpref", str(text / "test")),
                          ("--destdir", str(tmp_path / "bin")), ("--workers", "2"),
                          ("--srcdict", str(tmp_path / "dict.en.txt"))):
        assert command[command.index(option) + 1] == value
    assert "--joined-dictionary" in command
    assert "--srcdict" not in run_preprocess(cfg, tmp_path / "bin", None)
    monkeypatch.undo()
    with pytest.raises(StepError) as err:  # nothing under bin/text: fairseq-preprocess fails
        run_preprocess(cfg, tmp_path / "bin", None)
    message = str(err.value)
    assert message.startswith("fairseq-preprocess failed (exit ") and "\n" not in message
    log = message.rsplit("full log: ", 1)[1]
    assert "Traceback" in Path(log).read_text()
