"""Constituency trees of CoNLL-2012 files, and binary trees induced from attention.

Gold trees come from the parse-bit column (column 5, 0-based) of a ``*_conll`` file, read with
the SRL package's reader (:func:`ssan_plugin.srl.conll2012.read_conll2012_rows`) and its
bracket grammar (:func:`ssan_plugin.srl.brackets.parse_brackets`): a parse bit is ``(LABEL``
repeated, one ``*`` (the word), then ``)`` repeated, e.g. ``(TOP(S(NP*`` or ``*))``.
Pre-terminals (POS tags, column 4) are not in that column: a word's POS is its leaf label.

Tree induction, the split-point method: given a word-level attention matrix ``A`` (row i =
query i, column j = key j), a span [i, j] with more than one word is split at the k (i <= k < j)
that minimises the attention mass crossing the split,

    cross(k) = sum_{a in [i, k], b in [k+1, j]} A[a, b] + A[b, a],

ties going to the smallest k; both halves are split recursively down to single words. The
result is a binary tree, given here as its set of spans (inclusive word indices).

Scoring (:func:`score_spans`): punctuation words (PTB tags ``` `` '' , . : -LRB- -RRB- HYPH NFP```)
are removed first, from the sentence and from the attention (:func:`drop_words`); gold spans are
the unlabelled constituent spans over the remaining words, duplicates removed (a unary chain
gives one span); the whole-sentence span and single-word spans are excluded from both gold and
predicted spans. Precision, recall and F1 are corpus-level (micro): matched spans summed over
sentences divided by predicted (gold) spans summed over sentences. The right-branching baseline
predicts [i, n-1] for i = 1 .. n-2.
"""

from dataclasses import dataclass
from typing import Iterable, List, Sequence, Set, Tuple

import numpy as np

from ..errors import PipelineError
from ..srl.brackets import BracketError, Phrase, parse_brackets
from ..srl.conll2012 import PARSE, POS, WORD, read_conll2012_rows
from ..srl.corpus import CoNLLFormatError

#: PTB punctuation tags removed before scoring induced trees
PUNCTUATION_TAGS = frozenset({"``", "''", ",", ".", ":", "-LRB-", "-RRB-", "HYPH", "NFP"})

Span = Tuple[int, int]


@dataclass
class ParsedSentence:
    """One sentence of a CoNLL-2012 file with its constituency tree.

    ``roots``: the outermost phrases of the parse-bit column (usually one, ``TOP``), each with
    its embedded phrases; spans are inclusive 0-based word indices. ``line``: 1-based line of
    its first word."""

    words: Tuple[str, ...]
    tags: Tuple[str, ...]
    roots: List[Phrase]
    path: str = ""
    line: int = 0

    def phrases(self) -> List[Phrase]:
        """Every phrase of the tree, outermost first (depth first)."""
        out: List[Phrase] = []
        for root in self.roots:
            out.extend(root.dfs())
        return out


def read_parsed_conll(path) -> List[ParsedSentence]:
    """The sentences of a ``*_conll`` file with their trees; PipelineError for a missing or
    empty file, a malformed file, or a sentence whose parse-bit column is empty (``-``)."""
    from pathlib import Path

    if not Path(path).is_file():
        raise PipelineError(f"missing CoNLL file: {path}")
    try:
        blocks = read_conll2012_rows(str(path))
    except CoNLLFormatError as err:
        raise PipelineError(str(err)) from None
    except UnicodeDecodeError as err:
        raise PipelineError(f"{path}: not valid UTF-8 ({err.reason} at byte {err.start})") from None
    if not blocks:
        raise PipelineError(f"{path}: no sentence (empty CoNLL file)")
    out = []
    for rows, lines in blocks:
        bits = [row[PARSE] for row in rows]
        missing = [i for i, bit in enumerate(bits) if "*" not in bit]
        if missing:
            i = missing[0]
            raise PipelineError(
                f"{path}:{lines[i]}: no parse bit (column 6 is {bits[i]!r}): tree tasks need a "
                f"CoNLL-2012 file with constituency trees (e.g. *.gold_conll, not *.v4_auto_skel)")
        try:
            roots = parse_brackets(bits)
        except BracketError as err:
            raise PipelineError(f"{path}:{lines[err.position]}: bad parse bit: {err.message}") from None
        out.append(ParsedSentence(tuple(row[WORD] for row in rows), tuple(row[POS] for row in rows),
                                  roots, str(path), lines[0]))
    return out


def _strip_top(sentence: ParsedSentence) -> Tuple[List[Phrase], bool]:
    """(the phrases under TOP, whether there was a TOP): a single outermost ``TOP`` phrase is
    removed, anything else is returned as is."""
    roots = sentence.roots
    if len(roots) == 1 and roots[0].type == "TOP":
        return list(roots[0].children), True
    return list(roots), False


def tree_depth(sentence: ParsedSentence) -> int:
    """The maximum, over words, of the number of constituents containing the word, TOP
    excluded (pre-terminals are not constituents here)."""
    depth = [0] * len(sentence.words)
    for phrase in sentence.phrases():
        if phrase.type == "TOP":
            continue
        for i in range(phrase.start, phrase.end + 1):
            depth[i] += 1
    return max(depth, default=0)


def top_constituents(sentence: ParsedSentence) -> str:
    """The labels of the children of the root constituent below TOP, in order, joined by
    ``_``; a word directly under that root contributes its POS tag (e.g. ``NP_VP_.``).

    The root is TOP's child when TOP has exactly one child phrase and no bare word; otherwise
    (several phrases or words under TOP, or no TOP) the sequence is read one level higher, from
    the top-level items themselves."""
    top, _ = _strip_top(sentence)
    covered = sum(p.end - p.start + 1 for p in top)
    if len(top) == 1 and covered == len(sentence.words):
        root = top[0]
        children, start, end = root.children, root.start, root.end
    else:
        children, start, end = top, 0, len(sentence.words) - 1
    items: List[Tuple[int, str]] = [(p.start, p.type) for p in children]
    inside = set()
    for p in children:
        inside.update(range(p.start, p.end + 1))
    items += [(i, sentence.tags[i]) for i in range(start, end + 1) if i not in inside]
    return "_".join(label for _, label in sorted(items))


def gold_spans(sentence: ParsedSentence, keep: Sequence[bool]) -> Set[Span]:
    """Unlabelled constituent spans over the kept words (``keep[i]``: word i is kept),
    renumbered over the kept words, duplicates removed, whole-sentence and single-word spans
    excluded."""
    index, new = [], 0
    for k in keep:
        index.append(new if k else -1)
        new += bool(k)
    n = new
    spans: Set[Span] = set()
    for phrase in sentence.phrases():
        kept = [index[i] for i in range(phrase.start, phrase.end + 1) if index[i] >= 0]
        if not kept:
            continue
        span = (kept[0], kept[-1])
        if span[1] > span[0] and span != (0, n - 1):
            spans.add(span)
    return spans


def drop_words(matrix: np.ndarray, keep: Sequence[bool]) -> np.ndarray:
    """The rows and columns of the kept words of a square word-level matrix."""
    idx = np.flatnonzero(np.asarray(keep, dtype=bool))
    return np.asarray(matrix)[np.ix_(idx, idx)]


def split_point_spans(attention: np.ndarray) -> Set[Span]:
    """Every span (length > 1, whole sentence included) of the binary tree the split-point
    method induces from a square word-level attention matrix (see the module doc)."""
    a = np.asarray(attention, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"a square attention matrix expected, got shape {a.shape}")
    sym = a + a.T
    # prefix sums: P[x, y] = sum of sym[:x, :y]
    pre = np.zeros((a.shape[0] + 1, a.shape[0] + 1))
    pre[1:, 1:] = sym.cumsum(0).cumsum(1)

    def block(r0, r1, c0, c1):  # sum of sym[r0:r1, c0:c1]
        return pre[r1, c1] - pre[r0, c1] - pre[r1, c0] + pre[r0, c0]

    spans: Set[Span] = set()
    stack = [(0, a.shape[0] - 1)]
    while stack:
        i, j = stack.pop()
        if j <= i:
            continue
        spans.add((i, j))
        # crossing mass counts each (a, b) pair once from sym = A + A^T
        costs = [block(i, k + 1, k + 1, j + 1) for k in range(i, j)]
        k = i + int(np.argmin(costs))
        stack.append((i, k))
        stack.append((k + 1, j))
    return spans


def right_branching_spans(n: int) -> Set[Span]:
    """[i, n-1] for i = 1 .. n-2: the right-branching tree's spans, whole sentence and single
    words excluded."""
    return {(i, n - 1) for i in range(1, n - 1)}


def scored(spans: Iterable[Span], n: int) -> Set[Span]:
    """Spans as scored: the whole-sentence span (0, n-1) and single-word spans removed."""
    return {(i, j) for i, j in spans if j > i and (i, j) != (0, n - 1)}


@dataclass
class SpanScore:
    """Corpus-level (micro) span counts; :meth:`as_dict` gives percentages."""

    matched: int = 0
    predicted: int = 0
    gold: int = 0

    def add(self, predicted: Set[Span], gold: Set[Span]) -> None:
        self.matched += len(predicted & gold)
        self.predicted += len(predicted)
        self.gold += len(gold)

    @property
    def precision(self) -> float:
        return 100.0 * self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return 100.0 * self.matched / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "matched": self.matched, "predicted": self.predicted, "gold": self.gold}


def score_spans(sentence: ParsedSentence, attention: np.ndarray, score: SpanScore,
                baseline: SpanScore = None) -> None:
    """Add one sentence to ``score``: punctuation removed from the sentence and from the
    word-level ``attention`` (n x n over all its words), the split-point tree against the gold
    spans; and to ``baseline`` (if given) the right-branching tree."""
    if attention.shape != (len(sentence.words), len(sentence.words)):
        raise ValueError(f"{sentence.path}:{sentence.line}: attention of shape {attention.shape} "
                         f"for {len(sentence.words)} words")
    keep = [tag not in PUNCTUATION_TAGS for tag in sentence.tags]
    n = sum(keep)
    gold = gold_spans(sentence, keep)
    if n == 0:
        return
    predicted = scored(split_point_spans(drop_words(attention, keep)), n)
    score.add(predicted, gold)
    if baseline is not None:
        baseline.add(right_branching_spans(n), gold)
