"""Probing data sets in SentEval's format (Conneau et al., 2018), as the SSAN paper uses them.

A probing file has one example a line: ``SPLIT <TAB> LABEL <TAB> SENTENCE`` with SPLIT one of
``tr`` (train), ``va`` (validation), ``te`` (test). Tasks:

- ``bigram_shift`` (from raw text, one sentence a line, words = whitespace tokens): in half of
  the sentences (chosen at random) two adjacent, different words are inverted; labels ``I``
  (inverted) and ``O`` (original). Sentences with fewer than two different adjacent words
  are skipped.
- ``wrd`` (word reordering detection, Yang et al., 2019): one word moved to another position.
  The label is ``"i j"`` as in the set of ``../shared/data/probing/wrd/``
  (``word_order.txt.SPLIT.x`` sentences, ``.y`` labels): ``i`` the position of the moved word in
  the new sentence, ``j`` the position, in the new sentence, of the word that followed it
  originally (``len(sentence)`` if it was the last word); 0-based, over the sentence's tokens.
  :func:`read_wrd_dir` reads such a directory (its sentences are BPE-split with ``@@``, which
  is undone; labels are kept as they are, in the set's own token positions).
- ``tree_depth`` and ``top_constituent`` from a CoNLL-2012 file with trees
  (:mod:`ssan_plugin.analysis.trees`): every sentence; the label is the integer depth, or the
  top-constituent sequence with all but the 19 most frequent ones (ties: alphabetical) turned
  into ``OTHER``.

Splits are assigned at random, seeded: a shuffled order, the first 80% ``tr``, the next 10%
``va``, the rest ``te``; the file lists ``tr``, then ``va``, then ``te``, each in input order.
"""

import random
import re
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ..errors import PipelineError
from ..translation.textio import read_lines
from .trees import ParsedSentence, top_constituents, tree_depth

SPLITS = ("tr", "va", "te")
TASKS = ("bigram_shift", "wrd", "tree_depth", "top_constituent")
TOP_CONSTITUENT_CLASSES = 19
OTHER = "OTHER"

Example = Tuple[str, str, str]  # (split, label, sentence)


def assign_splits(n: int, rng: random.Random, fractions=(0.8, 0.1, 0.1)) -> List[str]:
    """A split name per item: a shuffled order, the first ``fractions[0]`` of it ``tr``, the
    next ``fractions[1]`` ``va``, the rest ``te`` (rounded down)."""
    order = list(range(n))
    rng.shuffle(order)
    n_tr, n_va = int(n * fractions[0]), int(n * fractions[1])
    split = [""] * n
    for rank, i in enumerate(order):
        split[i] = "tr" if rank < n_tr else "va" if rank < n_tr + n_va else "te"
    return split


def with_splits(labelled: Sequence[Tuple[str, str]], seed: int) -> List[Example]:
    """(label, sentence) pairs -> examples with seeded splits, ordered tr, va, te."""
    splits = assign_splits(len(labelled), random.Random(f"splits-{seed}"))
    examples = [(s, label, sent) for s, (label, sent) in zip(splits, labelled)]
    return [e for name in SPLITS for e in examples if e[0] == name]


def bigram_shift(sentences: Sequence[str], seed: int) -> List[Tuple[str, str]]:
    """(label, sentence): half of the usable sentences with two adjacent different words
    inverted (``I``), the others unchanged (``O``)."""
    rng = random.Random(f"bigram_shift-{seed}")
    usable = []
    for line in sentences:
        words = line.split()
        candidates = [i for i in range(len(words) - 1) if words[i] != words[i + 1]]
        if candidates:
            usable.append((words, candidates))
    inverted = set(rng.sample(range(len(usable)), len(usable) // 2))
    out = []
    for k, (words, candidates) in enumerate(usable):
        if k in inverted:
            i = rng.choice(candidates)
            words = words[:i] + [words[i + 1], words[i]] + words[i + 2:]
            out.append(("I", " ".join(words)))
        else:
            out.append(("O", " ".join(words)))
    return out


def move_word(words: Sequence[str], source: int, target: int) -> Tuple[List[str], str]:
    """Move ``words[source]`` so that it ends at position ``target`` of the new sentence.
    Returns (new words, label ``"i j"``): i = ``target``, j = the new position of the word that
    followed the moved one originally (``len(words)`` if there was none)."""
    rest = list(words[:source]) + list(words[source + 1:])
    new = rest[:target] + [words[source]] + rest[target:]
    # the follower's index in ``rest`` is ``source``; it shifts right by one if the moved word
    # now stands before it
    if source == len(words) - 1:
        follower = len(words)
    else:
        follower = source + (1 if target <= source else 0)
    return new, f"{target} {follower}"


def wrd(sentences: Sequence[str], seed: int) -> List[Tuple[str, str]]:
    """(label, sentence): in every sentence of at least three words, one word moved to another
    position, never to the neighbouring slot that would only swap two words back and forth
    unnoticed (the new sentence always differs from the original)."""
    rng = random.Random(f"wrd-{seed}")
    out = []
    for line in sentences:
        words = line.split()
        if len(words) < 3:
            continue
        for _ in range(100):
            source, target = rng.randrange(len(words)), rng.randrange(len(words))
            new, label = move_word(words, source, target)
            if new != words:
                out.append((label, " ".join(new)))
                break
    return out


def tree_depth_examples(sentences: Sequence[ParsedSentence]) -> List[Tuple[str, str]]:
    return [(str(tree_depth(s)), " ".join(s.words)) for s in sentences]


def top_constituent_examples(sentences: Sequence[ParsedSentence],
                             classes: int = TOP_CONSTITUENT_CLASSES) -> List[Tuple[str, str]]:
    labels = [top_constituents(s) for s in sentences]
    counts = Counter(labels)
    kept = {label for label, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:classes]}
    return [(label if label in kept else OTHER, " ".join(s.words))
            for label, s in zip(labels, sentences)]


def read_raw_sentences(path) -> List[str]:
    """Non-blank lines of a UTF-8 text file; PipelineError if there is none."""
    lines = [line.strip() for line in read_lines(path)]
    lines = [line for line in lines if line]
    if not lines:
        raise PipelineError(f"{path}: empty input (no sentence)")
    return lines


def undo_bpe(line: str) -> str:
    """Subword-nmt's ``@@ `` joins and Moses' ``@-@`` style joiners undone."""
    line = re.sub(r"@@( |$)", "", line)
    return re.sub(r" @([-,.])@ ", r"\1", line)


def read_wrd_dir(directory) -> List[Tuple[str, str, str]]:
    """(split, label, sentence) of every ``*.SPLIT.x`` / ``*.SPLIT.y`` pair of a directory
    laid out as ``../shared/data/probing/wrd/`` (SPLIT in tr, va, te); BPE undone."""
    directory = Path(directory)
    if not directory.is_dir():
        raise PipelineError(f"not a directory: {directory}")
    out = []
    for x_file in sorted(directory.glob("*.x")):
        split = x_file.suffixes[-2].lstrip(".") if len(x_file.suffixes) >= 2 else ""
        if split not in SPLITS:
            raise PipelineError(f"{x_file}: expected NAME.SPLIT.x with SPLIT in tr, va, te")
        y_file = x_file.with_suffix(".y")
        xs, ys = read_lines(x_file), read_lines(y_file)
        if len(xs) != len(ys):
            raise PipelineError(f"{x_file} has {len(xs)} lines but {y_file} has {len(ys)}")
        for lineno, (x, y) in enumerate(zip(xs, ys), 1):
            if not x.strip():
                continue
            if not re.fullmatch(r"\d+ \d+", y.strip()):
                raise PipelineError(f"{y_file}:{lineno}: expected a label 'i j', got {y!r}")
            out.append((split, y.strip(), undo_bpe(x.strip())))
    if not out:
        raise PipelineError(f"{directory}: no NAME.SPLIT.x / NAME.SPLIT.y files (empty input)")
    return out


def resplit(examples: Sequence[Example], seed: int) -> List[Example]:
    """Examples of a set that has fewer than three splits, split again 80/10/10 (seeded)."""
    return with_splits([(label, sent) for _, label, sent in examples], seed)


def write_probing_file(examples: Sequence[Example], path) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for split, label, sentence in examples:
            f.write(f"{split}\t{label}\t{sentence}\n")


def read_probing_file(path) -> List[Example]:
    """(split, label, sentence) of a SentEval probing file; PipelineError for a bad line, an
    empty file, or a split without example."""
    examples = []
    for lineno, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[0] not in SPLITS or not parts[1] or not parts[2].strip():
            raise PipelineError(f"{path}:{lineno}: expected 'tr|va|te <TAB> label <TAB> "
                                f"sentence', got {line[:80]!r}")
        examples.append((parts[0], parts[1], parts[2].strip()))
    if not examples:
        raise PipelineError(f"{path}: empty probing file")
    for split in SPLITS:
        if not any(e[0] == split for e in examples):
            raise PipelineError(f"{path}: no example in split {split!r}")
    return examples


def make_examples(task: str, raw_sentences: Optional[Sequence[str]] = None,
                  parsed: Optional[Sequence[ParsedSentence]] = None, seed: int = 1) -> List[Example]:
    """The examples of ``task`` from raw sentences (bigram_shift, wrd) or parsed CoNLL
    sentences (tree_depth, top_constituent), with seeded splits."""
    if task not in TASKS:
        raise PipelineError(f"unknown probing task {task!r} (choose from {', '.join(TASKS)})")
    if task in ("bigram_shift", "wrd"):
        labelled = (bigram_shift if task == "bigram_shift" else wrd)(raw_sentences, seed)
    elif task == "tree_depth":
        labelled = tree_depth_examples(parsed)
    else:
        labelled = top_constituent_examples(parsed)
    if not labelled:
        raise PipelineError(f"{task}: no usable sentence in the input")
    return with_splits(labelled, seed)
