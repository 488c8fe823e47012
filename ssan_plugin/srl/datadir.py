"""The SRL data directory: file names and formats, shared by the writer and every reader.

``ssan-prepare-srl`` (``binarize``) writes it; the ``srl`` task and
``ssan-evaluate-srl`` read it. A directory DIR holds:

- ``dict.words.txt``, ``dict.labels.txt``, ``dict.chars.txt``: fairseq Dictionaries of the
  words, the BIO labels and the characters of the words seen in the training split;
- per split S (``train``, ``valid``, ``test``):

  - ``S.words``, ``S.predicate``, ``S.labels``: fairseq mmap indexed datasets (``.bin`` +
    ``.idx``; the names here are the prefixes fairseq takes), one item per instance
    (predicate), one entry per word, no EOS. ``words``/``labels`` hold dictionary ids;
    ``predicate`` holds ``IS_PREDICATE`` (1) at the predicate word and ``NOT_PREDICATE`` (0)
    elsewhere;
  - ``S.chars``: the same instances as character ids: every word's characters followed by the
    character dictionary's EOS, the word separator (so an item holds as many EOS as its
    instance has words). Directories written before it existed lack it (and
    ``dict.chars.txt``); only character features (``--srl-char-dim``) need it;
  - ``S.props``: the gold CoNLL-2005 props file of the split (every sentence, brackets
    verbatim from the source);
  - ``S.instances.tsv``: tab-separated, header ``instance sentence predicate``, then one row
    per instance in dataset order: instance id (0, 1, ...), 0-based sentence index in
    ``S.props``, 0-based predicate word position;

- ``manifest.json``: sources, counts and label set (see ``binarize.write_manifest``).

Paths are returned as ``str`` (fairseq's loaders take strings). No fairseq dependency.
"""

import csv
import os
from typing import Iterable, List, NamedTuple

WORD_DICT = "dict.words.txt"
LABEL_DICT = "dict.labels.txt"
CHAR_DICT = "dict.chars.txt"
MANIFEST = "manifest.json"
SPLITS = ("train", "valid", "test")

# the three aligned indexed datasets of a split, in the order the task loads them
WORDS, PREDICATE, LABELS = "words", "predicate", "labels"
INDEXED = (WORDS, PREDICATE, LABELS)
CHARS = "chars"  # characters of the words, each word closed by the char dictionary's EOS
IS_PREDICATE, NOT_PREDICATE = 1, 0

INSTANCES_HEADER = ("instance", "sentence", "predicate")


class Instance(NamedTuple):
    """One row of ``S.instances.tsv``."""

    instance: int
    sentence: int
    predicate: int


def word_dict_path(data: str) -> str:
    return os.path.join(str(data), WORD_DICT)


def label_dict_path(data: str) -> str:
    return os.path.join(str(data), LABEL_DICT)


def char_dict_path(data: str) -> str:
    return os.path.join(str(data), CHAR_DICT)


def manifest_path(data: str) -> str:
    return os.path.join(str(data), MANIFEST)


def dataset_prefix(data: str, split: str, name: str) -> str:
    """Prefix of an indexed dataset (``name`` in ``INDEXED`` or ``CHARS``); fairseq adds
    ``.bin``/``.idx``."""
    if name not in INDEXED + (CHARS,):
        raise ValueError(f"unknown SRL dataset {name!r}; one of {INDEXED + (CHARS,)}")
    return os.path.join(str(data), f"{split}.{name}")


def props_path(data: str, split: str) -> str:
    return os.path.join(str(data), f"{split}.props")


def instances_path(data: str, split: str) -> str:
    return os.path.join(str(data), f"{split}.instances.tsv")


def write_instances(path: str, rows: Iterable[Instance]) -> int:
    """Write the instances table; returns the number of rows (header excluded)."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(INSTANCES_HEADER) + "\n")
        for row in rows:
            f.write("\t".join(str(int(x)) for x in row) + "\n")
            n += 1
    return n


def read_instances(path: str) -> List[Instance]:
    """Read an instances table (checked: integers, ids 0, 1, ... in order).

    Raises ValueError with a ``path:line: message`` if the file is not such a table.
    """
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    if not rows or tuple(rows[0]) != INSTANCES_HEADER:
        header = "\t".join(INSTANCES_HEADER)
        raise ValueError(f"{path}:1: not an instances table (header {header!r})")
    out = []
    for line, row in enumerate(rows[1:], start=2):
        try:
            if len(row) != len(INSTANCES_HEADER):
                raise ValueError
            inst = Instance(*(int(x) for x in row))
        except ValueError:
            raise ValueError(f"{path}:{line}: expected {len(INSTANCES_HEADER)} integers, "
                             f"got {row!r}") from None
        if inst.instance != len(out):
            raise ValueError(f"{path}:{line}: instance {inst.instance}, expected {len(out)} "
                             "(ids are 0, 1, ... in dataset order)")
        out.append(inst)
    return out
