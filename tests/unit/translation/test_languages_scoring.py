"""ssan_plugin/translation/languages.py, the scoring side (tests/unit/translation/test_languages.py
covers preparation): which kind each language is, the compound-split BLEU tokenisation against
the perl one-liner's semantics, the names and sacrebleu tokenizers reported, and the manifest
round trip of a LanguageConfig."""

import pytest

from ssan_plugin.translation.languages import (LanguageConfig, compound_split, language_kind,
                                               require_sacrebleu_tokenizer)
from ssan_plugin.translation.textio import PipelineError


def test_language_kinds():
    assert [language_kind(x) for x in ("en", "DE", "ro", "ja", "ZH", "ko", "src", "xx")] == [
        "moses", "moses", "moses", "cjk", "cjk", "cjk", "generic", "generic"]


@pytest.mark.parametrize("line, split", [
    ("Auto-Haus", "Auto ##AT##-##AT## Haus"),
    # non-overlapping, as perl's s///g: "b" is taken by the first match
    ("a-b-c", "a ##AT##-##AT## b-c"),
    ("a-b-c-d", "a ##AT##-##AT## b-c ##AT##-##AT## d"),
    ("- a - b -", "- a - b -"),  # only hyphens between two non-space characters
    ("x--y", "x ##AT##-##AT## -y"),  # a hyphen is a non-space character
    ("", ""),
])
def test_compound_split(line, split):
    assert compound_split(line) == split


def test_compound_split_bleu_is_german_moses_tokens_then_split():
    de = LanguageConfig.create("de", segmented=False, aggressive_dash_splits=True)
    assert de.compound_split_bleu()
    assert de.bleu_tokenise_compound_split("Das Auto-Haus, ein 3-teiliges Set.") == (
        "Das Auto ##AT##-##AT## Haus , ein 3 ##AT##-##AT## teiliges Set .")
    segmented = LanguageConfig.create("de", segmented=True)
    assert segmented.bleu_tokenise_compound_split("Auto-Haus ,  ja") == "Auto ##AT##-##AT## Haus , ja"
    assert not any(LanguageConfig.create(x, False).compound_split_bleu() for x in ("en", "ro", "ja"))


def test_aggressive_dash_splits_change_the_moses_tokens():
    plain = LanguageConfig.create("en", segmented=False)
    dashes = LanguageConfig.create("en", segmented=False, aggressive_dash_splits=True)
    assert plain.bleu_tokenise("a well-known man.") == "a well-known man ."
    assert dashes.bleu_tokenise("a well-known man.") == "a well @-@ known man ."
    assert dashes.bleu_tokenisation_name() == (
        "Moses tokeniser (sacremoses, lang=en, escape=False, aggressive dash splits)")
    assert plain.bleu_tokenisation_name() == "Moses tokeniser (sacremoses, lang=en, escape=False)"
    assert LanguageConfig.create("ja", False).bleu_tokenisation_name() == "characters"
    assert LanguageConfig.create("ja", True).bleu_tokenisation_name() == \
        "the given whitespace segmentation"
    assert LanguageConfig.create("src", True).bleu_tokenisation_name() == \
        "the given whitespace segmentation"


def test_sacrebleu_tokenizers_are_fixed_per_language():
    assert {x: LanguageConfig.create(x, False).sacrebleu_tokenize()
            for x in ("en", "de", "ja", "zh", "ko", "src")} == {
        "en": "13a", "de": "13a", "ja": "ja-mecab", "zh": "zh", "ko": "char", "src": "13a"}
    assert LanguageConfig.create("ja", True).sacrebleu_tokenize() == "ja-mecab"  # segmented too


def test_require_sacrebleu_tokenizer():
    metric = require_sacrebleu_tokenizer("13a")
    assert metric.corpus_score(["a b c d"], [["a b c d"]]).score == pytest.approx(100.0)
    try:  # Japanese: MeCab and its dictionary, or a message saying what to install
        import MeCab  # noqa: F401
        import ipadic  # noqa: F401
    except ImportError:
        with pytest.raises(PipelineError, match="sacrebleu tokenizer 'ja-mecab' is not usable "
                                                "here: .* pip install 'mecab-python3"):
            require_sacrebleu_tokenizer("ja-mecab")
    else:
        ja = require_sacrebleu_tokenizer("ja-mecab")
        assert ja.corpus_score(["私は学生です。"], [["私は学生です。"]]).score == pytest.approx(100.0)


def test_reference_is_raw_except_romanian():
    assert LanguageConfig.create("de", False).reference("„Ja“,  sagte er.") == "„Ja“,  sagte er."
    ro = LanguageConfig.create("ro", False, romanian_remove_diacritics=True)
    assert ro.reference("Ştiinţa şi ţara") == "Stiinta si tara"


@pytest.mark.parametrize("config", [
    LanguageConfig.create("ro", False, romanian_remove_diacritics=True, aggressive_dash_splits=True),
    LanguageConfig.create("ja", True),
    LanguageConfig.create("en", True),
])
def test_manifest_round_trip(config):
    record = config.as_dict()
    assert set(record) == {"lang", "kind", "segmented", "moses_tokenized",
                           "romanian_remove_diacritics", "aggressive_dash_splits"}
    assert LanguageConfig(**record) == config
