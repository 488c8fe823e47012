"""Sentences with their propositions, as the CoNLL readers return them.

A :class:`Proposition` is one predicate of a sentence: its 0-based word ``position``, the
``lemma`` shown in the target column of CoNLL-2005 props files, and its argument column
``tags`` verbatim in Start-End bracket notation (one tag per word, see ``brackets``).
Training turns every proposition into one instance (words, predicate position, BIO tags).
"""

from dataclasses import dataclass
from typing import Callable, List, Sequence, Tuple

from ..errors import InputError
from .brackets import BracketError, Phrase, brackets_to_bio, parse_brackets

# argument types that mark the predicate itself (a continuation of V is still the predicate)
PREDICATE_TYPES = ("V", "C-V")


class CoNLLFormatError(InputError, ValueError):
    """Malformed input; the message starts with ``path:line:`` (1-based line)."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


@dataclass(frozen=True)
class Proposition:
    position: int
    lemma: str
    tags: Tuple[str, ...]

    def bio(self) -> Tuple[List[str], int]:
        """(BIO tags of the outermost argument phrases, number of embedded phrases dropped)."""
        return brackets_to_bio(self.tags)


@dataclass(frozen=True)
class Sentence:
    words: Tuple[str, ...]
    propositions: Tuple[Proposition, ...]
    path: str = ""
    line: int = 0  # 1-based line of the first word

    def targets(self) -> List[str]:
        """The CoNLL-2005 target column: the lemma at each predicate position, '-' elsewhere."""
        column = ["-"] * len(self.words)
        for prop in self.propositions:
            column[prop.position] = prop.lemma
        return column


def check_column(
    tags: Sequence[str], position: int, lines: Sequence[int], path: str, column: int
) -> List[Phrase]:
    """Parse one argument column and check it annotates the predicate at ``position``.

    ``lines[i]`` is the file line of word i (for error messages); ``column`` is the 1-based
    argument column number. The predicate word must lie inside a ``V`` (or ``C-V``) phrase.
    """
    try:
        phrases = parse_brackets(tags)
    except BracketError as err:
        raise CoNLLFormatError(path, lines[err.position], f"argument column {column}: {err.message}") from None
    flat = [p for top in phrases for p in top.dfs()]
    verbs = [p for p in flat if p.type in PREDICATE_TYPES]
    if not verbs:
        raise CoNLLFormatError(
            path, lines[position],
            f"argument column {column} has no (V*) phrase: the column of the predicate on this "
            "line does not mark its predicate",
        )
    if not any(p.start <= position <= p.end for p in verbs):
        raise CoNLLFormatError(
            path, lines[position],
            f"the predicate on this line lies outside the (V*) phrase of its argument column "
            f"{column} (V at line {lines[verbs[0].start]})",
        )
    return phrases


def match_propositions(path: str, lines: Sequence[int], predicates: Sequence[int],
                       columns: Sequence[Sequence[str]], lemmas: Sequence[str],
                       describe: Callable[[int], str], marked_by: str) -> Tuple[Proposition, ...]:
    """One Proposition per predicate of a sentence, pairing the k-th argument column with the
    k-th predicate row, as both CoNLL layouts do.

    ``predicates``: the 0-based rows of the predicates, in order; ``columns``: the argument
    columns (each one tag per word); ``lemmas[k]``: predicate k's lemma; ``lines[i]``: the file
    line of word i. A predicate without a column or a column without a predicate is a
    CoNLLFormatError: ``describe(row)`` names the predicate on that row, ``marked_by`` says what
    marks the predicates in this layout. Each column is checked by :func:`check_column`.
    """
    if len(predicates) > len(columns):
        extra = predicates[len(columns)]
        raise CoNLLFormatError(
            path, lines[extra], f"predicate {describe(extra)} has no argument column: the "
            f"sentence has {len(predicates)} predicates but {len(columns)} argument columns",
        )
    if len(predicates) < len(columns):
        raise CoNLLFormatError(
            path, lines[0], f"argument column {len(predicates) + 1} has no predicate: the "
            f"sentence has {len(columns)} argument columns but {len(predicates)} {marked_by}",
        )
    props = []
    for k, (position, tags) in enumerate(zip(predicates, columns)):
        tags = tuple(tags)
        check_column(tags, position, lines, path, k + 1)
        props.append(Proposition(position, lemmas[k], tags))
    return tuple(props)
