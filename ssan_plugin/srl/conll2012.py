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

from typing import List, Tuple

from .corpus import CoNLLFormatError, Proposition, Sentence, check_column
from .io import open_text

FIXED_COLUMNS = 11  # before the argument columns
MIN_COLUMNS = FIXED_COLUMNS + 1  # + coreference
WORD, POS, PARSE, LEMMA, FRAMESET = 3, 4, 5, 6, 7  # column indices


def read_conll2012(path: str) -> List[Sentence]:
    """All sentences of a ``*_conll`` file, with one :class:`Proposition` per predicate."""
    return [_sentence(path, rows, lines) for rows, lines in read_conll2012_rows(path)]


def read_conll2012_rows(path: str) -> List[Tuple[List[List[str]], List[int]]]:
    """The sentences of a ``*_conll`` file as raw rows: per sentence (rows, 1-based line numbers),
    each row its whitespace-separated columns (at least ``MIN_COLUMNS``, the same number in
    every row of a sentence). Other columns than words and propositions (POS tag 4, parse bit 5)
    are read from here."""
    blocks: List[Tuple[List[List[str]], List[int]]] = []
    rows: List[List[str]] = []
    lines: List[int] = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = [] if line.startswith("#") else line.split()
            if not fields:
                if rows:
                    blocks.append((rows, lines))
                    rows, lines = [], []
                continue
            if len(fields) < MIN_COLUMNS:
                raise CoNLLFormatError(
                    path, lineno, f"expected at least {MIN_COLUMNS} columns "
                    f"(CoNLL-2012 layout), found {len(fields)}",
                )
            if rows and len(fields) != len(rows[0]):
                raise CoNLLFormatError(
                    path, lineno, f"{len(fields)} columns, but the sentence starting at line "
                    f"{lines[0]} has {len(rows[0])}",
                )
            rows.append(fields)
            lines.append(lineno)
    if rows:
        blocks.append((rows, lines))
    return blocks


def _sentence(path: str, rows: List[List[str]], lines: List[int]) -> Sentence:
    n_columns = len(rows[0]) - MIN_COLUMNS
    predicates = [i for i, row in enumerate(rows) if row[FRAMESET] != "-"]
    if len(predicates) > n_columns:
        extra = predicates[n_columns]
        raise CoNLLFormatError(
            path, lines[extra], f"predicate {rows[extra][LEMMA]!r} (frameset "
            f"{rows[extra][FRAMESET]!r}) has no argument column: the sentence has "
            f"{len(predicates)} predicates but {n_columns} argument columns",
        )
    if len(predicates) < n_columns:
        raise CoNLLFormatError(
            path, lines[0], f"argument column {len(predicates) + 1} has no predicate: the "
            f"sentence has {n_columns} argument columns but {len(predicates)} rows with a "
            "frameset id (column 8)",
        )
    props = []
    for k, position in enumerate(predicates):
        tags = tuple(row[FIXED_COLUMNS + k] for row in rows)
        check_column(tags, position, lines, path, k + 1)
        lemma = rows[position][LEMMA]
        if lemma == "-":  # never '-': that would mean "no predicate" in a props file
            lemma = rows[position][FRAMESET]
        props.append(Proposition(position, lemma, tags))
    return Sentence(tuple(row[WORD] for row in rows), tuple(props), path, lines[0])
