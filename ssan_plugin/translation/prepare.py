"""Raw parallel text -> filtered, sentencepiece-encoded fairseq data-bin, with a manifest.

Steps (``prepare``):

1. check every input before any work: files exist, are UTF-8, both sides of each split have
   the same number of lines, no split is empty;
2. per-language normalisation and (for Moses languages) tokenisation, see ``languages``;
3. TRAINING split only: drop pairs with an empty side;
4. a joint sentencepiece model trained on the remaining training pairs (both sides), applied
   to every split;
5. TRAINING split only: drop pairs longer than ``max_len`` pieces on either side or whose
   piece-length ratio exceeds ``ratio``; valid and test keep every line, in order, and their
   lines longer than the model's positions (``max_positions``, fairseq's default 1024, with
   the end-of-sentence token) are reported with their line numbers (decoding refuses them
   unless told to truncate or skip them);
6. ``fairseq-preprocess --joined-dictionary`` into ``dest``; the binarised sizes are checked;
7. ``dest/manifest.json``: inputs with sha256, counts before/after filtering and why, language
   handling, the sentencepiece model, the exact commands, and the files written (``files``).

A non-empty ``dest`` is refused unless ``overwrite``; then, once every input has been read and
checked, the files an earlier preparation wrote there (its manifest's, or the names this
configuration writes) are removed before anything is written, and nothing else: the data-bin
is rebuilt whole, never mixed with an earlier one.
"""

import json
import logging
import math
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

from .languages import LanguageConfig, looks_segmented
from .pipeline import MANIFEST, pretokenise_lines, spm_encode_lines
from .textio import PipelineError, read_lines, sha256, write_lines

logger = logging.getLogger("ssan_plugin.translation.prepare")

SPLITS = ("train", "valid", "test")
SPM_PREFIX = "spm"
DEFAULT_MAX_POSITIONS = 1024  # fairseq's --max-source/target-positions, used by the recipes


@dataclass
class PrepareConfig:
    src: str
    tgt: str
    train: str
    valid: str
    test: str
    dest: str
    vocab_size: int
    segmented: str = "auto"  # auto | none | src | tgt | both
    moses_tokenize: bool = True
    max_len: int = 250
    max_positions: int = DEFAULT_MAX_POSITIONS
    ratio: float = 9.0
    romanian_remove_diacritics: bool = False
    aggressive_dash_splits: bool = False
    spm_model_type: str = "unigram"
    character_coverage: Optional[float] = None  # None: 0.9995 with a CJK side, else 1.0
    spm_input_sentence_size: int = 10_000_000
    threads: int = 1
    workers: int = 1
    overwrite: bool = False
    command: str = ""

    def validate(self):
        if self.src == self.tgt:
            raise PipelineError(f"--src and --tgt must differ, both are {self.src!r}")
        for lang in (self.src, self.tgt):
            if not lang or "/" in lang or "." in lang or lang.strip() != lang:
                raise PipelineError(f"invalid language code {lang!r}")
        if self.vocab_size < 8:
            raise PipelineError(f"--vocab-size must be at least 8, got {self.vocab_size}")
        if self.max_len < 1:
            raise PipelineError(f"--max-len must be >= 1, got {self.max_len}")
        if not self.ratio >= 1:
            raise PipelineError(f"--ratio must be >= 1, got {self.ratio}")
        if self.max_positions < 2:
            raise PipelineError(f"--max-positions must be >= 2, got {self.max_positions}")
        if self.threads < 1 or self.workers < 1:
            raise PipelineError(f"--threads and --workers must be >= 1, got {self.threads} "
                                f"and {self.workers}")
        if self.character_coverage is not None and not 0.98 <= self.character_coverage <= 1:
            raise PipelineError(f"--character-coverage must be in [0.98, 1] (sentencepiece's "
                                f"range), got {self.character_coverage}")
        if self.segmented not in ("auto", "none", "src", "tgt", "both"):
            raise PipelineError(f"--segmented must be auto, none, src, tgt or both, "
                                f"got {self.segmented!r}")


def split_files(cfg: PrepareConfig) -> Dict[str, Dict[str, Path]]:
    prefixes = {"train": cfg.train, "valid": cfg.valid, "test": cfg.test}
    return {split: {lang: Path(f"{prefix}.{lang}") for lang in (cfg.src, cfg.tgt)}
            for split, prefix in prefixes.items()}


def check_inputs(cfg: PrepareConfig):
    """Read and check every input file; return {split: {lang: lines}} or raise PipelineError."""
    files = split_files(cfg)
    missing = [str(p) for split in SPLITS for p in files[split].values() if not p.is_file()]
    if missing:
        raise PipelineError("missing input file(s): " + ", ".join(missing))
    texts = {}
    for split in SPLITS:
        texts[split] = {lang: read_lines(path) for lang, path in files[split].items()}
        counts = {lang: len(lines) for lang, lines in texts[split].items()}
        if counts[cfg.src] != counts[cfg.tgt]:
            raise PipelineError(
                f"{split} split: line counts differ: {files[split][cfg.src]} has "
                f"{counts[cfg.src]} lines, {files[split][cfg.tgt]} has {counts[cfg.tgt]}")
        if counts[cfg.src] == 0:
            raise PipelineError(f"{split} split is empty: {files[split][cfg.src]} and "
                                f"{files[split][cfg.tgt]} have no lines")
        logger.info("%s: %d lines (%s, %s)", split, counts[cfg.src],
                    files[split][cfg.src], files[split][cfg.tgt])
    return texts


def own_files(src: str, tgt: str) -> List[str]:
    """The files (relative POSIX paths) a preparation of ``src`` -> ``tgt`` writes in dest:
    the sentencepiece model, the encoded and normalised text, fairseq-preprocess's
    dictionaries, binaries and log, the manifest."""
    files = [MANIFEST, f"{SPM_PREFIX}.model", f"{SPM_PREFIX}.vocab", "preprocess.log",
             f"dict.{src}.txt", f"dict.{tgt}.txt", "text/spm_train.txt"]
    for split in SPLITS:
        for lang in (src, tgt):
            files += [f"{split}.{src}-{tgt}.{lang}.bin", f"{split}.{src}-{tgt}.{lang}.idx",
                      f"text/{split}.spm.{lang}"]
            if split != "train":
                files.append(f"text/{split}.norm.{lang}")
    return files


def _safe_language(code) -> bool:
    return isinstance(code, str) and bool(code) and "/" not in code and "\\" not in code \
        and code not in (".", "..") and code.strip() == code


def previous_files(dest) -> List[str]:
    """What an earlier preparation recorded writing in ``dest``: its manifest's ``files``, or,
    for a manifest without them, the names its languages give; [] without a readable
    manifest of this pipeline."""
    path = Path(dest) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(manifest, dict):
        return []
    files = manifest.get("files")
    if isinstance(files, list) and all(isinstance(f, str) for f in files):
        return [f for f in files if not Path(f).is_absolute() and ".." not in Path(f).parts]
    if _safe_language(manifest.get("src")) and _safe_language(manifest.get("tgt")):
        return own_files(manifest["src"], manifest["tgt"])
    return []


def dest_files(cfg: PrepareConfig) -> List[str]:
    """Every file a preparation of ``cfg`` writes or, with ``overwrite``, removes in dest."""
    return sorted(set(own_files(cfg.src, cfg.tgt)) | set(previous_files(cfg.dest)))


def clear_previous(cfg: PrepareConfig, dest: Path) -> None:
    """``overwrite``: remove what an earlier preparation wrote in ``dest`` (see
    :func:`dest_files`), nothing else."""
    from ..cli.files import remove_own_files

    if cfg.overwrite and dest.is_dir():
        removed = remove_own_files(dest, dest_files(cfg))
        if removed:
            logger.info("--overwrite: removed %d files of an earlier preparation in %s",
                        len(removed), dest)


def check_dest(cfg: PrepareConfig) -> Path:
    dest = Path(cfg.dest)
    if dest.exists() and not dest.is_dir():
        raise PipelineError(f"--dest {dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not cfg.overwrite:
        raise PipelineError(f"--dest {dest} is not empty; choose a new directory or pass "
                            f"--overwrite")
    return dest


def language_configs(cfg: PrepareConfig, train_texts) -> Dict[str, LanguageConfig]:
    forced = {"none": (), "src": (cfg.src,), "tgt": (cfg.tgt,), "both": (cfg.src, cfg.tgt)}
    configs = {}
    for lang in (cfg.src, cfg.tgt):
        if cfg.segmented == "auto":
            segmented = looks_segmented(train_texts[lang], lang)
        else:
            segmented = lang in forced[cfg.segmented]
        configs[lang] = LanguageConfig.create(
            lang, segmented, tokenize=cfg.moses_tokenize,
            romanian_remove_diacritics=cfg.romanian_remove_diacritics,
            aggressive_dash_splits=cfg.aggressive_dash_splits)
        logger.info("%s: %s", lang, configs[lang])
    return configs


SPM_META_PIECES = 3  # <unk>, <s>, </s> (sentencepiece's defaults; no <pad>)


def character_coverage(cfg: PrepareConfig, configs) -> float:
    if cfg.character_coverage is not None:
        return cfg.character_coverage
    return 0.9995 if any(c.kind == "cjk" for c in configs.values()) else 1.0


def required_characters(lines, coverage: float):
    """What sentencepiece's trainer computes before training: the characters it must keep as
    pieces to cover ``coverage`` of the (NFKC-normalised, whitespace -> U+2581, one dummy
    prefix) training text, most frequent first. Returns (required, counts sorted by frequency,
    total)."""
    import unicodedata
    from collections import Counter

    from .pipeline import progress

    counts = Counter()
    chunk = []
    for line in progress(lines, "count characters"):
        chunk.append("\u2581" + "\u2581".join(unicodedata.normalize("NFKC", line).split()))
        if len(chunk) >= 10000:
            counts.update("".join(chunk))
            chunk = []
    counts.update("".join(chunk))
    ranked = counts.most_common()
    total = sum(counts.values())
    accumulated, required = 0, 0
    for _, n in ranked:
        if accumulated / total >= coverage:
            break
        accumulated += n
        required += 1
    return required, ranked, total


def check_vocab_covers_characters(cfg: PrepareConfig, lines, coverage: float):
    """Stop before any work when sentencepiece would die with "Vocabulary size is smaller than
    required_chars": name --vocab-size and --character-coverage values that work."""
    required, ranked, total = required_characters(lines, coverage)
    if required + SPM_META_PIECES <= cfg.vocab_size:
        return required
    fit = max(cfg.vocab_size - SPM_META_PIECES, 1)
    covered = sum(n for _, n in ranked[:fit]) / total
    max_coverage = math.floor(covered * 10000) / 10000
    given = "" if cfg.character_coverage is not None else " (the default)"
    lower = (f", or --character-coverage {max_coverage:g} or less (rarer characters then "
             f"become <unk>)" if max_coverage >= 0.98 else "")
    raise PipelineError(
        f"--vocab-size {cfg.vocab_size} is too small for this training text: at "
        f"--character-coverage {coverage:g}{given} sentencepiece must keep {required} "
        f"characters (of {len(ranked)} distinct) as pieces, plus {SPM_META_PIECES} special "
        f"pieces = {required + SPM_META_PIECES} > {cfg.vocab_size}. Use --vocab-size "
        f"{required + SPM_META_PIECES} or more (more leaves room for multi-character "
        f"pieces){lower}. Nothing was written.")


def train_sentencepiece(cfg: PrepareConfig, dest: Path, train_pairs, configs):
    import sentencepiece as spm

    text_dir = dest / "text"
    spm_input = text_dir / "spm_train.txt"
    write_lines(spm_input, [s for pair in train_pairs for s in pair])
    coverage = character_coverage(cfg, configs)
    options = dict(
        input=str(spm_input),
        model_prefix=str(dest / SPM_PREFIX),
        vocab_size=cfg.vocab_size,
        model_type=cfg.spm_model_type,
        character_coverage=coverage,
        hard_vocab_limit=False,  # small corpora: at most vocab_size pieces, not exactly
        input_sentence_size=cfg.spm_input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=cfg.threads,
        minloglevel=1,
    )
    logger.info("training sentencepiece: %s", options)
    try:
        spm.SentencePieceTrainer.train(**options)
    except RuntimeError as err:  # the pre-check missed a case: still a user-facing message
        raise PipelineError(f"sentencepiece training failed: {str(err).strip()[-300:]} "
                            f"(options: --vocab-size, --character-coverage, "
                            f"--spm-model-type)") from None
    spm_input.unlink()
    return spm.SentencePieceProcessor(model_file=str(dest / f"{SPM_PREFIX}.model")), options


def fairseq_preprocess(src: str, tgt: str, prefixes: Dict[str, Path], dest: Path, workers: int,
                       srcdict: Optional[Path] = None) -> List[str]:
    """fairseq-preprocess of the text files ``PREFIX.SRC`` / ``PREFIX.TGT`` of each split
    (``prefixes``: {"train": ..., "valid": ..., "test": ...}) into ``dest``, with one dictionary
    for both sides (``srcdict``: a given one, else built from train); returns the command. Its
    log lines are passed on as they come (binarising a large corpus takes minutes); a failure
    is one line with the last line of its output and the log file
    (``cli.steps.run_step``)."""
    from ..cli.steps import run_step

    command = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", src,
               "--target-lang", tgt, "--trainpref", str(prefixes["train"]),
               "--validpref", str(prefixes["valid"]), "--testpref", str(prefixes["test"]),
               "--destdir", str(dest), "--joined-dictionary", "--workers", str(workers)]
    if srcdict is not None:
        command += ["--srcdict", str(srcdict)]
    logger.info("running: %s", shlex.join(command))

    def on_line(line: str):
        if line.startswith("INFO:fairseq_cli.preprocess:") and "Namespace(" not in line:
            logger.info("fairseq-preprocess: %s", line.rstrip().split(":", 2)[-1])

    run_step("fairseq-preprocess", command, on_line=on_line)
    return command


def run_preprocess(cfg: PrepareConfig, dest: Path) -> List[str]:
    text = dest / "text"
    return fairseq_preprocess(cfg.src, cfg.tgt, {split: text / f"{split}.spm"
                                                 for split in ("train", "valid", "test")},
                              dest, cfg.workers)


def binarised_sizes(cfg: PrepareConfig, dest: Path) -> Dict[str, Dict[str, int]]:
    from fairseq.data import indexed_dataset

    sizes = {}
    for split in SPLITS:
        sizes[split] = {}
        for lang in (cfg.src, cfg.tgt):
            path = dest / f"{split}.{cfg.src}-{cfg.tgt}.{lang}"
            sizes[split][lang] = len(indexed_dataset.MMapIndexedDataset(str(path)))
    return sizes


def too_long_lines(pieces, max_positions: int):
    """1-based numbers of the lines whose pieces + end-of-sentence exceed ``max_positions``."""
    return [i + 1 for i, line in enumerate(pieces) if len(line.split()) + 1 > max_positions]


def report_too_long(split: str, encoded, files, max_positions: int) -> dict:
    """Warn about the lines of a kept split that a model with ``max_positions`` positions
    cannot take; returns {lang: [1-based line numbers]} (the manifest's ``too_long_kept``)."""
    found = {}
    for lang, pieces in encoded.items():
        lines = too_long_lines(pieces, max_positions)
        found[lang] = lines
        if lines:
            shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
            logger.warning("%s: %d line(s) longer than %d positions (sentencepiece pieces + end "
                           "of sentence), kept: lines %s; a model with --max-source/target-"
                           "positions %d cannot decode them as they are (ssan-translate "
                           "and ssan-evaluate-bleu refuse them unless told --too-long truncate "
                           "or empty)", files[lang], len(lines), max_positions, shown,
                           max_positions)
    return found


def prepare(cfg: PrepareConfig) -> dict:
    """Run the whole pipeline; returns the manifest (also written to dest/manifest.json)."""
    started = time.time()
    cfg.validate()
    dest = check_dest(cfg)
    texts = check_inputs(cfg)
    files = split_files(cfg)
    configs = language_configs(cfg, texts["train"])
    langs = (cfg.src, cfg.tgt)

    processed = {}
    for split in SPLITS:
        processed[split] = {
            lang: pretokenise_lines(configs[lang], texts[split][lang], f"normalise {split}.{lang}")
            for lang in langs}

    counts = {split: {"input": len(texts[split][cfg.src])} for split in SPLITS}
    train_pairs = [(s, t) for s, t in zip(processed["train"][cfg.src], processed["train"][cfg.tgt])
                   if s and t]
    counts["train"]["dropped_empty"] = counts["train"]["input"] - len(train_pairs)
    if not train_pairs:
        raise PipelineError(f"training split has no pair with both sides non-empty "
                            f"({files['train'][cfg.src]}, {files['train'][cfg.tgt]})")
    for split in ("valid", "test"):
        empty = sum(1 for s, t in zip(*(processed[split][lang] for lang in langs))
                    if not s or not t)
        if empty:
            logger.warning("%s: %d line pair(s) have an empty side; kept (valid/test are "
                           "never filtered)", split, empty)
        counts[split]["empty_side_kept"] = empty

    check_vocab_covers_characters(cfg, [x for pair in train_pairs for x in pair],
                                  character_coverage(cfg, configs))
    clear_previous(cfg, dest)  # every input is checked: the earlier data-bin goes, whole
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "text").mkdir(exist_ok=True)
    sp, spm_options = train_sentencepiece(cfg, dest, train_pairs, configs)

    def encode(lines, desc):
        return spm_encode_lines(sp, lines, cfg.threads, desc=f"sentencepiece {desc}")

    kept_train, too_long, bad_ratio = [], 0, 0
    for s, t in zip(*(encode(side, f"train.{lang}")
                      for side, lang in zip(zip(*train_pairs), langs))):
        ls, lt = len(s.split()), len(t.split())
        if max(ls, lt) > cfg.max_len:
            too_long += 1
        elif max(ls, lt) > cfg.ratio * min(ls, lt):
            bad_ratio += 1
        else:
            kept_train.append((s, t))
    counts["train"].update(dropped_too_long=too_long, dropped_ratio=bad_ratio,
                           kept=len(kept_train))
    if not kept_train:
        raise PipelineError("training split is empty after filtering "
                            f"(--max-len {cfg.max_len}, --ratio {cfg.ratio}): {counts['train']}")
    logger.info("train: %d pairs in, kept %d; dropped %d with an empty side, %d longer than "
                "%d pieces, %d with a length ratio above %g", counts["train"]["input"],
                len(kept_train), counts["train"]["dropped_empty"], too_long, cfg.max_len,
                bad_ratio, cfg.ratio)

    encoded = {"train": dict(zip(langs, map(list, zip(*kept_train))))}
    for split in ("valid", "test"):
        encoded[split] = {lang: encode(processed[split][lang], f"{split}.{lang}")
                          for lang in langs}
        counts[split]["kept"] = counts[split]["input"]
        counts[split]["too_long_kept"] = report_too_long(split, encoded[split], files[split],
                                                         cfg.max_positions)
    for split in SPLITS:
        for lang in langs:
            write_lines(dest / "text" / f"{split}.spm.{lang}", encoded[split][lang])
        if split != "train":
            for lang in langs:  # the normalised text the model sees, before sentencepiece
                write_lines(dest / "text" / f"{split}.norm.{lang}", processed[split][lang])

    preprocess_command = run_preprocess(cfg, dest)
    sizes = binarised_sizes(cfg, dest)
    for split in SPLITS:
        for lang in langs:
            if sizes[split][lang] != counts[split]["kept"]:
                raise PipelineError(f"fairseq-preprocess wrote {sizes[split][lang]} sentences "
                                    f"for {split}.{lang}, expected {counts[split]['kept']}")

    manifest = {
        "src": cfg.src,
        "tgt": cfg.tgt,
        "inputs": {split: {lang: {"path": str(files[split][lang].resolve()),
                                  "sha256": sha256(files[split][lang])} for lang in langs}
                   for split in SPLITS},
        "counts": counts,
        "languages": {lang: configs[lang].as_dict() for lang in langs},
        "filter": {"max_len_pieces": cfg.max_len, "ratio": cfg.ratio, "splits": ["train"],
                   "max_positions": cfg.max_positions},
        "sentencepiece": {"model": str((dest / f"{SPM_PREFIX}.model").resolve()),
                          "model_sha256": sha256(dest / f"{SPM_PREFIX}.model"),
                          "trained_on": "train (after dropping empty pairs), both sides",
                          "options": spm_options,
                          "pieces": sp.get_piece_size()},
        "fairseq_data": {"dir": str(dest.resolve()),
                         "dict": f"dict.{cfg.src}.txt (joined, = dict.{cfg.tgt}.txt)"},
        "commands": {"prepare": cfg.command or None,
                     "sentencepiece_train": "sentencepiece.SentencePieceTrainer.train(**options)",
                     "fairseq_preprocess": shlex.join(preprocess_command)},
        "config": asdict(cfg),
        "files": [f for f in own_files(cfg.src, cfg.tgt)
                  if f == MANIFEST or (dest / f).is_file()],
        "seconds": round(time.time() - started, 1),
    }
    with open(dest / MANIFEST, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    logger.info("wrote %s", dest / MANIFEST)
    return manifest

