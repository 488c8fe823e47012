#!/usr/bin/env python
"""Prepare CoNLL SRL data for ``fairseq-train --task srl`` (public contract).

    prepare_srl.py --format conll2012|conll2005 --train F [--valid F] [--test F] --dest DIR

F: for conll2012 a ``*_conll`` file; for conll2005 a prefix P (``P.words`` + ``P.props``,
each optionally ``.gz``) or ``WORDS,PROPS``. Each predicate of each sentence becomes one
instance (words, predicate position, BIO tags of its argument column; ``C-``/``R-`` kept).

DIR gets (splits named train / valid / test):
  dict.words.txt, dict.labels.txt   fairseq Dictionaries (words and labels seen in train)
  S.words, S.predicate, S.labels    fairseq mmap indexed datasets (.bin/.idx), one item per
                                    instance, one entry per word, no EOS; predicate: 1 at the
                                    predicate word, 0 elsewhere
  S.props                           gold CoNLL-2005 props file (the source brackets verbatim)
  S.instances.tsv                   instance, sentence, predicate position (0-based)
  manifest.json                     sources, counts, label set
Malformed input stops with ``path:line: message``.
"""

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fairseq.data import Dictionary, indexed_dataset  # noqa: E402

from ssan_plugin.srl.conll2005 import read_conll2005, resolve_conll2005  # noqa: E402
from ssan_plugin.srl.conll2012 import read_conll2012  # noqa: E402
from ssan_plugin.srl.corpus import CoNLLFormatError  # noqa: E402
from ssan_plugin.srl.props import write_props  # noqa: E402


def read_split(fmt: str, spec: str):
    if fmt == "conll2012":
        if not os.path.exists(spec):
            raise FileNotFoundError(f"{spec} does not exist")
        return read_conll2012(spec), [spec]
    words, props = resolve_conll2005(spec)
    return read_conll2005(words, props), [words, props]


def instances(sentences):
    """-> (sentence index, words, predicate position, BIO tags, dropped embedded phrases)."""
    for index, sentence in enumerate(sentences):
        for prop in sentence.propositions:
            bio, dropped = prop.bio()
            yield index, sentence.words, prop.position, bio, dropped


def build_dictionary(tokens, threshold: int, padding_factor: int) -> Dictionary:
    d = Dictionary()
    for tok, count in Counter(tokens).items():
        d.add_symbol(tok, n=count)
    d.finalize(threshold=threshold, nwords=-1, padding_factor=padding_factor)
    return d


def binarize(prefix: str, items, vocab_size: int) -> None:
    builder = indexed_dataset.make_builder(
        indexed_dataset.data_file_path(prefix), impl="mmap", vocab_size=vocab_size
    )
    for item in items:
        builder.add_item(torch.IntTensor(item))
    builder.finalize(indexed_dataset.index_file_path(prefix))


def write_split(dest: Path, split: str, sentences, word_dict: Dictionary, label_dict: Dictionary):
    rows = list(instances(sentences))
    words_ids, predicates, labels = [], [], []
    unk_words = unk_labels = tokens = dropped = 0
    for _, words, position, bio, n_dropped in rows:
        w = [word_dict.index(x) for x in words]
        lab = [label_dict.index(x) for x in bio]
        unk_words += sum(i == word_dict.unk() for i in w)
        unk_labels += sum(i == label_dict.unk() for i in lab)
        tokens += len(w)
        dropped += n_dropped
        words_ids.append(w)
        labels.append(lab)
        predicates.append([int(i == position) for i in range(len(words))])
    binarize(str(dest / f"{split}.words"), words_ids, len(word_dict))
    binarize(str(dest / f"{split}.predicate"), predicates, 2)
    binarize(str(dest / f"{split}.labels"), labels, len(label_dict))
    write_props(str(dest / f"{split}.props"),
                ((s.targets(), [list(p.tags) for p in s.propositions]) for s in sentences))
    with open(dest / f"{split}.instances.tsv", "w", encoding="utf-8") as f:
        f.write("instance\tsentence\tpredicate\n")
        for k, (index, _, position, _, _) in enumerate(rows):
            f.write(f"{k}\t{index}\t{position}\n")
    return {
        "sentences": len(sentences),
        "instances": len(rows),
        "instance_tokens": tokens,
        "unknown_word_tokens": unk_words,
        "unknown_label_tokens": unk_labels,
        "embedded_phrases_dropped": dropped,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", required=True, choices=["conll2012", "conll2005"])
    parser.add_argument("--train", required=True, metavar="F")
    parser.add_argument("--valid", metavar="F")
    parser.add_argument("--test", metavar="F")
    parser.add_argument("--dest", required=True, metavar="DIR")
    parser.add_argument("--word-threshold", type=int, default=1, metavar="N",
                        help="keep training words seen at least N times (default 1)")
    args = parser.parse_args(argv)

    dest = Path(args.dest)
    try:
        splits = {"train": read_split(args.format, args.train)}
        for name in ("valid", "test"):
            spec = getattr(args, name)
            if spec:
                splits[name] = read_split(args.format, spec)
    except (CoNLLFormatError, FileNotFoundError) as err:
        parser.exit(2, f"prepare_srl.py: error: {err}\n")

    train = splits["train"][0]
    train_rows = list(instances(train))
    if not train_rows:
        parser.exit(2, f"prepare_srl.py: error: {args.train} has no predicates\n")
    word_dict = build_dictionary((w for s in train for w in s.words), args.word_threshold, 8)
    label_dict = build_dictionary((t for row in train_rows for t in row[3]), 1, 1)

    dest.mkdir(parents=True, exist_ok=True)
    word_dict.save(str(dest / "dict.words.txt"))
    label_dict.save(str(dest / "dict.labels.txt"))
    manifest = {
        "format": args.format,
        "task": "srl",
        "words": len(word_dict),
        "labels": label_dict.symbols[label_dict.nspecial:],
        "splits": {},
    }
    for name, (sentences, sources) in splits.items():
        stats = write_split(dest, name, sentences, word_dict, label_dict)
        manifest["splits"][name] = {"sources": [os.path.abspath(s) for s in sources], **stats}
        print(f"{name}: {stats['sentences']} sentences, {stats['instances']} instances, "
              f"{stats['instance_tokens']} instance tokens, {stats['unknown_word_tokens']} unknown words, "
              f"{stats['unknown_label_tokens']} unknown labels")
    with open(dest / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
