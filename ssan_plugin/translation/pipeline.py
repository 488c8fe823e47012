"""The text pipeline recorded in a data-bin's manifest, applied to new text.

One place turns raw source text into the sentencepiece pieces the model was trained on, and
model output pieces back into detokenised text; preparation, evaluation, ``ssan-translate``
and ``ssan_plugin.hub`` all go through it, so that a sentence translated from raw text is
processed exactly as the test split was:

- ``encode_lines(lang_config, sp, lines)``: per-language normalisation and (Moses languages)
  tokenisation (``LanguageConfig.pretokenise``), then sentencepiece pieces, in batches with
  sentencepiece's own threads, with a progress bar on long inputs;
- ``decode_pieces(lang_config, sp, pieces)``: sentencepiece pieces -> text, then Moses
  detokenisation when the data was Moses-tokenised (``LanguageConfig.detokenise``);
- ``TextPipeline.from_data_dir(DIR)``: both sides as ``DIR/manifest.json`` records them.
"""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from .languages import LanguageConfig
from .textio import PipelineError

logger = logging.getLogger("ssan_plugin.translation.pipeline")

MANIFEST = "manifest.json"
ENCODE_BATCH = 2000  # lines per sentencepiece call (each call uses `threads` threads)
PROGRESS_MIN_LINES = 5000  # shorter inputs get no progress bar


def progress(iterable, desc: str, total: Optional[int] = None, unit: str = " lines",
             min_total: int = PROGRESS_MIN_LINES):
    """A tqdm progress bar on stderr for inputs of at least ``min_total`` items (at most one
    update per 2 s; on a terminal it is erased when done, in a log the last state stays)."""
    from tqdm import tqdm

    if total is None:
        total = len(iterable)
    return tqdm(iterable, desc=desc, total=total, unit=unit, mininterval=2.0, leave=False,
                disable=total < min_total)


def pretokenise_lines(lang_config: LanguageConfig, lines: Sequence[str],
                      desc: Optional[str] = None) -> List[str]:
    """Normalisation and (Moses languages) tokenisation of every line, as preparation does."""
    desc = desc or f"normalise {lang_config.lang}"
    return [lang_config.pretokenise(x) for x in progress(lines, desc)]


def spm_encode_lines(sp, lines: Sequence[str], threads: int = 1,
                     desc: str = "sentencepiece") -> List[str]:
    """Sentencepiece pieces of each (normalised) line, space-joined; batches of ENCODE_BATCH
    lines, each encoded with ``threads`` sentencepiece threads."""
    out: List[str] = []
    bar = progress(range(len(lines)), desc)
    for start in range(0, len(lines), ENCODE_BATCH):
        batch = list(lines[start:start + ENCODE_BATCH])
        pieces = sp.encode(batch, out_type=str, num_threads=max(1, threads))
        out.extend(" ".join(p) for p in pieces)
        bar.update(len(batch))
    bar.close()
    return out


def encode_lines(lang_config: LanguageConfig, sp, lines: Sequence[str],
                 threads: int = 1) -> List[str]:
    """Raw text -> the space-joined sentencepiece pieces the model was trained on."""
    return spm_encode_lines(sp, pretokenise_lines(lang_config, lines), threads,
                            desc=f"sentencepiece {lang_config.lang}")


def decode_pieces(lang_config: LanguageConfig, sp, pieces: Iterable[str]) -> List[str]:
    """Model output (space-joined sentencepiece pieces, fairseq's H- text) -> detokenised text,
    comparable with the raw reference."""
    return [lang_config.detokenise(sp.decode_pieces(p.split())) for p in pieces]


_LANGUAGE_FIELDS = {"lang": str, "kind": str, "segmented": bool, "moses_tokenized": bool,
                    "romanian_remove_diacritics": bool, "aggressive_dash_splits": bool}
_LANGUAGE_OPTIONAL = ("romanian_remove_diacritics", "aggressive_dash_splits")


def _type_name(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value),
                                                                         type(value).__name__)


def check_manifest(manifest, path) -> dict:
    """The manifest of a prepared data-bin, checked where the project reads it (types and
    required keys: ``src``, ``tgt``, ``languages.LANG``, ``sentencepiece.model``; where
    present, ``counts.SPLIT.kept`` and ``inputs.SPLIT.LANG.{path,sha256}``); PipelineError
    naming the file and the key otherwise."""
    again = "prepare the data-bin again with ssan-prepare-translation"

    def fail(key, expected, value):
        found = "missing" if value is _MISSING else f"found {_type_name(value)}"
        raise PipelineError(f"{path}: key {key!r} must be {expected}, {found}; {again}")

    def need(container, key, kind, expected, dotted):
        value = container.get(key, _MISSING) if isinstance(container, dict) else _MISSING
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            fail(dotted, expected, value)
        return value

    if not isinstance(manifest, dict):
        raise PipelineError(f"{path}: expected a JSON object, found {_type_name(manifest)}; "
                            f"{again}")
    langs = [need(manifest, side, str, "a language code (a string)", side)
             for side in ("src", "tgt")]
    languages = need(manifest, "languages", dict, "an object", "languages")
    for lang in langs:
        record = need(languages, lang, dict, "an object", f"languages.{lang}")
        for field, kind in _LANGUAGE_FIELDS.items():
            if field in _LANGUAGE_OPTIONAL and field not in record:
                continue
            need(record, field, kind, _type_name(kind()), f"languages.{lang}.{field}")
        unknown = sorted(set(record) - set(_LANGUAGE_FIELDS))
        if unknown:
            raise PipelineError(f"{path}: key 'languages.{lang}' has unknown fields "
                                f"{', '.join(unknown)}; {again}")
    spm = need(manifest, "sentencepiece", dict, "an object", "sentencepiece")
    need(spm, "model", str, "a path (a string)", "sentencepiece.model")
    counts = manifest.get("counts", {})  # read by evaluation only (evaluate.subset_size)
    if not isinstance(counts, dict):
        fail("counts", "an object", counts)
    for split in counts:
        kept = need(counts, split, dict, "an object", f"counts.{split}")
        value = need(kept, "kept", int, "an integer", f"counts.{split}.kept")
        if value < 0:
            fail(f"counts.{split}.kept", "a non-negative integer", value)
    inputs = manifest.get("inputs", {})
    if not isinstance(inputs, dict):
        fail("inputs", "an object", inputs)
    for split, sides in inputs.items():
        need(inputs, split, dict, "an object", f"inputs.{split}")
        for lang, record in sides.items():
            need(sides, lang, dict, "an object", f"inputs.{split}.{lang}")
            for key in ("path", "sha256"):
                need(record, key, str, "a string", f"inputs.{split}.{lang}.{key}")
    return manifest


_MISSING = object()


def load_manifest(data_dir) -> dict:
    """``DATA_DIR/manifest.json``, read and checked (:func:`check_manifest`); PipelineError,
    one line naming the file (and the key), for a missing, unreadable, truncated or wrongly
    typed manifest."""
    import json

    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise PipelineError(f"{path} not found: --data must be a directory written by "
                            f"ssan-prepare-translation")
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise PipelineError(f"{path} cannot be read: {err}") from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as err:
        raise PipelineError(f"{path} is not valid JSON ({err}): truncated or edited? prepare "
                            f"the data-bin again with ssan-prepare-translation") from None
    return check_manifest(manifest, path)


def language_config_from_manifest(manifest: dict, lang: str) -> LanguageConfig:
    return LanguageConfig(**manifest["languages"][lang])


def find_spm_model(manifest: dict, data_dir) -> Path:
    """The manifest's sentencepiece model, or the file of the same name in data_dir (a moved
    data-bin)."""
    recorded = Path(manifest["sentencepiece"]["model"])
    for candidate in (recorded, Path(data_dir) / recorded.name):
        if candidate.is_file():
            return candidate
    raise PipelineError(f"sentencepiece model not found: {recorded} (nor in {data_dir})")


@dataclass
class TextPipeline:
    """Source preprocessing and target postprocessing of one prepared data-bin."""

    data_dir: Path
    manifest: dict
    src: LanguageConfig
    tgt: LanguageConfig
    sp: object  # sentencepiece.SentencePieceProcessor

    @classmethod
    def from_data_dir(cls, data_dir) -> "TextPipeline":
        import sentencepiece as spm

        manifest = load_manifest(data_dir)
        model = find_spm_model(manifest, data_dir)
        return cls(data_dir=Path(data_dir), manifest=manifest,
                   src=language_config_from_manifest(manifest, manifest["src"]),
                   tgt=language_config_from_manifest(manifest, manifest["tgt"]),
                   sp=spm.SentencePieceProcessor(model_file=str(model)))

    def encode_source(self, lines: Sequence[str], threads: int = 1) -> List[str]:
        return encode_lines(self.src, self.sp, lines, threads)

    def decode_target(self, pieces: Iterable[str]) -> List[str]:
        return decode_pieces(self.tgt, self.sp, pieces)
