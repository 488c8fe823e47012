"""CoNLL SRL corpora -> the data directory of ``datadir`` (what ``--task srl`` trains on).

Conventions:

- every proposition (predicate) of every sentence becomes one instance: the sentence's words,
  the predicate position, the BIO tags of its argument column (outermost phrases only;
  ``C-``/``R-`` kept as labels of their own; ``Proposition.bio``);
- the dictionaries come from the training split only: words seen at least
  ``word_threshold`` times (padded to a multiple of 8, as fairseq-preprocess does), every
  label and every character seen (no padding); unseen words/labels/characters of other splits
  map to ``<unk>`` and are counted. Characters are those of every training word, rare words
  included, so that a word unknown to the word dictionary still has its spelling;
- nothing is written until every split has been read, so malformed input leaves no partial
  directory behind.

Uses fairseq's ``Dictionary`` and mmap indexed datasets.
"""

import json
import os
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, NamedTuple, Sequence, Tuple

import torch
from fairseq.data import Dictionary, indexed_dataset

from ..errors import InputError
from ..cli.files import check_input_file, check_output_dir, remove_own_files
from . import datadir
from .conll2005 import read_conll2005, resolve_conll2005
from .conll2012 import read_conll2012
from .corpus import CoNLLFormatError, Sentence
from .props import write_props

FORMATS = ("conll2012", "conll2005")
WORD_PADDING_FACTOR = 8
LABEL_PADDING_FACTOR = 1


class PrepareError(InputError, ValueError):
    """Input that reads fine but cannot be used (e.g. a training split without predicates)."""


class SRLInstance(NamedTuple):
    sentence: int  # index of the sentence in its split
    words: Tuple[str, ...]
    predicate: int  # 0-based position of the predicate word
    tags: List[str]  # one BIO tag per word
    dropped: int  # embedded argument phrases dropped by the BIO conversion


def read_split(fmt: str, spec: str) -> Tuple[List[Sentence], List[str]]:
    """(sentences, source paths) of one split.

    ``conll2012``: spec is a ``*_conll`` file. ``conll2005``: a prefix P (``P.words`` and
    ``P.props``, each optionally ``.gz``) or ``WORDS,PROPS``. Raises PrepareError (a missing
    file, a directory, an unreadable file), InputError (invalid UTF-8) or
    ``CoNLLFormatError`` (``path:line: message``).
    """
    try:
        if fmt == "conll2012":
            check_input_file(spec, "CoNLL-2012 file")
            return read_conll2012(spec), [spec]
        if fmt == "conll2005":
            try:
                words, props = resolve_conll2005(spec)
            except FileNotFoundError as err:
                raise PrepareError(str(err)) from None
            check_input_file(words, "CoNLL-2005 words file")
            check_input_file(props, "CoNLL-2005 props file")
            return read_conll2005(words, props), [words, props]
    except (CoNLLFormatError, PrepareError):
        raise
    except InputError as err:
        raise PrepareError(str(err)) from None
    raise ValueError(f"unknown SRL corpus format {fmt!r}; one of {FORMATS}")


def instances(sentences: Sequence[Sentence]) -> Iterator[SRLInstance]:
    """One instance per proposition, sentences in order, propositions in column order."""
    for index, sentence in enumerate(sentences):
        for prop in sentence.propositions:
            tags, dropped = prop.bio()
            yield SRLInstance(index, sentence.words, prop.position, tags, dropped)


def build_dictionary(tokens: Iterable[str], threshold: int, padding_factor: int) -> Dictionary:
    """A fairseq Dictionary of the tokens seen at least ``threshold`` times."""
    d = Dictionary()
    for tok, count in Counter(tokens).items():
        d.add_symbol(tok, n=count)
    d.finalize(threshold=threshold, nwords=-1, padding_factor=padding_factor)
    return d


def build_dictionaries(train: Sequence[Sentence], word_threshold: int = 1
                       ) -> Tuple[Dictionary, Dictionary]:
    """(word dictionary, label dictionary) of the training sentences; PrepareError if they
    have no predicates."""
    rows = list(instances(train))
    if not rows:
        raise PrepareError("the training split has no predicates")
    words = build_dictionary((w for s in train for w in s.words), word_threshold,
                             WORD_PADDING_FACTOR)
    labels = build_dictionary((t for row in rows for t in row.tags), 1, LABEL_PADDING_FACTOR)
    return words, labels


def build_char_dictionary(train: Sequence[Sentence]) -> Dictionary:
    """The characters of the training words (Python characters, i.e. code points)."""
    return build_dictionary((c for s in train for w in s.words for c in w), 1, 1)


def char_ids(words: Sequence[str], char_dict: Dictionary) -> List[int]:
    """The ``chars`` item of an instance: each word's character ids, then EOS (datadir)."""
    return [i for w in words for i in [char_dict.index(c) for c in w] + [char_dict.eos()]]


def write_indexed(prefix: str, items: Iterable[Sequence[int]], vocab_size: int) -> None:
    """An mmap indexed dataset ``prefix.bin``/``prefix.idx``, one item per sequence."""
    builder = indexed_dataset.make_builder(
        indexed_dataset.data_file_path(prefix), impl="mmap", vocab_size=vocab_size
    )
    for item in items:
        builder.add_item(torch.IntTensor(list(item)))
    builder.finalize(indexed_dataset.index_file_path(prefix))


def write_split(dest: str, split: str, sentences: Sequence[Sentence], word_dict: Dictionary,
                label_dict: Dictionary, char_dict: Dictionary) -> Dict[str, int]:
    """Write one split's indexed datasets, props and instances table; returns its counts."""
    rows = list(instances(sentences))
    word_ids, predicates, label_ids, chars = [], [], [], []
    unk_words = unk_labels = unk_chars = tokens = dropped = 0
    for row in rows:
        w = [word_dict.index(x) for x in row.words]
        lab = [label_dict.index(x) for x in row.tags]
        unk_words += sum(i == word_dict.unk() for i in w)
        unk_labels += sum(i == label_dict.unk() for i in lab)
        chars.append(char_ids(row.words, char_dict))
        unk_chars += sum(i == char_dict.unk() for i in chars[-1])
        tokens += len(w)
        dropped += row.dropped
        word_ids.append(w)
        label_ids.append(lab)
        predicates.append([datadir.IS_PREDICATE if i == row.predicate else datadir.NOT_PREDICATE
                           for i in range(len(row.words))])
    write_indexed(datadir.dataset_prefix(dest, split, datadir.WORDS), word_ids, len(word_dict))
    write_indexed(datadir.dataset_prefix(dest, split, datadir.PREDICATE), predicates, 2)
    write_indexed(datadir.dataset_prefix(dest, split, datadir.LABELS), label_ids, len(label_dict))
    write_indexed(datadir.dataset_prefix(dest, split, datadir.CHARS), chars, len(char_dict))
    write_props(datadir.props_path(dest, split),
                ((s.targets(), [list(p.tags) for p in s.propositions]) for s in sentences))
    datadir.write_instances(
        datadir.instances_path(dest, split),
        (datadir.Instance(k, row.sentence, row.predicate) for k, row in enumerate(rows)),
    )
    return {
        "sentences": len(sentences),
        "instances": len(rows),
        "instance_tokens": tokens,
        "unknown_word_tokens": unk_words,
        "unknown_label_tokens": unk_labels,
        "unknown_characters": unk_chars,
        "embedded_phrases_dropped": dropped,
    }


def write_manifest(dest: str, manifest: dict) -> None:
    """``manifest.json``: ``format``, ``task`` ("srl"), ``words`` and ``chars`` (dictionary
    sizes),
    ``labels`` (label symbols, specials excluded), ``splits.S`` = ``sources`` (absolute
    paths) + the counts of ``write_split``."""
    with open(datadir.manifest_path(dest), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


def own_files() -> List[str]:
    """The files (relative paths) :func:`prepare` writes in a data directory, any split."""
    files = [datadir.WORD_DICT, datadir.LABEL_DICT, datadir.CHAR_DICT, datadir.MANIFEST]
    for split in datadir.SPLITS:
        files += [f"{split}.{name}.{ext}" for name in datadir.INDEXED + (datadir.CHARS,)
                  for ext in ("bin", "idx")]
        files += [os.path.basename(datadir.props_path("", split)),
                  os.path.basename(datadir.instances_path("", split))]
    return files


def prepare(fmt: str, splits: Dict[str, str], dest: str, word_threshold: int = 1,
            overwrite: bool = False) -> dict:
    """Read every split (``{"train": spec, "valid": spec, ...}``; train required), then write
    the whole data directory at ``dest``; returns the manifest. With ``overwrite``, the files
    an earlier preparation wrote there (:func:`own_files`, every split) are removed once the
    inputs are read, nothing else, so that no split of an earlier corpus stays behind.

    Raises ``CoNLLFormatError`` or PrepareError before writing anything (``dest`` is checked
    first: not an existing file, writable).
    """
    try:
        check_output_dir(dest, "--dest")
    except InputError as err:
        raise PrepareError(str(err)) from None
    if "train" not in splits:
        raise PrepareError("a training split is required")
    unknown = set(splits) - set(datadir.SPLITS)
    if unknown:
        raise PrepareError(f"unknown split(s) {sorted(unknown)}; splits are {datadir.SPLITS}")
    read = {name: read_split(fmt, spec) for name, spec in splits.items()}
    try:
        word_dict, label_dict = build_dictionaries(read["train"][0], word_threshold)
    except PrepareError:
        raise PrepareError(f"{splits['train']} has no predicates") from None
    char_dict = build_char_dictionary(read["train"][0])

    if overwrite and Path(dest).is_dir():
        remove_own_files(dest, own_files())
    Path(dest).mkdir(parents=True, exist_ok=True)
    word_dict.save(datadir.word_dict_path(dest))
    label_dict.save(datadir.label_dict_path(dest))
    char_dict.save(datadir.char_dict_path(dest))
    manifest = {
        "format": fmt,
        "task": "srl",
        "words": len(word_dict),
        "chars": len(char_dict),
        "labels": label_dict.symbols[label_dict.nspecial:],
        "splits": {},
    }
    for name, (sentences, sources) in read.items():
        stats = write_split(dest, name, sentences, word_dict, label_dict, char_dict)
        manifest["splits"][name] = {"sources": [os.path.abspath(s) for s in sources], **stats}
    write_manifest(dest, manifest)
    return manifest
