"""Word alignments: reading gold links, scoring predicted ones (precision, recall, AER), the
diagonal reference, and how a training text writes a gold set's words (diacritics). A model's
piece links become word links in ``analysis.alignments`` (each gold word encoded on its own).

Conventions: a link is ``(i, j)``, 0-based, i a source token and j a target token. Files hold
one sentence a line with links written 1-based as ``i-j`` (a sure link) or ``i?j`` / ``ipj`` (a
possible link), the layout of the WPT shared tasks; a bitext line is ``source ||| target``,
tokens separated by spaces. Every sure link is also possible (S is a subset of P).

Scores over a test set (Och and Ney 2003), A the predicted links, summed over sentences:
precision = |A & P| / |A|, recall = |A & S| / |S|, AER = 1 - (|A & S| + |A & P|) / (|A| + |S|).
"""

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Sequence, Set, Tuple

from .textio import PipelineError, read_lines

Link = Tuple[int, int]
#: the link sets of an aligner that aligns both ways (the eflomal peer, the diagonal), in order:
#: forward (each B word linked to at most one A word), reverse (each A word to at most one B
#: word), their intersection and their union
DIRECTIONS = ("forward", "reverse", "intersection", "union")
LINK = re.compile(r"^(\d+)([-?p])(\d+)$")


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence's gold links, 0-based: ``sure`` and ``possible`` (sure included)."""

    sure: FrozenSet[Link]
    possible: FrozenSet[Link]


@dataclass(frozen=True)
class AlignmentScores:
    """Precision, recall and AER over a test set, with the counts behind them."""

    precision: float
    recall: float
    aer: float
    predicted: int
    sure: int
    possible: int
    sentences: int


def parse_links(line: str, where: str) -> Tuple[Set[Link], Set[Link]]:
    """(sure, possible) 0-based links of one line of ``i-j`` / ``i?j`` / ``ipj`` items (1-based
    in the file); possible includes sure. ``where`` names the line in errors."""
    sure, possible = set(), set()
    for item in line.split():
        match = LINK.match(item)
        if not match or int(match.group(1)) < 1 or int(match.group(3)) < 1:
            raise PipelineError(f"{where}: {item!r} is not a link i-j (sure) or i?j / ipj "
                                f"(possible) with 1-based token positions")
        link = (int(match.group(1)) - 1, int(match.group(3)) - 1)
        possible.add(link)
        if match.group(2) == "-":
            sure.add(link)
    return sure, possible


def read_gold(path) -> List[GoldAlignment]:
    """The gold links of every line of ``path`` (see the module docstring)."""
    gold = []
    for number, line in enumerate(read_lines(path), 1):
        sure, possible = parse_links(line, f"{path}: line {number}")
        gold.append(GoldAlignment(frozenset(sure), frozenset(possible)))
    return gold


def format_links(links: Iterable[Link]) -> str:
    """One sentence's links as a file line: sorted, 1-based ``i-j`` items (parse_links' sure)."""
    return " ".join(f"{i + 1}-{j + 1}" for i, j in sorted(links))


def read_bitext(path) -> List[Tuple[List[str], List[str]]]:
    """(source tokens, target tokens) of every ``source ||| target`` line of ``path``."""
    pairs = []
    for number, line in enumerate(read_lines(path), 1):
        parts = line.split(" ||| ")
        if len(parts) != 2:
            raise PipelineError(f"{path}: line {number} is not 'source ||| target'")
        source, target = (part.split() for part in parts)
        if not source or not target:
            raise PipelineError(f"{path}: line {number} has an empty side")
        pairs.append((source, target))
    return pairs


def check_links(links: Iterable[Link], source_len: int, target_len: int, where: str) -> None:
    """Every link inside a sentence of ``source_len`` x ``target_len`` tokens, else one line."""
    for i, j in links:
        if not (0 <= i < source_len and 0 <= j < target_len):
            raise PipelineError(f"{where}: link {i + 1}-{j + 1} outside a sentence of "
                                f"{source_len} source and {target_len} target tokens")


def without_marks(word: str) -> str:
    """``word`` with its combining marks (diacritics) removed: "în" -> "in", "ţară" -> "tara"."""
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def gold_word_coverage(gold: Sequence[Sequence[str]], training: Iterable[str],
                       examples: int = 5) -> Dict[str, object]:
    """How ``training`` (tokenised lines of one language) writes the words of that language's
    side of a gold set (``gold``: tokenised sentences). Counts over the gold's tokens (running
    words):

    - ``tokens``: all of them;
    - ``unseen``: those whose exact form never occurs in ``training``;
    - ``other_marks``: those that ``training`` writes mostly (more than half of the occurrences
      of the word without its diacritics) with other diacritics, e.g. a gold "si" where the
      training text writes "și"; ``other_marks_examples``: the commonest such words, with counts.
    """
    exact: Counter = Counter()
    for line in training:
        exact.update(line.split())
    plain: Counter = Counter()
    for word, count in exact.items():
        plain[without_marks(word)] += count
    words = [word for sentence in gold for word in sentence]
    other = Counter(word for word in words
                    if 2 * exact[word] < plain[without_marks(word)])
    return {"tokens": len(words), "unseen": sum(1 for word in words if word not in exact),
            "other_marks": sum(other.values()),
            "other_marks_examples": [[word, count] for word, count in other.most_common(examples)]}


def unmarked_romanian(lang: str, keeps_diacritics: bool, sentences: Sequence[Sequence[str]],
                      least: int = 20) -> str:
    """A warning (else "") when one side of a gold set is Romanian written without a single
    diacritic in at least ``least`` words while the model's text pipeline for it keeps them
    (prepared without ``--romanian-remove-diacritics``): such a model reads "si", "in", "ca"
    where its training text wrote "și", "în", "că" (the WPT Ro-En gold is written so)."""
    words = [word for sentence in sentences for word in sentence]
    if lang != "ro" or not keeps_diacritics or len(words) < least or \
            any(without_marks(word) != word for word in words):
        return ""
    return (f"the bitext's {lang} side has no diacritics in its {len(words)} words, but the model's "
            f"{lang} text keeps them (prepared without --romanian-remove-diacritics): words such as "
            f"'si' or 'in' reach it in a form its training text rarely wrote; to align against such "
            f"a gold, prepare the data with --romanian-remove-diacritics")


#: a sentence's counts, in this order: |A|, |S|, |P|, |A & S|, |A & P|
COUNTS = ("predicted", "sure", "possible", "predicted_sure", "predicted_possible")


def sentence_counts(predicted: Sequence[Iterable[Link]],
                    gold: Sequence[GoldAlignment]) -> List[Tuple[int, int, int, int, int]]:
    """Per sentence, the counts of :data:`COUNTS` of ``predicted`` against ``gold`` (as many
    sentences each)."""
    if len(predicted) != len(gold):
        raise PipelineError(f"{len(predicted)} predicted alignments for {len(gold)} gold sentences")
    out = []
    for links, reference in zip(predicted, gold):
        links = set(links)
        out.append((len(links), len(reference.sure), len(reference.possible),
                    len(links & reference.sure), len(links & reference.possible)))
    return out


def scores_of_counts(totals: Sequence[float], sentences: int = 0) -> AlignmentScores:
    """The scores of :data:`COUNTS` summed over a test set (the module docstring)."""
    a, s, p, a_s, a_p = totals
    return AlignmentScores(
        precision=a_p / a if a else 0.0,
        recall=a_s / s if s else 0.0,
        aer=1.0 - (a_s + a_p) / (a + s) if a + s else 0.0,
        predicted=int(a), sure=int(s), possible=int(p), sentences=sentences)


def alignment_scores(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]) -> AlignmentScores:
    """Scores of ``predicted`` (one set of links a sentence) against ``gold``, summed over the
    sentences (the module docstring); the two must have as many sentences."""
    counts = sentence_counts(predicted, gold)
    return scores_of_counts([sum(column) for column in zip(*counts)] or [0] * len(COUNTS), len(gold))


def diagonal_links(len_a: int, len_b: int) -> Dict[str, Set[Link]]:
    """The diagonal reference, which needs no training: each word linked to the word of the other
    side at the same relative position (the word whose span of [0, 1) holds its span's centre).
    {direction: links (A word, B word), 0-based} for each of :data:`DIRECTIONS`."""
    if len_a < 1 or len_b < 1:
        raise PipelineError(f"a sentence pair with an empty side ({len_a} and {len_b} words)")
    forward = {((2 * j + 1) * len_a // (2 * len_b), j) for j in range(len_b)}
    reverse = {(i, (2 * i + 1) * len_b // (2 * len_a)) for i in range(len_a)}
    return dict(zip(DIRECTIONS, (forward, reverse, forward & reverse, forward | reverse)))
