"""Unit tests of the translation pipeline: languages, strict reading, generate parsing, and
prepare_translation.py's refusals and training-only filtering (tiny, in seconds)."""

import json
from pathlib import Path

import pytest
from translation_testlib import lines, load_script, prepare

from ssan_plugin.translation.decode import parse_generate_output, parse_speed
from ssan_plugin.translation.languages import (LanguageConfig, clean_whitespace,
                                               looks_segmented, normalise_romanian)
from ssan_plugin.translation.textio import PipelineError, read_lines

# ---------------------------------------------------------------- Romanian


def test_romanian_cedilla_to_comma_and_optional_diacritic_removal():
    text = "Ştiinţa şi ţara Şcolii; ș ț ă â î Ă Â Î"
    assert normalise_romanian(text) == "Știința și țara Școlii; ș ț ă â î Ă Â Î"
    assert normalise_romanian(text, remove_diacritics=True) == \
        "Stiinta si tara Scolii; s t a a i A A I"


def test_romanian_language_config_prepares_and_scores_consistently():
    keep = LanguageConfig.create("ro", segmented=False)
    strip = LanguageConfig.create("ro", segmented=False, romanian_remove_diacritics=True)
    raw = "„Ştiinţa”   e în ţară."
    assert keep.moses_tokenized
    assert keep.pretokenise(raw) == '" Știința " e în țară .'  # Moses quotes + tokeniser
    assert strip.pretokenise(raw) == '" Stiinta " e in tara .'
    assert keep.detokenise(keep.pretokenise(raw)) == '"Știința" e în țară.'
    # the reference gets exactly the normalisation the outputs cannot undo
    assert keep.reference(raw) == "„Știința”   e în țară."
    assert strip.reference(raw) == "„Stiinta”   e in tara."
    # the flag only concerns Romanian
    assert not LanguageConfig.create("en", False, romanian_remove_diacritics=True) \
        .romanian_remove_diacritics


# ---------------------------------------------------------------- Japanese

SEGMENTED_JA = ["誰 が 一番 に 着 く か 私 に は 分か り ま せ ん 。", "私 は テニス 部員 で す 。"]
RAW_JA = ["誰が一番に着くか私には分かりません。", "私はテニス部員です。"]


def test_japanese_segmentation_detected():
    assert looks_segmented(SEGMENTED_JA, "ja")
    assert not looks_segmented(RAW_JA, "ja")


@pytest.mark.parametrize("segmented, text", [(True, SEGMENTED_JA[0]), (False, RAW_JA[0])])
def test_japanese_is_never_moses_tokenised_or_normalised(segmented, text):
    ja = LanguageConfig.create("ja", segmented=segmented)
    assert ja.kind == "cjk" and not ja.moses_tokenized
    assert ja.pretokenise(text) == text  # no Moses punctuation rules (。 stays), no tokens
    assert ja.detokenise(text) == text
    assert ja.sacrebleu_tokenize() in ("ja-mecab", "char")


def test_japanese_tokenised_bleu_uses_segmentation_or_characters():
    assert LanguageConfig.create("ja", True).bleu_tokenise(SEGMENTED_JA[1]) == SEGMENTED_JA[1]
    assert LanguageConfig.create("ja", False).bleu_tokenise("私は 部員") == "私 は 部 員"


def test_pretokenised_english_detected_raw_english_not():
    tokenised = ["i can 't tell who will arrive first .", "you have eaten lunch , haven 't you ?",
                 "i 'm in the tennis club ."] * 4
    raw = ["I can't tell who will arrive first.", "You have eaten lunch, haven't you?",
           "I'm in the tennis club."] * 4
    assert looks_segmented(tokenised, "en")
    assert not looks_segmented(raw, "en")
    en = LanguageConfig.create("en", segmented=True)
    assert not en.moses_tokenized
    assert en.pretokenise(tokenised[0]) == tokenised[0]  # no punctuation normalisation either


def test_moses_round_trip_german():
    de = LanguageConfig.create("de", segmented=False)
    raw = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
    tok = de.pretokenise(raw)
    assert tok == "Ein Mann mit einem orangefarbenen Hut , der etwas anstarrt ."
    assert de.detokenise(tok) == raw
    assert de.bleu_tokenise(raw) == tok


def test_generic_languages_get_whitespace_cleanup_only():
    g = LanguageConfig.create("src", segmented=True)
    assert g.kind == "generic" and not g.moses_tokenized
    assert g.pretokenise("  a\u00a0b\r c\u2028d,e  ") == "a b c d,e"
    assert clean_whitespace("x\ty\x0bz") == "x y z"


# ---------------------------------------------------------------- reading


def test_read_lines_strict_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.de"
    path.write_bytes("eins\nzwei\n".encode() + b"dr\xe4i\n")
    with pytest.raises(PipelineError, match=r"bad\.de: line 3 is not valid UTF-8"):
        read_lines(path)
    ok = tmp_path / "ok.en"
    ok.write_bytes("\ufeffa\r\nb\n\nc".encode())
    assert read_lines(ok) == ["a", "b", "", "c"]


# ---------------------------------------------------------------- fairseq-generate output


def test_generate_output_restored_to_corpus_order_and_counted():
    out = "S-2\tc\nH-2\t-0.1\tC\nH-0\t-0.2\tA\nH-0\t-0.9\tworse\nH-1\t-0.3\t\nD-1\t-0.3\t\n"
    assert parse_generate_output(out, 3) == ["A", "", "C"]
    with pytest.raises(PipelineError, match=r"returned 3 hypotheses for a split of 4.*\[3\]"):
        parse_generate_output(out, 4)
    log = "| Translated 1,037 sentences (9,000 tokens) in 2.0s (518.50 sentences/s, 4500.00 tokens/s)"
    assert parse_speed(log) == 518.5
    assert parse_speed("nothing") is None


# ---------------------------------------------------------------- prepare: refusals

PREPARE = load_script("prepare_translation")


def write_pairs(directory, split, src, tgt, pairs, src_lang="en", tgt_lang="ro"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.{src_lang}").write_text("".join(s + "\n" for s in src), "utf-8")
    (directory / f"{split}.{tgt_lang}").write_text("".join(t + "\n" for t in tgt), "utf-8")


def small_corpus(directory, n_train=40, bad_train=(), src_lang="en", tgt_lang="ro"):
    src = [f"The house number {i} is green." for i in range(n_train)]
    tgt = [f"Casa numărul {i} este verde." for i in range(n_train)]
    for s, t in bad_train:
        src.append(s)
        tgt.append(t)
    write_pairs(directory, "train", src, tgt, None, src_lang, tgt_lang)
    write_pairs(directory, "valid", ["A house.", "Two houses."], ["O casă.", "Două case."],
                None, src_lang, tgt_lang)
    write_pairs(directory, "test", ["Ştiinţa house.", "", "A green house."],
                ["Ştiinţa casei.", "Ceva.", "O casă verde."], None, src_lang, tgt_lang)


def call_prepare(tmp_path, raw, *extra, src="en", tgt="ro"):
    dest = tmp_path / "bin"
    argv = ["--src", src, "--tgt", tgt, "--train", str(raw / "train"),
            "--valid", str(raw / "valid"), "--test", str(raw / "test"),
            "--dest", str(dest), "--vocab-size", "60", *extra]
    return PREPARE.main(argv), dest


def test_prepare_refuses_missing_files(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    (raw / "valid.ro").unlink()
    code, dest = call_prepare(tmp_path, raw)
    err = capsys.readouterr().err
    assert code != 0 and f"missing input file(s): {raw / 'valid.ro'}" in err
    assert not dest.exists()


def test_prepare_refuses_mismatched_line_counts(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    with open(raw / "test.en", "a", encoding="utf-8") as f:
        f.write("one more\n")
    code, dest = call_prepare(tmp_path, raw)
    err = capsys.readouterr().err
    assert code != 0
    assert f"test split: line counts differ: {raw / 'test.en'} has 4 lines, " \
           f"{raw / 'test.ro'} has 3" in err
    assert not dest.exists()


def test_prepare_refuses_empty_training_split(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    (raw / "train.en").write_text("")
    (raw / "train.ro").write_text("")
    code, dest = call_prepare(tmp_path, raw)
    assert code != 0 and "train split is empty" in capsys.readouterr().err
    assert not dest.exists()
    # a training split whose every pair has an empty side is refused as well
    (raw / "train.en").write_text("a\n\n")
    (raw / "train.ro").write_text("\nb\n")
    code, dest = call_prepare(tmp_path, raw)
    assert code != 0 and "no pair with both sides non-empty" in capsys.readouterr().err


def test_prepare_refuses_non_utf8(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    with open(raw / "train.ro", "ab") as f:
        f.write(b"\xff\xfe broken\n")
    with open(raw / "train.en", "a", encoding="utf-8") as f:
        f.write("broken\n")
    code, dest = call_prepare(tmp_path, raw)
    assert code != 0 and f"{raw / 'train.ro'}: line 41 is not valid UTF-8" in \
        capsys.readouterr().err
    assert not dest.exists()


def test_prepare_cli_exit_status_is_nonzero(tmp_path):
    raw = tmp_path / "raw"
    small_corpus(raw)
    (raw / "train.en").unlink()
    result = prepare("en", "ro", raw, tmp_path / "bin", 60, check=False)
    assert result.returncode != 0
    assert "missing input file(s)" in result.stderr and "Traceback" not in result.stderr


# ---------------------------------------------------------------- prepare: filtering


def test_prepare_filters_training_split_only_and_writes_manifest(tmp_path):
    raw = tmp_path / "raw"
    long_side = " ".join(["house"] * 80)  # >= 80 pieces
    bad = [("", "Gol."), ("Empty target.", ""), (long_side, long_side),
           ("A.", " ".join(["verde"] * 15))]  # <= 3 pieces vs 15..45 pieces
    small_corpus(raw, bad_train=bad)
    code, dest = call_prepare(tmp_path, raw, "--max-len", "60", "--ratio", "3",
                              "--romanian-remove-diacritics")
    assert code == 0
    manifest = json.loads((dest / "manifest.json").read_text())
    train = manifest["counts"]["train"]
    assert train == {"input": 44, "dropped_empty": 2, "dropped_too_long": 1,
                     "dropped_ratio": 1, "kept": 40}
    assert manifest["counts"]["test"]["kept"] == 3  # the empty test source line is kept
    assert manifest["counts"]["test"]["empty_side_kept"] == 1
    # valid/test: every line, in order, normalised (cedilla -> comma, no diacritics, Moses)
    assert lines(dest / "text" / "test.norm.ro") == ["Stiinta casei .", "Ceva .", "O casa verde ."]
    assert lines(dest / "text" / "test.norm.en") == ["Ştiinţa house .", "", "A green house ."]
    assert len(lines(dest / "text" / "train.spm.en")) == 40
    assert manifest["languages"]["ro"]["moses_tokenized"]
    assert manifest["languages"]["ro"]["romanian_remove_diacritics"]
    assert manifest["inputs"]["train"]["en"]["sha256"] and \
        Path(manifest["sentencepiece"]["model"]).is_file()
    assert "--joined-dictionary" in manifest["commands"]["fairseq_preprocess"]
    assert (dest / "dict.en.txt").read_text() == (dest / "dict.ro.txt").read_text()
    # a second run into the same --dest is refused instead of mixing two corpora
    code, _ = call_prepare(tmp_path, raw)
    assert code != 0
