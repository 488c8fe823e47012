"""The sentence-pair data directory, shared by the writer (``prepare``) and every reader.

A directory DIR holds:

- ``dict.s1.txt`` = ``dict.s2.txt``: one fairseq Dictionary for both sentences (built on the
  training split, or a translation data-bin's source dictionary with ``--translation-data``);
- per split S: ``S.s1-s2.s1.{bin,idx}`` and ``S.s1-s2.s2.{bin,idx}`` (fairseq-preprocess's
  names; first and second sentence, EOS appended as for translation sources) and
  ``S.gold.tsv``: header ``pair_ID label score``, then one row per pair in input order
  (``label`` one of corpus.LABELS or empty, ``score`` the relatedness or empty);
- ``manifest.json``, ``text/`` (the encoded text), ``spm.model`` (sentencepiece mode).
"""

import csv
import math
import os
from typing import List, Optional

from .corpus import LABELS, Pair

SIDES = ("s1", "s2")
SPLITS = ("train", "valid", "test")
MANIFEST = "manifest.json"
GOLD_HEADER = ("pair_ID", "label", "score")


def dict_path(data) -> str:
    return os.path.join(str(data), "dict.s1.txt")


def side_prefix(data, split: str, side: str) -> str:
    return os.path.join(str(data), f"{split}.s1-s2.{side}")


def gold_path(data, split: str) -> str:
    return os.path.join(str(data), f"{split}.gold.tsv")


def write_gold(path, pairs: List[Pair]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE,
                            escapechar="\\")
        writer.writerow(GOLD_HEADER)
        for p in pairs:
            writer.writerow((p.pair_id, p.label or "", "" if p.score is None else repr(p.score)))


def read_gold(path) -> List[Pair]:
    """-> pairs with empty sentences (ids, labels, scores only)."""
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    if not rows or tuple(rows[0]) != GOLD_HEADER:
        raise ValueError(f"{path}: not a gold file of prepare_pairs.py (header {GOLD_HEADER})")
    out = []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(GOLD_HEADER):
            raise ValueError(f"{path}: line {line} has {len(row)} tab-separated fields, "
                             f"expected {len(GOLD_HEADER)} ({', '.join(GOLD_HEADER)})")
        label: Optional[str] = row[1] or None
        if label is not None and label not in LABELS:
            raise ValueError(f"{path}: line {line}: unknown label {label!r}")
        score = None
        if row[2]:
            try:
                score = float(row[2])
            except ValueError:
                score = math.nan
            if not math.isfinite(score):
                raise ValueError(f"{path}: line {line}: score {row[2]!r} is not a finite number")
        out.append(Pair(row[0], "", "", label, score))
    return out
