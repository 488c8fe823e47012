"""Raw sentence pairs -> a fairseq data directory for ``--task sentence_pair``, with a manifest.

The text goes through the translation pipeline's own steps (``ssan_plugin.translation``), not a
second pipeline: per-language normalisation and Moses tokenisation (``LanguageConfig``,
``pretokenise_lines``), then either

- ``tokens="spm"``: a sentencepiece model trained on the training pairs (both sentences;
  ``translation.prepare.train_sentencepiece`` with its vocabulary pre-check), or, with
  ``translation_data=DIR``, the sentencepiece model, language handling and dictionary recorded
  in a translation data-bin's manifest, so that a translation encoder fits the pair data
  (``--encoder-init``);
- ``tokens="words"``: the normalised, tokenised words.

Then ``fairseq-preprocess --joined-dictionary`` (with the translation dictionary as
``--srcdict`` in ``translation_data`` mode), the gold table per split and ``manifest.json``.
Every input is read and checked before anything is written; pairs are never filtered or
reordered. The layout is ``datadir``. With ``overwrite``, the files a preparation writes
(:func:`own_files`) are removed from a non-empty ``dest`` first, once the inputs are checked,
and nothing else: the directory is rebuilt whole, never mixed with an earlier one.
"""

import json
import logging
import shlex
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

from ..errors import PipelineError
from ..cli.files import remove_own_files
from ..translation import pipeline
from ..translation import prepare as translation_prepare
from ..translation.languages import LanguageConfig, looks_segmented
from ..translation.textio import sha256, write_lines
from . import datadir
from .corpus import FORMATS, LABELS, Pair, read_pairs, spec_paths

logger = logging.getLogger("ssan_plugin.pairs.prepare")

TOKENS = ("spm", "words")


@dataclass
class PairPrepareConfig:
    format: str
    train: str
    valid: str
    test: str
    dest: str
    tokens: str = "spm"
    vocab_size: int = 4000
    lang: str = "en"
    translation_data: Optional[str] = None
    segmented: str = "auto"  # auto | yes | no
    threads: int = 1
    workers: int = 1
    overwrite: bool = False
    command: str = ""

    def validate(self):
        if self.format not in FORMATS:
            raise PipelineError(f"--format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if self.tokens not in TOKENS:
            raise PipelineError(f"--tokens must be spm or words, got {self.tokens!r}")
        if self.segmented not in ("auto", "yes", "no"):
            raise PipelineError(f"--segmented must be auto, yes or no, got {self.segmented!r}")
        if self.translation_data and self.tokens != "spm":
            raise PipelineError("--translation-data takes the translation's sentencepiece "
                                "model: it needs --tokens spm")
        if self.tokens == "spm" and not self.translation_data and self.vocab_size < 8:
            raise PipelineError(f"--vocab-size must be at least 8, got {self.vocab_size}")

    def translation_config(self) -> translation_prepare.PrepareConfig:
        """The translation pipeline's config for what it does here (sentencepiece training,
        the binarised size check): the two sentences play source (s1) and target (s2)."""
        return translation_prepare.PrepareConfig(
            src="s1", tgt="s2", train=self.train, valid=self.valid, test=self.test,
            dest=self.dest, vocab_size=self.vocab_size, threads=self.threads,
            workers=self.workers, overwrite=self.overwrite)


def own_files() -> List[str]:
    """The files (relative POSIX paths) a preparation writes in dest."""
    files = [datadir.MANIFEST, f"{translation_prepare.SPM_PREFIX}.model",
             f"{translation_prepare.SPM_PREFIX}.vocab", "preprocess.log", "dict.s1.txt",
             "dict.s2.txt", "text/spm_train.txt"]
    for split in datadir.SPLITS:
        files.append(f"{split}.gold.tsv")
        for side in datadir.SIDES:
            files += [f"text/{split}.{side}", f"{split}.s1-s2.{side}.bin",
                      f"{split}.s1-s2.{side}.idx"]
    return files


def read_splits(cfg: PairPrepareConfig) -> Dict[str, List[Pair]]:
    """Every split read and checked (PairFormatError names file and line) before any work."""
    return {split: read_pairs(cfg.format, getattr(cfg, split)) for split in datadir.SPLITS}


def translation_side(cfg: PairPrepareConfig):
    """(LanguageConfig, sentencepiece processor, dictionary path) of a translation data-bin."""
    import sentencepiece as spm

    data = Path(cfg.translation_data)
    manifest = pipeline.load_manifest(data)
    if cfg.lang not in (manifest["src"], manifest["tgt"]):
        raise PipelineError(f"--lang {cfg.lang}: {data} translates {manifest['src']} -> "
                            f"{manifest['tgt']}")
    dictionary = data / f"dict.{cfg.lang}.txt"
    if not dictionary.is_file():
        raise PipelineError(f"{dictionary} not found (a translation data-bin has one per language)")
    model = pipeline.find_spm_model(manifest, data)
    return (pipeline.language_config_from_manifest(manifest, cfg.lang),
            spm.SentencePieceProcessor(model_file=str(model)), dictionary, model)


def run_preprocess(cfg: PairPrepareConfig, dest: Path, srcdict: Optional[Path]) -> List[str]:
    """fairseq-preprocess of the two sentences (``s1``, ``s2``) of every split, one dictionary
    (``srcdict``: a translation model's, else built from train)."""
    text = dest / "text"
    return translation_prepare.fairseq_preprocess(
        "s1", "s2", {split: text / split for split in ("train", "valid", "test")}, dest,
        cfg.workers, srcdict)


def prepare(cfg: PairPrepareConfig) -> dict:
    """Run the whole preparation; returns the manifest (also written to dest/manifest.json)."""
    started = time.time()
    cfg.validate()
    tcfg = cfg.translation_config()
    dest = translation_prepare.check_dest(tcfg)
    splits = read_splits(cfg)
    for split, pairs in splits.items():
        logger.info("%s: %d pairs", split, len(pairs))

    spm_info, srcdict = None, None
    if cfg.translation_data:
        lang_config, sp, srcdict, spm_model = translation_side(cfg)
    else:
        train_text = [s for p in splits["train"] for s in (p.a, p.b)]
        segmented = (looks_segmented(train_text, cfg.lang) if cfg.segmented == "auto"
                     else cfg.segmented == "yes")
        lang_config = LanguageConfig.create(cfg.lang, segmented)
    logger.info("language handling: %s", lang_config)

    normalised = {split: {side: pipeline.pretokenise_lines(
        lang_config, [getattr(p, "a" if side == "s1" else "b") for p in pairs],
        f"normalise {split}.{side}") for side in datadir.SIDES}
        for split, pairs in splits.items()}
    for split in datadir.SPLITS:
        for side in datadir.SIDES:
            for number, line in enumerate(normalised[split][side]):
                if not line:  # e.g. a sentence of characters the normalisation removes
                    raise PipelineError(f"{getattr(cfg, split)}: pair {splits[split][number].pair_id}"
                                        f" ({split}): sentence {side} is empty after normalisation")

    if cfg.overwrite and dest.is_dir():  # every input is checked: the earlier data goes, whole
        remove_own_files(dest, own_files())
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "text").mkdir(exist_ok=True)
    if cfg.tokens == "spm":
        if not cfg.translation_data:
            train_pairs = list(zip(normalised["train"]["s1"], normalised["train"]["s2"]))
            configs = {"s1": lang_config}
            coverage = translation_prepare.character_coverage(tcfg, configs)
            translation_prepare.check_vocab_covers_characters(
                tcfg, [s for pair in train_pairs for s in pair], coverage)
            sp, options = translation_prepare.train_sentencepiece(tcfg, dest, train_pairs, configs)
            spm_model = dest / f"{translation_prepare.SPM_PREFIX}.model"
            spm_info = {"trained_on": "train, both sentences", "options": options}
        else:
            spm_info = {"trained_on": f"the translation data-bin {cfg.translation_data}"}
        spm_info.update(model=str(Path(spm_model).resolve()), model_sha256=sha256(spm_model),
                        pieces=sp.get_piece_size())
        encoded = {split: {side: pipeline.spm_encode_lines(sp, lines, cfg.threads,
                                                           desc=f"sentencepiece {split}.{side}")
                           for side, lines in sides.items()}
                   for split, sides in normalised.items()}
    else:
        encoded = normalised
    for split in datadir.SPLITS:
        for side in datadir.SIDES:
            write_lines(dest / "text" / f"{split}.{side}", encoded[split][side])
        datadir.write_gold(datadir.gold_path(dest, split), splits[split])

    preprocess_command = run_preprocess(cfg, dest, srcdict)
    sizes = translation_prepare.binarised_sizes(tcfg, dest)
    for split in datadir.SPLITS:
        for side in datadir.SIDES:
            if sizes[split][side] != len(splits[split]):
                raise PipelineError(f"fairseq-preprocess wrote {sizes[split][side]} sentences for "
                                    f"{split}.{side}, expected {len(splits[split])}")

    counts = {}
    for split, pairs in splits.items():
        counts[split] = {"pairs": len(pairs),
                         "labels": {label: sum(p.label == label for p in pairs) for label in LABELS},
                         "with_score": sum(p.score is not None for p in pairs)}
    manifest = {
        "format": cfg.format,
        "inputs": {split: [{"path": str(path.resolve()), "sha256": sha256(path)}
                           for path in spec_paths(cfg.format, getattr(cfg, split))]
                   for split in datadir.SPLITS},
        "counts": counts,
        "labels": list(LABELS),
        "tokens": cfg.tokens,
        "language": lang_config.as_dict(),
        "sentencepiece": spm_info,
        "dictionary": {"path": datadir.dict_path(dest),
                       "from": str(Path(srcdict).resolve()) if srcdict else "train (both sentences)"},
        "commands": {"prepare": cfg.command or None,
                     "fairseq_preprocess": shlex.join(preprocess_command)},
        "config": asdict(cfg),
        "seconds": round(time.time() - started, 1),
    }
    with open(dest / datadir.MANIFEST, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    logger.info("wrote %s", dest / datadir.MANIFEST)
    return manifest
