"""prepare.py's check that sentencepiece's vocabulary can hold the characters it must keep:
on real Japanese (a 700-line slice of ../shared/data/mt/en-ja, skipped when absent) a too small
--vocab-size stops before any work with a message naming --vocab-size and
--character-coverage values, and those values are exactly what sentencepiece accepts."""

import io
import re

import pytest
import sentencepiece as spm
from conftest import require_shared
from helpers.translation_testlib import call_prepare, lines

from ssan_plugin.translation.prepare import SPM_META_PIECES, required_characters

N_TRAIN = 700


@pytest.fixture
def raw(tmp_path):
    source = require_shared("mt/en-ja")
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, n in (("train", N_TRAIN), ("valid", 10), ("test", 10)):
        for lang in ("en", "ja"):
            text = lines(source / f"{split}.{lang}")[:n]
            (raw / f"{split}.{lang}").write_text("".join(x + "\n" for x in text), "utf-8")
    return raw


def spm_trains(sentences, vocab_size, coverage):
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences),
                                       model_writer=io.BytesIO(), vocab_size=vocab_size,
                                       character_coverage=coverage, hard_vocab_limit=False,
                                       minloglevel=2)
        return True
    except RuntimeError as err:
        assert "Vocabulary size is smaller than required_chars" in str(err)
        return False


def test_small_japanese_corpus_stops_before_work_with_working_values(raw, tmp_path, capsys):
    vocab = 500
    code, dest = call_prepare(tmp_path, raw, "--vocab-size", str(vocab), src="en", tgt="ja")
    err = capsys.readouterr().err
    assert code == 2 and not dest.exists()  # nothing written, sentencepiece never ran
    assert "Traceback" not in err and "RuntimeError" not in err
    m = re.search(r"--vocab-size 500 is too small .* at --character-coverage 0.9995 \(the "
                  r"default\) sentencepiece must keep (\d+) characters .* Use --vocab-size "
                  r"(\d+) or more .* or --character-coverage ([\d.]+) or less", err)
    assert m, err
    required, min_vocab, max_coverage = int(m.group(1)), int(m.group(2)), float(m.group(3))
    assert min_vocab == required + SPM_META_PIECES > vocab and 0.9 < max_coverage < 0.9995

    # what sentencepiece itself does with the same training text (both sides, as prepare does)
    sentences = [x for pair in zip(lines(raw / "train.en"), lines(raw / "train.ja"))
                 for x in pair]
    assert required_characters(sentences, 0.9995)[0] == required
    assert not spm_trains(sentences, min_vocab - 1, 0.9995)  # our count is exact ...
    assert spm_trains(sentences, min_vocab, 0.9995)  # ... and both suggestions work
    assert spm_trains(sentences, vocab, max_coverage)


def test_explicit_coverage_is_named_as_given(raw, tmp_path, capsys):
    code, dest = call_prepare(tmp_path, raw, "--vocab-size", "300", "--character-coverage",
                              "0.999", src="en", tgt="ja")
    err = capsys.readouterr().err
    assert code == 2 and not dest.exists()
    assert "at --character-coverage 0.999 sentencepiece must keep" in err
