"""CoNLL-2005 props files: what srl-eval.pl reads.

One line per word, columns separated by whitespace: the target column (predicate lemma on
predicate rows, ``-`` elsewhere), then one bracket-notation argument column per predicate in
the order of the predicate rows. Exactly one blank line after every sentence. A sentence
without predicates has only the target column.
"""

from typing import Iterable, List, Sequence, Tuple

from .io import open_text, sentence_blocks

# (target column, argument columns): each column has one entry per word
PropsSentence = Tuple[List[str], List[List[str]]]


def format_props(targets: Sequence[str], columns: Sequence[Sequence[str]]) -> str:
    """One sentence as text (ends with the blank separator line)."""
    for column in columns:
        if len(column) != len(targets):
            raise ValueError(f"argument column of length {len(column)} for {len(targets)} words")
    width = max([len(t) for t in targets] + [1])
    out = []
    for i, target in enumerate(targets):
        out.append(" ".join([target.ljust(width)] + [c[i].rjust(10) for c in columns]).rstrip())
    return "\n".join(out) + "\n\n"


def write_props(path: str, sentences: Iterable[PropsSentence]) -> int:
    """Write sentences; returns how many were written."""
    n = 0
    with open_text(path, "w") as f:
        for targets, columns in sentences:
            if not targets:
                raise ValueError("a props sentence needs at least one word")
            f.write(format_props(targets, columns))
            n += 1
    return n


def read_props(path: str) -> List[PropsSentence]:
    """Sentences of a props file, read as srl-eval.pl reads them.

    A sentence ends at a blank line; an empty sentence (a second blank line in a row, or a
    blank first line) ends the file for srl-eval.pl, and here too, with a warning that says how
    many non-blank lines were left unread (srl-eval.pl says nothing). Rows of one sentence must
    have the same number of columns (srl-eval.pl would silently misalign them: an error here).
    """
    return [_columns(rows) for rows, _ in sentence_blocks(path, end_at_empty=True)]


def _columns(rows: List[List[str]]) -> PropsSentence:
    cols = [list(c) for c in zip(*rows)]
    return cols[0], cols[1:]
