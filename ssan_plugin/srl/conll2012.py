"""Reader for CoNLL-2012 (OntoNotes) ``*_conll`` files.

Columns (whitespace separated): 0 document, 1 part, 2 word index, 3 word, 4 POS, 5 parse bit,
6 predicate lemma, 7 predicate frameset id, 8 word sense, 9 speaker, 10 named entities,
11 .. N-2 one argument column per predicate, N-1 coreference. Sentences end at a blank line;
lines starting with ``#`` (``#begin document``/``#end document``) are skipped.

How predicates are identified: the k-th argument column belongs to the k-th row whose frameset
column (7) is not ``-`` (that row also carries the predicate lemma in column 6). The predicate
row lies inside the column's ``(V*)`` phrase -- usually at its start; a multi-word V such as
``(V* ... *)`` may end on it, and for a split predicate (``flip - flopped``: ``(V*)`` ...
``(C-V*)``) it may carry the ``C-V`` piece. Nominal and adjectival predicates are annotated
the same way (EWT has them), so they become instances too.
"""

from typing import List

from .corpus import Sentence, match_propositions
from .io import Block, sentence_blocks

FIXED_COLUMNS = 11  # before the argument columns
MIN_COLUMNS = FIXED_COLUMNS + 1  # + coreference
WORD, POS, PARSE, LEMMA, FRAMESET = 3, 4, 5, 6, 7  # column indices


def read_conll2012(path: str) -> List[Sentence]:
    """All sentences of a ``*_conll`` file, with one :class:`Proposition` per predicate."""
    return [_sentence(path, rows, lines) for rows, lines in read_conll2012_rows(path)]


def read_conll2012_rows(path: str) -> List[Block]:
    """The sentences of a ``*_conll`` file as raw rows: per sentence (rows, 1-based line numbers),
    each row its whitespace-separated columns (at least ``MIN_COLUMNS``, the same number in
    every row of a sentence). Other columns than words and propositions (POS tag 4, parse bit 5)
    are read from here."""
    return list(sentence_blocks(path, comments=True, min_columns=MIN_COLUMNS, layout="CoNLL-2012"))


def _sentence(path: str, rows: List[List[str]], lines: List[int]) -> Sentence:
    predicates = [i for i, row in enumerate(rows) if row[FRAMESET] != "-"]
    columns = list(zip(*rows))[FIXED_COLUMNS:-1]
    # the lemma is never '-' (that would mean "no predicate" in a props file): the frameset then
    lemmas = [rows[i][LEMMA] if rows[i][LEMMA] != "-" else rows[i][FRAMESET] for i in predicates]
    props = match_propositions(
        path, lines, predicates, columns, lemmas,
        describe=lambda i: f"{rows[i][LEMMA]!r} (frameset {rows[i][FRAMESET]!r})",
        marked_by="rows with a frameset id (column 8)")
    return Sentence(tuple(row[WORD] for row in rows), props, path, lines[0])
