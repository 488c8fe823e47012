"""Per-language text handling, shared by preparation and evaluation.

Three kinds of language:

- ``moses``: languages with Moses rules (en, de, ro, fr, ...). Raw text gets Moses punctuation
  normalisation (sacremoses ``MosesPunctNormalizer``) and Moses tokenisation (``escape=False``);
  evaluation detokenises with ``MosesDetokenizer``. Romanian also gets the customary WMT16
  normalisation (cedilla -> comma-below forms; optionally no diacritics at all).
- ``cjk``: ja, zh, ko. Never Moses-tokenised: sentencepiece works on the raw text, or on the
  given segmentation when the input is already word-segmented (detected or forced).
- ``generic``: any other code (e.g. ``src``/``tgt`` of the synthetic corpus): whitespace
  clean-up only.

Text that is already tokenised/segmented ("segmented" below) is never re-tokenised, punctuation-
normalised (that would undo the tokenisation) or detokenised. Every kind gets whitespace
clean-up (runs of any Unicode whitespace -> one space, stripped), so that a stray ``\\r`` cannot
split a line downstream. Sentencepiece later applies its own NFKC normalisation.
"""

import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Sequence

MOSES_LANGS = frozenset(
    "ca cs da de el en es et fi fr ga hu is it lt lv nl pl pt ro ru sk sl sv ta".split()
)
CJK_LANGS = frozenset({"ja", "zh", "ko"})

# WMT16 Romanian (Sennrich's normalise-romanian.py / remove-diacritics.py): the legacy
# cedilla letters are replaced by the correct comma-below letters; the Edinburgh systems then
# removed all diacritics from the Romanian side.
RO_CEDILLA_TO_COMMA = str.maketrans({"\u015e": "\u0218", "\u015f": "\u0219",
                                     "\u0162": "\u021a", "\u0163": "\u021b"})
RO_REMOVE_DIACRITICS = str.maketrans({"\u0218": "S", "\u0219": "s", "\u021a": "T", "\u021b": "t",
                                      "\u0102": "A", "\u0103": "a", "\u00c2": "A", "\u00e2": "a",
                                      "\u00ce": "I", "\u00ee": "i"})

_ATTACHED_PUNCT = re.compile(r"\w[.,!?;:](?=\s|$)")
_DETACHED_PUNCT = re.compile(r"(?:^|\s)[.,!?;:](?=\s|$)")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff66-\uff9f]")


def language_kind(lang: str) -> str:
    lang = lang.lower()
    if lang in MOSES_LANGS:
        return "moses"
    if lang in CJK_LANGS:
        return "cjk"
    return "generic"


def clean_whitespace(line: str) -> str:
    return " ".join(line.split())


def normalise_romanian(line: str, remove_diacritics: bool = False) -> str:
    """Cedilla s/t -> comma-below s/t; with ``remove_diacritics`` also ă â î ș ț -> a a i s t."""
    line = line.translate(RO_CEDILLA_TO_COMMA)
    if remove_diacritics:
        line = line.translate(RO_REMOVE_DIACRITICS)
    return line


def looks_segmented(lines: Sequence[str], lang: str) -> bool:
    """Whether a sample of text is already tokenised / word-segmented.

    cjk: at least one space per four CJK characters on average (raw Japanese has almost no
    spaces; segmented Japanese has one between every word).
    moses: punctuation is split off the words (at least 90% of sentence punctuation marks
    ``. , ! ? ; :`` followed by a space or the line end are preceded by a space), or, for text
    without such marks, Moses tokenisation leaves at least 90% of the lines unchanged.
    generic: always treated as segmented (whitespace tokens are all we know).
    """
    kind = language_kind(lang)
    sample = [clean_whitespace(x) for x in lines[:500]]
    sample = [x for x in sample if x]
    if not sample:
        return False
    if kind == "generic":
        return True
    if kind == "cjk":
        cjk = sum(len(_CJK_CHAR.findall(x)) for x in sample)
        spaces = sum(x.count(" ") for x in sample)
        return cjk > 0 and spaces * 4 >= cjk
    attached = sum(len(_ATTACHED_PUNCT.findall(x)) for x in sample)
    detached = sum(len(_DETACHED_PUNCT.findall(x)) for x in sample)
    if attached + detached >= 10:
        return detached >= 0.9 * (attached + detached)
    tok = _moses_tokenizer(lang.lower())
    unchanged = sum(tok.tokenize(x, escape=False, return_str=True) == x for x in sample)
    return unchanged >= 0.9 * len(sample)


@lru_cache(maxsize=None)
def _moses_normalizer(lang):
    from sacremoses import MosesPunctNormalizer

    return MosesPunctNormalizer(lang=lang)


@lru_cache(maxsize=None)
def _moses_tokenizer(lang):
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


@lru_cache(maxsize=None)
def _moses_detokenizer(lang):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


@dataclass(frozen=True)
class LanguageConfig:
    """How one side of the corpus was prepared; stored in the manifest, read by evaluation."""

    lang: str
    kind: str
    segmented: bool
    moses_tokenized: bool
    romanian_remove_diacritics: bool = False
    aggressive_dash_splits: bool = False

    @classmethod
    def create(cls, lang, segmented, tokenize=True, romanian_remove_diacritics=False,
               aggressive_dash_splits=False):
        kind = language_kind(lang)
        return cls(lang=lang, kind=kind, segmented=bool(segmented),
                   moses_tokenized=bool(kind == "moses" and tokenize and not segmented),
                   romanian_remove_diacritics=bool(romanian_remove_diacritics
                                                   and lang.lower() == "ro"),
                   aggressive_dash_splits=bool(aggressive_dash_splits))

    def as_dict(self):
        return asdict(self)

    # -- preparation -------------------------------------------------------------------
    def normalise(self, line: str) -> str:
        """Input-side normalisation (no tokenisation)."""
        line = clean_whitespace(line)
        if self.lang.lower() == "ro":
            line = normalise_romanian(line, self.romanian_remove_diacritics)
        if self.kind == "moses" and not self.segmented:
            line = clean_whitespace(_moses_normalizer(self.lang.lower()).normalize(line))
        return line

    def pretokenise(self, line: str) -> str:
        line = self.normalise(line)
        if self.moses_tokenized and line:
            line = _moses_tokenizer(self.lang.lower()).tokenize(
                line, escape=False, return_str=True,
                aggressive_dash_splits=self.aggressive_dash_splits)
            line = clean_whitespace(line)
        return line

    # -- evaluation --------------------------------------------------------------------
    def detokenise(self, line: str) -> str:
        """Sentencepiece-decoded model output -> text comparable with the raw reference."""
        line = clean_whitespace(line)
        if self.moses_tokenized and line:
            line = _moses_detokenizer(self.lang.lower()).detokenize(line.split())
        return line

    def reference(self, line: str) -> str:
        """The raw reference as scored. Unchanged, except Romanian: cedilla -> comma-below
        forms, and no diacritics when the outputs have none (as in the WMT16 En-Ro systems,
        which scored diacritic-free outputs against diacritic-free references)."""
        if self.lang.lower() == "ro":
            return normalise_romanian(line, self.romanian_remove_diacritics)
        return line

    def bleu_tokenise(self, line: str) -> str:
        """Tokenisation for the "tokenised BLEU" (multi-bleu.perl style, sacrebleu tok none):
        Moses tokenisation (escape=False) for moses languages, the given segmentation for
        segmented text, characters for unsegmented CJK."""
        line = clean_whitespace(line)
        if self.kind == "moses" and not self.segmented:
            return clean_whitespace(_moses_tokenizer(self.lang.lower()).tokenize(
                line, escape=False, return_str=True,
                aggressive_dash_splits=self.aggressive_dash_splits))
        if self.kind == "cjk" and not self.segmented:
            return " ".join(ch for ch in line if not ch.isspace())
        return line

    def bleu_tokenisation_name(self) -> str:
        if self.kind == "moses" and not self.segmented:
            dash = ", aggressive dash splits" if self.aggressive_dash_splits else ""
            return f"Moses tokeniser (sacremoses, lang={self.lang}, escape=False{dash})"
        if self.kind == "cjk" and not self.segmented:
            return "characters"
        return "the given whitespace segmentation"

    def compound_split_bleu(self) -> bool:
        """Whether a compound-split tokenised BLEU is reported (German output, as the WMT14
        En-De papers since Vaswani et al. 2017 report it)."""
        return self.kind == "moses" and self.lang.lower() in COMPOUND_SPLIT_LANGS

    def bleu_tokenise_compound_split(self, line: str) -> str:
        """The ``##AT##`` convention (tensor2tensor's get_ende_bleu.sh, fairseq's
        compound_split_bleu.sh): Moses tokenisation without aggressive dash splits, then every
        hyphen between two non-space characters becomes the token ``##AT##-##AT##``."""
        line = clean_whitespace(line)
        if not self.segmented:
            line = clean_whitespace(_moses_tokenizer(self.lang.lower()).tokenize(
                line, escape=False, return_str=True))
        return compound_split(line)

    def sacrebleu_tokenize(self) -> str:
        """sacrebleu's tokenizer for the detokenised BLEU. Always the same per language, never
        chosen by what the machine has installed: Japanese is scored with ja-mecab (MeCab
        0.996 and the IPA dictionary, both shipped by the pinned mecab-python3 and ipadic
        packages; ``require_sacrebleu_tokenizer`` stops with an install hint without them)."""
        if self.kind == "cjk":
            if self.lang.lower() == "ja":
                return "ja-mecab"
            if self.lang.lower() == "zh":
                return "zh"
            return "char"
        return "13a"


COMPOUND_SPLIT_LANGS = frozenset({"de"})
_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")


def compound_split(line: str) -> str:
    """perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g' (same non-overlapping matches)."""
    return _COMPOUND_HYPHEN.sub(r"\1 ##AT##-##AT## \2", line)


def require_sacrebleu_tokenizer(name: str):
    """A sacrebleu BLEU metric with tokenizer ``name``, or a PipelineError saying what to
    install (ja-mecab needs mecab-python3 and ipadic)."""
    from sacrebleu.metrics import BLEU

    from .textio import PipelineError

    try:
        return BLEU(tokenize=name)
    except (RuntimeError, ImportError, AssertionError) as err:
        hint = (" Install the pinned packages: pip install 'mecab-python3>=1.0.9,<2' "
                "'ipadic>=1.0,<2' (make install does)." if name == "ja-mecab" else "")
        raise PipelineError(f"sacrebleu tokenizer {name!r} is not usable here: "
                            f"{str(err).strip().splitlines()[-1] if str(err).strip() else err!r}."
                            f"{hint}") from None
