"""Strict readers of the sentence-pair corpora; a malformed line stops with ``path:line: ...``.

- SICK (Marelli et al. 2014): one tab-separated file with a header naming at least
  ``pair_ID sentence_A sentence_B entailment_label relatedness_score`` (other columns, e.g.
  ``SemEval_set``, are ignored). Labels ENTAILMENT / NEUTRAL / CONTRADICTION (any case),
  relatedness a number in [1, 5], pair ids unique.
- SNLI in InferSent's layout: three aligned files ``s1.SPLIT``, ``s2.SPLIT``, ``labels.SPLIT``
  (one pair per line; labels entailment / neutral / contradiction). A spec is either
  ``DIR/SPLIT`` (reads ``DIR/s1.SPLIT`` etc.) or the three paths ``S1,S2,LABELS``. SNLI has no
  pair ids: the 1-based line number is the id. No relatedness score.

Every sentence must be non-empty after whitespace clean-up; files are UTF-8 (``textio``).
"""

import math
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

from ..errors import PipelineError
from ..translation.textio import read_lines

LABELS = ("entailment", "neutral", "contradiction")  # label ids 0, 1, 2
SCORE_RANGE = (1.0, 5.0)
SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "entailment_label", "relatedness_score")
FORMATS = ("sick", "snli")


class PairFormatError(PipelineError):
    """Malformed or misaligned pair input; the message names the file and line."""


class Pair(NamedTuple):
    pair_id: str
    a: str
    b: str
    label: Optional[str]  # one of LABELS, or None (no entailment label in this format)
    score: Optional[float]  # relatedness in [1, 5], or None


def _label(value: str, where: str) -> str:
    label = value.strip().lower()
    if label not in LABELS:
        hint = " (a pair without gold label; remove it)" if label == "-" else ""
        raise PairFormatError(f"{where}: label {value!r} is not one of {', '.join(LABELS)}{hint}")
    return label


def _sentence(value: str, where: str, column: str) -> str:
    text = " ".join(value.split())
    if not text:
        raise PairFormatError(f"{where}: {column} is empty")
    return text


def read_sick(path) -> List[Pair]:
    """The pairs of a SICK TSV file (header, then one pair a line); PairFormatError naming the
    file and line for a malformed one."""
    lines = read_lines(path)
    if not lines:
        raise PairFormatError(f"{path}: empty file (expected a header and pairs)")
    header = lines[0].split("\t")
    missing = [c for c in SICK_COLUMNS if c not in header]
    if missing:
        raise PairFormatError(f"{path}:1: header lacks column(s) {', '.join(missing)} "
                              f"(SICK layout: {' '.join(SICK_COLUMNS)} ...)")
    index = {c: header.index(c) for c in SICK_COLUMNS}
    pairs, seen = [], {}
    for number, line in enumerate(lines[1:], start=2):
        where = f"{path}:{number}"
        fields = line.split("\t")
        if len(fields) != len(header):
            raise PairFormatError(f"{where}: {len(fields)} tab-separated fields, the header has "
                                  f"{len(header)}")
        pair_id = fields[index["pair_ID"]].strip()
        if not pair_id:
            raise PairFormatError(f"{where}: pair_ID is empty")
        if pair_id in seen:
            raise PairFormatError(f"{where}: pair_ID {pair_id} repeats line {seen[pair_id]}")
        seen[pair_id] = number
        raw_score = fields[index["relatedness_score"]]
        try:
            score = float(raw_score)
        except ValueError:
            score = math.nan
        if not SCORE_RANGE[0] <= score <= SCORE_RANGE[1]:
            raise PairFormatError(f"{where}: relatedness_score {raw_score!r} is not a number in "
                                  f"[{SCORE_RANGE[0]:g}, {SCORE_RANGE[1]:g}]")
        pairs.append(Pair(pair_id, _sentence(fields[index["sentence_A"]], where, "sentence_A"),
                          _sentence(fields[index["sentence_B"]], where, "sentence_B"),
                          _label(fields[index["entailment_label"]], where), score))
    if not pairs:
        raise PairFormatError(f"{path}: no pairs after the header")
    return pairs


def snli_files(spec: str) -> Tuple[Path, Path, Path]:
    parts = spec.split(",")
    if len(parts) == 3:
        return tuple(Path(p) for p in parts)
    if len(parts) == 1:
        path = Path(spec)
        return tuple(path.parent / f"{name}.{path.name}" for name in ("s1", "s2", "labels"))
    raise PairFormatError(f"SNLI input {spec!r}: give DIR/SPLIT or S1,S2,LABELS")


def read_snli(spec: str) -> List[Pair]:
    """The pairs of an SNLI split given as its three line-aligned files (``snli_files``:
    first sentences, second sentences, labels); PairFormatError when their lengths differ."""
    files = snli_files(spec)
    s1, s2, labels = (read_lines(f) for f in files)
    counts = [len(s1), len(s2), len(labels)]
    if len(set(counts)) != 1:
        raise PairFormatError("misaligned SNLI files: " + ", ".join(
            f"{f} has {n} lines" for f, n in zip(files, counts)))
    if not counts[0]:
        raise PairFormatError(f"{files[0]}: no pairs")
    pairs = []
    for number, (a, b, label) in enumerate(zip(s1, s2, labels), start=1):
        pairs.append(Pair(str(number), _sentence(a, f"{files[0]}:{number}", "sentence 1"),
                          _sentence(b, f"{files[1]}:{number}", "sentence 2"),
                          _label(label, f"{files[2]}:{number}"), None))
    return pairs


def read_pairs(fmt: str, spec: str) -> List[Pair]:
    """The pairs of ``spec`` in format ``fmt`` (``sick`` or ``snli``)."""
    if fmt == "sick":
        return read_sick(spec)
    if fmt == "snli":
        return read_snli(spec)
    raise PairFormatError(f"unknown pair format {fmt!r}; one of {', '.join(FORMATS)}")


def spec_paths(fmt: str, spec: str) -> List[Path]:
    """The files a spec reads (for the manifest's checksums)."""
    return [Path(spec)] if fmt == "sick" else list(snli_files(spec))
