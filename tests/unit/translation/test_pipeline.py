"""ssan_plugin/translation/pipeline.py and textio.split_lines: batched, threaded sentencepiece
encoding equals line-by-line encoding; line splitting keeps every line."""

import sentencepiece as spm

from ssan_plugin.translation import pipeline
from ssan_plugin.translation.languages import LanguageConfig
from ssan_plugin.translation.textio import split_lines


def tiny_spm(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("".join(f"The house number {i} is green, isn't it?\n" for i in range(300)))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "m"),
                                   vocab_size=40, hard_vocab_limit=False, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))


def test_batched_threaded_encoding_equals_line_by_line(tmp_path, monkeypatch):
    sp = tiny_spm(tmp_path)
    monkeypatch.setattr(pipeline, "ENCODE_BATCH", 7)  # several batches, a short last one
    en = LanguageConfig.create("en", segmented=False)
    raw = [f"The  house\u00a0number {i} isn't green!" for i in range(30)] + [""]
    got = pipeline.encode_lines(en, sp, raw, threads=2)
    expected = [" ".join(sp.encode(en.pretokenise(x), out_type=str)) for x in raw]
    assert got == expected and len(got) == 31 and got[-1] == ""
    assert "'" in "".join(got)  # Moses tokenisation without escaping (no &apos;)
    # and back: pieces -> detokenised text (Moses detokeniser rejoins "isn 't")
    assert pipeline.decode_pieces(en, sp, got[:1]) == ["The house number 0 isn't green!"]


def test_split_lines_only_on_newline():
    data = "\ufeffa\r\nb\u2028c\x0cd\n\r\nlast".encode("utf-8")
    lines, crlf = split_lines(data, "x")
    assert lines == ["a", "b\u2028c\x0cd", "", "last"] and crlf == 2


def test_text_pipeline_reproduces_the_prepared_test_split(tmp_path):
    """The shared function applied to the raw test file gives exactly the pieces preparation
    wrote (Moses normalisation and tokenisation, Romanian cedillas, an empty line)."""
    from helpers.translation_testlib import call_prepare, small_corpus

    raw = tmp_path / "raw"
    small_corpus(raw)
    code, dest = call_prepare(tmp_path, raw)
    assert code == 0
    text = pipeline.TextPipeline.from_data_dir(dest)
    raw_test = (raw / "test.en").read_text("utf-8").splitlines()
    assert raw_test[0].startswith("\u015etiin\u0163a") and raw_test[1] == ""
    prepared = (dest / "text" / "test.spm.en").read_text("utf-8").splitlines()
    assert text.encode_source(raw_test) == prepared
    assert text.src.moses_tokenized and text.tgt.lang == "ro"
