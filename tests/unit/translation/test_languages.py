"""ssan_plugin/translation/languages.py: Romanian, Japanese, pretokenised English, Moses German
and generic languages (normalisation, tokenisation, detection of segmented text)."""

import pytest

from ssan_plugin.translation.languages import (LanguageConfig, clean_whitespace,
                                               looks_segmented, normalise_romanian)


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
    # without sentence punctuation the rule is Moses tokenisation leaving the lines as they are:
    # "$ 5" and "( small )" are tokenised, "$5" and "(small)" are not
    assert looks_segmented(["it costs $ 5", "a ( small ) house", "green house"] * 3, "en")
    assert not looks_segmented(["it costs $5", "a (small) house", "green house"] * 3, "en")
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
